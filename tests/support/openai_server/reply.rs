//! Scripted replies and how they are written on the wire: SSE chunks cut
//! into small deltas, one JSON completion, or an HTTP error.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use axum::body::Body;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;
use serde_json::Value;
use serde_json::json;

use super::endless::Endless;

/// One scripted answer: a completion (text, tool calls, usage, finish
/// reason) or an HTTP error, optionally cut off or delayed.
#[derive(Clone, Debug, Default)]
pub struct Reply {
    text: String,
    /// OpenAI's `refusal`: the model declines (with `content: null`).
    refusal: Option<String>,
    tool_calls: Vec<(String, String, String)>,
    usage: Option<(u64, u64)>,
    cached: Option<CachedTokens>,
    finish: Option<String>,
    error: Option<(u16, String)>,
    /// Status, content type and body sent as they are.
    raw: Option<(u16, String, String)>,
    retry_after: Option<String>,
    cut_after: Option<usize>,
    /// Sends no more after this many SSE events, keeping the body open.
    stall_after: Option<usize>,
    delay_headers: Duration,
    endless: Option<(Endless, Duration)>,
    /// Headers wait until this reads `true` (the test releases them).
    hold: Option<tokio::sync::watch::Receiver<bool>>,
    /// A stream without `[DONE]` whose body stays open.
    open_end: bool,
    /// The finish reason every streamed chunk carries (Ollama's `""`, a
    /// gateway's `"stop"`), instead of `null` before the last.
    interim_finish: Option<String>,
    /// A thinking model's `reasoning_content`, before the answer.
    reasoning: Option<String>,
}

#[derive(Clone, Copy, Debug)]
enum CachedTokens {
    /// `usage.prompt_tokens_details.cached_tokens` (OpenAI, xAI, vLLM).
    OpenAi(u64),
    /// `usage.prompt_cache_hit_tokens` (DeepSeek).
    DeepSeek(u64),
}

impl Reply {
    /// A plain text answer (finish reason `stop`).
    pub fn text(text: impl Into<String>) -> Self {
        Reply {
            text: text.into(),
            ..Reply::default()
        }
    }

    /// A refusal (OpenAI's `message.refusal`, streamed as `delta.refusal`
    /// pieces; finish reason `stop`).
    pub fn refusal(refusal: impl Into<String>) -> Self {
        Reply {
            refusal: Some(refusal.into()),
            ..Reply::default()
        }
    }

    /// An answer with one tool call (finish reason `tool_calls`);
    /// `arguments` is the raw JSON text.
    pub fn tool_call(id: &str, name: &str, arguments: impl Into<String>) -> Self {
        Reply::default().and_tool_call(id, name, arguments)
    }

    /// A 200 response whose body never ends ([`Endless`]), one piece
    /// every `pause`.
    pub fn endless(kind: Endless, pause: Duration) -> Self {
        Reply {
            endless: Some((kind, pause)),
            ..Reply::default()
        }
    }

