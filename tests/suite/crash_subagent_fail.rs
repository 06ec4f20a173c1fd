//! A subagent's task that crashes again and again before its first step
//! is failed, and its report to the parent keeps the task's hop and chain:
//! the failure path started the hop count over (the report came at hop 1,
//! with no chain), so the parent's turn that read it could send what the
//! hop budget refuses after an ordinary failure (audit, 2026-12-07).
//! Through the binary, killed with SIGKILL while the task's model call
//! waits, until the crash limit fails it.

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

use super::crash::entries;
use super::crash::send;
use super::crash::wait_until;

const SCRIPT: &str = r#"
[[rule]]
name = "child-hang"
match = "CHILD-HANG"
steps = [ { delay_ms = 5000, tool = "SendMessage", args = { text = "never reported" } } ]

[[rule]]
bot = "boss"
match = "could not finish"
steps = [ { tool = "SendMessage", args = { text = "heard of the failure" } } ]

[[rule]]
bot = "boss"
match = "^go"
steps = [
  { tool = "Task", args = { description = "hang", prompt = "CHILD-HANG" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]
"#;

#[tokio::test]
async fn a_task_failed_by_its_crashes_reports_at_its_own_hop() {
    let fleet = TestFleet::new()
        .script("s", SCRIPT)
        .bot("boss", "s", &["SendMessage", "Task"])
        .runtime("debounce_ms = 0\nextract_memory = false\nmax_hops = 4");
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    // the scripted model names the rule it plays at DEBUG: the task's
    // start is counted before its model call
    let level = "info,botfleet_actors::model::scripted=debug";
    let mut host = HostProcess::start_with_log_level(&path, port, &log, level).await;
    let sent = send(&host.url, "boss", "go").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let report = |es: &[Value]| es.iter().find(|e| e["kind"] == "agent_message").cloned();
    // each start of the task killed in its model call, until the crash
    // limit (max_turn_attempts, 3) fails it at the next start
    let mut kills = 0;
    loop {
        let es = entries(&host.url, &session).await;
        if report(&es).is_some() {
            break;
        }
        assert!(kills < 8, "the task was never failed: {es:#?}");
        host.wait_log("rule=child-hang").await;
        host.kill9().await;
        kills += 1;
        host = HostProcess::start_with_log_level(&path, port, &log, level).await;
        // the next start runs the task again, or fails it and reports
        let url = host.url.clone();
        let reported = tokio::time::timeout(
            std::time::Duration::from_secs(3),
            wait_until(&url, &session, |es| report(es).is_some()),
        )
        .await;
        if reported.is_ok() {
            break;
        }
    }
    let es = wait_until(&host.url, &session, |es| {
        es.iter()
            .any(|e| e["kind"] == "delivery" && e["text"] == "heard of the failure")
    })
    .await;
    let report = report(&es).unwrap();
    assert!(
        report["text"].as_str().unwrap().contains("crashed"),
        "{report}"
    );
    // the person's message is hop 0, the task 1, its report 2
    assert_eq!(report["hop"], 2, "{report}");
    assert!(
        report.get("chain").is_some_and(|c| !c.is_null()),
        "{report}"
    );
    host.kill9().await;
}
