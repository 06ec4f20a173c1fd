//! A turn restarted many times: `runtime.max_turn_attempts` (3) counts the
//! crashes in a row at the same step. A step finished resets the count, a
//! clean stop does not count, and a turn cut off again and again without
//! finishing a step still fails. (Before, every start counted: the fourth
//! start of any turn failed it, "the turn crashed 3 times in a row", even
//! when each start had made progress or the host had been stopped
//! cleanly.)

use std::path::PathBuf;

use serde_json::Value;

use super::crash::entries;
use super::crash::send;
use super::crash::turn_ended;
use super::crash::wait_until;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

/// A turn that appends `s1` to multi.txt, then thinks for a minute: killed
/// or stopped while it thinks, it never finishes a second step.
const STUCK: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "echo s1 >> multi.txt" } },
  { delay_ms = 60000, tool = "SendMessage", args = { text = "never" } },
]
"#;

/// A bot `r` with Shell on `script`, as a host process that is restarted
/// on the same data, port and log.
struct Restarted {
    fleet: TestFleet,
    path: PathBuf,
    log: PathBuf,
    port: u16,
}

impl Restarted {
    fn new(script: &str) -> Self {
        let fleet = TestFleet::new()
            .script("s", script)
            .bot("r", "s", &["SendMessage", "Shell"]);
        let path = fleet.write();
        let log = fleet.path().join("host.log");
        Self {
            fleet,
            path,
            log,
            port: free_port(),
        }
    }

    async fn start(&self) -> HostProcess {
        HostProcess::start(&self.path, self.port, &self.log).await
    }
}

/// What a host logs when it resumes a turn (a resume writes no entry, so
/// its log is what shows it).
const RESUMED: &str = "resuming turn from its checkpoint";

/// The turn's record, as `GET /v1/turns/{turn}` shows it.
async fn turn_record(url: &str, turn: &str) -> Value {
    let c = botfleet::client::Client::new(url, TOKEN).unwrap();
    c.get(&format!("/v1/turns/{turn}")).await.unwrap()["turn"].clone()
}

/// Sends the message and waits for its turn's first Shell result; returns
/// (session, input seq, turn).
async fn start_turn(url: &str) -> (String, i64, String) {
    let sent = send(url, "r", "go").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    let es = wait_until(url, &session, |es| {
        es.iter()
            .any(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
    })
    .await;
    let result = es.iter().find(|e| e["kind"] == "tool_result").unwrap();
    let turn = result["turn"].as_str().unwrap().to_owned();
    (session, seq, turn)
}

fn shell_results(es: &[Value]) -> usize {
    es.iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
        .count()
}

/// The tester's case, with SIGKILL: a five-step turn killed after each of
/// its first three steps. Each start finished a step, so the fourth start
/// is the first at its step and the turn completes, every step run once.
#[tokio::test]
async fn a_turn_killed_between_its_steps_completes() {
    let script = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "echo s1 >> multi.txt" } },
  { delay_ms = 1500, tool = "Shell", args = { command = "echo s2 >> multi.txt" } },
  { delay_ms = 1500, tool = "Shell", args = { command = "echo s3 >> multi.txt" } },
  { delay_ms = 1500, tool = "SendMessage", args = { text = "all done" } },
]
"#;
    let fleet = Restarted::new(script);
    let mut host = fleet.start().await;
    let (session, seq, turn) = start_turn(&host.url).await;
    for step in 1..=3 {
        // step `step` ran and is recorded; the model "thinks" about the next
        wait_until(&host.url, &session, |es| shell_results(es) == step).await;
        host.kill9().await;
        host = fleet.start().await;
    }
    let es = wait_until(&host.url, &session, turn_ended(seq)).await;
    let end = es.iter().find(|e| e["kind"] == "turn_end").unwrap();
    assert_eq!(end["status"], "completed", "{es:#?}");
    assert_eq!(deliveries(&es), vec!["all done".to_owned()]);
    let side =
        std::fs::read_to_string(fleet.fleet.path().join("data/workspace/alice/multi.txt")).unwrap();
    assert_eq!(side, "s1\ns2\ns3\n", "each step ran once");
    let record = turn_record(&host.url, &turn).await;
    assert_eq!(
        record["attempts"], 1,
        "the last start finished a step: {record}"
    );
    host.kill9().await;
}

