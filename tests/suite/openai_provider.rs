//! The OpenAI-compatible provider against the loopback OpenAI server: the
//! wire format and streaming edge cases. Failures are in `openai_faults.rs`,
//! which shares the helpers here.

use std::time::Duration;

use botfleet::model::ChatMessage;
use botfleet::model::FinishReason;
use botfleet::model::Model;
use botfleet::model::ModelError;
use botfleet::model::ModelRequest;
use botfleet::model::ModelResponse;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use botfleet::model::SinkControl;
use botfleet::model::StreamSink;
use botfleet::model::ToolCall;
use botfleet::model::ToolSpec;
use botfleet::model::Usage;
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::OpenAiServerBuilder;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;

pub(super) const KEY: &str = "sk-test-secret-7f3a";

pub(super) fn options(server: &OpenAiServer) -> OpenAiOptions {
    OpenAiOptions {
        api_key: Some(KEY.to_owned()),
        timeout: Duration::from_secs(10),
        backoff_base: Duration::from_millis(2),
        backoff_max: Duration::from_millis(50),
        ..OpenAiOptions::new(server.base_url(), "test-model")
    }
}

pub(super) fn model(server: &OpenAiServer) -> OpenAiModel {
    OpenAiModel::new(options(server)).unwrap()
}

pub(super) fn request(text: &str) -> ModelRequest {
    ModelRequest {
        bot: "ada".to_owned(),
        messages: vec![
            ChatMessage::System {
                content: "You are Ada.".to_owned(),
            },
            ChatMessage::User {
                content: text.to_owned(),
            },
        ],
        tools: vec![std::sync::Arc::new(ToolSpec {
            name: "SendMessage".to_owned(),
            description: "Send a message to the user.".to_owned(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        })],
        ..ModelRequest::default()
    }
}

pub(super) fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}

/// Records deltas (those since the last restart); optionally aborts on a
/// substring or cancels on the first delta.
#[derive(Default)]
pub(super) struct Recorder {
    pub(super) deltas: Vec<String>,
    /// How many times the provider started over.
    pub(super) restarts: usize,
    pub(super) abort_on: Option<&'static str>,
    pub(super) cancel_on_first: Option<CancellationToken>,
}

impl Recorder {
    pub(super) fn text(&self) -> String {
        self.deltas.concat()
    }
}

impl StreamSink for Recorder {
    fn on_text(&mut self, delta: &str) -> SinkControl {
        self.deltas.push(delta.to_owned());
        if let Some(token) = &self.cancel_on_first {
            token.cancel();
        }
        match self.abort_on {
            Some(needle) if self.text().contains(needle) => SinkControl::Abort {
                reason: format!("saw {needle:?}"),
            },
            _ => SinkControl::Continue,
        }
    }

    fn on_restart(&mut self) {
        self.restarts += 1;
        self.deltas.clear();
    }
}

/// Runs one completion with a fresh recorder, failing the test if it hangs.
pub(super) async fn complete(
    model: &OpenAiModel,
    request: &ModelRequest,
) -> (Result<ModelResponse, ModelError>, Recorder) {
    let mut sink = Recorder::default();
    let result = within(model.complete(request, &mut sink, &CancellationToken::new())).await;
    (result, sink)
}

pub(super) async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .expect("the model call hung")
}

pub(super) async fn serve(builder: OpenAiServerBuilder) -> (OpenAiServer, OpenAiModel) {
    let server = builder.start().await;
    let model = model(&server);
    (server, model)
}

#[tokio::test]
async fn streams_text_and_sends_the_chat_completions_request() {
    let (server, model) =
        serve(OpenAiServer::builder().reply(Reply::text("Hello there, friend.").usage(20, 5)))
            .await;
    let (result, sink) = complete(&model, &request("hi")).await;
    assert_eq!(
        result.unwrap(),
        ModelResponse {
            reasoning: None,
            text: "Hello there, friend.".to_owned(),
            tool_calls: Vec::new(),
            finish: FinishReason::Stop,
            usage: Some(Usage {
                prompt_tokens: 20,
                completion_tokens: 5,
                cached_prompt_tokens: 0,
            }),
        }
    );
    assert_eq!(sink.deltas, vec!["Hell", "o th", "ere,", " fri", "end."]);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let received = &requests[0];
    assert_eq!(
        (received.method.as_str(), received.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        received.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(received.header("accept"), Some("text/event-stream"));
    assert_eq!(
        received.body,
        json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "You are Ada."},
                {"role": "user", "content": "hi"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "SendMessage",
                "description": "Send a message to the user.",
                "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}
            }}],
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
    assert!(!received.body.to_string().contains(KEY));
    server.shutdown().await;
}

