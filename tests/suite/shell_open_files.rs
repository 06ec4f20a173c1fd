//! A Shell command gets the open-file limit the host started with, not
//! the one `botfleet run` raised for its connections (round 22, f4 "Fix
//! 3": a bot's command could open as many files as the hard limit allows),
//! through the sandbox's launcher and, with `runtime.shell_sandbox =
//! "off"` or no Landlock, from a direct `sh` too (round 24: it inherited
//! the raised limit).

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::RunProcess;
use crate::support::process::cli;
use crate::support::process::open_file_limits;

/// Runs the input as a Shell command and sends back what it printed.
const SCRIPT: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "{{input}}" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;

/// The review would ask before some of these commands; here they run.
const NO_REVIEW: &str = "[review]\nshell = \"off\"\n";

/// Whether this kernel has the Shell sandbox (Landlock), whose launcher
/// gives the limit back; the reason printed when not.
fn landlock() -> bool {
    let out = std::process::Command::new(BIN)
        .args(["sandbox-exec", "--probe"])
        .output()
        .unwrap();
    let found = String::from_utf8_lossy(&out.stdout).starts_with("landlock enforced=full")
        || String::from_utf8_lossy(&out.stdout).starts_with("landlock enforced=partial");
    if !found {
        eprintln!("skipped: this kernel has no Landlock, so Shell runs without the launcher");
    }
    found
}

/// A host started with a soft limit of 400 (a shell's `ulimit -S -n`)
/// raises its own to the hard limit, and `ulimit -n` in a bot's Shell
/// command still prints 400: through the launcher (when this kernel has
/// Landlock)…
#[tokio::test]
async fn a_shell_command_gets_the_open_file_limit_the_host_started_with() {
    if !landlock() {
        return;
    }
    shell_prints_the_starting_limit("required").await;
}

/// …and run directly, with the sandbox off (as `auto` runs commands on a
/// kernel without Landlock).
#[tokio::test]
async fn a_direct_shell_command_gets_the_open_file_limit_the_host_started_with() {
    shell_prints_the_starting_limit("off").await;
}

/// Starts a host with a soft limit of 400 and `runtime.shell_sandbox =
/// sandbox`, and checks that its bot's `ulimit -n` prints 400.
async fn shell_prints_the_starting_limit(sandbox: &str) {
    let Some((_, hard)) = open_file_limits("self") else {
        eprintln!("skipped: no /proc/self/limits, or an unlimited open-file limit");
        return;
    };
    let soft = 400;
    if hard <= soft {
        eprintln!("skipped: the hard open-file limit ({hard}) leaves nothing to raise");
        return;
    }
    let fleet = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .runtime(&format!("shell_sandbox = \"{sandbox}\"\n"))
        .tables(NO_REVIEW);
    let path = fleet.write();
    let host = RunProcess::spawn(&path, &fleet.path().join("host.log"), Some(soft));
    host.wait_healthy().await;
    let (running, _) = open_file_limits(&host.pid).unwrap();
    assert_eq!(running, hard.min(1 << 20), "the host raised its own limit");

    let (code, said, err) = cli(&["send", "r", "ulimit -n"], &host.url, TOKEN).await;
    let (stopped, logged) = host.stop(20).await;
    assert_eq!(code, 0, "{err}\n{logged}");
    assert!(said.contains("exit code: 0"), "{said}");
    let printed: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| l.parse::<u64>().is_ok())
        .collect();
    assert_eq!(printed, vec![soft.to_string()], "{sandbox}: {said}");
    assert!(stopped, "{logged}");
}

/// A descriptor the host was started with (`botfleet run 7>>FILE`, a
/// supervisor's socket) is not open in a sandboxed command: writing to it
/// got past Landlock to a file outside the workspace (QA).
#[tokio::test]
async fn a_sandboxed_command_inherits_no_descriptor_of_the_host() {
    if !landlock() {
        return;
    }
    let fleet = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .runtime("shell_sandbox = \"required\"\n")
        .tables(NO_REVIEW);
    let path = fleet.write();
    let outside = fleet.path().join("outside.txt");
    let host = RunProcess::spawn_after(
        &path,
        &fleet.path().join("host.log"),
        Some(format!("exec 7>>'{}'", outside.display())),
    );
    host.wait_healthy().await;
    let (code, said, err) = cli(
        &["send", "r", "echo ESCAPED >&7; echo rc=$?"],
        &host.url,
        TOKEN,
    )
    .await;
    let (stopped, logged) = host.stop(20).await;
    assert_eq!(code, 0, "{err}\n{logged}");
    assert!(said.contains("rc=") && !said.contains("rc=0"), "{said}");
    let written = std::fs::read_to_string(&outside).unwrap_or_default();
    assert!(!written.contains("ESCAPED"), "{written}");
    assert!(stopped, "{logged}");
}
