//! What small or oddly served models do, through a running host and the
//! loopback OpenAI server: a reply sent again in the next step, and a
//! complete answer padded with whitespace before its tool call.

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::openai_outcomes::host;
use super::openai_outcomes::turn;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

const ANSWER: &str = r#"{"text": "The answer is 42."}"#;

/// The tool results of the session: (call id, is_error, content).
fn results(entries: &[Value]) -> Vec<(String, bool, String)> {
    entries
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap_or("").to_owned(),
                e["is_error"].as_bool().unwrap_or(false),
                e["content"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Regression (round 21, H2): a small model that sends its answer again in
/// the next step (the result `delivered` reads to it as "not answered
/// yet") made the person read it twice; the loop guard only refuses a
/// third identical call. The repeat is refused with a result that says it
/// was already delivered, and the person sees the message once.
#[tokio::test]
async fn a_message_sent_again_in_the_next_step_is_refused() {
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call("c1", "SendMessage", ANSWER))
        .reply(Reply::tool_call(
            "c2",
            "SendMessage",
            r#"{"text": " The answer is 42.\n"}"#,
        ))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, true).await;
    let (entries, end) = turn(&host, "what is the answer").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["The answer is 42."]);
    let results = results(&entries);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert_eq!((results[0].1, results[0].2.as_str()), (false, "delivered"));
    let (id, is_error, content) = &results[1];
    assert_eq!(id, "c2");
    assert!(
        *is_error && content.contains("already delivered") && content.contains("end your turn"),
        "{content}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// The same within one answer (two identical calls, run together without a
/// commit between them), and a different message after it still goes out.
#[tokio::test]
async fn the_same_message_twice_in_one_answer_is_delivered_once() {
    let server = OpenAiServer::builder()
        .reply(
            Reply::tool_call("c1", "SendMessage", ANSWER)
                .and_tool_call("c2", "SendMessage", ANSWER)
                .and_tool_call("c3", "SendMessage", r#"{"text": "Anything else?"}"#),
        )
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, false).await;
    let (entries, end) = turn(&host, "what is the answer").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(
        deliveries(&entries),
        ["The answer is 42.", "Anything else?"]
    );
    let refused: Vec<_> = results(&entries)
        .into_iter()
        .filter(|(_, is_error, _)| *is_error)
        .collect();
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert_eq!(refused[0].0, "c2");
    assert!(refused[0].2.contains("already delivered"), "{refused:#?}");
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (round 21, H2): a complete answer whose text ended in 300
/// newlines (or spaces) before a valid SendMessage failed the turn as "the
/// model's output kept looping (the same 1 line(s) 12 times)", streamed or
/// not; local models served by llama.cpp pad like that. Whitespace is not a
/// loop: the call runs.
#[tokio::test]
async fn an_answer_padded_with_whitespace_runs_its_call() {
    for stream in [true, false] {
        for pad in ["\n", " "] {
            let server = OpenAiServer::builder()
                .reply(
                    Reply::tool_call("c1", "SendMessage", r#"{"text": "hi"}"#)
                        .with_text(format!("ok{}", pad.repeat(300))),
                )
                .responder(|_| Reply::text(""))
                .start()
                .await;
            let host = host(&server, stream).await;
            let (entries, end) = turn(&host, "hello").await;
            assert_eq!(
                end["status"], "completed",
                "stream = {stream}, pad {pad:?}: {end}"
            );
            assert_eq!(
                deliveries(&entries),
                ["hi"],
                "stream = {stream}, pad {pad:?}"
            );
            host.shutdown().await;
            server.shutdown().await;
        }
    }
}
