//! A person's message cuts a background compaction short: the bot's next
//! turn does not wait for a summariser that is slow or does not answer.
//! A person waited for the summariser's whole timeout and retries, 40 s
//! for a two-word reply with a 20 s timeout (QA, 2026-12-05), and 13 s
//! behind a catch-up of 13 chunks of a healthy but slow one.

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;

fn is_compaction(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You summarise"))
}

#[tokio::test]
async fn a_persons_message_cuts_a_background_compaction_short() {
    // the summariser never answers (its gate stays shut)
    let (_open, shut) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |request| {
            if is_compaction(request) {
                Reply::text("SUMMARY").hold_until(shut.clone())
            } else if last_message(request).is_some_and(|m| m["role"] == "tool") {
                Reply::text("")
            } else {
                Reply::tool_call(
                    "call_1",
                    "SendMessage",
                    json!({ "text": "seen" }).to_string(),
                )
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            "max_retries = 0\ntimeout_s = 600",
        )
        .bot("r", "main", &["SendMessage"])
        .runtime("debounce_ms = 0\nextract_memory = false\ncontext_entries = 8")
        .start()
        .await;
    let (session, first) = host.end_turn("r", "one").await;
    assert_eq!(first["status"], "completed", "{first}");
    // the turn left more than half the window unsummarised: a background
    // compaction asks the summariser, which does not answer
    let waited = async {
        loop {
            let n = server.request_count();
            if server.requests().iter().any(|r| is_compaction(&r.body)) {
                return;
            }
            server.wait_for_requests(n + 1).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), waited)
        .await
        .expect("no background compaction was asked for");

    // the person's next message is answered without waiting for it
    let (status, sent) = host.send("r", "two", None).await;
    assert_eq!(status, 202, "{sent}");
    assert_eq!(sent["session"], session.as_str());
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    let replies = entries
        .iter()
        .filter(|e| e["kind"] == "delivery" && e["text"] == "seen")
        .count();
    assert_eq!(replies, 2, "{entries:#?}");
    // and no summary was written by the call cut off
    assert!(
        !entries.iter().any(|e| e["kind"] == "summary"),
        "{entries:#?}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