    /// An HTTP error with an OpenAI-style `{"error": {"message": ..}}` body.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Reply {
            error: Some((status, message.into())),
            ..Reply::default()
        }
    }

    /// A response with this status, content type and body, sent as they
    /// are: a provider's own error shape (`code`, `type`), a web page.
    pub fn raw(status: u16, content_type: &str, body: impl Into<String>) -> Self {
        Reply {
            raw: Some((status, content_type.to_owned(), body.into())),
            ..Reply::default()
        }
    }

    /// Adds text before the tool calls.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    /// Adds another tool call; an empty `id` leaves the `id` field out, as
    /// some servers do.
    pub fn and_tool_call(mut self, id: &str, name: &str, arguments: impl Into<String>) -> Self {
        self.tool_calls
            .push((id.to_owned(), name.to_owned(), arguments.into()));
        self
    }

    /// Reports usage (sent in streams only when the request asked for it
    /// with `stream_options.include_usage`, as OpenAI does).
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage = Some((prompt_tokens, completion_tokens));
        self
    }

    /// Reports cached prompt tokens the OpenAI way.
    pub fn cached(mut self, tokens: u64) -> Self {
        self.cached = Some(CachedTokens::OpenAi(tokens));
        self
    }

    /// Reports cached prompt tokens the DeepSeek way.
    pub fn cached_deepseek(mut self, tokens: u64) -> Self {
        self.cached = Some(CachedTokens::DeepSeek(tokens));
        self
    }

    /// Overrides the finish reason.
    pub fn finish(mut self, reason: &str) -> Self {
        self.finish = Some(reason.to_owned());
        self
    }

    /// Sends a `Retry-After` header with an error (`"0"`, `"0.05"`, `"3600"`).
    pub fn retry_after(mut self, value: &str) -> Self {
        self.retry_after = Some(value.to_owned());
        self
    }

    /// Adds a thinking model's reasoning (`reasoning_content`: streamed
    /// before the text, or in the whole message).
    pub fn reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Streams every chunk with this finish reason (`""` as Ollama,
    /// SGLang, LocalAI send it; `"stop"` as some gateways do), not only
    /// the last.
    pub fn interim_finish(mut self, reason: &str) -> Self {
        self.interim_finish = Some(reason.to_owned());
        self
    }

    /// Drops the connection after `events` SSE events (or, for a JSON
    /// reply, after that many bytes of the body).
    pub fn cut_after(mut self, events: usize) -> Self {
        self.cut_after = Some(events);
        self
    }

    /// Sends nothing more after `events` SSE events, and keeps the body
    /// open (a server that stalls mid-answer).
    pub fn stall_after(mut self, events: usize) -> Self {
        self.stall_after = Some(events);
        self
    }

    /// Waits this long before sending the response headers.
    pub fn delay_headers(mut self, delay: Duration) -> Self {
        self.delay_headers = delay;
        self
    }

    /// Streams the answer without `data: [DONE]`, or sends the whole
    /// JSON answer, and keeps the body open after it (a server or proxy
    /// that never ends its bodies).
    pub fn without_done(mut self) -> Self {
        self.open_end = true;
        self
    }

    /// Holds the response (before its headers) until `gate` reads
    /// `true`: the test decides when the model answers, without a sleep.
    pub fn hold_until(mut self, gate: tokio::sync::watch::Receiver<bool>) -> Self {
        self.hold = Some(gate);
        self
    }

    fn finish_reason(&self) -> String {
        match (&self.finish, self.tool_calls.is_empty()) {
            (Some(reason), _) => reason.clone(),
            (None, true) => "stop".to_owned(),
            (None, false) => "tool_calls".to_owned(),
        }
    }

    fn usage_json(&self) -> Option<Value> {
        let (prompt, completion) = self.usage?;
        let mut usage = json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt.saturating_add(completion),
        });
        match self.cached {
            Some(CachedTokens::OpenAi(n)) => {
                usage["prompt_tokens_details"] = json!({ "cached_tokens": n });
            }
            Some(CachedTokens::DeepSeek(n)) => {
                usage["prompt_cache_hit_tokens"] = json!(n);
                usage["prompt_cache_miss_tokens"] = json!(prompt.saturating_sub(n));
            }
            None => {}
        }
        Some(usage)
    }
}

/// How streamed replies are cut up on the wire.
#[derive(Clone, Debug)]
pub(super) struct WireShape {
    pub(super) text_chunk_chars: usize,
    pub(super) arg_chunk_bytes: usize,
    pub(super) interleave_tool_calls: bool,
    pub(super) omit_tool_call_index: bool,
    pub(super) tcp_split: Option<usize>,
    pub(super) crlf: bool,
    pub(super) comments: bool,
    pub(super) chunk_delay: Duration,
}

/// Answers one request with `reply`, shaped by `shape`.
pub(super) async fn respond(reply: Reply, request: &Value, shape: &WireShape) -> Response {
    if !reply.delay_headers.is_zero() {
        tokio::time::sleep(reply.delay_headers).await;
    }
    if let Some(mut gate) = reply.hold.clone() {
        // a dropped sender releases it too
        let _ = gate.wait_for(|open| *open).await;
    }
    if let Some((status, message)) = &reply.error {
        return error_response(*status, message, reply.retry_after.as_deref());
    }
    if let Some((status, content_type, body)) = &reply.raw {
        let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        // split as the builder says, at any byte (inside a character too)
        if let Some(size) = shape.tcp_split {
            let pieces = body
                .as_bytes()
                .chunks(size)
                .map(|piece| Ok(Bytes::copy_from_slice(piece)))
                .collect();
            let mut response = body_response(content_type, pieces, shape.chunk_delay);
            *response.status_mut() = status;
            return response;
        }
        return (
            status,
            [(header::CONTENT_TYPE, content_type.clone())],
            body.clone(),
        )
            .into_response();
    }
    if let Some((kind, pause)) = reply.endless {
        return super::endless::respond(kind, pause);
    }
    let model = request["model"].as_str().unwrap_or("test-model");
    if request["stream"] == true {
        let include_usage = request["stream_options"]["include_usage"] == true;
        stream_response(&reply, model, include_usage, shape)
    } else {
        json_response(&reply, model)
    }
}

