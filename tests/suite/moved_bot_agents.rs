//! A bot fleet.toml gives to another user keeps its conversations with its
//! former owner's bots (its side goes to the new owner, theirs stays with
//! them: docs/operations.md, "Changing a bot's owner"), but from the
//! change on no message passes between it and them, whatever turn it
//! comes from: bots message only bots of their own owner, checked as each
//! message is sent. Here alice's `a3` is given to bob while a turn of each
//! direction is cut off by the restart: `a3` answering `a1`'s question,
//! `a1` answering `a3`'s message. Neither runs on after the restart (the
//! other bot belongs to another user now: the turn ends with an
//! `owner_changed` notice, suite::moved_bot_inputs), and nothing reaches
//! the other bot. (Before, `a3`'s reply, bob's bot's text, landed in
//! alice's DM with `a1` as a message from `a3` and woke `a1` with her
//! tools; `a1`'s landed with `a3`.) A later SendToAgent to the other bot
//! is refused (the refusal of SendMessage in such a conversation:
//! tools::agents::owner_tests).

use botfleet_memory::BotId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;
use crate::support::process::poll;

/// Before the restart: `a1` asks `a3` (`ask`), `a3` writes to `a1`
/// (`tell`); whichever bot is asked hangs in its model call, so the
/// restart cuts its turn off.
const BEFORE: &str = r#"
[[rule]]
bot = "a1"
match = "^ask"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "a3", text = "QUESTION-FROM-A1" } },
  { tool = "SendMessage", args = { text = "asked a3" } },
] } ]

[[rule]]
bot = "a3"
match = "^tell"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "a1", text = "HELLO-FROM-A3" } },
  { tool = "SendMessage", args = { text = "told a1" } },
] } ]

