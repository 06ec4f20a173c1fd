//! A loopback server speaking the OpenAI chat-completions protocol, for tests.
//!
//! It answers `POST /v1/chat/completions` from a script: first any queued
//! failures ([`OpenAiServerBuilder::fail_next`]), then queued replies
//! ([`OpenAiServerBuilder::reply`]), then the responder closure, and when all
//! are exhausted an HTTP 400 saying so (not retried, so a test fails fast).
//! A strict server ([`OpenAiServerBuilder::strict`]) first refuses, as vLLM
//! and llama-server do, a conversation with malformed tool-call arguments
//! or two tool calls of one id, and, as OpenAI does, a tool call whose
//! name is not 1–64 ASCII letters, digits, `_` or `-`. [`Reply::endless`] bodies never end.
//! A request with `"stream": true` gets SSE, cut into small deltas the way
//! real providers do; otherwise one JSON completion. Every request is
//! recorded (method, path, headers, body) so tests assert on what the model
//! *received*.
//!
//! ```ignore
//! let server = OpenAiServer::builder()
//!     .reply(Reply::text("hello").usage(12, 3).cached(8))
//!     .fail_next(2, Reply::error(429, "slow down").retry_after("0"))
//!     .tcp_split(7)
//!     .start()
//!     .await;
//! // point the provider at server.base_url() ...
//! assert_eq!(server.requests().len(), 3);
//! server.shutdown().await;
//! ```
#![allow(dead_code)]

mod endless;
mod reply;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::Method;
use axum::http::Uri;
use axum::response::Response;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use endless::Endless;
pub use reply::Reply;
use reply::WireShape;

/// Builds a reply from the request body, for dynamic scripts.
pub type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// A request as the server received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path and query (`/v1/chat/completions`).
    pub path: String,
    /// Headers, names lowercase, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (a JSON string holding the raw text if it did not parse).
    pub body: Value,
}

impl RecordedRequest {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `messages` array.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }
}

/// The last message of a request body.
pub fn last_message(request: &Value) -> Option<&Value> {
    request["messages"].as_array()?.last()
}

/// The text of the last `user` message of a request body, without the
/// time lines at its start ([`without_time`]).
pub fn last_user_text(request: &Value) -> Option<&str> {
    request["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "user")?["content"]
        .as_str()
        .map(without_time)
}

/// A turn of a bot that answers each message with SendMessage "noted"
/// (call `call_1`), then ends with an empty answer after its result.
pub fn noted_turn(request: &Value) -> Reply {
    if last_message(request).is_some_and(|m| m["role"] == "tool") {
        return Reply::text("");
    }
    Reply::tool_call(
        "call_1",
        "SendMessage",
        serde_json::json!({ "text": "noted" }).to_string(),
    )
}

/// The text of each user-side message of a request body, without the
/// time lines at its start ([`without_time`]).
pub fn user_texts(request: &Value) -> Vec<&str> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .map(without_time)
        .collect()
}

/// How the line saying when an input arrived starts
/// (`prompts/time_note.md`); requests alternate roles, so it is joined to
/// its input by a blank line.
pub const TIME: &str = "[time: ";

/// How the runtime's note on a turn cancelled before it answered starts
/// (`prompts/cancelled_before.md`), joined to the next input alike.
pub const NOTE: &str = "[runtime note] ";

/// `text` without any of its time lines and runtime notes (each with the
/// blank line after it): the inputs of a message that joins several, as
/// they were said.
pub fn without_times(text: &str) -> String {
    text.split("\n\n")
        .filter(|p| !(p.starts_with(TIME) && p.ends_with(']') && !p.contains('\n')))
        .filter(|p| !p.starts_with(NOTE))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `text` without the time lines and runtime notes (and the blank line
/// after each) at its start: what was said.
pub fn without_time(text: &str) -> &str {
    let mut text = text;
    loop {
        if let Some(rest) = text.strip_prefix(TIME) {
            match rest.split_once("]\n\n") {
                Some((_, said)) => text = said,
                None => return "",
            }
        } else if text.starts_with(NOTE) {
            match text.split_once("\n\n") {
                Some((_, said)) => text = said,
                None => return "",
            }
        } else {
            return text;
        }
    }
}

/// The tool results since the newest user-side message of a request body:
/// how many steps the turn has taken since its input.
pub fn results_since_input(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .rev()
                .take_while(|m| m["role"] != "user")
                .filter(|m| m["role"] == "tool")
                .count()
        })
        .unwrap_or_default()
}

