//! What a bot received from another bot before fleet.toml gave one of the
//! two to another user does not run after the change: the turn the
//! restart cut off and the messages queued behind it end without a model
//! call, `cancelled`, with an `owner_changed` notice in the session of the
//! bot they were sent to (read by its owner only), naming the other bot.
//! Here alice's `a1` asks alice's `a3` to run a Shell command that writes
//! a marker file; `a3` is given to bob while the work waits. (Before, the
//! work ran for bob: the instruction alice's bot queued was carried out
//! with bob's tools, in bob's workspace; only the reply was refused.) The
//! same holds the other way: what `a3` asked `a1` before it was given
//! away does not run for alice.
//!
//! After the restart the script answers any `RUN-MARKER` (and a person's
//! `run`) with the Shell command: a model call over one of those inputs
//! would write the marker.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::process::poll;

use super::moved_bot_agents::agent_session;
use super::moved_bot_agents::entries_as;
use super::moved_bot_agents::give_a3_to_bob;
use super::moved_bot_agents::start;

/// Before the restart: `a1` told to `ask` (or `ask again`) sends `a3` an
/// instruction; `a3` told to `tell` sends `a1` one; whichever bot gets an
/// instruction hangs in its model call, so the restart cuts its turn off
/// (and a second instruction waits behind it).
const BEFORE: &str = r#"
[[rule]]
bot = "a1"
match = "^ask"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "a3", text = "RUN-MARKER {{input}}" } },
  { tool = "SendMessage", args = { text = "asked a3" } },
] } ]

[[rule]]
bot = "a3"
match = "^tell"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "a1", text = "RUN-MARKER from a3" } },
  { tool = "SendMessage", args = { text = "told a1" } },
] } ]

