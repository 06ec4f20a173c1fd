//! A cancel answered `{"cancelled": true}` holds across a SIGKILL that
//! comes right after the answer: a real host (`botfleet run`) whose turn
//! runs a long Shell command is cancelled through the API and killed as
//! soon as the answer is read; after the restart the turn reads
//! `cancelled`, and its next command and its reply never happen.
//!
//! Before, the answer came as soon as the run was told to stop, ahead of
//! the commit of its end: a host killed in between resumed the turn at
//! its next start (the Shell "outcome unknown"), ran the next command and
//! delivered the reply the person had cancelled — about every other time.
//! Three rounds, each on a new message, so the old race is met at least
//! once in nearly every run; the unit test
//! `a_cancel_is_answered_once_the_cancelled_turns_end_is_committed`
//! (actors/src/bot_cancel_tests.rs) holds the store's writer and fails
//! on the old code every time.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

/// A message starting with "work" runs a long command, then a second one
/// and a reply, which a cancelled turn never reaches.
const SCRIPT: &str = r#"
[[rule]]
match = "^work"
steps = [
  { tool = "Shell", args = { command = "echo started >> log.txt; sleep 60", timeout_s = 120 } },
  { tool = "Shell", args = { command = "echo went-on >> log.txt" } },
  { tool = "SendMessage", args = { text = "work done" } },
]
"#;

/// How many times each line is in the workspace's `log.txt`.
fn logged(fleet: &TestFleet, line: &str) -> usize {
    let path = fleet.path().join("data/workspace/alice/log.txt");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == line)
        .count()
}

/// The turns of bot `r`.
async fn turns(client: &botfleet::client::Client) -> Vec<Value> {
    client.get("/v1/bots/r/turns").await.unwrap()["turns"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_turn_cancelled_just_before_a_sigkill_stays_cancelled() {
    let fleet = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .runtime("debounce_ms = 0\nextract_memory = false");
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let mut host = HostProcess::start(&path, port, &log).await;
    for round in 1..=3 {
        let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
        let (status, sent) = client
            .send_message("r", &format!("work {round}"), &format!("cancel-{round}"))
            .await
            .unwrap();
        assert_eq!(status.as_u16(), 202, "{sent}");
        let session = sent["session"].as_str().unwrap().to_owned();
        // the turn is in its long command
        poll(20, async || {
            if logged(&fleet, "started") == round {
                Ok(())
            } else {
                Err(format!("round {round}: the command never started"))
            }
        })
        .await;
        let answer = client
            .post("/v1/bots/r/cancel", &serde_json::json!({}), None)
            .await;
        let url = host.url.clone();
        host.kill9().await;
        let (status, answer) = answer.unwrap();
        assert_eq!(status.as_u16(), 200, "{answer}");
        assert_eq!(answer["cancelled"], true, "{answer}");

        host = HostProcess::start(&path, port, &log).await;
        let client = botfleet::client::Client::new(&url, TOKEN).unwrap();
        // every turn ended, none running: the cancelled one stayed so
        let listed = poll(20, async || {
            let listed = turns(&client).await;
            let bots = client.get("/v1/bots").await.unwrap();
            let bot = bots["bots"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["id"] == "r")
                .unwrap()
                .clone();
            if listed.len() == round
                && listed.iter().all(|t| t["status"] != "running")
                && bot["running_turn"].is_null()
                && bot["queued"] == 0
            {
                Ok(listed)
            } else {
                Err(format!("round {round}: turns {listed:#?}, bot {bot}"))
            }
        })
        .await;
        assert!(
            listed.iter().all(|t| t["status"] == "cancelled"),
            "round {round}: {listed:#?}"
        );
        let entries = client.entries_after(&session, 0).await.unwrap();
        assert_eq!(deliveries(&entries), Vec::<String>::new(), "{entries:#?}");
        assert_eq!(
            logged(&fleet, "went-on"),
            0,
            "round {round}: the cancelled turn ran on after the restart"
        );
    }
    host.kill9().await;
}
