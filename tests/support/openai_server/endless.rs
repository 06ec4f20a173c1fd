//! Bodies that never end, for the provider's limits: a stream of tool-call
//! argument pieces, of text pieces, of keep-alive comments only, one SSE
//! line without end, or a JSON completion whose text goes on forever.

use std::io;
use std::time::Duration;

use axum::body::Bytes;
use axum::response::Response;
use serde_json::json;

use super::reply::body_response_endless;

/// What an endless reply keeps sending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endless {
    /// SSE: one tool call (`SendMessage`) whose `arguments` grow by a
    /// 1 KiB piece per event.
    Arguments,
    /// SSE: text (`content`) that grows by a piece of words per event
    /// (a server that ignores `max_tokens`).
    Words,
    /// SSE: `: ping` comment lines and nothing else.
    Comments,
    /// SSE: one `data:` line that never ends.
    Line,
    /// JSON (`application/json`): a completion whose `content` never ends.
    Text,
    /// SSE: a whole answer (one SendMessage call, `hi`) with its finish
    /// reason, then `: keep-alive` comments and never `[DONE]` nor the
    /// end of the body (a proxy's heartbeat).
    HeartbeatAfterFinish,
}

/// The response for `kind`, one piece every `pause` (a yield when zero).
pub(super) fn respond(kind: Endless, pause: Duration) -> Response {
    let event = |value: serde_json::Value| Bytes::from(format!("data: {value}\n\n"));
    let delta = |delta: serde_json::Value| {
        event(
            json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
        )
    };
    let piece = "x".repeat(1024);
    let (content_type, head, repeat): (&str, Vec<Bytes>, Bytes) = match kind {
        Endless::Arguments => (
            "text/event-stream",
            vec![
                delta(json!({"role": "assistant", "content": ""})),
                delta(json!({"tool_calls": [{"index": 0, "id": "call_big", "type": "function",
                    "function": {"name": "SendMessage", "arguments": "{\"text\": \""}}]})),
            ],
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})),
        ),
        Endless::Words => (
            "text/event-stream",
            vec![delta(json!({"role": "assistant", "content": ""}))],
            delta(json!({"content": "The person sent another note about lorem ipsum. ".repeat(20)})),
        ),
        Endless::Comments => (
            "text/event-stream",
            Vec::new(),
            Bytes::from_static(b": ping\n\n"),
        ),
        Endless::HeartbeatAfterFinish => (
            "text/event-stream",
            vec![
                delta(json!({"role": "assistant", "content": ""})),
                delta(json!({"tool_calls": [{"index": 0, "id": "call_hb", "type": "function",
                    "function": {"name": "SendMessage", "arguments": "{\"text\": \"hi\"}"}}]})),
                event(json!({"id": "chatcmpl-test", "object": "chat.completion.chunk",
                    "created": 0, "model": "test-model",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
            ],
            Bytes::from_static(b": keep-alive\n\n"),
        ),
        Endless::Line => (
            "text/event-stream",
            vec![Bytes::from_static(
                b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"",
            )],
            Bytes::from(piece),
        ),
        Endless::Text => (
            "application/json",
            vec![Bytes::from_static(
                b"{\"id\": \"chatcmpl-test\", \"object\": \"chat.completion\", \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assistant\", \"content\": \"",
            )],
            Bytes::from(piece),
        ),
    };
    let pieces = head
        .into_iter()
        .map(Ok::<_, io::Error>)
        .chain(std::iter::repeat(repeat).map(Ok));
    body_response_endless(content_type, pieces, pause)
}