[[rule]]
match = "RUN-MARKER"
steps = [ { delay_ms = 600000, tool = "SendMessage", args = { text = "too late" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// After the restart: an instruction from the other bot, or a person's
/// `run`, is carried out with Shell in the owner's workspace. (Not `a1`'s
/// own instruction quoted back to it: the host's word that `a3` will not
/// answer it wakes `a1` in alice's DM, and `a1` doing its own work for
/// alice is no instruction of bob's bot run for her.)
const AFTER: &str = r#"
[[rule]]
bot = "a3"
match = "RUN-MARKER"
steps = [ { tool = "Shell", args = { command = "echo ran >> marker.txt" } },
          { tool = "SendMessage", args = { text = "RAN" } } ]

[[rule]]
bot = "a1"
match = "RUN-MARKER from a3"
steps = [ { tool = "Shell", args = { command = "echo ran >> marker.txt" } },
          { tool = "SendMessage", args = { text = "RAN" } } ]

[[rule]]
match = "^run"
steps = [ { tool = "Shell", args = { command = "echo ran >> marker.txt" } },
          { tool = "SendMessage", args = { text = "RAN" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

const TOOLS: &[&str] = &["SendMessage", "SendToAgent", "Shell"];

/// The marker file in the workspace of `user`.
fn marker(host: &TestHost, user: &str) -> PathBuf {
    host.fleet
        .path()
        .join(format!("data/workspace/{user}/marker.txt"))
}

/// The seqs of the messages from bot `from` in `entries`.
fn messages_from(entries: &[Value], from: &str) -> Vec<i64> {
    entries
        .iter()
        .filter(|e| e["kind"] == "agent_message" && e["from"] == from)
        .map(|e| e["seq"].as_i64().unwrap())
        .collect()
}

/// Waits until `count` messages from bot `from` are in `session` (as
/// `token`'s user reads it); their seqs.
async fn wait_messages(
    host: &TestHost,
    token: &str,
    session: &str,
    from: &str,
    count: usize,
) -> Vec<i64> {
    poll(30, async || {
        let entries = entries_as(host, token, session).await;
        let seqs = messages_from(&entries, from);
        if seqs.len() == count {
            Ok(seqs)
        } else {
            Err(format!("{session}: {entries:#?}"))
        }
    })
    .await
}

/// Waits until a turn over each of `inputs` of `session` ended (not
/// interrupted), as `token`'s user reads it; the session's entries.
async fn inputs_ended(host: &TestHost, token: &str, session: &str, inputs: &[i64]) -> Vec<Value> {
    poll(30, async || {
        let entries = entries_as(host, token, session).await;
        let ended = |seq: &i64| {
            entries.iter().any(|e| {
                e["kind"] == "turn_end"
                    && e["status"] != "interrupted"
                    && e["inputs"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|s| s.as_i64() == Some(*seq)))
            })
        };
        if inputs.iter().all(ended) {
            Ok(entries)
        } else {
            Err(format!("{session}: {entries:#?}"))
        }
    })
    .await
}

/// Every turn of `entries` ended `cancelled` without a model step, with
/// an `owner_changed` notice naming `peer` and offering no retry; there
/// was at least one.
fn ended_unanswered(entries: &[Value], peer: &str) {
    let ends: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "turn_end" && e["status"] != "interrupted")
        .collect();
    assert!(!ends.is_empty(), "{entries:#?}");
    for end in ends {
        assert_eq!(end["status"], "cancelled", "{entries:#?}");
        let turn = &end["turn"];
        let notice = entries
            .iter()
            .find(|e| e["kind"] == "notice" && e["turn"] == *turn)
            .unwrap_or_else(|| panic!("no notice of turn {turn}: {entries:#?}"));
        assert_eq!(notice["code"], "owner_changed", "{notice}");
        let text = notice["text"].as_str().unwrap_or("");
        assert!(
            text.contains(&format!("{peer} no longer belong to the same user"))
                && text.contains("nothing it asked for here ran"),
            "{notice}"
        );
        assert!(notice["retry_turn"].is_null(), "{notice}");
    }
    let stepped: Vec<&Value> = entries
        .iter()
        .filter(|e| {
            matches!(
                e["kind"].as_str(),
                Some("assistant" | "tool_call" | "tool_result")
            )
        })
        .collect();
    assert!(stepped.is_empty(), "a turn ran: {stepped:#?}");
}

/// The user of `token` tells `bot` to `run`: the Shell command runs (the
/// marker mechanism works, for the bot's owner now).
async fn owner_runs(host: &TestHost, bot: &str, token: &str) {
    let (end, entries) = host.end_turn_as(bot, token, "run it").await;
    assert_eq!(end["status"], "completed", "{entries:#?}");
}

/// (1) `a1`'s instruction that `a3`'s turn was working on when the
/// restart gave `a3` to bob, and the one queued behind it, never run for
/// bob: no model step, no marker in bob's (or alice's) workspace; bob
/// reads why in `a3`'s conversation with `a1`, and alice's side holds
/// nothing of it.
#[tokio::test]
async fn a_former_owners_bots_instructions_do_not_run_for_the_new_owner() {
    let host = start(BEFORE, TOOLS).await;
    host.complete_turn("a1", "ask first").await;
    host.wait_running("a3").await;
    host.complete_turn("a1", "ask again").await;
    let a3_side = agent_session("a3", "a1");
    let inputs = wait_messages(&host, TOKEN, &a3_side, "a1", 2).await;

    let host = give_a3_to_bob(host, AFTER, TOOLS).await;
    let entries = inputs_ended(&host, BOB_TOKEN, &a3_side, &inputs).await;
    ended_unanswered(&entries, "a1");
    assert!(!marker(&host, "bob").exists(), "{entries:#?}");
    assert!(!marker(&host, "alice").exists(), "{entries:#?}");
    let a1_side = entries_as(&host, TOKEN, &agent_session("a1", "a3")).await;
    assert!(
        !a1_side.iter().any(|e| e["kind"] == "notice"),
        "written into alice's side: {a1_side:#?}"
    );

    // the same command, asked by bob, runs once: only his
    owner_runs(&host, "a3", BOB_TOKEN).await;
    let written = std::fs::read_to_string(marker(&host, "bob")).unwrap();
    assert_eq!(written, "ran\n");
    let again = entries_as(&host, BOB_TOKEN, &a3_side).await;
    assert_eq!(again.len(), entries.len(), "{again:#?}");
    host.shutdown().await;
}

/// (2) The other way: `a3`'s instruction that `a1`'s turn was working on
/// when the restart gave `a3` to bob never runs for alice; she reads why
/// in `a1`'s conversation with `a3`.
#[tokio::test]
async fn a_moved_bots_instructions_do_not_run_for_its_former_owner() {
    let host = start(BEFORE, TOOLS).await;
    host.complete_turn("a3", "tell a1").await;
    host.wait_running("a1").await;
    let a1_side = agent_session("a1", "a3");
    let inputs = wait_messages(&host, TOKEN, &a1_side, "a3", 1).await;

    let host = give_a3_to_bob(host, AFTER, TOOLS).await;
    let entries = inputs_ended(&host, TOKEN, &a1_side, &inputs).await;
    ended_unanswered(&entries, "a3");
    assert!(!marker(&host, "alice").exists(), "{entries:#?}");
    assert!(!marker(&host, "bob").exists(), "{entries:#?}");
    let a3_side = entries_as(&host, BOB_TOKEN, &agent_session("a3", "a1")).await;
    assert!(
        !a3_side.iter().any(|e| e["kind"] == "notice"),
        "written into bob's side: {a3_side:#?}"
    );

    owner_runs(&host, "a1", TOKEN).await;
    let written = std::fs::read_to_string(marker(&host, "alice")).unwrap();
    assert_eq!(written, "ran\n");
    host.shutdown().await;
}
