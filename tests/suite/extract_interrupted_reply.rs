//! Fact extraction reads the reply a turn delivered before a newer message
//! interrupted it. That turn owes no extraction (its input comes again),
//! and the turn that answers both messages delivered only the second
//! reply: the first was never read. (QA, 2026-12-05: the extractor saw
//! both messages and only "Reply two".)
//!
//! The model (an OpenAI-compatible server on loopback): "book" is answered
//! with "Reply one", after which its closing step is held until the test
//! has sent "thanks", which interrupts it; a turn with "thanks" answers
//! "Reply two". The extractor adds nothing; its requests are recorded.

use serde_json::Value;
use tokio::sync::watch;

use crate::support::fleet::TestFleet;
use crate::support::memory_model::adds;
use crate::support::memory_model::bot_step;
use crate::support::memory_model::content;
use crate::support::memory_model::is_extraction;
use crate::support::memory_model::send_message;
use crate::support::openai_server::OpenAiServer;

#[tokio::test]
async fn the_extractor_reads_the_reply_of_the_interrupted_turn_too() {
    let (release, gate) = watch::channel(false);
    let model = move |body: &Value| {
        if is_extraction(body) {
            return adds("");
        }
        let messages: Vec<&Value> = body["messages"].as_array().unwrap().iter().collect();
        let asked = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| content(m))
            .collect::<Vec<_>>()
            .join("\n");
        match bot_step(&messages) {
            Ok((id, _)) if asked.contains("thanks") => send_message(&id, "Reply two"),
            Ok((id, _)) => send_message(&id, "Reply one"),
            // after "Reply one": held until "thanks" came
            Err(step) if !asked.contains("thanks") => step.hold_until(gate.clone()),
            Err(step) => *step,
        }
    };
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .runtime("debounce_ms = 0\ndebounce_max_ms = 0")
        .start()
        .await;
    let (_, first) = host.send("r", "please book me a flight", None).await;
    let session = first["session"].as_str().unwrap().to_owned();
    host.wait_for(&session, |es| {
        es.iter()
            .find(|e| e["kind"] == "delivery" && e["text"] == "Reply one")
            .cloned()
    })
    .await;
    let (_, second) = host.send("r", "thanks", None).await;
    release.send_replace(true);
    host.wait_turn_end(&session, second["seq"].as_i64().unwrap())
        .await;
    // its request, once the extraction the turn's end owes has run
    let extraction = host
        .wait_get("/v1/bots", |_| {
            server
                .requests()
                .into_iter()
                .find(|r| is_extraction(&r.body))
                .map(|r| r.body)
        })
        .await;
    let input = extraction["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        input.contains("Reply one") && input.contains("Reply two"),
        "{input}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
