//! A note written again with a longer lifetime lives to the later expiry.
//! "I'm still waiting for the ACME invoice, keep it in mind for two more
//! days": the bot remembers the same note again with 48 hours, and the
//! note must not vanish at the end of the hour the first one was for.
//!
//! Before, the same text in the same scope and layer answered "Already
//! remembered … Nothing changed." and kept the first note's expiry: the
//! note left the prompt an hour later, and the answer did not say when it
//! would (the model had no reason to think it would go). Fact extraction
//! restating a note had the same fate, and no way at all to extend it.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

const NOTE: &str = "Waiting for the ACME invoice";
const HOUR: i64 = 3_600_000;

const SCRIPT: &str = r#"
[[rule]]
match = "^for an hour"
steps = [
  { tool = "Remember", args = { text = "Waiting for the ACME invoice", layer = "notes", expires_in_hours = 1 } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]

[[rule]]
match = "^for a moment"
steps = [
  { tool = "Remember", args = { text = "Kettle is on", layer = "notes", expires_in_hours = 0.0003 } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]

[[rule]]
match = "^m-"
steps = [
  { tool = "Forget", args = { id = "{{input}}" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]

[[rule]]
match = "^for two days"
steps = [
  { tool = "Remember", args = { text = "Waiting for the ACME invoice", layer = "notes", expires_in_hours = 48 } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;

/// a's notes as the memory API lists them.
async fn notes(host: &crate::support::fleet::TestHost) -> Vec<Value> {
    let (status, memory) = host.get("/v1/bots/a/memory", TOKEN).await;
    assert_eq!(status, 200, "{memory}");
    memory["scopes"][0]["notes"]["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_note_remembered_again_for_longer_lives_to_the_later_expiry() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .runtime("debounce_ms = 0\nextract_memory = false\n")
        .bot("a", "s", &["SendMessage", "Remember"])
        .start()
        .await;
    let session = host.complete_turn("a", "for an hour, please").await;
    let first = notes(&host).await;
    assert_eq!(first.len(), 1, "{first:#?}");
    let within_the_hour = first[0]["expires_at"].as_i64().unwrap();

    host.complete_turn("a", "for two days: I'm still waiting for it")
        .await;
    let again = notes(&host).await;
    assert_eq!(again.len(), 1, "one note, not two: {again:#?}");
    assert_eq!(again[0]["id"], first[0]["id"], "{again:#?}");
    assert_eq!(again[0]["text"], NOTE);
    let expires_at = again[0]["expires_at"].as_i64().unwrap();
    assert!(
        expires_at >= within_the_hour + 47 * HOUR,
        "the note still expires within the hour it was first written for: {again:#?}"
    );

    // the bot is told the note lives on, and until when
    let entries = host.entries(&session).await;
    let answers = deliveries(&entries);
    let until = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(expires_at)
        .unwrap()
        .format("%Y-%m-%d %H:%M UTC")
        .to_string();
    assert!(
        answers[1].contains(&until) && !answers[1].contains("Nothing changed"),
        "{answers:#?}"
    );

    // a shorter lifetime given later does not cut it short
    host.complete_turn("a", "for an hour, again").await;
    let last = notes(&host).await;
    assert_eq!(
        last[0]["expires_at"].as_i64(),
        Some(expires_at),
        "{last:#?}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn forgetting_a_note_past_its_expiry_says_it_expired() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .runtime("debounce_ms = 0\nextract_memory = false\n")
        .bot("a", "s", &["SendMessage", "Remember", "Forget"])
        .start()
        .await;
    host.complete_turn("a", "for a moment: the kettle").await;
    let written = notes(&host).await;
    let id = written[0]["id"].as_str().unwrap().to_owned();
    // about a second on, the listing no longer shows it
    host.wait_get("/v1/bots/a/memory", |m| {
        let count = &m["scopes"][0]["notes"]["count"];
        (count == 0).then(|| count.clone())
    })
    .await;

    let expired_by_api = || async {
        let (status, answer) = host
            .call(
                reqwest::Method::DELETE,
                &format!("/v1/memory/{id}"),
                TOKEN,
                None,
            )
            .await;
        assert_eq!(status, 404, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains("expired at") && message.contains("agent:a"),
            "forgetting an expired note answered: {message}"
        );
    };
    let expired_by_tool = |answer: &str| {
        assert!(
            answer.contains(&format!("{id} was a note that expired at"))
                && answer.contains("Nothing changed"),
            "Forget of an expired note answered: {answer}"
        );
    };
    expired_by_api().await;
    let session = host.complete_turn("a", &id).await;
    expired_by_tool(&deliveries(&host.entries(&session).await)[1]);

    // any write to the scope purges the expired note: its id still
    // answers "expired", not "no memory item" (QA)
    host.complete_turn("a", "for an hour, please").await;
    expired_by_api().await;
    host.complete_turn("a", &id).await;
    expired_by_tool(&deliveries(&host.entries(&session).await)[3]);
    host.shutdown().await;
}
