//! OpenAI-compatible dialects through a whole bot and the loopback OpenAI
//! server: parallel tool calls that all come at index 0 (Ollama behind
//! LiteLLM, some Qwen setups) each run, and the reasoning of a thinking
//! model (DeepSeek, Kimi) goes back with its tool calls in the turn's
//! next request, and not in a later turn's.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::RecordedRequest;
use crate::support::openai_server::Reply;

/// An SSE body of these chunk deltas, then the finish reason and `[DONE]`.
fn sse(deltas: &[Value], finish: &str) -> Reply {
    let mut body = String::new();
    let chunk = |delta: &Value, finish: Option<&str>| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    for delta in deltas {
        body.push_str(&format!("data: {}\n\n", chunk(delta, None)));
    }
    body.push_str(&format!("data: {}\n\n", chunk(&json!({}), Some(finish))));
    body.push_str("data: [DONE]\n\n");
    Reply::raw(200, "text/event-stream", body)
}

/// The assistant message of request `request` whose first tool call is
/// `call`.
fn assistant_with_call(requests: &[RecordedRequest], request: usize, call: &str) -> Value {
    requests[request].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"][0]["id"] == call)
        .cloned()
        .unwrap_or_else(|| panic!("no call {call} in request {request}"))
}

/// A host whose bot `r` (SendMessage) asks `server`, with no retries.
async fn host(server: &OpenAiServer) -> TestHost {
    TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await
}

/// A SendMessage call piece at index 0 with its own id.
fn send_at_zero(id: &str, text: &str) -> Value {
    json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
        "function": {"name": "SendMessage",
            "arguments": json!({"text": text}).to_string()}}]})
}