/// Configures and starts an [`OpenAiServer`].
pub struct OpenAiServerBuilder {
    script: Script,
    shape: WireShape,
}

#[derive(Default)]
struct Script {
    failures: VecDeque<Reply>,
    replies: VecDeque<Reply>,
    responder: Option<Responder>,
    requests: Vec<RecordedRequest>,
    strict: bool,
}

impl OpenAiServerBuilder {
    /// Queues a reply.
    pub fn reply(mut self, reply: Reply) -> Self {
        self.script.replies.push_back(reply);
        self
    }

    /// Queues several replies.
    pub fn replies(mut self, replies: impl IntoIterator<Item = Reply>) -> Self {
        self.script.replies.extend(replies);
        self
    }

    /// Answers the next `n` requests with `failure` (usually a
    /// [`Reply::error`]) before any queued reply.
    pub fn fail_next(mut self, n: usize, failure: Reply) -> Self {
        self.script.failures.extend(std::iter::repeat_n(failure, n));
        self
    }

    /// Answers with `responder` once the queued replies run out.
    pub fn responder(
        mut self,
        responder: impl Fn(&Value) -> Reply + Send + Sync + 'static,
    ) -> Self {
        self.script.responder = Some(Arc::new(responder));
        self
    }

    /// Refuses with HTTP 400 a request whose messages hold tool-call
    /// arguments that are not JSON, or two tool calls with one id.
    pub fn strict(mut self) -> Self {
        self.script.strict = true;
        self
    }

    /// Characters per streamed text delta (default 4).
    pub fn text_chunk_chars(mut self, n: usize) -> Self {
        self.shape.text_chunk_chars = n.max(1);
        self
    }

    /// Bytes per streamed tool-call `arguments` fragment, rounded up to a
    /// character boundary (default 5).
    pub fn arg_chunk_bytes(mut self, n: usize) -> Self {
        self.shape.arg_chunk_bytes = n.max(1);
        self
    }

    /// Streams the fragments of several tool calls round-robin, all their
    /// first deltas in one event (default: one call after the other).
    pub fn interleave_tool_calls(mut self) -> Self {
        self.shape.interleave_tool_calls = true;
        self
    }

    /// Leaves `index` out of streamed tool-call pieces, as some servers
    /// do (each call's first piece still carries its id; calls stream one
    /// after the other, so not with [`Self::interleave_tool_calls`]).
    pub fn omit_tool_call_index(mut self) -> Self {
        self.shape.omit_tool_call_index = true;
        self
    }

    /// Writes the SSE byte stream (and a [`Reply::raw`] body) in pieces of
    /// `n` bytes, ignoring event, line and UTF-8 boundaries (default: one
    /// write per event, a raw body whole).
    pub fn tcp_split(mut self, n: usize) -> Self {
        self.shape.tcp_split = Some(n.max(1));
        self
    }

    /// Ends SSE lines with `\r\n`.
    pub fn crlf(mut self) -> Self {
        self.shape.crlf = true;
        self
    }

    /// Sends `: keep-alive` comments between events.
    pub fn comments(mut self) -> Self {
        self.shape.comments = true;
        self
    }

    /// Waits this long before each write of a streamed body (slow mode).
    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        self.shape.chunk_delay = delay;
        self
    }

    /// Binds 127.0.0.1 on a free port and starts serving.
    pub async fn start(self) -> OpenAiServer {
        let shared = Arc::new(Shared {
            script: Mutex::new(self.script),
            shape: self.shape,
            received: Notify::new(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("openai_server: bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("openai_server: local_addr: {e}"));
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::warn!("openai_server: {e}");
            }
        });
        OpenAiServer {
            addr,
            shared,
            stop: Some(stop),
            task,
        }
    }
}

/// A running loopback OpenAI server; see the module docs.
pub struct OpenAiServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

struct Shared {
    script: Mutex<Script>,
    shape: WireShape,
    received: Notify,
}

