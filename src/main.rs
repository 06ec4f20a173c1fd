//! The `botfleet` binary.

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: the turn engine and the store writer
/// allocate and free many small objects across threads, where glibc spent
/// 15–20% of the host's CPU (docs/performance.md, "Allocator").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The log filter without `RUST_LOG` (docs/operations.md, "Logs").
const DEFAULT_LOG: &str = "warn,botfleet=info,botfleet_actors=info,botfleet_memory=info";

fn main() -> ExitCode {
    let cli = botfleet::cli::parse();
    // a `RUST_LOG` tracing cannot read is said, not replaced in silence
    // by the default (QA)
    let (filter, unread) = match std::env::var("RUST_LOG") {
        Ok(value) if !value.trim().is_empty() => match EnvFilter::try_new(&value) {
            Ok(filter) => (filter, None),
            Err(e) => (EnvFilter::new(DEFAULT_LOG), Some((value, e))),
        },
        _ => (EnvFilter::new(DEFAULT_LOG), None),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // a log line that cannot be written (stderr redirected to a file on
        // a full disk) is dropped; by default the subscriber reports that
        // with `eprintln!`, which panics when stderr fails, and the panic
        // took down whichever thread logged: the store's writer, logging
        // the refused write, so the host stopped storing anything until a
        // restart, though the disk had space again
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Some((value, e)) = unread {
        tracing::warn!(
            "RUST_LOG={value:?} is not a log filter ({e}); logging with the default, \
             {DEFAULT_LOG}: give levels such as RUST_LOG=info or RUST_LOG=warn,botfleet=debug"
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(botfleet::cli::main(cli))
}
