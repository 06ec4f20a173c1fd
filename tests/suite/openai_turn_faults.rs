//! Faults in an OpenAI-compatible provider's answers, seen through a
//! running host: tool-call arguments that are a JSON array, a `usage`
//! without token counts, a surrogate pair split between two stream
//! events. The model client alone is tested in `openai_faults.rs`, which
//! holds `serve_completions` for the wire shapes the loopback server
//! cannot produce.

use pretty_assertions::assert_eq;

use super::openai_faults::serve_completions;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// Regression: tool-call arguments that are a JSON array were read into
/// SendMessage by position and delivered, while every later request showed
/// them as `{}`, so the model's history did not match what ran. The call
/// is refused as invalid and nothing is delivered.
#[tokio::test]
async fn array_arguments_are_refused_and_nothing_is_delivered() {
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call(
            "c1",
            "SendMessage",
            r#"["hello from an array"]"#,
        ))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (status, sent) = host.send("r", "say hello", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    let entries = host.entries(&session).await;
    assert_eq!(deliveries(&entries), Vec::<String>::new());
    let result = entries
        .iter()
        .find(|e| e["kind"] == "tool_result")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    assert_eq!(result["is_error"], true, "{result}");
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains(
            "invalid arguments for SendMessage: they are an array, and arguments must be a \
             JSON object"
        ),
        "{content}"
    );
    // the model was told so in its next request
    let requests = server.requests();
    let told = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c1")
        .unwrap_or_else(|| panic!("{:#?}", requests[1].body));
    assert_eq!(told["content"], result["content"]);
    host.shutdown().await;
    server.shutdown().await;
}

/// A provider on loopback that reports no token counts: each answer is one
/// whole completion whose `usage` is `{}` (a SendMessage call) or all null
/// (after the call's result, an empty stop). The loopback server's replies
/// always carry numbers, hence this one.
async fn provider_without_token_counts() -> String {
    use axum::Json;
    use serde_json::Value;
    use serde_json::json;

    async fn answer(Json(request): Json<Value>) -> Json<Value> {
        let after_tool = crate::support::openai_server::last_message(&request)
            .is_some_and(|m| m["role"] == "tool");
        let (message, finish, usage) = if after_tool {
            (
                json!({"role": "assistant", "content": ""}),
                "stop",
                json!({"prompt_tokens": null, "completion_tokens": null}),
            )
        } else {
            let function = json!({"name": "SendMessage", "arguments": r#"{"text": "hi"}"#});
            (
                json!({"role": "assistant", "content": null,
                    "tool_calls": [{"id": "c1", "type": "function", "function": function}]}),
                "tool_calls",
                json!({}),
            )
        };
        Json(json!({
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
            "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }))
    }

    serve_completions(axum::routing::post(answer)).await
}

/// Regression: `"usage": {}` (or null counts) counted as 0 tokens, so a
/// `daily_token_budget` was never spent. It is no usage: the engine counts
/// the tokens itself, and the bot pauses once the budget is spent.
#[tokio::test]
async fn a_usage_without_token_counts_is_counted_toward_the_daily_budget() {
    let base_url = provider_without_token_counts().await;
    let host = TestFleet::new()
        .midday()
        .openai("main", &base_url, "stream = false\nmax_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .bot_lines("daily_token_budget = 1")
        .start()
        .await;
    let (status, first) = host.send("r", "hello", None).await;
    assert_eq!(status, 202, "{first}");
    let session = first["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, first["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let today = &bots["bots"][0]["usage"]["today"];
    assert!(
        today["prompt_tokens"].as_u64() > Some(0) && today["completion_tokens"].as_u64() > Some(0),
        "{bots:#}"
    );
    // the budget is spent: the next message is told so instead of answered
    let (_, second) = host.send("r", "and again", None).await;
    let seq = second["seq"].as_i64().unwrap();
    let next = host
        .wait_for(&session, |entries| {
            entries
                .iter()
                .find(|e| {
                    (e["kind"] == "notice" && e["code"] == "budget_exhausted")
                        || (e["kind"] == "turn_end"
                            && e["inputs"]
                                .as_array()
                                .is_some_and(|inputs| inputs.contains(&seq.into())))
                })
                .cloned()
        })
        .await;
    assert_eq!(
        (next["kind"].as_str(), next["code"].as_str()),
        (Some("notice"), Some("budget_exhausted")),
        "{next}"
    );
    host.shutdown().await;
}

/// A provider that streams a SendMessage whose arguments cut the surrogate
/// pair of 😀 (`\ud83d\ude00`) between two events, as a proxy slicing
/// strings by UTF-16 units does; after the tool result it stops.
async fn provider_splitting_a_surrogate_pair() -> String {
    use axum::Json;
    use axum::response::IntoResponse;
    use serde_json::Value;

    async fn answer(Json(request): Json<Value>) -> axum::response::Response {
        let after_tool = crate::support::openai_server::last_message(&request)
            .is_some_and(|m| m["role"] == "tool");
        let events: Vec<&str> = if after_tool {
            vec![r#"{"choices":[{"index":0,"delta":{"content":"done"},"finish_reason":"stop"}]}"#]
        } else {
            vec![
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"s1","type":"function","function":{"name":"SendMessage","arguments":"{\"text\": \"smile "}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\ud83d"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\ude00\"}"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            ]
        };
        let mut body = String::new();
        for e in events {
            body.push_str(&format!("data: {e}\n\n"));
        }
        body.push_str("data: [DONE]\n\n");
        ([("content-type", "text/event-stream")], body).into_response()
    }

    serve_completions(axum::routing::post(answer)).await
}

/// Regression: each half of the pair alone is not valid JSON, so the turn
/// failed at once ("stream event is not a completion chunk"); the halves
/// are joined into the character.
#[tokio::test]
async fn a_surrogate_pair_split_between_two_events_is_joined() {
    let base_url = provider_splitting_a_surrogate_pair().await;
    let host = TestFleet::new()
        .openai("main", &base_url, "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (status, sent) = host.send("r", "smile", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&host.entries(&session).await), ["smile 😀"]);
    host.shutdown().await;
}
