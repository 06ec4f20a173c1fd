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
bot = "maker"
match = "^ask helper"
steps = [
  { tool = "SendToAgent", args = { agent = "helper", text = "ponder deeply" } },
  { tool = "SendMessage", args = { text = "asked helper" } },
]

[[rule]]
bot = "maker"
match = "bot_removed:helper"
steps = [ { tool = "SendMessage", args = { text = "no answer: {{input}}" } } ]

[[rule]]
bot = "helper"
match = "ponder deeply"
steps = [ { delay_ms = 120000, tool = "SendMessage", args = { text = "much later" } } ]

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

    remove_helper(&host).await;
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

    remove_helper(&host).await;
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

/// Alice removes `helper` (`DELETE /v1/bots/helper`).
async fn remove_helper(host: &TestHost) {
    let (status, removed) = host
        .call(reqwest::Method::DELETE, "/v1/bots/helper", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{removed}");
}

/// The bot that asked a removed bot and ended its turn waiting is told
/// no answer will come, in the conversation it asked from, and tells its
/// person (QA: the asker was never woken, its person waited for good).
async fn the_asker_hears(host: &TestHost, maker_dm: &str) {
    let told = host.wait_delivery(maker_dm, "no answer").await;
    assert!(
        told.contains("helper was removed by its owner before it answered your message")
            && told.contains("ponder deeply"),
        "{told}"
    );
    let entries = host.entries(maker_dm).await;
    let events: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "event" && e["origin"] == "bot_removed:helper")
        .collect();
    assert_eq!(events.len(), 1, "{entries:#?}");
    assert_eq!(events[0]["trusted"], true, "{:#}", events[0]);
}

/// Removed while its turn worked on another bot's message.
#[tokio::test]
async fn a_bot_removed_while_it_worked_on_a_bots_message_tells_the_asker() {
    let host = with_helper().await;
    let (maker_dm, end) = host.end_turn("maker", "ask helper to ponder").await;
    assert_eq!(end["status"], "completed", "{end}");
    host.wait_running("helper").await;

    remove_helper(&host).await;
    the_asker_hears(&host, &maker_dm).await;
    host.shutdown().await;
}

/// Removed while another bot's message still waited in its queue (behind
/// a person's long turn): the removal itself tells the asker.
#[tokio::test]
async fn a_bot_removed_with_a_bots_message_in_its_queue_tells_the_asker() {
    let host = with_helper().await;
    let (status, sent) = host.send("helper", "think about it", None).await;
    assert_eq!(status, 202, "{sent}");
    host.wait_running("helper").await;
    let (maker_dm, end) = host.end_turn("maker", "ask helper to ponder").await;
    assert_eq!(end["status"], "completed", "{end}");

    remove_helper(&host).await;
    the_asker_hears(&host, &maker_dm).await;
    host.shutdown().await;
}

/// Removed while its turn worked on one of another bot's messages and a
/// second one from the same conversation waited in its queue: the asker
/// is told once for that conversation (QA: the cancelled turn and the
/// queue each told it, quoting another message, and it ran two turns).
#[tokio::test]
async fn a_bot_removed_with_a_bots_messages_in_its_turn_and_queue_tells_the_asker_once() {
    let host = with_helper().await;
    let (maker_dm, end) = host.end_turn("maker", "ask helper to ponder").await;
    assert_eq!(end["status"], "completed", "{end}");
    host.wait_running("helper").await;
    // the same conversation asks again while helper works on the first
    let (_, end) = host.end_turn("maker", "ask helper once more").await;
    assert_eq!(end["status"], "completed", "{end}");
    wait_listed(&host, "helper", |b| b["queued"] == 1).await;

    remove_helper(&host).await;
    the_asker_hears(&host, &maker_dm).await;
    // both ways of telling have run: helper's turn has ended, and maker
    // has nothing left to do
    wait_listed(&host, "helper", |b| b["running_turn"].is_null()).await;
    wait_listed(&host, "maker", |b| {
        b["running_turn"].is_null() && b["queued"] == 0
    })
    .await;
    let entries = host.entries(&maker_dm).await;
    let told = entries
        .iter()
        .filter(|e| e["kind"] == "event" && e["origin"] == "bot_removed:helper")
        .count();
    assert_eq!(told, 1, "{entries:#?}");
    host.shutdown().await;
}

/// Waits until `bot`'s entry of the bot list (`GET /v1/bots`) is as
/// `ready` wants it.
async fn wait_listed(host: &TestHost, bot: &str, ready: impl Fn(&Value) -> bool) {
    host.wait_get("/v1/bots", |list| {
        list["bots"]
            .as_array()?
            .iter()
            .find(|b| b["id"] == bot)
            .filter(|b| ready(b))
            .cloned()
    })
    .await;
}
