//! The tokens a turn used before a SIGKILL still count once it resumes: a
//! real host (`botfleet run`) is killed while a turn waits for its second
//! model call, after its first step (a Shell call) is stored; after the
//! restart the turn ends with all three of its calls in its `turn_end`
//! usage and in the bot's `usage` (total and today, which the daily
//! token budget reads).
//!
//! Before, a turn's usage was kept in memory and stored only with its
//! end: the resumed turn counted just the calls made after the restart
//! (2 of 3 here), so every crash took tokens off the bot's counts and
//! its budget.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::free_port;

use super::crash::entries;
use super::crash::killed_after_a_shell_step;

#[tokio::test]
async fn a_turn_resumed_after_a_sigkill_counts_the_calls_made_before_it() {
    // three calls: the Shell step, the reply (slow, so the kill lands in
    // it), and the stop
    let script = r#"
[[rule]]
match = "^work"
steps = [
  { tool = "Shell", args = { command = "echo once >> log.txt" } },
  { delay_ms = 1500, tool = "SendMessage", args = { text = "worked" } },
]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Shell"])
        .runtime("debounce_ms = 0\nextract_memory = false");
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    // killed once the first step is stored, while the second call waits
    let (host, session, es) = killed_after_a_shell_step(&path, port, &log, "work now").await;
    let url = host.url.clone();
    let end = es.iter().find(|e| e["kind"] == "turn_end").unwrap();
    assert_eq!(end["status"], "completed", "{es:#?}");
    assert_eq!(end["usage"]["calls"], 3, "the turn's own count: {end}");
    let client = botfleet::client::Client::new(&url, TOKEN).unwrap();
    let bots = client.get("/v1/bots").await.unwrap();
    let r: &Value = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "r")
        .unwrap();
    assert_eq!(r["usage"]["turns"], 1, "{r}");
    assert_eq!(r["usage"]["total"]["calls"], 3, "{r}");
    assert_eq!(r["usage"]["today"]["calls"], 3, "the budget's count: {r}");
    assert_eq!(
        r["usage"]["total"]["prompt_tokens"], end["usage"]["prompt_tokens"],
        "{r} vs {end}"
    );
    // the step before the kill ran once
    let ran = std::fs::read_to_string(fleet.path().join("data/workspace/alice/log.txt")).unwrap();
    assert_eq!(ran, "once\n");
    assert_eq!(
        entries(&url, &session)
            .await
            .iter()
            .filter(|e| e["kind"] == "delivery")
            .count(),
        1
    );
    host.kill9().await;
}