fn error_response(status: u16, message: &str, retry_after: Option<&str>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body =
        json!({"error": {"message": message, "type": "test_error", "param": null, "code": null}});
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(value) = retry_after.and_then(|v| v.parse().ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

fn json_response(reply: &Reply, model: &str) -> Response {
    let mut message = json!({"role": "assistant", "content": null});
    if !reply.text.is_empty() {
        message["content"] = json!(reply.text);
    }
    if let Some(refusal) = &reply.refusal {
        message["refusal"] = json!(refusal);
    }
    if let Some(reasoning) = &reply.reasoning {
        message["reasoning_content"] = json!(reasoning);
    }
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = reply
            .tool_calls
            .iter()
            .map(|(id, name, arguments)| {
                let function = json!({"name": name, "arguments": arguments});
                let mut call = json!({"type": "function", "function": function});
                if !id.is_empty() {
                    call["id"] = json!(id);
                }
                call
            })
            .collect();
    }
    let mut body = json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason()}],
    });
    if let Some(usage) = reply.usage_json() {
        body["usage"] = usage;
    }
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    if reply.open_end {
        return body_response_open(
            "application/json",
            vec![Ok(Bytes::from(bytes))],
            Duration::ZERO,
        );
    }
    let pieces = match reply.cut_after {
        Some(n) => vec![
            Ok(Bytes::copy_from_slice(&bytes[..n.min(bytes.len())])),
            Err(cut()),
        ],
        None => vec![Ok(Bytes::from(bytes))],
    };
    body_response("application/json", pieces, Duration::ZERO)
}

fn stream_response(reply: &Reply, model: &str, include_usage: bool, shape: &WireShape) -> Response {
    let mut events = stream_events(reply, include_usage, shape);
    for event in &mut events {
        event["id"] = json!("chatcmpl-test");
        event["object"] = json!("chat.completion.chunk");
        event["created"] = json!(0);
        event["model"] = json!(model);
        if include_usage && event.get("usage").is_none() {
            event["usage"] = Value::Null;
        }
    }
    let cut_at = reply.cut_after.filter(|n| *n <= events.len());
    let newline = if shape.crlf { "\r\n" } else { "\n" };
    let mut frames: Vec<String> = events
        .iter()
        .map(|event| format!("data: {event}{newline}{newline}"))
        .chain((!reply.open_end).then(|| format!("data: [DONE]{newline}{newline}")))
        .map(|frame| {
            if shape.comments {
                format!(": keep-alive{newline}{frame}")
            } else {
                frame
            }
        })
        .collect();
    if let Some(n) = cut_at.or(reply.stall_after) {
        frames.truncate(n);
    }
    let mut pieces: Vec<Result<Bytes, io::Error>> = match shape.tcp_split {
        Some(size) => frames
            .concat()
            .into_bytes()
            .chunks(size)
            .map(|piece| Ok(Bytes::copy_from_slice(piece)))
            .collect(),
        None => frames.into_iter().map(|f| Ok(Bytes::from(f))).collect(),
    };
    if cut_at.is_some() {
        pieces.push(Err(cut()));
    }
    if reply.open_end || reply.stall_after.is_some() {
        return body_response_open("text/event-stream", pieces, shape.chunk_delay);
    }
    body_response("text/event-stream", pieces, shape.chunk_delay)
}

