//! A member whose owner stops sharing it (`shareable = false` in
//! fleet.toml): the next start takes it out of the rooms of other users,
//! with a `members_changed` notice saying why; a discussion the restart
//! cut off goes on without it, and new messages no longer reach it.
//!
//! (Before, it stayed a working member of the other user's room: the
//! resumed discussion and every new `@b1` ran turns of it on its owner's
//! provider, while the room's owner could no longer even reorder the
//! members with it.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::process::poll;

const SCRIPT: &str = r#"
[[rule]]
bot = "b1"
match = "slow topic"
steps = [ { delay_ms = 1500, tool = "SendMessage", args = { text = "b1, later" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

const TOOLS: &[&str] = &["SendMessage"];

/// Posts `text` to room r1 as alice.
async fn post(host: &TestHost, text: &str, key: &str) -> Value {
    let (status, v) = host
        .post_raw(
            "/v1/groups/r1/messages",
            Some(TOKEN),
            Some(key),
            json!({ "text": text }).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    v
}

/// The authors of the room's deliveries after `seq`.
async fn speakers(host: &TestHost, timeline: &str, seq: i64) -> Vec<String> {
    host.entries(timeline)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "delivery" && e["seq"].as_i64() > Some(seq))
        .map(|e| e["author"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_bot_its_owner_no_longer_shares_leaves_other_users_rooms() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("a2", "s", TOOLS)
        .bot_of("b1", "s", TOOLS, "bob")
        .bot_lines("shareable = true")
        .start()
        .await;
    let (status, room) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({ "name": "r1", "members": ["b1", "a2"] }).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    assert_eq!(room["shared"], true, "{room}");
    // b1 has the floor when the host stops
    let slow = post(&host, "slow topic", "k1").await;
    let timeline = slow["session"].as_str().unwrap().to_owned();
    let slow_seq = slow["seq"].as_i64().unwrap();
    // b1 is bob's: only he sees its running turn
    poll(20, async || {
        let (_, v) = host.get("/v1/bots", BOB_TOKEN).await;
        let running = v["bots"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|b| b["id"] == "b1" && b["running_turn"].is_string());
        if running {
            Ok(())
        } else {
            Err(format!("b1 not running: {v}"))
        }
    })
    .await;

    // bob no longer shares b1
    let fleet = host
        .shutdown()
        .await
        .without_bot("b1")
        .bot_of("b1", "s", TOOLS, "bob");
    fleet.write();
    let host = restart(fleet).await;
    // the cut-off discussion goes on without b1
    host.wait_turn_end(&timeline, slow_seq).await;
    assert_eq!(speakers(&host, &timeline, slow_seq).await, ["a2"]);
    // the room no longer lists it, and is alice's own again
    let (status, room) = host.get("/v1/groups/r1", TOKEN).await;
    assert_eq!(status, 200, "{room}");
    assert_eq!(room["members"], json!([{ "id": "a2", "name": "a2-name" }]));
    assert_eq!(room["shared"], false, "{room}");
    // so bob no longer reads it
    let (status, v) = host.get("/v1/groups/r1", BOB_TOKEN).await;
    assert_eq!(status, 404, "{v}");
    // the timeline says why, once
    let said: Vec<String> = host
        .entries(&timeline)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == "members_changed")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("bob no longer shares b1-name (@b1)")
            && said[0].contains("Members now, in speaking order: a2-name (@a2)"),
        "{said:?}"
    );

    // a new mention of b1 does not reach it; alice's own bot answers
    let asked = post(&host, "@b1 still there? @a2 you?", "k2").await;
    assert_eq!(asked["addressed"], json!(["a2"]), "{asked}");
    assert_eq!(asked["unknown_mentions"], json!(["b1"]), "{asked}");
    let seq = asked["seq"].as_i64().unwrap();
    host.wait_turn_end(&timeline, seq).await;
    assert_eq!(speakers(&host, &timeline, seq).await, ["a2"]);

    // a second start says nothing more
    let fleet = host.shutdown().await;
    let host = restart(fleet).await;
    let notices = host
        .entries(&timeline)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == "members_changed")
        .count();
    assert_eq!(notices, 1);

    // shared again, alice may add it again
    let fleet = host
        .shutdown()
        .await
        .without_bot("b1")
        .bot_of("b1", "s", TOOLS, "bob")
        .bot_lines("shareable = true");
    fleet.write();
    let host = restart(fleet).await;
    let status = host
        .http
        .put(format!("{}/v1/groups/r1/members", host.url))
        .bearer_auth(TOKEN)
        .json(&json!({ "members": ["a2", "b1"] }))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap();
    assert_eq!(status, 200);
    let asked = post(&host, "@b1 back?", "k3").await;
    assert_eq!(asked["addressed"], json!(["b1"]), "{asked}");
    let seq = asked["seq"].as_i64().unwrap();
    host.wait_turn_end(&timeline, seq).await;
    let spoke = speakers(&host, &timeline, seq).await;
    assert!(
        !spoke.is_empty() && spoke.iter().all(|s| s == "b1"),
        "{spoke:?}"
    );
    host.shutdown().await;
}
