//! What the per-entry clip bounds as an OpenAI-compatible server receives
//! it: the inputs of one turn share one cap, a call's huge argument is
//! clipped (still JSON) in the requests after it, and a provider that
//! reports no usage is counted for what was sent.

use botfleet_memory::Encoding;
use serde_json::Value;
use serde_json::json;

use super::openai_faults::serve_completions;
use super::openai_outcomes::turn;
use super::turn_request_bounds::prose;
use super::turn_request_bounds::size;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::RecordedRequest;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;

/// Whether a request is a compaction's (its system prompt, compact.md).
fn is_compaction(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You summarise"))
}

/// Tokens of a request's messages, as the engine counts them (4 a message
/// and its text; an assistant's calls as name and arguments).
fn tokens(request: &RecordedRequest) -> u64 {
    let e = Encoding::default();
    request
        .messages()
        .iter()
        .map(|m| {
            let mut text = m["content"].as_str().unwrap_or("").to_owned();
            for c in m["tool_calls"].as_array().map_or(&[][..], Vec::as_slice) {
                text.push(' ');
                text.push_str(c["function"]["name"].as_str().unwrap_or(""));
                text.push(' ');
                text.push_str(c["function"]["arguments"].as_str().unwrap_or(""));
            }
            u64::from(e.count_message(&text))
        })
        .sum()
}