#[tokio::test]
async fn assembles_interleaved_tool_calls_split_across_chunks() {
    let (server, model) = serve(
        OpenAiServer::builder()
            .interleave_tool_calls()
            .arg_chunk_bytes(3)
            .reply(
                Reply::tool_call("call_a", "SendMessage", r#"{"text":"first message"}"#)
                    .with_text("On it.")
                    .and_tool_call("call_b", "Search", r#"{"query":"rust sse","limit":3}"#)
                    .and_tool_call("call_c", "Ping", ""),
            ),
    )
    .await;
    let (result, sink) = complete(&model, &request("go")).await;
    let response = result.unwrap();
    assert_eq!(sink.text(), "On it.");
    assert_eq!(response.text, "On it.");
    assert_eq!(
        response.tool_calls,
        vec![
            call("call_a", "SendMessage", r#"{"text":"first message"}"#),
            call("call_b", "Search", r#"{"query":"rust sse","limit":3}"#),
            call("call_c", "Ping", "{}"),
        ]
    );
    assert_eq!(response.finish, FinishReason::ToolCalls);
    assert_eq!(server.request_count(), 1);
}

/// Regression: two calls streamed without `index` became one (the second
/// id replaced the first, the arguments ran together).
#[tokio::test]
async fn tool_calls_streamed_without_index_stay_apart() {
    let (server, model) = serve(OpenAiServer::builder().omit_tool_call_index().reply(
        Reply::tool_call("call_a", "SendMessage", r#"{"text":"one"}"#).and_tool_call(
            "call_b",
            "SendMessage",
            r#"{"text":"two"}"#,
        ),
    ))
    .await;
    let (result, _) = complete(&model, &request("go")).await;
    assert_eq!(
        result.unwrap().tool_calls,
        vec![
            call("call_a", "SendMessage", r#"{"text":"one"}"#),
            call("call_b", "SendMessage", r#"{"text":"two"}"#),
        ]
    );
    server.shutdown().await;
}

/// Regression: a refusal was dropped and the call answered with nothing.
#[tokio::test]
async fn a_refusal_is_an_error_carrying_its_words() {
    for stream in [true, false] {
        let server = OpenAiServer::builder()
            .reply(Reply::refusal("I can't help with that."))
            .start()
            .await;
        let model = OpenAiModel::new(OpenAiOptions {
            stream,
            ..options(&server)
        })
        .unwrap();
        let (result, sink) = complete(&model, &request("x")).await;
        let error = result.unwrap_err();
        assert_eq!(
            error.to_string(),
            "the model refused to answer: I can't help with that.",
            "stream {stream}"
        );
        assert!(!error.is_retryable());
        // not streamed to the sink as the model's text
        assert_eq!(sink.text(), "");
        assert_eq!(server.request_count(), 1);
        server.shutdown().await;
    }
}

#[tokio::test]
async fn sse_events_split_across_tcp_writes() {
    for split in [1, 2, 3, 7, 16, 61] {
        let (server, model) = serve(
            OpenAiServer::builder()
                .tcp_split(split)
                .crlf()
                .comments()
                .reply(
                    Reply::tool_call("c1", "SendMessage", r#"{"text":"split me"}"#)
                        .with_text("a b c d e f"),
                ),
        )
        .await;
        let (result, sink) = complete(&model, &request("x")).await;
        let response = result.unwrap_or_else(|e| panic!("split {split}: {e}"));
        assert_eq!(sink.text(), "a b c d e f", "split {split}");
        assert_eq!(
            response.tool_calls,
            vec![call("c1", "SendMessage", r#"{"text":"split me"}"#)]
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn unicode_split_across_chunks() {
    let text = "héllo wörld 😀🎉 中文字符 — ok";
    let arguments = r#"{"text":"ünïcødé 🚀 测试"}"#;
    for split in [1, 3, 5] {
        let (server, model) = serve(
            OpenAiServer::builder()
                .tcp_split(split)
                .text_chunk_chars(1)
                .arg_chunk_bytes(2)
                .reply(Reply::tool_call("u", "SendMessage", arguments).with_text(text)),
        )
        .await;
        let (result, sink) = complete(&model, &request("x")).await;
        let response = result.unwrap_or_else(|e| panic!("split {split}: {e}"));
        assert_eq!(sink.text(), text);
        assert_eq!(response.text, text);
        assert_eq!(
            response.tool_calls,
            vec![call("u", "SendMessage", arguments)]
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn non_streaming_gives_the_same_response() {
    let reply = Reply::tool_call("c9", "SendMessage", r#"{"text":"hi"}"#)
        .with_text("Sure.")
        .usage(40, 7)
        .cached(32);
    let server = OpenAiServer::builder()
        .reply(reply.clone())
        .reply(reply)
        .start()
        .await;
    let streaming = model(&server);
    let plain = OpenAiModel::new(OpenAiOptions {
        stream: false,
        ..options(&server)
    })
    .unwrap();
    let (streamed, _) = complete(&streaming, &request("x")).await;
    let (whole, sink) = complete(&plain, &request("x")).await;
    assert_eq!(whole.unwrap(), streamed.unwrap());
    assert_eq!(sink.deltas, vec!["Sure."]);
    let body = &server.requests()[1].body;
    assert_eq!(body["stream"], json!(false));
    assert!(body.get("stream_options").is_none());
    assert_eq!(
        server.requests()[1].header("accept"),
        Some("application/json")
    );
}

#[tokio::test]
async fn reports_cached_prompt_tokens_in_both_dialects() {
    let server = OpenAiServer::builder()
        .reply(Reply::text("a").usage(100, 2).cached(64))
        .reply(Reply::text("b").usage(100, 2).cached_deepseek(48))
        .reply(Reply::text("c").usage(100, 2).cached(16))
        .start()
        .await;
    let plain = OpenAiModel::new(OpenAiOptions {
        stream: false,
        ..options(&server)
    })
    .unwrap();
    let mut cached = Vec::new();
    for model in [&model(&server), &model(&server), &plain] {
        let (result, _) = complete(model, &request("x")).await;
        cached.push(result.unwrap().usage.unwrap().cached_prompt_tokens);
    }
    assert_eq!(cached, vec![64, 48, 16]);
}

#[tokio::test]
async fn headers_auth_and_stable_bodies() {
    let server = OpenAiServer::builder()
        .replies([Reply::text("1"), Reply::text("2"), Reply::text("3")])
        .start()
        .await;
    let with_extras = OpenAiModel::new(OpenAiOptions {
        extra_headers: vec![("X-Title".to_owned(), "botfleet-tests".to_owned())],
        temperature: Some(0.25),
        ..options(&server)
    })
    .unwrap();
    let keyless = OpenAiModel::new(OpenAiOptions {
        api_key: None,
        ..options(&server)
    })
    .unwrap();
    let mut long = request("x");
    long.max_tokens = Some(64);
    complete(&with_extras, &long).await.0.unwrap();
    complete(&keyless, &request("x")).await.0.unwrap();
    complete(&keyless, &request("x")).await.0.unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].header("x-title"), Some("botfleet-tests"));
    assert_eq!(requests[0].body["temperature"], json!(0.25));
    assert_eq!(requests[0].body["max_tokens"], json!(64));
    assert_eq!(requests[1].header("authorization"), None);
    assert_eq!(requests[1].body.to_string(), requests[2].body.to_string());
}

#[tokio::test]
async fn a_responder_scripts_a_whole_turn() {
    let (server, model) =
        serve(
            OpenAiServer::builder().responder(|request| match last_message(request) {
                Some(message) if message["role"] == "tool" => Reply::text("done"),
                _ => {
                    let text = last_user_text(request).unwrap_or_default();
                    Reply::tool_call("s1", "SendMessage", json!({ "text": text }).to_string())
                }
            }),
        )
        .await;
    let mut turn = request("echo me");
    let first = complete(&model, &turn).await.0.unwrap();
    assert_eq!(
        first.tool_calls,
        vec![call("s1", "SendMessage", r#"{"text":"echo me"}"#)]
    );
    turn.messages.push(ChatMessage::Assistant {
        reasoning: None,
        content: first.text,
        tool_calls: first.tool_calls,
    });
    turn.messages.push(ChatMessage::Tool {
        tool_call_id: "s1".to_owned(),
        content: "sent".to_owned(),
    });
    let second = complete(&model, &turn).await.0.unwrap();
    assert_eq!(
        (second.text.as_str(), second.finish),
        ("done", FinishReason::Stop)
    );
    // The second prompt starts with the bytes of the first one's messages.
    let requests = server.requests();
    let (before, after) = (requests[0].messages(), requests[1].messages());
    assert_eq!(before, &after[..before.len()]);
    assert_eq!(
        after[2]["tool_calls"][0]["function"]["arguments"],
        r#"{"text":"echo me"}"#
    );
}
