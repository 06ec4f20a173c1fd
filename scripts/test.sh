#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: checks the toolchain,
# formatting and lints, then every test of the workspace (unit, property,
# end-to-end through the API and CLI, crash/restart with a real host
# process) and the benches in test mode (each bench once, small inputs).
#
#   ./scripts/test.sh            # everything
#   ./scripts/test.sh --quick    # tests only (no fmt/clippy)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=${CARGO_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}

need() { command -v "$1" >/dev/null 2>&1 || { echo "missing $1: $2" >&2; exit 1; }; }
need cargo "install Rust with rustup (https://rustup.rs)"
need sh "the Shell tool and its tests run commands with sh"
if [ "$quick" = 0 ]; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

# The web page's browser test (tests/suite/ui_browser.rs) drives Debian's
# headless chromium through chromedriver; without them it skips, saying why.
# Install them where we can (root with apt-get, about a minute once);
# BOTFLEET_BROWSER=off skips the install.
# BOTFLEET_BROWSER_LATENCY_MS=N cargo test --test all -- suite::ui_browser
# runs the browser tests with every request of the page answered N ms late,
# as on a slow machine: a test that only passes on a fast one shows up.
if [ "${BOTFLEET_BROWSER:-auto}" != "off" ] && ! command -v chromedriver >/dev/null 2>&1 \
  && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing chromium and chromedriver for the browser test (BOTFLEET_BROWSER=off skips)"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }; then
    echo "could not install chromium; the browser test will skip" >&2
  fi
fi

export RUST_BACKTRACE=1
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
# A fresh clone builds once: incremental caches would only cost disk and time.
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
fi

# A build that runs out of disk fails deep inside cargo with "No space left on
# device"; say so up front. A fresh build and test run takes about 12 GiB.
target_dir=${CARGO_TARGET_DIR:-target}
mkdir -p "$target_dir"
free_kib=$(df -Pk "$target_dir" 2>/dev/null | awk 'NR == 2 { print $4 }')
if [ -n "$free_kib" ] && [ "$free_kib" -lt $((12 * 1024 * 1024)) ]; then
  echo "warning: only $((free_kib / 1024 / 1024)) GiB free where cargo builds ($target_dir);" \
    "a fresh build and test run needs about 12 GiB: free some space (cargo clean in other checkouts) if the build fails with 'No space left on device'" >&2
fi

if [ "$quick" = 0 ]; then
  echo "== cargo fmt --check"
  cargo fmt --all -- --check
  echo "== cargo clippy -D warnings"
  cargo clippy -j "$jobs" --workspace --all-targets -- -D warnings
fi
echo "== cargo test (workspace, all targets)"
cargo test -j "$jobs" --workspace --all-targets
echo "== doc tests"
cargo test -j "$jobs" --workspace --doc
echo "all tests passed"
