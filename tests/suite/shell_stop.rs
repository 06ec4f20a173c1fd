//! A host stopped cleanly (SIGTERM, as Ctrl-C) in the middle of a Shell
//! call: the command's whole process group dies with the call, its
//! background children included. (Before, only `sh` died: its children ran
//! on, reparented to init, and the list the next start reaps was cleared.)

use std::time::Duration;

use tokio::time::Instant;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::HostProcess;
use crate::support::process::alive;
use crate::support::process::free_port;

/// Sends `signal` (e.g. "TERM") to `pid` with kill(1).
fn signal(pid: i32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}: {status}");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_clean_stop_kills_a_running_shell_commands_children() {
    let script = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "sleep 30 & echo $! > child.pid; wait", timeout_s = 120 } },
  { tool = "SendMessage", args = { text = "after: {{tool_result}}" } },
]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Shell"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let mut host = HostProcess::start(&path, free_port(), &log).await;
    let c = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let (status, body) = c.send_message("r", "run it", "stop-key-1").await.unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");

    let child_pid = fleet.path().join("data/workspace/alice/child.pid");
    // a file signals nothing: poll, bounded
    let deadline = Instant::now() + Duration::from_secs(30);
    let child = loop {
        if let Some(pid) = std::fs::read_to_string(&child_pid)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(alive(child), "the command's child runs");

    let host_pid = i32::try_from(host.child.id().unwrap()).unwrap();
    signal(host_pid, "TERM");
    let exited = tokio::time::timeout(Duration::from_secs(20), host.child.wait()).await;
    assert!(
        exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
        "the host did not stop cleanly; log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );

    // SIGKILL is delivered before the host exits; init reaps the orphan
    // soon after
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(child) {
        if Instant::now() >= deadline {
            signal(child, "KILL");
            panic!("the command's child {child} outlived the stopped host");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // nothing is left listed for the next start to reap
    let listed = std::fs::read_dir(fleet.path().join("data/shell"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(listed, 0, "the killed group is taken off the list");
}