/// A turn killed three times in a row without finishing a step is failed
/// at its fourth start, saying so, and its inputs can be retried.
#[tokio::test]
async fn a_turn_killed_three_times_at_the_same_step_fails() {
    let fleet = Restarted::new(STUCK);
    let mut host = fleet.start().await;
    let (session, seq, turn) = start_turn(&host.url).await;
    for resumes in 1..=2 {
        host.kill9().await;
        host = fleet.start().await;
        host.wait_log(RESUMED).await;
        let record = turn_record(&host.url, &turn).await;
        assert_eq!(record["attempts"], resumes + 1, "{record}");
    }
    host.kill9().await;
    let host = fleet.start().await;
    let es = wait_until(&host.url, &session, turn_ended(seq)).await;
    let end = es.iter().find(|e| e["kind"] == "turn_end").unwrap();
    assert_eq!(end["status"], "failed", "{es:#?}");
    let record = turn_record(&host.url, &turn).await;
    assert_eq!(
        record["error"], "the turn crashed 3 times in a row at the same step",
        "{record}"
    );
    assert_eq!(record["attempts"], 4, "{record}");
    let notice = es
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap();
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .contains("crashed 3 times in a row at the same step"),
        "{notice}"
    );
    let side =
        std::fs::read_to_string(fleet.fleet.path().join("data/workspace/alice/multi.txt")).unwrap();
    assert_eq!(side, "s1\n", "the first step ran once");
    host.kill9().await;
}

/// A turn that replied, then was killed three times in a row at its next
/// step: its reply stands, and it ends `completed` with a
/// `failed_after_reply` notice and no retry, as a turn whose step after
/// its reply fails does. (QA: it failed with a `turn_failed` notice and a
/// retry; `botfleet send` printed the reply, then the failure, exit 3; a
/// retry asked the model over a message already answered.)
#[tokio::test]
async fn a_turn_killed_three_times_after_its_reply_keeps_it() {
    let script = r#"
[[rule]]
steps = [
  { tool = "SendMessage", args = { text = "here is your answer" } },
  { delay_ms = 60000, text = "wrapping up" },
]
"#;
    let fleet = Restarted::new(script);
    let mut host = fleet.start().await;
    let sent = send(&host.url, "r", "go").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    let es = wait_until(&host.url, &session, |es| !deliveries(es).is_empty()).await;
    let turn = es.iter().find(|e| e["kind"] == "delivery").unwrap()["turn"]
        .as_str()
        .unwrap()
        .to_owned();
    for _ in 1..=2 {
        host.kill9().await;
        host = fleet.start().await;
        host.wait_log(RESUMED).await;
    }
    host.kill9().await;
    let host = fleet.start().await;
    let es = wait_until(&host.url, &session, turn_ended(seq)).await;
    let end = es.iter().find(|e| e["kind"] == "turn_end").unwrap();
    assert_eq!(end["status"], "completed", "{es:#?}");
    assert_eq!(deliveries(&es), vec!["here is your answer".to_owned()]);
    let notice = es
        .iter()
        .find(|e| e["kind"] == "notice")
        .unwrap_or_else(|| panic!("a notice: {es:#?}"));
    assert_eq!(notice["code"], "failed_after_reply", "{notice}");
    assert!(notice["retry_turn"].is_null(), "{notice}");
    let record = turn_record(&host.url, &turn).await;
    assert_eq!(
        record["error"], "the turn crashed 3 times in a row at the same step",
        "{record}"
    );
    let c = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let retried = c
        .post_ok(&format!("/v1/turns/{turn}/retry"), &serde_json::json!({}))
        .await;
    assert!(retried.is_err(), "a retry would answer twice: {retried:?}");
    host.kill9().await;
}

/// The tester's case with SIGTERM: a host stopped cleanly more often than
/// the limit while a turn thinks. The stops are not crashes: the turn
/// resumes each time, counted as the first start at its step.
#[tokio::test]
async fn clean_stops_do_not_count_against_a_turn() {
    let fleet = Restarted::new(STUCK);
    let mut host = fleet.start().await;
    let (session, _, turn) = start_turn(&host.url).await;
    for resumes in 1..=4 {
        host.stop(&fleet.log).await;
        host = fleet.start().await;
        host.wait_log(RESUMED).await;
        let record = turn_record(&host.url, &turn).await;
        assert_eq!(
            (&record["status"], &record["attempts"]),
            (&Value::from("running"), &Value::from(1)),
            "after {resumes} clean stops: {record}"
        );
    }
    // a crash after the clean stops counts as the first in a row
    host.kill9().await;
    let mut host = fleet.start().await;
    host.wait_log(RESUMED).await;
    let record = turn_record(&host.url, &turn).await;
    assert_eq!(record["attempts"], 2, "{record}");
    let es = entries(&host.url, &session).await;
    assert!(
        !es.iter().any(|e| e["kind"] == "turn_end"),
        "the turn still runs: {es:#?}"
    );
    host.kill9().await;
}
