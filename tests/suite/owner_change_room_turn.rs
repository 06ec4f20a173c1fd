//! A room member's turn cut off by the restart that gives the member to
//! bob: what the room asked it came while it was alice's, and its own
//! room session goes to bob read from the change on. The turn ends
//! `owner_changed` without a model call; the room's timeline says so and
//! offers no retry, and a retry is refused (review: the notice said the
//! turn failed, pointed at a `turn_failed` notice that did not exist and
//! offered a retry, which was taken and ended the same way).

use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::restart;

/// Before the restart: `p` hangs on the room's question.
const BEFORE: &str = r#"
[[rule]]
bot = "p"
match = "(?i)standup"
steps = [ { delay_ms = 600000, tool = "SendMessage", args = { text = "too late" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "Q-ANSWERED" } } ]
"#;

/// After the restart: anyone answers.
const AFTER: &str = r#"
[[rule]]
bot = "p"
steps = [ { tool = "SendMessage", args = { text = "P-ANSWERED" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "Q-ANSWERED" } } ]
"#;

const TOOLS: &[&str] = &["SendMessage"];

#[tokio::test]
async fn a_members_turn_of_before_the_owner_change_ends_without_a_retry() {
    let host = TestFleet::new()
        .script("s", BEFORE)
        .bot("p", "s", TOOLS)
        .bot("q", "s", TOOLS)
        .start()
        .await;
    let (status, v) = host.create_room(TOKEN, "standup", &["p", "q"]).await;
    assert!(status < 300, "{status} {v}");
    let posted = host
        .post_text("/v1/groups/standup/messages", TOKEN, "@p @q standup please")
        .await;
    let timeline = posted["session"].as_str().unwrap().to_owned();
    let seq = posted["seq"].as_i64().unwrap();
    host.wait_running("p").await;

    let fleet = host.shutdown().await;
    std::fs::write(fleet.path().join("scripts/s.toml"), AFTER).unwrap();
    let fleet = fleet.without_bot("p").bot_of("p", "s", TOOLS, "bob");
    fleet.write();
    let host = restart(fleet).await;
    host.wait_turn_end(&timeline, seq).await;
    let entries = host.entries(&timeline).await;
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "room_run_member_failed")
        .unwrap_or_else(|| panic!("no notice of p: {entries:#?}"));
    let text = notice["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("@p") && text.contains("came before fleet.toml gave it"),
        "{notice}"
    );
    assert!(
        notice["retry_turn"].is_null(),
        "a retry is offered: {notice}"
    );
    assert!(
        !entries.iter().any(|e| e.to_string().contains("P-ANSWERED")),
        "p answered what alice asked of it: {entries:#?}"
    );

    // bob's retry of the turn is refused, saying why
    let (status, v) = host.get("/v1/bots/p/turns", BOB_TOKEN).await;
    assert_eq!(status, 200, "{v}");
    let turn = v["turns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["status"] == "cancelled")
        .and_then(|t| t["id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no cancelled turn: {v:#}"));
    let (status, v): (u16, Value) = host
        .call(
            reqwest::Method::POST,
            &format!("/v1/turns/{turn}/retry"),
            BOB_TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 409, "{v}");
    assert!(v.to_string().contains("cannot be retried"), "{v}");
    host.shutdown().await;
}