[[rule]]
match = "QUESTION-FROM-A1|HELLO-FROM-A3"
steps = [ { delay_ms = 600000, tool = "SendMessage", args = { text = "too late" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// After the restart: each bot would answer with SendMessage (in a
/// conversation with a bot, to that bot); `a1` told to `ping` messages
/// `a3` with SendToAgent and reports what it got.
const AFTER: &str = r#"
[[rule]]
bot = "a1"
match = "^ping"
steps = [ { tool = "SendToAgent", args = { agent = "a3", text = "PING-FROM-A1" } },
          { tool = "SendMessage", args = { text = "PINGED {{tool_result}}" } } ]

[[rule]]
bot = "a3"
steps = [ { tool = "SendMessage", args = { text = "REPLY-FROM-A3" } } ]

[[rule]]
bot = "a1"
steps = [ { tool = "SendMessage", args = { text = "REPLY-FROM-A1" } } ]
"#;

const TOOLS: &[&str] = &["SendMessage", "SendToAgent"];

/// Alice's `a1` and `a3` with `tools`, on the scripted model's `before`
/// (also `moved_bot_inputs.rs`).
pub(super) async fn start(before: &str, tools: &[&str]) -> TestHost {
    TestFleet::new()
        .script("s", before)
        .bot("a1", "s", tools)
        .bot("a3", "s", tools)
        .start()
        .await
}

/// Stops the host, puts the script of after the restart (`after`) in
/// place, gives `a3` (with `tools`) to bob in fleet.toml and starts again.
pub(super) async fn give_a3_to_bob(host: TestHost, after: &str, tools: &[&str]) -> TestHost {
    let fleet = host.shutdown().await;
    std::fs::write(fleet.path().join("scripts/s.toml"), after).unwrap();
    let fleet = fleet.without_bot("a3").bot_of("a3", "s", tools, "bob");
    fleet.write();
    restart(fleet).await
}

/// The session of `bot` with bot `peer`.
pub(super) fn agent_session(bot: &str, peer: &str) -> String {
    SessionKey {
        bot: BotId::new(bot).unwrap(),
        kind: SessionKind::Agent,
        peer: peer.into(),
    }
    .id()
    .to_string()
}

/// The entries of `session` as the user of `token` reads them; none for
/// a session that does not exist (yet).
pub(super) async fn entries_as(host: &TestHost, token: &str, session: &str) -> Vec<Value> {
    let path = format!("/v1/sessions/{session}/entries?after=0&limit=500");
    let (status, v) = host.get(&path, token).await;
    if status == 404 {
        return Vec::new();
    }
    assert_eq!(status, 200, "{path}: {v}");
    v["entries"].as_array().unwrap().clone()
}

/// Waits until the session's turn resumed after the restart ended (its
/// only `turn_end`); its entries, as `token`'s user reads them.
async fn resumed_turn_ended(host: &TestHost, token: &str, session: &str) -> Vec<Value> {
    poll(30, async || {
        let entries = entries_as(host, token, session).await;
        if entries.iter().any(|e| e["kind"] == "turn_end") {
            Ok(entries)
        } else {
            Err(format!("{session}: {entries:#?}"))
        }
    })
    .await
}

/// Whether `entries` hold the `owner_changed` notice of a turn that did
/// not run on.
fn told_owner_changed(entries: &[Value]) -> bool {
    entries
        .iter()
        .any(|e| e["kind"] == "notice" && e["code"] == "owner_changed")
}

/// Messages from bot `from` in `entries`.
fn messages_from(entries: &[Value], from: &str) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["kind"] == "agent_message" && e["from"] == from)
        .cloned()
        .collect()
}

/// (1) `a3`'s turn answering `a1`, cut off by the restart that gives `a3`
/// to bob, does not run on for bob: nothing of it reaches `a1` or alice's
/// DM with `a1`, and bob is told why. `a1`, which told alice it asked
/// `a3`, is woken in her DM with it by the host's word that `a3` will not
/// answer (audit: it was never told, and alice waited for good), once
/// (the event's nonce names the turn, so another start adds none).
#[tokio::test]
async fn a_moved_bots_reply_does_not_reach_its_former_owners_bot() {
    let host = start(BEFORE, TOOLS).await;
    let dm_a1 = host.complete_turn("a1", "ask a3 something").await;
    host.wait_running("a3").await;

    let host = give_a3_to_bob(host, AFTER, TOOLS).await;
    // a3's side of the conversation is bob's now; alice no longer reads it
    let a3_side = agent_session("a3", "a1");
    let entries = resumed_turn_ended(&host, BOB_TOKEN, &a3_side).await;
    assert!(entries_as(&host, TOKEN, &a3_side).await.is_empty());

    let dm = poll(30, async || {
        let dm = host.entries(&dm_a1).await;
        if deliveries(&dm).iter().any(|d| d == "REPLY-FROM-A1") {
            Ok(dm)
        } else {
            Err(format!("a1 is not woken: {dm:#?}"))
        }
    })
    .await;
    assert!(
        messages_from(&dm, "a3").is_empty(),
        "bob's a3 wrote into alice's DM with a1: {dm:#?}"
    );
    let told: Vec<&Value> = dm.iter().filter(|e| e["kind"] == "event").collect();
    assert!(
        matches!(&told[..], [e] if e["origin"] == "bot_owner_changed:a3"
            && e["trusted"] == true
            && e["text"].as_str().is_some_and(|t| t.contains("QUESTION-FROM-A1")
                && t.contains("a3 and you no longer belong to the same user"))),
        "{dm:#?}"
    );
    let fleet = host.shutdown().await;
    let host = restart(fleet).await;
    let again = host.entries(&dm_a1).await;
    assert_eq!(
        again.iter().filter(|e| e["kind"] == "event").count(),
        1,
        "{again:#?}"
    );
    let a1_side = entries_as(&host, TOKEN, &agent_session("a1", "a3")).await;
    assert!(messages_from(&a1_side, "a3").is_empty(), "{a1_side:#?}");
    assert!(
        told_owner_changed(&entries),
        "bob is told why: {entries:#?}"
    );
    host.shutdown().await;
}

/// (2) `a1`'s turn answering `a3`, cut off by the restart that gives `a3`
/// to bob, does not run on for alice: nothing of it reaches a session of
/// `a3`, and alice is told why. A later SendToAgent of `a1` to `a3` is
/// refused, naming no owner, and sends nothing.
#[tokio::test]
async fn a_former_owners_bot_cannot_message_the_moved_bot() {
    let host = start(BEFORE, TOOLS).await;
    let dm_a3 = host.complete_turn("a3", "tell a1 hello").await;
    host.wait_running("a1").await;

    let host = give_a3_to_bob(host, AFTER, TOOLS).await;
    // a1's side of the conversation stays alice's
    let a1_side = agent_session("a1", "a3");
    let entries = resumed_turn_ended(&host, TOKEN, &a1_side).await;
    let a3_side = agent_session("a3", "a1");
    let reached = [
        host.entries(&dm_a3).await,
        entries_as(&host, BOB_TOKEN, &a3_side).await,
    ]
    .concat();
    assert!(
        messages_from(&reached, "a1").is_empty(),
        "alice's a1 wrote to bob's a3: {reached:#?}"
    );
    // nor is bob's a3 woken for what it asked for alice
    assert!(
        !reached.iter().any(|e| e["kind"] == "event"),
        "{reached:#?}"
    );
    assert!(
        told_owner_changed(&entries),
        "alice is told why: {entries:#?}"
    );

    let dm_a1 = host.complete_turn("a1", "ping a3").await;
    let dm = host.entries(&dm_a1).await;
    let pinged: Vec<String> = deliveries(&dm)
        .into_iter()
        .filter(|d| d.starts_with("PINGED"))
        .collect();
    assert!(
        matches!(&pinged[..], [d] if d.contains("there is no agent \"a3\"") && !d.contains("bob")),
        "{dm:#?}"
    );
    let reached = [
        host.entries(&dm_a3).await,
        entries_as(&host, BOB_TOKEN, &a3_side).await,
    ]
    .concat();
    assert!(messages_from(&reached, "a1").is_empty(), "{reached:#?}");
    host.shutdown().await;
}

/// Before the restart: `a1` asks `a3`; `a3` answers it with SendToAgent
/// and, in the same step, runs a command that the restart cuts off.
const ANSWERED_BEFORE: &str = r#"
[[rule]]
bot = "a1"
match = "^ask"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "a3", text = "QUESTION-FROM-A1" } },
  { tool = "SendMessage", args = { text = "asked a3" } },
] } ]

