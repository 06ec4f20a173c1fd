//! A Shell command gets the open-file limit the host started with, not
//! the one `botfleet run` raised for its connections (round 22, f4 "Fix
//! 3": a bot's command could open as many files as the hard limit allows).

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
/// command still prints 400.
#[tokio::test]
async fn a_shell_command_gets_the_open_file_limit_the_host_started_with() {
    let Some((_, hard)) = open_file_limits("self") else {
        eprintln!("skipped: no /proc/self/limits, or an unlimited open-file limit");
        return;
    };
    let soft = 400;
    if hard <= soft {
        eprintln!("skipped: the hard open-file limit ({hard}) leaves nothing to raise");
        return;
    }
    if !landlock() {
        return;
    }
    let fleet = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
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
    assert_eq!(printed, vec![soft.to_string()], "{said}");
    assert!(stopped, "{logged}");
}
