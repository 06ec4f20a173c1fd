//! A room member's messages past the room's limit of 2 per member turn:
//! the SendMessage that goes over it is told `not published` when it is
//! called, whether the calls come in one step or in several; and a
//! subagent's report tells its parent to answer with SendToAgent only if
//! the parent has that tool. (A message past the room's reply cap is
//! refused when sent too: `room_cap.rs`; the note on an input about
//! messages kept back, "1 … was", is checked in `group/member_tests.rs`.)
//!
//! (Before, the third SendMessage of a turn answered `delivered` and was
//! dropped after the turn, the next input said "1 of your messages … were
//! not published", and a parent with only Task was told to answer its
//! subagent with SendToAgent.)

use serde_json::json;

use super::groups::create;
use super::groups::discuss;
use super::groups::member_inputs;
use super::groups::member_session;
use super::groups::notice_codes;
use super::groups::pairs;
use super::groups::replies;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

/// `a` says three things in one step (parallel calls); `b` says one thing,
/// then two more in its next step.
const OVER_THE_LIMIT: &str = r#"
[[rule]]
bot = "a"
steps = [ { calls = [
  { tool = "SendMessage", args = { text = "a one" } },
  { tool = "SendMessage", args = { text = "a two" } },
  { tool = "SendMessage", args = { text = "a three" } },
] } ]

[[rule]]
bot = "b"
steps = [
  { tool = "SendMessage", args = { text = "b one" } },
  { calls = [
    { tool = "SendMessage", args = { text = "b two" } },
    { tool = "SendMessage", args = { text = "b three" } },
  ] },
]
"#;

/// The results of a member's SendMessage calls in its room session, in
/// order, and the texts of its `room_message_over_limit` notices.
async fn send_results(host: &TestHost, bot: &str, room: &str) -> (Vec<String>, Vec<String>) {
    let entries = host.entries(&member_session(bot, room)).await;
    let results = entries
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "SendMessage")
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    let notices = entries
        .iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == "room_message_over_limit")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    (results, notices)
}

/// The `deliveries` of each turn end in a member's room session.
async fn turn_deliveries(host: &TestHost, bot: &str, room: &str) -> Vec<i64> {
    host.entries(&member_session(bot, room))
        .await
        .iter()
        .filter(|e| e["kind"] == "turn_end")
        .map(|e| e["deliveries"].as_i64().unwrap_or(-1))
        .collect()
}

fn assert_third_refused(results: &[String], turns: usize) {
    assert_eq!(results.len(), 3 * turns, "{results:#?}");
    for turn in results.chunks(3) {
        assert_eq!(turn[0], "delivered", "{results:#?}");
        assert_eq!(turn[1], "delivered", "{results:#?}");
        assert!(
            turn[2].starts_with("not published: you already sent 2 messages to the room")
                && turn[2].contains("the most the room publishes per member turn"),
            "{results:#?}"
        );
    }
}

#[tokio::test]
async fn the_send_past_the_per_turn_limit_is_told_not_published_when_called() {
    let host = TestFleet::new()
        .script("s", OVER_THE_LIMIT)
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    let (status, room) = create(&host, TOKEN, json!({"name": "pair", "members": ["a", "b"]})).await;
    assert_eq!(status, 201, "{room}");

    let (_, run) = discuss(&host, "pair", "what is new?", "k1").await;
    // two messages a turn: a, b, a, b, a reach the 10-reply cap; the third
    // of each turn was refused
    let want: Vec<(&str, &str)> = [
        ("a", "a one"),
        ("a", "a two"),
        ("b", "b one"),
        ("b", "b two"),
    ]
    .into_iter()
    .cycle()
    .take(10)
    .collect();
    assert_eq!(replies(&run), pairs(&want));
    assert_eq!(notice_codes(&run), vec!["room_run_reply_limit"]);

    for (bot, third, turns) in [("a", "a three", 3), ("b", "b three", 2)] {
        // in one step (a) and across steps (b), the third call of every
        // turn was told at once that it was not published
        let (results, notices) = send_results(&host, bot, "pair").await;
        assert_third_refused(&results, turns);
        // its text is kept for the owner, and only what went out counts
        assert_eq!(notices.len(), turns, "{notices:#?}");
        assert!(
            notices
                .iter()
                .all(|n| n.contains(third) && n.starts_with("Not published in room pair")),
            "{notices:#?}"
        );
        assert_eq!(turn_deliveries(&host, bot, "pair").await, vec![2; turns]);
        let session = host.entries(&member_session(bot, "pair")).await;
        assert_eq!(
            session.iter().filter(|e| e["kind"] == "delivery").count(),
            2 * turns,
            "{bot}"
        );
        // nothing was kept back after the turn, so no input says so
        let inputs = member_inputs(&host, bot, "pair").await;
        assert_eq!(inputs.len(), turns);
        assert!(
            inputs.iter().all(|i| !i.contains("not published")),
            "{inputs:#?}"
        );
    }
    host.shutdown().await;
}

/// The report of `p`'s subagent as `p` saw it: `p` answers a message from
/// a bot by quoting it.
async fn report_as_seen(host: &TestHost, parent: &str) -> String {
    let (status, sent) = host.send(parent, "research please", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let seen = host
        .wait_for(&session, |es| {
            es.iter()
                .filter(|e| e["kind"] == "delivery")
                .find(|e| e["text"].as_str().unwrap_or("").starts_with("seen: "))
                .cloned()
        })
        .await;
    seen["text"].as_str().unwrap_or_default().to_owned()
}

const DELEGATES: &str = r#"
[[rule]]
match = "^research"
steps = [
  { tool = "Task", args = { description = "look", prompt = "SUBTASK look" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
match = "SUBTASK look"
steps = [ { tool = "SendMessage", args = { text = "REPORT found it" } } ]

[[rule]]
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "seen: {{input}}" } } ]
"#;

#[tokio::test]
async fn a_report_never_names_send_to_agent() {
    let host = TestFleet::new()
        .script("s", DELEGATES)
        .bot("p", "s", &["SendMessage", "Task", "CheckSubagent"])
        .bot(
            "q",
            "s",
            &["SendMessage", "Task", "CheckSubagent", "SendToAgent"],
        )
        .start()
        .await;
    // p has no SendToAgent: the report is quoted data, with no tool to
    // answer it named
    let seen = report_as_seen(&host, "p").await;
    assert!(
        seen.contains("Message from bot `p.") && seen.contains("REPORT found it"),
        "{seen}"
    );
    assert!(!seen.contains("SendToAgent"), "{seen}");
    // q has SendToAgent, but its own subagent's report is not a bot
    // message to answer with it (that ran the finished subagent outside
    // its task): it reads as its subagent's report
    let seen = report_as_seen(&host, "q").await;
    assert!(
        seen.contains("`, your subagent for the task \"look\": its report on that task")
            && seen.contains("REPORT found it"),
        "{seen}"
    );
    assert!(!seen.contains("SendToAgent"), "{seen}");
    host.shutdown().await;
}