impl Shared {
    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl OpenAiServer {
    /// A builder with no replies and the default wire shape.
    pub fn builder() -> OpenAiServerBuilder {
        OpenAiServerBuilder {
            script: Script::default(),
            shape: WireShape {
                text_chunk_chars: 4,
                arg_chunk_bytes: 5,
                interleave_tool_calls: false,
                omit_tool_call_index: false,
                tcp_split: None,
                crlf: false,
                comments: false,
                chunk_delay: Duration::ZERO,
            },
        }
    }

    /// `http://127.0.0.1:PORT/v1`, the provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.script().requests.clone()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        self.shared.script().requests.len()
    }

    /// Waits until at least `n` requests have been received.
    pub async fn wait_for_requests(&self, n: usize) {
        loop {
            let notified = self.shared.received.notified();
            if self.request_count() >= n {
                return;
            }
            notified.await;
        }
    }

    /// Waits until a request whose body `pick` accepts has come (30 s at
    /// most: then the test fails naming what came).
    pub async fn wait_until(&self, pick: impl Fn(&Value) -> bool) {
        let wait = async {
            loop {
                let notified = self.shared.received.notified();
                if self.requests().iter().any(|r| pick(&r.body)) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .is_err()
        {
            let seen: Vec<Option<String>> = self
                .requests()
                .iter()
                .map(|r| last_user_text(&r.body).map(str::to_owned))
                .collect();
            panic!("no such request in 30 s; the last user texts of those that came: {seen:?}");
        }
    }

    /// Queues a reply while running.
    pub fn push_reply(&self, reply: Reply) {
        self.shared.script().replies.push_back(reply);
    }

    /// Fails the next `n` requests with `failure` while running.
    pub fn fail_next(&self, n: usize, failure: Reply) {
        self.shared
            .script()
            .failures
            .extend(std::iter::repeat_n(failure, n));
    }

    /// Stops accepting connections and waits (briefly) for open ones.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_secs(2), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

impl Drop for OpenAiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body_json = serde_json::from_slice::<Value>(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let recorded = RecordedRequest {
        method: method.to_string(),
        path: uri.to_string(),
        headers: headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body_json.clone(),
    };
    let reply = {
        let mut script = shared.script();
        script.requests.push(recorded);
        next_reply(&mut script, &method, &uri, &body_json)
    };
    shared.received.notify_waiters();
    reply::respond(reply, &body_json, &shared.shape).await
}

fn next_reply(script: &mut Script, method: &Method, uri: &Uri, body: &Value) -> Reply {
    if method != Method::POST || uri.path() != "/v1/chat/completions" {
        return Reply::error(404, format!("openai_server: no route for {method} {uri}"));
    }
    if !body.is_object() {
        return Reply::error(400, "openai_server: the body is not a JSON object");
    }
    if script.strict
        && let Err(message) = strict_check(body)
    {
        return Reply::error(400, message);
    }
    if let Some(reply) = script.failures.pop_front() {
        return reply;
    }
    if let Some(reply) = script.replies.pop_front() {
        return reply;
    }
    match &script.responder {
        Some(responder) => responder(body),
        None => Reply::error(400, "openai_server: the script has no reply left"),
    }
}

/// What a strict server refuses in the conversation of a request.
fn strict_check(body: &Value) -> Result<(), String> {
    let mut ids = std::collections::HashSet::new();
    let calls = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten();
    for call in calls {
        let id = call["id"].as_str().unwrap_or("");
        if !ids.insert(id.to_owned()) {
            return Err(format!("duplicate tool call id {id:?}"));
        }
        // OpenAI's rule for a function's name (`^[a-zA-Z0-9_-]+$`, at
        // most 64): it refuses a conversation holding any other
        let name = call["function"]["name"].as_str().unwrap_or("");
        let valid = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(format!(
                "Invalid 'tool_calls[].function.name': string does not match pattern: {name:?}"
            ));
        }
        let arguments = call["function"]["arguments"].as_str().unwrap_or("");
        if let Err(e) = serde_json::from_str::<Value>(arguments) {
            return Err(format!("tool call {id:?}: Unterminated string ({e})"));
        }
    }
    Ok(())
}