/// The chunk bodies (without id/model boilerplate) of a streamed reply.
fn stream_events(reply: &Reply, include_usage: bool, shape: &WireShape) -> Vec<Value> {
    let interim = reply
        .interim_finish
        .clone()
        .map_or(Value::Null, Value::String);
    let delta = |delta: Value| json!({"choices": [{"index": 0, "delta": delta, "finish_reason": interim.clone()}]});
    let mut events = vec![delta(json!({"role": "assistant", "content": ""}))];
    if let Some(reasoning) = &reply.reasoning {
        events.push(delta(json!({"reasoning_content": reasoning})));
    }
    let chars: Vec<char> = reply.text.chars().collect();
    for piece in chars.chunks(shape.text_chunk_chars) {
        events.push(delta(json!({"content": piece.iter().collect::<String>()})));
    }
    let refusal: Vec<char> = reply.refusal.as_deref().unwrap_or("").chars().collect();
    for piece in refusal.chunks(shape.text_chunk_chars) {
        events.push(delta(json!({"refusal": piece.iter().collect::<String>()})));
    }
    let first = |i: usize, (id, name, _): &(String, String, String)| {
        let function = json!({"name": name, "arguments": ""});
        let mut call = json!({"index": i, "type": "function", "function": function});
        if !id.is_empty() {
            call["id"] = json!(id);
        }
        call
    };
    let fragment = |i: usize, piece: &str| json!({"index": i, "function": {"arguments": piece}});
    let (first, fragment) = (
        |i: usize, call: &(String, String, String)| without_index(first(i, call), shape),
        |i: usize, piece: &str| without_index(fragment(i, piece), shape),
    );
    let mut fragments: Vec<VecDeque<&str>> = reply
        .tool_calls
        .iter()
        .map(|(_, _, arguments)| split_utf8(arguments, shape.arg_chunk_bytes).into())
        .collect();
    if shape.interleave_tool_calls {
        let firsts: Vec<Value> = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| first(i, c))
            .collect();
        if !firsts.is_empty() {
            events.push(delta(json!({"tool_calls": firsts})));
        }
        while fragments.iter().any(|f| !f.is_empty()) {
            for (i, queue) in fragments.iter_mut().enumerate() {
                if let Some(piece) = queue.pop_front() {
                    events.push(delta(json!({"tool_calls": [fragment(i, piece)]})));
                }
            }
        }
    } else {
        for (i, (call, queue)) in reply.tool_calls.iter().zip(fragments).enumerate() {
            events.push(delta(json!({"tool_calls": [first(i, call)]})));
            for piece in queue {
                events.push(delta(json!({"tool_calls": [fragment(i, piece)]})));
            }
        }
    }
    events.push(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason()}]}),
    );
    if include_usage && let Some(usage) = reply.usage_json() {
        events.push(json!({"choices": [], "usage": usage}));
    }
    events
}

/// A tool-call piece without its `index` when the shape says so.
fn without_index(mut piece: Value, shape: &WireShape) -> Value {
    if shape.omit_tool_call_index
        && let Some(fields) = piece.as_object_mut()
    {
        fields.remove("index");
    }
    piece
}

/// Splits `text` into pieces of at least `size` bytes, on char boundaries.
fn split_utf8(text: &str, size: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = size.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, tail) = rest.split_at(end);
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

fn cut() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "openai_server: cut mid-body",
    )
}

/// A 200 response whose body is written piece by piece (an `Err` piece
/// aborts the connection).
fn body_response(
    content_type: &str,
    pieces: Vec<Result<Bytes, io::Error>>,
    delay: Duration,
) -> Response {
    body_response_endless(content_type, pieces.into_iter(), delay)
}

/// [`body_response`] whose body stays open after its pieces (it ends
/// when the client goes away).
fn body_response_open(
    content_type: &str,
    pieces: Vec<Result<Bytes, io::Error>>,
    delay: Duration,
) -> Response {
    use futures::StreamExt;
    let stream = pieces_stream(pieces.into_iter(), delay).chain(futures::stream::pending());
    stream_body(content_type, stream)
}

/// The pieces as a stream, each after `delay` (a yield when zero).
fn pieces_stream(
    pieces: impl Iterator<Item = Result<Bytes, io::Error>> + Send + 'static,
    delay: Duration,
) -> impl futures::Stream<Item = Result<Bytes, io::Error>> + Send + 'static {
    futures::stream::unfold(pieces, move |mut pieces| async move {
        let piece = pieces.next()?;
        if delay.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(delay).await;
        }
        Some((piece, pieces))
    })
}

/// [`body_response`] over any iterator of pieces, endless ones included
/// (the body ends when the client goes away).
pub(super) fn body_response_endless(
    content_type: &str,
    pieces: impl Iterator<Item = Result<Bytes, io::Error>> + Send + 'static,
    delay: Duration,
) -> Response {
    stream_body(content_type, pieces_stream(pieces, delay))
}

/// A 200 response with `stream` as its body.
fn stream_body(
    content_type: &str,
    stream: impl futures::Stream<Item = Result<Bytes, io::Error>> + Send + 'static,
) -> Response {
    let mut response = Response::new(Body::from_stream(stream));
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    response
}
