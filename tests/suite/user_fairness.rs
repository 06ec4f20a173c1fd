//! One user's flood must not starve another user:
//! `host.user_messages_per_minute` holds each user to their share of the
//! host (every message is a write through the store's one writer, which
//! every other user's messages and turns queue on). Over it the API
//! answers `429 rate_limited` with `Retry-After` and a body naming the
//! key; a retry of a message already accepted is still `duplicate`, and
//! other users are not held back. (How a bot's own queue takes turns
//! between conversations is tested in `actors/src/bot_queue.rs`: through
//! the API only a bot's owner sends it direct messages.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::start_refused;
use crate::support::fleet::status_wait_body;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

/// Alice's bot `r` and bob's bot `q`, with `host` lines (also the fleet
/// of `token_guesses.rs`).
pub(super) fn fleet(host: &str) -> TestFleet {
    TestFleet::new()
        .host(host)
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot_of("q", "s", &["SendMessage"], "bob")
}

/// Sends `text` to `bot` as the user of `token`, with `key`: the status,
/// the `Retry-After` header and the body.
async fn send(
    host: &TestHost,
    bot: &str,
    token: &str,
    text: &str,
    key: &str,
) -> (u16, Option<String>, Value) {
    let resp = host
        .http
        .post(format!("{}/v1/bots/{bot}/messages", host.url))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(&json!({ "text": text }))
        .send()
        .await
        .unwrap();
    status_wait_body(resp).await
}

/// Three messages a minute: the fourth is refused with `429`,
/// `Retry-After` and the key to change; nothing refused was saved;
/// retries of accepted messages are `duplicate` before and after the
/// bucket is empty, and take nothing from it; bob is not held back by
/// alice's limit. Before, there was no limit: the fourth was accepted.
#[tokio::test]
async fn a_user_past_the_rate_gets_429_naming_the_key_and_duplicates_still_answer() {
    let host = fleet("user_messages_per_minute = 3").start().await;
    let (status, _, first) = send(&host, "r", TOKEN, "one", "k1").await;
    assert_eq!(status, 202, "{first}");
    // a retry takes no token: three more can still be sent after it
    for _ in 0..2 {
        let (status, _, again) = send(&host, "r", TOKEN, "one", "k1").await;
        assert_eq!(
            (status, &again["status"]),
            (200, &json!("duplicate")),
            "{again}"
        );
    }
    let mut seqs = Vec::new();
    for (text, key) in [("two", "k2"), ("three", "k3")] {
        let (status, _, sent) = send(&host, "r", TOKEN, text, key).await;
        assert_eq!(status, 202, "{text}: {sent}");
        seqs.push(sent["seq"].clone());
    }
    let (status, retry_after, refused) = send(&host, "r", TOKEN, "four", "k4").await;
    assert_eq!(status, 429, "{refused}");
    let error = &refused["error"];
    assert_eq!(error["code"], "rate_limited", "{refused}");
    assert_eq!(error["limit"], "user_messages_per_minute", "{refused}");
    assert_eq!(error["key"], "host.user_messages_per_minute", "{refused}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("host.user_messages_per_minute") && message.contains("fleet.toml"),
        "{message}"
    );
    // a bucket, not a sliding minute: it said "you sent 3 messages in the
    // last minute" where one minute could hold twice that (API QA)
    assert!(
        message.contains("you reached the limit of 3 messages a minute"),
        "{message}"
    );
    // a token every 20 s
    let wait: u64 = retry_after.expect("Retry-After").parse().unwrap();
    assert!((1..=20).contains(&wait), "Retry-After: {wait}");
    assert_eq!(error["retry_after_s"], json!(wait), "{refused}");
    // still refused, and a retry of an accepted message is still a
    // duplicate, never a 429
    let (status, _, again) = send(&host, "r", TOKEN, "four", "k4").await;
    assert_eq!(status, 429, "{again}");
    let (status, _, dup) = send(&host, "r", TOKEN, "two", "k2").await;
    assert_eq!(
        (status, &dup["status"]),
        (200, &json!("duplicate")),
        "{dup}"
    );
    assert_eq!(dup["seq"], seqs[0], "{dup}");
    // the key of an accepted message with another text: its conflict
    let (status, _, conflict) = send(&host, "r", TOKEN, "other", "k3").await;
    assert_eq!(
        (status, &conflict["status"]),
        (409, &json!("conflict")),
        "{conflict}"
    );
    // the refused message was not saved: alice's DM holds her 3 messages
    let session = first["session"].as_str().unwrap();
    let texts: Vec<String> = host
        .entries(session)
        .await
        .iter()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
    // bob has his own share
    for i in 0..3 {
        let (status, _, sent) =
            send(&host, "q", BOB_TOKEN, &format!("bob {i}"), &format!("b{i}")).await;
        assert_eq!(status, 202, "{sent}");
    }
    host.shutdown().await;
}