[[rule]]
bot = "a3"
match = "QUESTION-FROM-A1"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "a1", text = "ANSWER-FROM-A3" } },
  { tool = "Shell", args = { command = "sleep 100", timeout_s = 120 } },
] } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// (3) `a3` answered `a1` before the restart that gives it to bob cut its
/// turn off: `a1` is not told that `a3` will not answer (review: the
/// notice was decided from the turn's checkpoint, which may predate the
/// answer's outcome; its own entries say whom it answered).
#[tokio::test]
async fn a_moved_bot_that_answered_before_the_change_is_not_said_to_not_answer() {
    const SHELL: &[&str] = &["SendMessage", "SendToAgent", "Shell"];
    let host = TestFleet::new()
        .script("s", ANSWERED_BEFORE)
        .bot("a1", "s", TOOLS)
        .bot("a3", "s", SHELL)
        .tables("[review]\nshell = \"off\"\n")
        .start()
        .await;
    let dm_a1 = host.complete_turn("a1", "ask a3 something").await;
    let a1_side = agent_session("a1", "a3");
    // the answer goes to the conversation a1 asked from
    poll(30, async || {
        let entries = host.entries(&dm_a1).await;
        if messages_from(&entries, "a3").is_empty() {
            Err(format!("a3 has not answered: {entries:#?}"))
        } else {
            Ok(())
        }
    })
    .await;
    host.wait_running("a3").await;

    let fleet = host.shutdown().await;
    let fleet = fleet.without_bot("a3").bot_of("a3", "s", SHELL, "bob");
    fleet.write();
    let host = restart(fleet).await;
    let a3_side = agent_session("a3", "a1");
    let entries = resumed_turn_ended(&host, BOB_TOKEN, &a3_side).await;
    assert!(told_owner_changed(&entries), "{entries:#?}");
    // a1's answer came; nothing says it will not
    let told: Vec<Value> = [
        host.entries(&dm_a1).await,
        entries_as(&host, TOKEN, &a1_side).await,
    ]
    .concat()
    .into_iter()
    .filter(|e| e["kind"] == "event")
    .collect();
    assert!(told.is_empty(), "{told:#?}");
    host.shutdown().await;
}