/// Regression: two parallel calls at index 0 with distinct ids ran as one
/// call with both names and arguments run together, and neither message
/// was delivered.
#[tokio::test]
async fn parallel_calls_sharing_index_zero_both_run() {
    let server = OpenAiServer::builder()
        .replies([
            sse(
                &[
                    json!({"role": "assistant", "content": null}),
                    send_at_zero("call_a", "likes jazz, noted"),
                    send_at_zero("call_b", "anything else?"),
                ],
                "tool_calls",
            ),
            Reply::text(""),
        ])
        .start()
        .await;
    let host = host(&server).await;
    let (session, end) = host.end_turn("r", "I like jazz").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    assert_eq!(
        deliveries(&entries),
        ["likes jazz, noted", "anything else?"],
        "{entries:#?}"
    );
    let requests = server.requests();
    let calls = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .map(|m| m["tool_calls"].clone())
        .unwrap();
    assert_eq!(calls[0]["id"], "call_a");
    assert_eq!(calls[1]["id"], "call_b");
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: `reasoning_content` was dropped, and thinking-mode servers
/// refused the second request of every turn with tool calls ("The
/// reasoning_content in the thinking mode must be passed back to the
/// API"). It goes back with the calls within the turn, and (QA,
/// 2026-12-05: DeepSeek V4 refuses a request that leaves out the
/// reasoning of any earlier turn's calls: every second turn failed) in
/// the later turns too, after a restart as well; it is never delivered.
#[tokio::test]
async fn reasoning_goes_back_with_its_calls_in_every_later_request() {
    let thinking = |id: &str, text: &str, thought: &str| {
        sse(
            &[
                json!({"role": "assistant", "reasoning_content": thought}),
                json!({"reasoning_content": " Then answer."}),
                send_at_zero(id, text),
            ],
            "tool_calls",
        )
    };
    let server = OpenAiServer::builder()
        .replies([
            thinking("call_1", "hello", "They greet me."),
            Reply::text(""),
            thinking("call_2", "fine", "They ask how I am."),
            Reply::text(""),
            thinking("call_3", "bye", "They leave."),
            Reply::text(""),
        ])
        .start()
        .await;
    let host = host(&server).await;
    let (session, end) = host.end_turn("r", "hi").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (_, end) = host.end_turn("r", "how are you?").await;
    assert_eq!(end["status"], "completed", "{end}");
    // after a restart, from the store
    let fleet = host.shutdown().await;
    let host = crate::support::fleet::restart(fleet).await;
    let (_, end) = host.end_turn("r", "bye").await;
    assert_eq!(end["status"], "completed", "{end}");
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    let assistant_of = |request: usize, call: &str| assistant_with_call(&requests, request, call);
    // the turn's second request carries the first step's reasoning
    assert_eq!(
        assistant_of(1, "call_1")["reasoning_content"],
        "They greet me. Then answer."
    );
    // the next turn sends the earlier turn's calls with it, and its own
    for request in [2, 3] {
        assert_eq!(
            assistant_of(request, "call_1")["reasoning_content"],
            "They greet me. Then answer.",
            "request {request}"
        );
    }
    for request in [3, 4] {
        assert_eq!(
            assistant_of(request, "call_2")["reasoning_content"],
            "They ask how I am. Then answer.",
            "request {request}"
        );
    }
    assert_eq!(
        assistant_of(4, "call_1")["reasoning_content"],
        "They greet me. Then answer."
    );
    let entries = host.entries(&session).await;
    assert_eq!(deliveries(&entries), ["hello", "fine", "bye"]);
    for entry in &entries {
        let text = entry["text"].as_str().unwrap_or("");
        assert!(!text.contains("greet me"), "reasoning shown: {entry}");
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (QA, 2026-12-05): a tool-call step whose reasoning came
/// empty (`"reasoning_content": ""`: DeepSeek V4 sends one on some tool
/// rounds) was sent back without the field, and DeepSeek refused that
/// request and every later one of the conversation (400 "Missing
/// `reasoning_content` field"), after a restart too. It goes back as it
/// came, empty; a model that sends no reasoning still gets none back.
#[tokio::test]
async fn an_empty_reasoning_goes_back_empty() {
    let server = OpenAiServer::builder()
        .replies([
            sse(
                &[
                    json!({"role": "assistant", "reasoning_content": ""}),
                    send_at_zero("call_1", "hello"),
                ],
                "tool_calls",
            ),
            Reply::text(""),
            sse(&[send_at_zero("call_2", "fine")], "tool_calls"),
            Reply::text(""),
        ])
        .start()
        .await;
    let host = host(&server).await;
    let (_, end) = host.end_turn("r", "hi").await;
    assert_eq!(end["status"], "completed", "{end}");
    let fleet = host.shutdown().await;
    let host = crate::support::fleet::restart(fleet).await;
    let (_, end) = host.end_turn("r", "how are you?").await;
    assert_eq!(end["status"], "completed", "{end}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let assistant_of = |request: usize, call: &str| assistant_with_call(&requests, request, call);
    for request in [1, 2, 3] {
        assert_eq!(
            assistant_of(request, "call_1")["reasoning_content"],
            "",
            "request {request}"
        );
    }
    assert!(
        assistant_of(3, "call_2").get("reasoning_content").is_none(),
        "{}",
        requests[3].body
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// DeepSeek's rule as its server applies it: a 400 when an assistant
/// message with tool calls has no `reasoning_content`.
fn missing_reasoning(request: &Value) -> Option<usize> {
    request["messages"].as_array()?.iter().position(|m| {
        m["role"] == "assistant"
            && m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
            && m.get("reasoning_content").is_none()
    })
}

/// Regression (QA, 2026-12-05): tool calls stored without their
/// reasoning (by a model without reasoning the bot used before, or by an
/// older botfleet, which dropped an empty one) made a thinking-mode
/// server refuse every later request of the conversation, after an
/// upgrade too. Refused so, the request is sent again with an empty
/// `reasoning_content` on those calls, and the turn goes on; the provider
/// sends them so from then on.
#[tokio::test]
async fn calls_stored_without_reasoning_are_sent_again_with_an_empty_one() {
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering;
    let thinking = std::sync::Arc::new(AtomicBool::new(false));
    let refused = std::sync::Arc::new(AtomicUsize::new(0));
    let server = OpenAiServer::builder()
        .responder({
            let (thinking, refused) = (thinking.clone(), refused.clone());
            move |request| {
                if thinking.load(Ordering::SeqCst)
                    && let Some(at) = missing_reasoning(request)
                {
                    refused.fetch_add(1, Ordering::SeqCst);
                    return Reply::error(
                        400,
                        format!(
                            "Missing `reasoning_content` field in the assistant message at message index {at}"
                        ),
                    );
                }
                let last = request["messages"].as_array().unwrap().last().unwrap();
                if last["role"] == "tool" {
                    return Reply::text("");
                }
                let reply = Reply::tool_call("c", "SendMessage", r#"{"text":"hi"}"#);
                if thinking.load(Ordering::SeqCst) {
                    reply.reasoning("They greet me.")
                } else {
                    reply
                }
            }
        })
        .start()
        .await;
    let host = host(&server).await;
    // a model without reasoning: its calls are stored without any
    let (_, end) = host.end_turn("r", "hi").await;
    assert_eq!(end["status"], "completed", "{end}");
    // the bot's model is now a thinking one
    thinking.store(true, Ordering::SeqCst);
    let (session, end) = host.end_turn("r", "hello again").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (_, end) = host.end_turn("r", "and again").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(
        deliveries(&host.entries(&session).await),
        ["hi", "hi", "hi"]
    );
    // refused once: from then on the provider sends the empty reasoning
    // at once (it was refused and sent again at every step)
    assert_eq!(refused.load(Ordering::SeqCst), 1);
    host.shutdown().await;
    server.shutdown().await;
}
