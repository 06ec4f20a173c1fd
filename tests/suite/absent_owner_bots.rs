//! A user dropped from fleet.toml leaves the bots their bots made with
//! CreateAgent behind (QA: those went on running their routines and their
//! queued turns, on the absent user's memory and workspace, where no user
//! could see, stop or remove them). Such a bot is held, as a bot the
//! config dropped: it runs nothing until `[[users]]` lists its owner
//! again, and then it is back, with its conversation.

use botfleet::memory::BotId;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::fleet::until_signalled;

const CAROL: &str = "carol-secret-token";

const SCRIPT: &str = r#"
[[rule]]
bot = "c1"
match = "^make"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps." } },
  { tool = "SendMessage", args = { text = "made" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

fn carol() -> String {
    format!("[[users]]\nid = \"carol\"\ntoken = \"{CAROL}\"\n")
}

/// helper's record as the store holds it.
async fn helper(host: &TestHost) -> botfleet::memory::BotRecord {
    host.host
        .as_ref()
        .unwrap()
        .fleet
        .store()
        .get_bot(&BotId::new("helper").unwrap())
        .await
        .unwrap()
        .expect("helper is stored")
}

/// Carol leaves the fleet (her `[[users]]` table goes) and her c1 goes
/// to bob; the host started again on that file.
async fn carol_leaves(host: TestHost) -> TestHost {
    let fleet = host
        .shutdown()
        .await
        .without_tables()
        .without_bot("c1")
        .bot_of("c1", "s", &["SendMessage", "CreateAgent"], "bob");
    fleet.write();
    restart(fleet).await
}

/// Carol asks c1 to make `helper` (CreateAgent); its listing once made.
async fn carol_makes_helper(host: &TestHost) -> serde_json::Value {
    let (status, made) = host
        .call(
            reqwest::Method::POST,
            "/v1/bots/c1/messages",
            CAROL,
            Some(json!({ "text": "make a helper" })),
        )
        .await;
    assert_eq!(status, 202, "{made}");
    let client = botfleet::client::Client::new(&host.url, CAROL).unwrap();
    until_signalled(&client, async || {
        let (_, v) = host.get("/v1/bots", CAROL).await;
        v["bots"]
            .as_array()
            .and_then(|bs| bs.iter().find(|b| b["id"] == "helper").cloned())
            .ok_or_else(|| format!("c1 made no helper yet: {v}"))
    })
    .await
}

#[tokio::test]
async fn a_made_bot_of_a_user_dropped_from_the_config_is_held_until_they_are_back() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot_of("c1", "s", &["SendMessage", "CreateAgent"], "carol")
        .tables(&carol())
        .start()
        .await;
    let bots = carol_makes_helper(&host).await;
    assert_eq!(bots["owner"], "carol", "{bots}");
    assert!(helper(&host).await.removed_at().is_none());

    let host = carol_leaves(host).await;
    let held = helper(&host).await;
    assert!(
        held.removed_at().is_some(),
        "held while carol is away: {held:?}"
    );
    let (_, bobs) = host.get("/v1/bots", BOB_TOKEN).await;
    assert!(!bobs.to_string().contains("\"helper\""), "{bobs}");

    // carol is back: so is helper, and it answers her
    let fleet = host.shutdown().await.tables(&carol());
    fleet.write();
    let host = restart(fleet).await;
    let back = helper(&host).await;
    assert!(back.removed_at().is_none(), "{back:?}");
    let (status, sent) = host
        .call(
            reqwest::Method::POST,
            "/v1/bots/helper/messages",
            CAROL,
            Some(json!({ "text": "still there?" })),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    host.shutdown().await;
}

/// A held made bot in a room says why it takes no turns: its owner is
/// away, not that it was removed (QA: the notice said "removed by its
/// owner", which nobody did, and it came back with them).
#[tokio::test]
async fn a_held_made_bot_in_a_room_is_named_as_held_not_removed() {
    let fleet = TestFleet::new()
        .script("s", SCRIPT)
        .bot_of("c1", "s", &["SendMessage", "CreateAgent"], "carol")
        .bot_of("b1", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true")
        .tables(&carol());
    let host = fleet.start().await;
    carol_makes_helper(&host).await;
    let (status, room) = host.create_room(CAROL, "mix", &["helper", "b1"]).await;
    assert_eq!(status, 201, "{room}");

    let host = carol_leaves(host).await;
    host.post_text("/v1/groups/mix/messages", BOB_TOKEN, "@helper @b1 hi")
        .await;
    let bob = botfleet::client::Client::new(&host.url, BOB_TOKEN).unwrap();
    let notice = until_signalled(&bob, async || {
        let (_, v) = host.get("/v1/groups/mix/entries", BOB_TOKEN).await;
        v["entries"]
            .as_array()
            .and_then(|es| es.iter().find(|e| e["code"] == "removed_member").cloned())
            .ok_or_else(|| format!("no removed_member notice: {v:#}"))
    })
    .await;
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains("@helper belongs to a user who is no longer one of this host's")
            && !text.contains("removed by its owner"),
        "{text}"
    );
    host.shutdown().await;
}
