//! A reply to what a member asked another bot from its room while the
//! room was its owner's alone, arriving after the room was given to more
//! people (QA: alice's bot asked her other bot from her private room; she
//! added bob's bot; the answer, read from her DM, arrived in the member's
//! session of the now shared room, stood in its context there, and the
//! member posted it where bob reads). Such a reply goes to the two bots'
//! own conversation instead.

use botfleet::memory::SessionKind;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::session_of;
use crate::support::fleet::until_signalled;
use crate::support::shared_room::share_with_bob;

const SCRIPT: &str = r#"
[[rule]]
bot = "a1"
match = "ask a2"
steps = [ { tool = "SendToAgent", args = { agent = "a2", text = "PINQUERY what is the pin?" } } ]

[[rule]]
bot = "a2"
match = "PINQUERY"
steps = [ { delay_ms = 2500, tool = "SendToAgent", args = { agent = "a1", text = "the pin is 7731" } } ]

[[rule]]
steps = [ { text = "quiet" } ]
"#;

/// On `script`: alice's room `own` of a1 and a2 (and `extra` bots of
/// hers beside), where a1 asks a2 for the pin while the room is private;
/// bob's b1 joins before the answer comes. The answer reaches a1 in its
/// own conversation with a2, not its session of the room, nor the room's
/// timeline.
async fn the_answer_stays_out_of_the_room(script: &str, extra: &[&str]) {
    let tools = &["SendMessage", "SendToAgent"];
    let mut fleet = TestFleet::new()
        .script("s", script)
        .bot("a1", "s", tools)
        .bot("a2", "s", tools);
    for bot in extra {
        fleet = fleet.bot(bot, "s", tools);
    }
    let host = fleet
        .bot_of("b1", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true")
        .start()
        .await;
    let (status, room) = host.create_room(TOKEN, "own", &["a1", "a2"]).await;
    assert_eq!((status, &room["shared"]), (201, &json!(false)), "{room}");
    // a1 asks a2 from the private room; the answer takes 2.5 s
    host.discuss(TOKEN, "own", "@a1 ask a2 for the pin").await;
    share_with_bob(&host).await;

    let own = session_of("a1", SessionKind::Agent, "a2");
    let client = host.client();
    let reply = until_signalled(&client, async || {
        // (the session is made by the reply)
        let entries = client.entries_after(&own, 0).await.unwrap_or_default();
        entries
            .iter()
            .find(|e| e["kind"] == "agent_message" && e["text"] == "the pin is 7731")
            .cloned()
            .ok_or_else(|| format!("no reply in a1's conversation with a2: {entries:#?}"))
    })
    .await;
    assert_eq!(reply["from"], "a2", "{reply}");
    let in_room = host
        .entries(&session_of("a1", SessionKind::Group, "own"))
        .await;
    assert!(
        !in_room.iter().any(|e| e.to_string().contains("7731")),
        "{in_room:#?}"
    );
    let (_, timeline) = host.get("/v1/groups/own/entries", TOKEN).await;
    assert!(!timeline.to_string().contains("7731"), "{timeline}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_reply_to_an_ask_from_before_the_room_was_shared_stays_out_of_it() {
    the_answer_stays_out_of_the_room(SCRIPT, &[]).await;
}

const RELAYED: &str = r#"
[[rule]]
bot = "a1"
match = "ask a2"
steps = [ { tool = "SendToAgent", args = { agent = "a2", text = "PINQUERY what is the pin?" } } ]

[[rule]]
bot = "a2"
match = "PINQUERY"
steps = [ { tool = "SendToAgent", args = { agent = "a3", text = "LOOKUP the pin" } } ]

[[rule]]
bot = "a3"
match = "LOOKUP"
steps = [ { delay_ms = 2500, tool = "SendToAgent", args = { agent = "a2", text = "FOUND 7731" } } ]

[[rule]]
bot = "a2"
match = "FOUND"
steps = [ { tool = "SendToAgent", args = { agent = "a1", text = "the pin is 7731" } } ]

[[rule]]
steps = [ { text = "quiet" } ]
"#;

/// The same when the answer comes through a third bot: a2, asked by a1
/// from the room, asks a3, and a3's answer wakes a2 in its conversation
/// with a1; a2's answer goes where a1's newest message there asked
/// (`asked_replies_here`), unless the room was given to more people since.
#[tokio::test]
async fn a_relayed_reply_to_an_ask_from_before_the_room_was_shared_stays_out_of_it() {
    the_answer_stays_out_of_the_room(RELAYED, &["a3"]).await;
}
