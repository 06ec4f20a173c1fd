//! No one entry blows a request: a message over the per-entry cap (a
//! quarter of `compact_at_tokens`) goes to an OpenAI-compatible server as
//! its start and its end around a note, while the transcript keeps it
//! whole; and the compaction check counts what requests send, so a long
//! turn whose older results go as stubs does not ask for a compaction at
//! each step.

use serde_json::Value;

use super::openai_outcomes::turn;
use super::turn_request_bounds::prose;
use super::turn_request_bounds::reading_fleet;
use super::turn_request_bounds::reading_step;
use super::turn_request_bounds::size;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::RecordedRequest;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;

/// Whether a request is a compaction's (its system prompt, compact.md).
fn is_compaction(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You summarise"))
}

/// The number of tool messages after a request's last user message (its
/// step in the turn, when every step made one call).
fn steps_since_input(request: &Value) -> usize {
    let messages = request["messages"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let input = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    messages[input..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .count()
}

/// Regression: a person's 300 KB paste went whole into the turn's
/// requests (and every later one until a compaction after a later message
/// summarised it); at a real endpoint the request passed the model's
/// context window and the turn failed. It goes as its start and its end
/// around a note saying how much was cut and where the whole is; the
/// transcript (GET entries) keeps every character.
#[tokio::test]
async fn a_huge_message_is_sent_clipped_and_kept_whole() {
    let server = OpenAiServer::builder()
        .responder(|request| {
            if last_message(request).is_some_and(|m| m["role"] == "tool") {
                return Reply::text("");
            }
            Reply::tool_call("s", "SendMessage", r#"{"text":"got it"}"#)
        })
        .start()
        .await;
    // the default compaction threshold (100,000 tokens): a cap of 25,000
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage", "SearchTranscript"])
        .host("max_text_chars = 400000\nmax_body_bytes = 2097152")
        .start()
        .await;
    // 300,000 characters, its start and its end marked
    let body = prose(1, 300_000);
    let paste = format!("START-OF-PASTE {} END-OF-PASTE", &body[..300_000 - 28]);
    assert_eq!(paste.len(), 300_000);
    let (entries, end) = turn(&host, &paste).await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["got it"]);
    let requests = server.requests();
    let turns: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| !is_compaction(&r.body))
        .collect();
    assert_eq!(turns.len(), 2, "{} requests", requests.len());
    for r in &turns {
        // about 25,000 tokens of the paste (~100 KB of this text), not 300 KB
        assert!(size(r) < 150_000, "a request of {} bytes", size(r));
        let sent = r
            .messages()
            .iter()
            .find(|m| {
                m["role"] == "user"
                    && m["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("START-OF-PASTE"))
            })
            .and_then(|m| m["content"].as_str())
            .unwrap_or_else(|| panic!("no paste in {:.2000}", r.body));
        assert!(
            sent.ends_with("END-OF-PASTE"),
            "{:.300}",
            &sent[sent.len() - 300..]
        );
        assert!(
            sent.contains("characters are cut here: it is too long for your context"),
            "{sent:.500}"
        );
        assert!(
            sent.contains(" of this message's 300,000 characters"),
            "no count"
        );
        assert!(sent.contains("SearchTranscript"), "no way to the whole");
    }
    // the same clip in both requests: the prefix a provider cached holds
    assert_eq!(turns[0].messages()[1], turns[1].messages()[1]);
    let kept = entries
        .iter()
        .find(|e| e["kind"] == "user_message")
        .and_then(|e| e["text"].as_str())
        .unwrap();
    assert_eq!(kept, paste);
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: the compaction check counted the context whole while a
/// long turn's requests sent its older tool results as stubs; once the
/// turn's results passed `compact_at_tokens` every step asked for a
/// compaction, which keeps the running turn and so could not help — with
/// the summariser down, one failed summariser call per step. The check
/// counts what is sent: twenty reads of ~2,500 tokens (~50,000 in the
/// transcript, past the 40,000 mark) go as stubs well under it, and the
/// turn asks for no compaction.
#[tokio::test]
async fn a_long_turn_under_the_mark_as_sent_asks_for_no_compaction() {
    const READS: usize = 20;
    let server = OpenAiServer::builder()
        .responder(|request| {
            if is_compaction(request) {
                return Reply::error(500, "the summariser is down");
            }
            let reading = last_user_text(request).is_some_and(|t| t.contains("read f0.txt"));
            if !reading {
                // an earlier turn: a note answered
                if last_message(request).is_some_and(|m| m["role"] == "tool") {
                    return Reply::text("");
                }
                return Reply::tool_call("n", "SendMessage", r#"{"text":"noted"}"#);
            }
            reading_step(steps_since_input(request), READS)
        })
        .start()
        .await;
    let host = reading_fleet(&server.base_url(), READS).start().await;
    // a conversation before the turn that no summary covers yet: a
    // compaction during the turn would have something to summarise
    for i in 0..6 {
        let (_, end) = turn(&host, &format!("note {i}: {}", prose(100 + i, 400))).await;
        assert_eq!(end["status"], "completed", "{end}");
    }
    let before = server.request_count();
    let (entries, end) = turn(&host, "read f0.txt to f19.txt").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(
        deliveries(&entries).last().map(String::as_str),
        Some("read them all")
    );
    let full: usize = entries
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| e["content"].as_str().unwrap().len())
        .sum();
    assert!(full >= READS * 10_000, "{full}");
    let requests = server.requests().split_off(before);
    // the turn's own requests end with its closing step; a compaction
    // after it (in the background, the turn done) is not the turn's
    let last = requests
        .iter()
        .rposition(|r| !is_compaction(&r.body))
        .unwrap();
    let during: Vec<usize> = (0..last)
        .filter(|&i| is_compaction(&requests[i].body))
        .collect();
    assert!(
        during.is_empty(),
        "compactions asked for during the turn, at its requests {during:?} of {}",
        last + 1
    );
    assert_eq!(last, READS + 1, "the turn's requests");
    // what it sent stayed under the mark: older results went as stubs
    let sent = size(&requests[last]);
    assert!(sent < full / 2, "{sent} bytes sent, results {full}");
    host.shutdown().await;
    server.shutdown().await;
}
