//! A turn cancelled because its owner removed its bot (a bot made by
//! CreateAgent, `DELETE /v1/bots/{bot}`) before it answered: its
//! `turn_cancelled` notice offers no retry and says the bot was removed
//! (found by F8, round 21: it offered `retry_turn` and "send a new
//! message", and both answer 409 for a removed bot).

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^mkagent"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
bot = "helper"
match = "^think"
steps = [ { delay_ms = 120000, tool = "SendMessage", args = { text = "much later" } } ]

[[rule]]
bot = "helper"
match = "(?s)You are a member of the group room .*ponder"
steps = [ { delay_ms = 120000, tool = "SendMessage", args = { text = "much later" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// A host where alice's `maker` made `helper` with CreateAgent.
async fn with_helper() -> TestHost {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", &["SendMessage", "SendToAgent", "CreateAgent"])
        .start()
        .await;
    let (_, end) = host.end_turn("maker", "mkagent").await;
    assert_eq!(end["status"], "completed", "{end}");
    host
}

#[tokio::test]
async fn a_turn_cancelled_by_its_bots_removal_offers_no_retry() {
    let host = with_helper().await;
    // helper thinks, and has said nothing yet
    let (status, sent) = host.send("helper", "think about it", None).await;
    assert_eq!(status, 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    host.wait_running("helper").await;

    let (status, removed) = host
        .call(reqwest::Method::DELETE, "/v1/bots/helper", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{removed}");
    let end = host.wait_turn_end(&dm, sent["seq"].as_i64().unwrap()).await;
    assert_eq!(end["status"], "cancelled", "{end}");

    let entries = host.entries(&dm).await;
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_cancelled")
        .unwrap_or_else(|| panic!("no turn_cancelled notice: {entries:#?}"));
    assert_eq!(notice["retry_turn"], Value::Null, "{notice:#}");
    let text = notice["text"].as_str().unwrap();
    assert!(text.contains("removed by its owner"), "{text}");
    assert!(!text.contains("retry"), "{text}");
    // what the notice offered before answers 409 indeed
    let turn = end["turn"].as_str().unwrap();
    let (status, retried) = host
        .call(
            reqwest::Method::POST,
            &format!("/v1/turns/{turn}/retry"),
            TOKEN,
            Some(serde_json::json!({})),
        )
        .await;
    assert_eq!(status, 409, "{retried}");
    host.shutdown().await;
}

/// The same in a room: helper's turn in a discussion is cancelled by its
/// removal, and the timeline's notice says so, with no retry and no
/// advice to mention it (QA, 2026-12-04: it offered `botfleet retry`,
/// which answers 409, and a mention, which reaches no one).
#[tokio::test]
async fn a_room_turn_cancelled_by_its_bots_removal_offers_no_retry() {
    let host = with_helper().await;
    let (status, room) = host.create_room(TOKEN, "den", &["helper", "maker"]).await;
    assert_eq!(status, 201, "{room}");
    let posted = host
        .post_text("/v1/groups/den/messages", TOKEN, "ponder this")
        .await;
    let timeline = posted["session"].as_str().unwrap().to_owned();
    let seq = posted["seq"].as_i64().unwrap();
    host.wait_running("helper").await;

    let (status, removed) = host
        .call(reqwest::Method::DELETE, "/v1/bots/helper", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{removed}");
    host.wait_turn_end(&timeline, seq).await;

    let entries = host.entries(&timeline).await;
    let notice = entries
        .iter()
        .find(|e| e["code"] == "room_run_member_failed")
        .unwrap_or_else(|| panic!("no member_failed notice: {entries:#?}"));
    assert_eq!(notice["retry_turn"], Value::Null, "{notice:#}");
    let text = notice["text"].as_str().unwrap();
    assert!(text.contains("removed by its owner"), "{text}");
    assert!(
        !text.contains("botfleet retry") && !text.contains("mention @helper"),
        "{text}"
    );
    host.shutdown().await;
}
