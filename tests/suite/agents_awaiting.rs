//! A bot that asks other bots for what its answer needs, and ends its
//! turn right after asking (issue 4's scenario, without the model saying
//! anything first): the turn is reminded once to tell the person what it
//! asked (not to "send your answer now", which pushed a model to make one
//! up before the replies existed); a turn that still says nothing
//! completes with an `awaiting_replies` notice and no retry (a retry
//! would ask them again), and the replies wake it in new turns, which
//! bring the person the summary. (QA: it ended `undelivered`, offered a
//! retry, and `send` exited 4.)

use botfleet_memory::BotId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::process::cli;

const SCRIPT: &str = r#"
[[rule]]
bot = "r"
match = "^debate"
steps = [
  { calls = [
      { tool = "SendToAgent", args = { agent = "a", text = "argue for tea" } },
      { tool = "SendToAgent", args = { agent = "b", text = "argue for coffee" } },
  ] },
]

[[rule]]
bot = "r"
match = "will come to you in a new turn"
steps = [ { tool = "SendMessage", args = { text = "I asked A and B; I will report back." } } ]

[[rule]]
bot = "q"
match = "^debate"
steps = [
  { calls = [
      { tool = "SendToAgent", args = { agent = "a", text = "argue for tea" } },
      { tool = "SendToAgent", args = { agent = "b", text = "argue for coffee" } },
  ] },
]

[[rule]]
bot = "a"
steps = [ { tool = "SendMessage", args = { text = "TEA: it calms" } } ]

[[rule]]
bot = "b"
steps = [ { tool = "SendMessage", args = { text = "COFFEE: it wakes" } } ]

[[rule]]
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "summary: {{inputs}}" } } ]
"#;

fn notices(entries: &[Value]) -> Vec<&Value> {
    entries.iter().filter(|e| e["kind"] == "notice").collect()
}

#[tokio::test]
async fn a_turn_that_asked_other_bots_tells_the_person_and_waits_for_their_replies() {
    let tools = &["SendMessage", "SendToAgent"];
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", tools)
        .bot("q", "s", tools)
        .bot("a", "s", tools)
        .bot("b", "s", tools)
        .start()
        .await;

    // reminded to say what it asked, it does: one reply, completed
    let (session, end) = host.end_turn("r", "debate: tea or coffee?").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["deliveries"], 1, "{end}");
    let entries = host.entries(&session).await;
    let reminder = entries
        .iter()
        .find(|e| e["kind"] == "reminder")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    let text = reminder["text"].as_str().unwrap();
    assert!(
        text.contains("You asked a and b") && !text.contains("Send your answer now"),
        "{text}"
    );
    assert!(notices(&entries).is_empty(), "{entries:#?}");

    // one that still says nothing completes, saying what it waits for,
    // with no retry; `send` exits 0 and shows the notice
    let (code, out, err) = cli(&["send", "q", "debate: tea or coffee?"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("q asked a and b and will answer once their replies arrive")
            && !err.contains("retry"),
        "{err}"
    );
    let session = SessionKey {
        bot: BotId::new("q").unwrap(),
        kind: SessionKind::Dm,
        peer: "alice".to_owned(),
    }
    .id()
    .to_string();
    // the replies wake q, whose turns bring the person the summary
    let entries = host
        .wait_for(&session, |es| {
            let said = deliveries(es).join("\n");
            (said.contains("TEA: it calms") && said.contains("COFFEE: it wakes"))
                .then(|| serde_json::json!(es))
        })
        .await;
    let entries = entries.as_array().unwrap();
    let [notice] = notices(entries)
        .try_into()
        .unwrap_or_else(|n: Vec<&Value>| panic!("one notice: {n:#?}"));
    assert_eq!(notice["code"], "awaiting_replies", "{notice}");
    assert!(notice["retry_turn"].is_null(), "{notice}");
    let first_end = entries
        .iter()
        .find(|e| e["kind"] == "turn_end")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    assert_eq!(first_end["status"], "completed", "{first_end}");
    assert_eq!(first_end["deliveries"], 0, "{first_end}");
    host.shutdown().await;
}

const TWO_ASKS: &str = r#"
[[rule]]
bot = "r"
match = "^slowfan"
steps = [ { tool = "SendToAgent", args = { agent = "slow1", text = "slow job" } } ]

[[rule]]
bot = "r"
match = "FWD please ask slow1"
steps = [ { tool = "SendToAgent", args = { agent = "slow1", text = "slow job via a" } } ]

[[rule]]
bot = "r"
match = "Message from bot `slow1`"
steps = [ { tool = "SendMessage", args = { text = "r got it" } } ]

[[rule]]
bot = "a"
match = "^fwdtest"
steps = [ { tool = "SendToAgent", args = { agent = "r", text = "FWD please ask slow1" } } ]

[[rule]]
bot = "slow1"
steps = [ { delay_ms = 1500, tool = "SendMessage", args = { text = "done: {{inputs}}" } } ]
"#;

/// Regression (QA): one turn of a bot answering two messages of one
/// sender sent from two of its conversations (its person's, and another
/// bot's) replied only to the newest; the other conversation never got
/// the reply and never woke. The reply now goes to each.
#[tokio::test]
async fn a_reply_to_messages_asked_from_two_conversations_reaches_both() {
    let host = TestFleet::new()
        .script("s", TWO_ASKS)
        .bot("r", "s", &["SendMessage", "SendToAgent"])
        .bot("a", "s", &["SendMessage", "SendToAgent"])
        .bot("slow1", "s", &["SendMessage", "SendToAgent"])
        .start()
        .await;
    // slow1 is busy with a first job while the two asks queue behind it,
    // and one turn takes both
    host.send("r", "slowfan 1", None).await;
    let slow = SessionKey {
        bot: BotId::new("slow1").unwrap(),
        kind: SessionKind::Agent,
        peer: "r".to_owned(),
    }
    .id()
    .to_string();
    let entries = |session: &str| format!("/v1/sessions/{session}/entries");
    // (a session that does not exist yet answers 404: waited on too)
    host.wait_get(&entries(&slow), |v| {
        v["entries"]
            .as_array()?
            .iter()
            .any(|e| e["kind"] == "agent_message")
            .then(|| json!(1))
    })
    .await;
    host.send("a", "fwdtest", None).await;
    host.wait_get(&entries(&slow), |v| {
        v["entries"]
            .as_array()?
            .iter()
            .any(|e| e["kind"] == "agent_message" && e["text"] == "slow job via a")
            .then(|| json!(1))
    })
    .await;
    host.send("r", "slowfan 2", None).await;
    let with_a = SessionKey {
        bot: BotId::new("r").unwrap(),
        kind: SessionKind::Agent,
        peer: "a".to_owned(),
    }
    .id()
    .to_string();
    // the conversation with a gets slow1's answer and wakes r there
    let entries = host
        .wait_for(&with_a, |es| {
            let answered = es
                .iter()
                .any(|e| e["kind"] == "agent_message" && e["from"] == "slow1");
            let woke = es
                .iter()
                .any(|e| e["kind"] == "delivery" && e["text"] == "r got it");
            (answered && woke).then(|| json!(es))
        })
        .await;
    assert!(entries.is_array());
    host.shutdown().await;
}
