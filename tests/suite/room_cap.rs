//! A room's cap of 10 public replies per user message, decided when a
//! member sends: the SendMessage that would be the 11th reply is told it
//! is not published, and the discussion ends at exactly 10.
//!
//! (Before, the timeline held 10 replies, but the member whose message was
//! kept back by the cap was told `delivered`, went on believing the room
//! had read it, and only its next input said otherwise.)

use serde_json::Value;
use serde_json::json;

use super::groups::create;
use super::groups::discuss;
use super::groups::member_inputs;
use super::groups::member_session;
use super::groups::notice_codes;
use super::groups::replies;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

/// Members `a`, `b`, `c` say two things a turn, `d` one; `b` then asks
/// whether its second message went out.
const TWO_AND_ONE: &str = r#"
[[rule]]
bot = "d"
steps = [ { tool = "SendMessage", args = { text = "{{bot}} alone" } } ]

[[rule]]
steps = [ { calls = [
  { tool = "SendMessage", args = { text = "{{bot}} first" } },
  { tool = "SendMessage", args = { text = "{{bot}} second" } },
] } ]
"#;

/// The SendMessage results in `bot`'s session of `room`, in order.
async fn send_results(host: &TestHost, bot: &str, room: &str) -> Vec<String> {
    host.entries(&member_session(bot, room))
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "SendMessage")
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The entries of `bot`'s session of `room` with notice code `code`.
async fn notices(host: &TestHost, bot: &str, room: &str, code: &str) -> Vec<Value> {
    host.entries(&member_session(bot, room))
        .await
        .into_iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == code)
        .collect()
}

#[tokio::test]
async fn the_reply_past_the_cap_is_refused_when_sent() {
    let host = TestFleet::new()
        .script("s", TWO_AND_ONE)
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .bot("c", "s", &["SendMessage"])
        .bot("d", "s", &["SendMessage"])
        .start()
        .await;
    let (status, room) = create(
        &host,
        TOKEN,
        json!({"name": "four", "members": ["a", "b", "c", "d"]}),
    )
    .await;
    assert_eq!(status, 201, "{room}");
    // round 1: 2 + 2 + 2 + 1 = 7; round 2: a brings 9, and b's first
    // message is the 10th reply
    let (_, run) = discuss(&host, "four", "go", "k1").await;
    let published = replies(&run);
    assert_eq!(published.len(), 10, "{run:#?}");
    assert_eq!(published[9], ("b".to_owned(), "b first".to_owned()));
    assert_eq!(notice_codes(&run), vec!["room_run_reply_limit"]);
    let end = run.last().unwrap();
    assert_eq!(
        (end["kind"].as_str(), end["deliveries"].as_i64()),
        (Some("turn_end"), Some(10))
    );

    // b's second message of round 2 was refused as it sent it, naming the
    // cap; its first turn's two went out
    let results = send_results(&host, "b", "four").await;
    assert_eq!(results.len(), 4, "{results:#?}");
    assert_eq!(results[..3], ["delivered", "delivered", "delivered"]);
    assert!(
        results[3].starts_with("not published: the discussion in room")
            && results[3].contains("already has 10 replies"),
        "{results:#?}"
    );
    // its text is kept for b's owner; only what went out counts
    let kept = notices(&host, "b", "four", "room_message_over_reply_cap").await;
    assert_eq!(kept.len(), 1, "{kept:#?}");
    let text = kept[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with(
            "Not published in room four: b sent this after the discussion already had 10 replies"
        ) && text.ends_with("b second"),
        "{text}"
    );
    assert!(
        notices(&host, "b", "four", "room_message_over_limit")
            .await
            .is_empty()
    );
    let b_ends: Vec<i64> = host
        .entries(&member_session("b", "four"))
        .await
        .iter()
        .filter(|e| e["kind"] == "turn_end")
        .map(|e| e["deliveries"].as_i64().unwrap_or(-1))
        .collect();
    assert_eq!(b_ends, vec![2, 1]);
    // every other member's messages were all published
    for bot in ["a", "c", "d"] {
        let results = send_results(&host, bot, "four").await;
        assert!(
            results.iter().all(|r| r == "delivered"),
            "{bot}: {results:#?}"
        );
    }

    // nothing was kept back after the turn, so b's next input does not
    // bring it up again
    discuss(&host, "four", "@b again", "k2").await;
    let inputs = member_inputs(&host, "b", "four").await;
    let last = inputs.last().unwrap();
    assert!(!last.contains("not published"), "{last}");
    host.shutdown().await;
}