/// A model that answers a turn's input with SendMessage "got them" and the
/// call's result with an empty stop; the summariser writes a line.
async fn acknowledging_model() -> OpenAiServer {
    OpenAiServer::builder()
        .responder(|request| {
            if is_compaction(request) {
                return Reply::text("a summary");
            }
            if last_message(request).is_some_and(|m| m["role"] == "tool") {
                return Reply::text("");
            }
            Reply::tool_call("s", "SendMessage", r#"{"text":"got them"}"#)
        })
        .start()
        .await
}

/// Regression: each input of a turn was clipped to the per-entry cap (a
/// quarter of `compact_at_tokens`) alone, so ten huge inputs batched into
/// one turn sent ten caps, 2.5 times `compact_at_tokens`, and a
/// compaction keeps the running turn. The turn's inputs share one cap:
/// each goes as its start and its end, and the request stays under the
/// threshold.
#[tokio::test]
async fn ten_huge_inputs_of_one_turn_share_one_cap() {
    const INPUTS: usize = 10;
    let server = acknowledging_model().await;
    // a cap of 5,000 tokens; the debounce gathers the ten into one turn
    let host = TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            "max_retries = 0\ncompact_at_tokens = 20000",
        )
        .bot("r", "main", &["SendMessage", "SearchTranscript"])
        .runtime("debounce_ms = 3000\ndebounce_max_ms = 60000\nextract_memory = false")
        .host("max_text_chars = 100000\nmax_body_bytes = 1048576")
        .start()
        .await;
    let mut last = Value::Null;
    for k in 0..INPUTS {
        // ~13,000 tokens each
        let text = format!("INPUT{k} {} END{k}", prose(k, 40_000));
        let (status, body) = host.send("r", &text, None).await;
        assert_eq!(status, 202, "{body}");
        last = body;
    }
    let session = last["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, last["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(
        end["inputs"].as_array().map(Vec::len),
        Some(INPUTS),
        "one turn over the ten: {end}"
    );
    let requests = server.requests();
    let turns: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| !is_compaction(&r.body))
        .collect();
    // a run the next input interrupted before the debounce gathered them
    // all may come first: the completed run is the last two requests
    assert!(turns.len() >= 2, "{} requests", requests.len());
    let completed = turns.len() - 2;
    for (n, r) in turns.iter().enumerate() {
        let sent = tokens(r);
        assert!(
            sent < 20_000,
            "a request of {sent} tokens ({} bytes) passes compact_at_tokens",
            size(r)
        );
        let users: String = r
            .messages()
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .collect();
        let e = Encoding::default();
        assert!(
            u64::from(e.count(&users)) < 5_000 + 200,
            "the inputs took {} tokens",
            e.count(&users)
        );
        if n < completed {
            continue;
        }
        for k in 0..INPUTS {
            assert!(
                users.contains(&format!("INPUT{k} ")) && users.contains(&format!("END{k}")),
                "input {k} is not in the request"
            );
        }
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: a call's arguments went whole into every later request: a
/// Write of 200 KB re-sent 200 KB at each step. The later requests carry
/// the argument clipped inside its JSON (the strict server refuses
/// arguments that are not JSON), the call ran with it whole.
#[tokio::test]
async fn a_huge_write_argument_is_clipped_in_later_requests() {
    let content = format!("BEGIN {} FINISH", prose(7, 200_000));
    let arguments = json!({ "path": "big.txt", "content": content }).to_string();
    let server = OpenAiServer::builder()
        .responder(move |request| {
            if is_compaction(request) {
                return Reply::text("a summary");
            }
            let results = request["messages"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
            match results {
                0 => Reply::tool_call("w", "Write", arguments.clone()),
                1 => Reply::tool_call("s", "SendMessage", r#"{"text":"written"}"#),
                _ => Reply::text(""),
            }
        })
        .strict()
        .arg_chunk_bytes(65_536)
        .start()
        .await;
    // a cap of 5,000 tokens
    let host = TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            "max_retries = 0\ncompact_at_tokens = 20000",
        )
        .bot("r", "main", &["SendMessage", "Write"])
        .start()
        .await;
    let (entries, end) = turn(&host, "write the big file").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["written"]);
    let requests: Vec<RecordedRequest> = server
        .requests()
        .into_iter()
        .filter(|r| !is_compaction(&r.body))
        .collect();
    assert_eq!(requests.len(), 3);
    for r in &requests[1..] {
        assert!(size(r) < 60_000, "a request of {} bytes", size(r));
        let call = r
            .messages()
            .iter()
            .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
            .find(|c| c["id"] == "w")
            .unwrap_or_else(|| panic!("no Write call in {:.2000}", r.body));
        let sent: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(sent["path"], "big.txt");
        let text = sent["content"].as_str().unwrap();
        assert!(text.starts_with("BEGIN ") && text.ends_with(" FINISH"));
        assert!(
            text.contains("characters are cut here") && text.contains("made with it whole"),
            "{:.300}",
            &text[text.len() / 2 - 150..]
        );
    }
    // the transcript and the file keep it whole
    let written = entries
        .iter()
        .find(|e| e["kind"] == "assistant")
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(written.contains(" FINISH"), "{written:.300}");
    let fleet = host.shutdown().await;
    let file = std::fs::read_to_string(fleet.path().join("data/workspace/alice/big.txt")).unwrap();
    assert_eq!(file, content);
    server.shutdown().await;
}

/// A provider on loopback that reports no usage at all: a SendMessage call
/// for an input, an empty stop after its result.
async fn provider_without_usage() -> String {
    use axum::Json;

    async fn answer(Json(request): Json<Value>) -> Json<Value> {
        let after_tool = last_message(&request).is_some_and(|m| m["role"] == "tool");
        let (message, finish) = if after_tool {
            (json!({"role": "assistant", "content": ""}), "stop")
        } else {
            let function = json!({"name": "SendMessage", "arguments": r#"{"text": "got it"}"#});
            (
                json!({"role": "assistant", "content": null,
                    "tool_calls": [{"id": "c1", "type": "function", "function": function}]}),
                "tool_calls",
            )
        };
        Json(json!({
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
            "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }))
    }

    serve_completions(axum::routing::post(answer)).await
}

/// Regression: a call whose provider reported no usage counted the
/// context's whole count as its prompt tokens, a clipped paste whole: a
/// 300 KB paste (~100,000 tokens) sent clipped to 25,000 tokens counted
/// ~200,000 for a turn of two calls. Each call counts what it sent.
#[tokio::test]
async fn a_provider_without_usage_is_counted_for_what_was_sent() {
    let base_url = provider_without_usage().await;
    // the default threshold (100,000 tokens): a cap of 25,000
    let host = TestFleet::new()
        .openai("main", &base_url, "stream = false\nmax_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .host("max_text_chars = 400000\nmax_body_bytes = 2097152")
        .start()
        .await;
    let (entries, end) = turn(&host, &prose(3, 300_000)).await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["got it"]);
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let prompt = bots["bots"][0]["usage"]["today"]["prompt_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("{bots:#}"));
    // two calls of about the cap and the system prompt each
    assert!(
        (2 * 20_000..2 * 35_000).contains(&prompt),
        "{prompt} prompt tokens for two calls"
    );
    // the next turn has the paste in its stable prefix: counted as sent,
    // clipped, the prefix is a part of the prompt (QA, 2026-12-05: counted
    // whole, it was four times the prompt)
    let (_, end) = turn(&host, "and now?").await;
    assert_eq!(end["status"], "completed", "{end}");
    let usage = &end["usage"];
    let (prefix, prompt) = (
        usage["prefix_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap(),
    );
    assert!(
        prefix > 2 * 20_000 && prefix <= prompt,
        "prefix {prefix} of prompt {prompt}: {end}"
    );
    host.shutdown().await;
}