/// Regression (QA, 2026-12-05): 30 clients sending one message with one
/// key at once each held a token while the first copy was written (the
/// ledger had no row for the key yet), so copies were refused `429`
/// instead of `duplicate`, and so were other messages of the user, with
/// one message accepted. Copies of a message being admitted, or accepted
/// lately, take no token now.
#[tokio::test]
async fn copies_of_a_message_sent_at_once_take_no_token() {
    let started = fleet("user_messages_per_minute = 3").start().await;
    let host = &started;
    for round in 0..3 {
        let copies = (0..30).map(|_| send(host, "r", TOKEN, "same", "same-key"));
        let others = (0..2).map(|i| {
            let (text, key) = (format!("other {round} {i}"), format!("o-{round}-{i}"));
            async move { send(host, "r", TOKEN, &text, &key).await }
        });
        let (copies, others) = tokio::join!(
            futures::future::join_all(copies),
            futures::future::join_all(others)
        );
        let statuses: Vec<u16> = copies.iter().map(|(s, _, _)| *s).collect();
        let accepted = statuses.iter().filter(|s| **s == 202).count();
        if round == 0 {
            assert_eq!(accepted, 1, "{statuses:?}");
        } else {
            assert_eq!(accepted, 0, "{statuses:?}");
        }
        assert_eq!(
            statuses.iter().filter(|s| **s == 200).count(),
            30 - accepted,
            "round {round}: {statuses:?}"
        );
        if round == 0 {
            // one copy and the two others: the three tokens
            for (status, _, body) in &others {
                assert_eq!(*status, 202, "{body}");
            }
        } else {
            // the bucket is empty now; the copies still answer duplicate
            for (status, _, body) in &others {
                assert_eq!(*status, 429, "{body}");
            }
        }
    }
    // a message sent several times at once past the rate: every copy
    // refused (were a copy let through beside a refused one, each message
    // sent twice would pass the rate)
    let copies = (0..10).map(|i| {
        let (text, key) = (format!("again {i}"), format!("again-{i}"));
        async move {
            let copies = (0..8).map(|_| send(host, "r", TOKEN, &text, &key));
            futures::future::join_all(copies)
                .await
                .into_iter()
                .map(|(status, _, _)| status)
                .collect::<Vec<u16>>()
        }
    });
    let statuses: Vec<Vec<u16>> = futures::future::join_all(copies).await;
    assert!(statuses.iter().flatten().all(|s| *s == 429), "{statuses:?}");
    started.shutdown().await;
}

/// Out-of-range values are refused at start, naming the key and the
/// range; the edges start.
#[tokio::test]
async fn user_messages_per_minute_out_of_range_is_refused_naming_the_key() {
    let cases = [
        (
            "user_messages_per_minute = 0",
            "is 0 but must be 1 to 60000: with 0 every message of every user would be refused",
        ),
        (
            "user_messages_per_minute = 60001",
            "is 60001 but must be 1 to 60000: more would not hold back",
        ),
        ("user_messages_per_minute = -1", "line "),
        ("user_messages_per_minute = \"600\"", "line "),
    ];
    for (lines, says) in cases {
        let e = start_refused(&fleet(lines), lines).await;
        assert!(
            e.contains("fleet.toml") && e.contains("user_messages_per_minute") && e.contains(says),
            "{lines}: {e}"
        );
    }
    for edge in [
        "user_messages_per_minute = 1",
        "user_messages_per_minute = 60000",
    ] {
        let host = fleet(edge).start().await;
        host.shutdown().await;
    }
}
