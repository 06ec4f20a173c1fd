//! A member its owner removes while its room input still waits in its
//! queue (it was busy with a slow DM) starts no turn, so none of its turns
//! ends: the discussion, and every later message to the room, waited for
//! good, until a restart (audit, 2026-12-07). The room goes on without it
//! and its `turn_end` lists it `no_turn`.

use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^make"
steps = [
  { tool = "CreateAgent", args = { name = "Helper", id = "helper", role = "helps", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "made" } },
]

[[rule]]
bot = "helper"
match = "slow"
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "slow done" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} is here" } } ]
"#;

#[tokio::test]
async fn a_member_removed_with_its_room_input_queued_is_not_waited_for() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", &["SendMessage", "CreateAgent"])
        .bot("a1", "s", &["SendMessage"])
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    host.complete_turn("maker", "make one").await;
    let (status, room) = host.create_room(TOKEN, "r1", &["a1", "helper"]).await;
    assert_eq!(status, 201, "{room}");
    // helper busy with a slow DM; the room's input waits behind it
    let (status, sent) = host.send("helper", "slow please", None).await;
    assert_eq!(status, 202, "{sent}");
    host.wait_running("helper").await;
    let asked = host
        .post_text("/v1/groups/r1/messages", TOKEN, "@helper hello")
        .await;
    // the discussion began: helper has its input queued
    host.wait_get("/v1/bots", |v| {
        v["bots"]
            .as_array()?
            .iter()
            .find(|b| b["id"] == "helper" && b["queued"] == 1)
            .cloned()
    })
    .await;
    let (status, removed) = host
        .call(reqwest::Method::DELETE, "/v1/bots/helper", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{removed}");
    // the discussion ends without it
    let seq = asked["seq"].as_i64().unwrap();
    host.wait_turn_end(asked["session"].as_str().unwrap(), seq)
        .await;
    let (status, page) = host
        .get(&format!("/v1/groups/r1/entries?after={seq}"), TOKEN)
        .await;
    assert_eq!(status, 200, "{page}");
    let end = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "turn_end")
        .cloned()
        .unwrap_or_else(|| panic!("no end: {page:#}"));
    assert_eq!(
        end["members"],
        json!([{"id": "helper", "outcome": "no_turn"}]),
        "{end}"
    );
    // and the room takes the next message
    let (_, entries) = host.discuss(TOKEN, "r1", "@a1 are you there").await;
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "delivery" && e["text"] == "a1 is here"),
        "{entries:#?}"
    );
    host.shutdown().await;
}
