//! The loop guard and one answer holding the same call several times (QA:
//! four identical parallel Reads in one answer failed the turn on its
//! first step, "the model kept repeating the same Read call", before the
//! model ever read the refusal; small models do send such batches). The
//! copies past the guard's count are refused, and the model gets its next
//! step to change course; the same call again in that step ends the turn.

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

const READ: &str = r#"{ tool = "Read", args = { path = "notes.txt" } }"#;

fn script() -> String {
    format!(
        r#"
[[rule]]
match = "^four"
steps = [
  {{ tool = "Write", args = {{ path = "notes.txt", content = "x" }} }},
  {{ calls = [ {READ}, {READ}, {READ}, {READ} ] }},
  {{ tool = "SendMessage", args = {{ text = "read it" }} }},
]

[[rule]]
match = "^stubborn"
steps = [
  {{ tool = "Write", args = {{ path = "notes.txt", content = "x" }} }},
  {{ calls = [ {READ}, {READ}, {READ}, {READ} ] }},
  {{ calls = [ {READ} ] }},
  {{ tool = "SendMessage", args = {{ text = "never" }} }},
]
"#
    )
}

/// The tool results after `seq`: (is_error, content).
fn results_after(entries: &[Value], seq: i64) -> Vec<(bool, String)> {
    entries
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["seq"].as_i64() > Some(seq))
        .map(|e| {
            (
                e["is_error"] == true,
                e["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn repeated_calls_in_one_answer_are_refused_and_the_model_may_change_course() {
    let host = TestFleet::new()
        .script("s", &script())
        .bot("r", "s", &["SendMessage", "Read", "Write"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "four reads").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    assert_eq!(deliveries(&entries), vec!["read it"], "{entries:#?}");
    let got = results_after(&entries, 0);
    let refused: Vec<_> = got
        .iter()
        .filter(|(err, text)| {
            !*err && text.starts_with("not run: you made this same call")
                || *err && text.contains("same call")
        })
        .collect();
    assert_eq!(refused.len(), 2, "the 3rd and 4th copies: {got:#?}");

    // the same call again in the next step, after the refusal: the turn ends
    let (_, end) = host.end_turn("r", "stubborn reads").await;
    assert_eq!(end["status"], "failed", "{end}");
    let record = end["error"].as_str().unwrap_or_default().to_owned();
    let entries = host.entries(&session).await;
    assert!(
        !deliveries(&entries).contains(&"never".to_owned()),
        "{entries:#?}"
    );
    let (_, turn) = host
        .get(
            &format!("/v1/turns/{}", end["turn"].as_str().unwrap()),
            crate::support::fleet::TOKEN,
        )
        .await;
    assert!(
        format!("{record}{turn}").contains("kept repeating the same Read call"),
        "{turn}"
    );
    host.shutdown().await;
}
