//! A Shell command gets the open-file limit the host started with, not
//! the one `botfleet run` raised for its connections (round 22, f4 "Fix
//! 3": a bot's command could open as many files as the hard limit allows).

use std::process::Stdio;
use std::time::Duration;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::cli;
use crate::support::process::free_port;
use crate::support::process::poll;
use crate::support::process::signal;

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

/// The soft and hard "Max open files" of `/proc/PID/limits` (`None`:
/// unlimited or unreadable).
fn open_file_limits(pid: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let mut fields = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .map(str::parse::<u64>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

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
    let log = fleet.path().join("host.log");
    let out = std::fs::File::create(&log).unwrap();
    let port = free_port();
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -S -n {soft} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(["run", "--fleet"])
        .arg(&path)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // `exec`: the shell's process is the host's
    let pid = child.id().unwrap().to_string();
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    poll(30, async || {
        match http.get(format!("{url}/healthz")).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            other => Err(format!(
                "the host never answered /healthz ({other:?}); log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )),
        }
    })
    .await;
    let (running, _) = open_file_limits(&pid).unwrap();
    assert_eq!(running, hard.min(1 << 20), "the host raised its own limit");

    let (code, said, err) = cli(&["send", "r", "ulimit -n"], &url, TOKEN).await;
    signal(&pid, "TERM");
    let exited = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, 0, "{err}\n{logged}");
    assert!(said.contains("exit code: 0"), "{said}");
    let printed: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| l.parse::<u64>().is_ok())
        .collect();
    assert_eq!(printed, vec![soft.to_string()], "{said}");
    assert!(
        exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
        "{logged}"
    );
}
