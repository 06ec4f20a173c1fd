//! SIGHUP (a closed terminal, a dropped SSH session) stops a real host
//! (`botfleet run`) as SIGTERM does: it says "stopping…", the running
//! Shell command's process group dies with the stop, nothing is left
//! listed for the next start to reap, and the process exits with success.
//! (SIGHUP's default action killed the host outright: no stop, no
//! checkpoint, Shell commands running on until the next start.)

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::alive;
use crate::support::process::free_port;

/// Sends `signal` (e.g. "HUP") to `pid` with kill(1).
fn signal(pid: i32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}: {status}");
}

/// Whether this test process ignores SIGHUP (run under `nohup`): the host
/// it starts would inherit that and, as documented, keep ignoring it.
fn hangup_ignored_here() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|mask| mask & 1 != 0)
}

/// Polls `check` every 20 ms until it holds, for at most `secs` (a file
/// or a process signals nothing).
async fn until(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {secs} s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn sighup_stops_the_host_cleanly_and_its_shell_command_with_it() {
    if hangup_ignored_here() {
        eprintln!(
            "skipping the SIGHUP test: this test process ignores SIGHUP (nohup?), so the host would too"
        );
        return;
    }
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
    let port = free_port();
    let mut host = tokio::process::Command::new(BIN)
        .args(["run", "--fleet"])
        .arg(&path)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !http
        .get(format!("{url}/healthz"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(Instant::now() < deadline, "the host did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let c = botfleet::client::Client::new(&url, TOKEN).unwrap();
    let (status, body) = c.send_message("r", "run it", "hup-key-1").await.unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");

    let child_pid = fleet.path().join("data/workspace/alice/child.pid");
    let read_pid = || {
        std::fs::read_to_string(&child_pid)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
    };
    until(30, "the command starts", || read_pid().is_some()).await;
    let child = read_pid().unwrap();
    assert!(alive(child), "the command's child runs");

    let host_pid = i32::try_from(host.id().unwrap()).unwrap();
    signal(host_pid, "HUP");
    let exited = tokio::time::timeout(Duration::from_secs(20), host.wait()).await;
    let mut stdout = String::new();
    let mut stderr = String::new();
    // bounded: a command left running (the bug) would hold them open
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        host.stdout.take().unwrap().read_to_string(&mut stdout),
    )
    .await;
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        host.stderr.take().unwrap().read_to_string(&mut stderr),
    )
    .await;
    let status = exited
        .unwrap_or_else(|_| panic!("the host did not stop on SIGHUP; log:\n{stderr}"))
        .unwrap();
    assert!(
        status.success(),
        "the host did not stop cleanly ({status}); stdout:\n{stdout}\nlog:\n{stderr}"
    );
    assert!(
        stdout.contains("stopping…"),
        "the host says it stops: {stdout}"
    );

    // the command's process group died with the stop (SIGKILL, delivered
    // before the host exits; init reaps the orphan soon after)
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(child) {
        if Instant::now() >= deadline {
            signal(child, "KILL");
            panic!("the command's child {child} outlived the stopped host");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // nothing is left listed for the next start to reap
    let shell_dir = fleet.path().join("data/shell");
    let listed: Vec<_> = std::fs::read_dir(&shell_dir)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(listed.is_empty(), "still listed: {listed:?}");
}
