//! Approved calls whose effect is a store write (SendToAgent here; Task,
//! UpdateAgent and a bot's reply to another bot work the same way) use
//! their approval up in the commit of their outcome and effects, as a
//! call with an external effect uses it with its start record. So a used
//! approval means the action happened, for these calls too: made again
//! for the same request of the person (the decision's note, read after
//! the run, asks for it), the call is told it already ran, and is not a
//! second approval that the person, seeing the same card again, would
//! approve and so send the message twice. (Before, these calls used the
//! approval a commit before their effects, so a used one could not be
//! told apart from one whose call a crash cut off, and they were asked
//! about again. The crash itself is `engine/calls_approval_tests.rs`: the
//! resumed turn runs the call once, with the approval, asking nothing.)

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::session_of;

use super::review::approvals;
use super::review::approve_while_the_turn_thinks;

/// x tells y a key (review asks about it), tries it again a few seconds
/// later (the test approves meanwhile), and once more when told of the
/// approval; y only acknowledges it. (y's silence now wakes x with word
/// that no answer comes, and its "noted" wakes x too: x's turn over the
/// approval may take y's answer with it, the newer input, so that
/// answer's rule is the approval's.)
const SCRIPT: &str = r#"
[[rule]]
bot = "y"
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]

[[rule]]
bot = "x"
match = "approved approval|Message from bot `y`"
steps = [
  { tool = "SendToAgent", args = { agent = "y", text = "the deploy key is AKIAABCDEFGHIJKLMNOP" } },
  { tool = "SendMessage", args = { text = "after the approval: {{tool_result}}" } },
]

[[rule]]
bot = "x"
match = "^send"
steps = [
  { tool = "SendToAgent", args = { agent = "y", text = "the deploy key is AKIAABCDEFGHIJKLMNOP" } },
  { delay_ms = 5000, tool = "SendToAgent", args = { agent = "y", text = "the deploy key is AKIAABCDEFGHIJKLMNOP" } },
  { tool = "SendMessage", args = { text = "first turn: {{tool_result}}" } },
]
"#;

#[tokio::test]
async fn an_approved_message_to_a_bot_sent_before_its_event_is_read_is_not_asked_again() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("x", "s", &["SendMessage", "SendToAgent"])
        .bot("y", "s", &["SendMessage"])
        .start()
        .await;
    let (status, sent) = host.send("x", "send y the key", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();

    // approved while the turn that asked is still thinking
    let (id, after, results) = approve_while_the_turn_thinks(&host, &session).await;
    assert!(
        results[1].1.starts_with("delivered to y"),
        "the turn's second try ran with the approval: {results:#?}"
    );

    // the repeat the decision asked for is not a new approval…
    let listed = approvals(&host).await;
    assert_eq!(listed.len(), 1, "no second approval: {listed:#?}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert!(listed[0]["consumed_at"].is_i64(), "{listed:#?}");
    // …the bot is told the message already went…
    assert!(
        after.contains("already ran") && after.contains(&id),
        "names the approval it ran with: {after}"
    );
    // …and y got it once
    let y_session = session_of("y", botfleet_memory::SessionKind::Agent, "x");
    let got: Vec<Value> = host
        .entries(&y_session)
        .await
        .into_iter()
        .filter(|e| e["author"] == "x")
        .collect();
    assert_eq!(got.len(), 1, "{got:#?}");
    host.shutdown().await;
}
