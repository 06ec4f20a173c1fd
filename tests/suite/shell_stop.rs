//! A host stopped cleanly in the middle of a Shell call, by SIGTERM (as
//! Ctrl-C) or by SIGHUP (a closed terminal, a dropped SSH session): it
//! says "stopping…", the command's whole process group dies with the
//! call, its background children included, nothing is left listed for the
//! next start to reap, and the process exits with success. (Before, only
//! `sh` died on SIGTERM: its children ran on, reparented to init, and the
//! list the next start reaps was cleared; SIGHUP's default action killed
//! the host outright: no stop, no checkpoint, Shell commands running on
//! until the next start.)

use std::time::Duration;

use super::crash::turn_ended;
use super::crash::wait_until;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::process::HostProcess;
use crate::support::process::alive;
use crate::support::process::free_port;
use crate::support::process::poll;
use crate::support::process::signal;

/// ... and the turn, resumed at the next start, tells the model the
/// stop ended the command, not that the host crashed (QA: "the host
/// restarted while `Shell` was running").
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_clean_stop_kills_a_running_shell_commands_children() {
    let stopped = stop_during_a_shell_call("TERM", "stop-key-1").await;
    let host = HostProcess::start(&stopped.path, free_port(), &stopped.log).await;
    let es = wait_until(&host.url, &stopped.session, turn_ended(stopped.seq)).await;
    let results: Vec<&str> = es
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert_eq!(results.len(), 1, "{es:#?}");
    assert!(
        results[0].starts_with(
            "outcome unknown: the host was stopped while `Shell` was running, and ended it"
        ),
        "{}",
        results[0]
    );
    let delivered = deliveries(&es);
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    host.kill9().await;
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
    stop_during_a_shell_call("HUP", "hup-key-1").await;
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

/// A host stopped during a turn's Shell call: its fleet, and the message
/// whose turn the stop cut off.
struct Stopped {
    _fleet: TestFleet,
    path: std::path::PathBuf,
    log: std::path::PathBuf,
    session: String,
    seq: i64,
}

/// Sends `sig` to a host whose Shell call runs a command with a background
/// child, and checks the stop: said, clean, the child gone, nothing listed.
async fn stop_during_a_shell_call(sig: &str, key: &str) -> Stopped {
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
    let (status, body) = c.send_message("r", "run it", key).await.unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");
    let session = body["session"].as_str().unwrap().to_owned();
    let seq = body["seq"].as_i64().unwrap();

    // a file signals nothing: poll, bounded
    let child_pid = fleet.path().join("data/workspace/alice/child.pid");
    let child = poll(30, async || {
        std::fs::read_to_string(&child_pid)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .ok_or_else(|| "the command never started".to_owned())
    })
    .await;
    assert!(alive(child), "the command's child runs");

    signal(host.child.id().unwrap(), sig);
    host.wait_log("stopping…").await;
    let exited = tokio::time::timeout(Duration::from_secs(20), host.child.wait()).await;
    assert!(
        exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
        "the host did not stop cleanly on SIG{sig}; log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );

    // SIGKILL is delivered before the host exits; init reaps the orphan
    // soon after
    poll(5, async || {
        if alive(child) {
            Err(format!(
                "the command's child {child} outlived the stopped host"
            ))
        } else {
            Ok(())
        }
    })
    .await;
    // nothing is left listed for the next start to reap
    let listed = std::fs::read_dir(fleet.path().join("data/shell"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(listed, 0, "the killed group is taken off the list");
    Stopped {
        _fleet: fleet,
        path,
        log,
        session,
        seq,
    }
}
