//! Request and response types shared by every provider.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

/// What a model call is for; scripted models and logs use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// A step of a bot's turn.
    #[default]
    Turn,
    /// Extracting memory facts after a turn.
    Extract,
    /// Summarising old entries (compaction).
    Compact,
    /// Reviewing an action before it runs.
    Review,
}

/// One message of the conversation sent to the model (OpenAI chat shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    /// Instructions.
    System {
        /// Text.
        content: String,
    },
    /// Input from the user side (users, other bots as quoted data, events).
    User {
        /// Text.
        content: String,
    },
    /// The model's own earlier output.
    Assistant {
        /// Text (may be empty).
        content: String,
        /// Tool calls it made.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The thinking that led to the calls (`reasoning_content`), sent
        /// back with them in every later request: thinking-mode servers
        /// (DeepSeek, Kimi) refuse a request whose earlier tool-call
        /// message lacks it; `Some("")` when the model
        /// sent an empty one (it goes back as sent). `None` otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    /// A tool's answer to one call.
    Tool {
        /// The call answered.
        tool_call_id: String,
        /// Text.
        content: String,
    },
}

impl ChatMessage {
    /// The text of the message that counts toward its tokens: its content,
    /// and for an assistant message its reasoning (sent back with its
    /// calls in every later request) and the names and arguments of its
    /// calls.
    pub fn token_text(&self) -> String {
        match self {
            ChatMessage::System { content }
            | ChatMessage::User { content }
            | ChatMessage::Tool { content, .. } => content.clone(),
            ChatMessage::Assistant {
                content,
                tool_calls,
                reasoning,
            } => assistant_token_text(
                reasoning.as_deref().unwrap_or_default(),
                content,
                tool_calls
                    .iter()
                    .map(|c| (c.name.as_str(), c.arguments.as_str())),
            ),
        }
    }
}

/// What an assistant message counts toward its tokens, from its parts:
/// its reasoning (it goes back with the calls as `reasoning_content`),
/// its text, and the name and arguments of each call. The one spelling of
/// it for the context ([`ChatMessage::token_text`]), a clipped message
/// (`engine/entry_clip.rs`) and the summariser's verbatim window
/// (`engine/compaction_bounds.rs`), so they count alike.
pub(crate) fn assistant_token_text<'a>(
    reasoning: &str,
    content: &str,
    calls: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let mut t = String::with_capacity(reasoning.len() + content.len() + 1);
    t.push_str(reasoning);
    if !t.is_empty() {
        t.push(' ');
    }
    t.push_str(content);
    for (name, arguments) in calls {
        t.push(' ');
        t.push_str(name);
        t.push(' ');
        t.push_str(arguments);
    }
    t
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name (`SendMessage`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: Value,
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id: the model's own, or a fresh one when it gave none or
    /// repeated one used before ([`ToolCall::fresh_id`]).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as raw JSON text.
    pub arguments: String,
}

impl ToolCall {
    /// A new random call id (`call_` and 32 hex digits), for a call the
    /// provider sent without one or with one already taken.
    pub fn fresh_id() -> String {
        format!("call_{}", uuid::Uuid::new_v4().simple())
    }
}

/// One request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ModelRequest {
    /// What the call is for.
    pub purpose: Purpose,
    /// The bot making the call (for logs and scripted rules).
    pub bot: String,
    /// Conversation, system prompt first.
    pub messages: Vec<ChatMessage>,
    /// Tools offered: shared with the registry, which builds each spec
    /// once (a turn cloned every schema's JSON tree per model call).
    pub tools: Vec<Arc<ToolSpec>>,
    /// Upper bound on generated tokens, if any.
    pub max_tokens: Option<u32>,
}

impl ModelRequest {
    /// The newest user-side message text, if any.
    pub fn last_user_text(&self) -> Option<&str> {
        self.messages.iter().rev().find_map(|m| match m {
            ChatMessage::User { content } => Some(content.as_str()),
            _ => None,
        })
    }
}

/// Token usage as the provider reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's cache (when reported).
    pub cached_prompt_tokens: u64,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished.
    #[default]
    Stop,
    /// It wants tool calls run.
    ToolCalls,
    /// It hit the token limit (`length`): the text or the last tool call's
    /// arguments are cut off. (A refusal and a content filter's stop are
    /// not finish reasons but errors, [`ModelError::Refused`] and
    /// [`ModelError::ContentFiltered`]: no caller can use such an answer.)
    Length,
    /// Something else the provider said.
    Other,
}

/// A finished completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ModelResponse {
    /// Text produced.
    pub text: String,
    /// The model's thinking (`reasoning_content` or `reasoning`), apart
    /// from the text: never shown to people nor streamed to the sink;
    /// counted with the text when the provider reports no usage. `Some("")`
    /// when the answer had the field, empty (it must go back so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Tool calls, complete and in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped.
    pub finish: FinishReason,
    /// Usage, when the provider reported it.
    pub usage: Option<Usage>,
}

/// What the stream watcher wants after a delta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkControl {
    /// Keep streaming.
    Continue,
    /// Stop the stream now (e.g. a loop was detected).
    Abort {
        /// Why.
        reason: String,
    },
}

/// Receives streamed text.
pub trait StreamSink: Send {
    /// Called with each text delta, in order.
    fn on_text(&mut self, delta: &str) -> SinkControl;

    /// Called with what a streamed answer made besides its text (tool
    /// calls' names and arguments, reasoning, a refusal), in order: never
    /// shown, but made, and counted if the call then fails.
    fn on_unshown(&mut self, _piece: &str) {}

    /// Called when the provider starts the call over (a stream broke off
    /// and the request is sent again): the text delivered so far is void,
    /// and the deltas that follow are the new answer from its start.
    fn on_restart(&mut self);
}

/// A sink that accepts everything.
impl StreamSink for () {
    fn on_text(&mut self, _delta: &str) -> SinkControl {
        SinkControl::Continue
    }

    fn on_restart(&mut self) {}
}

/// Model failures.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The endpoint could not be reached (after retries).
    #[error("model endpoint unreachable after {attempts} attempt(s): {detail}")]
    Unreachable {
        /// Attempts made.
        attempts: u32,
        /// Last error.
        detail: String,
    },
    /// The endpoint answered with an HTTP error (after retries for
    /// 408/429/5xx).
    #[error("model endpoint answered HTTP {status} after {attempts} attempt(s): {body}")]
    Http {
        /// Status code.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// Start of the response body.
        body: String,
    },
    /// The endpoint answered with 429 or 5xx and asked to be retried
    /// later than the provider waits (`backoff_max`).
    #[error(
        "model endpoint answered HTTP {status} after {attempts} attempt(s) and asked to wait {}, longer than the {} this provider waits between attempts; try again once the wait is over: {body}",
        wait_text(*wait),
        wait_text(*max_wait)
    )]
    WaitTooLong {
        /// Status code.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// What the server asked to wait (`Retry-After`, `retry-after-ms`).
        wait: Duration,
        /// The longest wait the provider honours.
        max_wait: Duration,
        /// Start of the response body.
        body: String,
    },
    /// The endpoint answered with 429 or 5xx and asked to be retried after
    /// a wait that would end past the call's deadline (`call_timeout_s`).
    #[error(
        "model endpoint answered HTTP {status}{} after {attempts} attempt(s) and asked to wait {}, past the {} a model call may take (call_timeout_s); try again once the wait is over, or raise call_timeout_s above it: {body}",
        if *status == 429 { " (rate limited)" } else { "" },
        wait_text(*wait),
        wait_text(*limit)
    )]
    WaitPastDeadline {
        /// Status code.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// What the server asked to wait (`Retry-After`, `retry-after-ms`).
        wait: Duration,
        /// The call's deadline (`call_timeout`).
        limit: Duration,
        /// Start of the response body.
        body: String,
    },
    /// The request was longer than the model's context window (OpenAI's
    /// `context_length_exceeded`, vLLM's `maximum context length`): sent
    /// again it fails again; the context must shrink first.
    #[error(
        "the conversation no longer fits the model's context window: {advice}. The provider said: {body}"
    )]
    ContextOverflow {
        /// Status code.
        status: u16,
        /// The window in tokens, when the provider named it.
        window: Option<u64>,
        /// What to change (the provider's `compact_at_tokens`).
        advice: String,
        /// Start of the response body.
        body: String,
    },
    /// The provider's account has no credit or quota left (OpenAI's 429
    /// `insufficient_quota`, a 402): no retry helps until someone adds some.
    #[error(
        "the provider's account is out of quota or credit ({}): add credit or raise the account's limits with the provider, then retry; retrying before that fails the same way. The provider said: {body}",
        quota_said_by(*status)
    )]
    QuotaExhausted {
        /// The error status; `None` when the provider said so inside an
        /// answer it sent with 200 (a stream's `error` event).
        status: Option<u16>,
        /// Start of the response body.
        body: String,
    },
    /// The call, with its retries, ran past its deadline (`call_timeout_s`).
    #[error(
        "the model call took longer than {} s ({attempts} attempt(s))",
        limit.as_secs_f64()
    )]
    TimedOut {
        /// The deadline.
        limit: Duration,
        /// Attempts started.
        attempts: u32,
    },
    /// The answer grew past the size cap (`max_response_bytes`).
    #[error("the model's answer passed {limit} bytes")]
    TooLarge {
        /// The cap in bytes.
        limit: usize,
    },
    /// The answer broke off (network error, silence past `timeout`, an
    /// `error` event, end of body before the finish reason), after retries.
    #[error("the model's answer broke off after {attempts} attempt(s): {detail}")]
    StreamBroken {
        /// Attempts made.
        attempts: u32,
        /// What happened to the last one.
        detail: String,
    },
    /// The model declined to answer (OpenAI's `refusal` field).
    #[error("the model refused to answer: {refusal}")]
    Refused {
        /// Its words.
        refusal: String,
        /// The tokens the answer cost, when the server reported them
        /// (counted like an answer's: the provider bills them).
        usage: Option<Usage>,
    },
    /// The provider's content filter stopped the answer (finish reason
    /// `content_filter`).
    #[error(
        "the provider's content filter stopped the model's answer (finish reason content_filter)"
    )]
    ContentFiltered {
        /// The tokens the answer cost, when the server reported them.
        usage: Option<Usage>,
    },
    /// The response did not follow the protocol.
    #[error("model response did not parse: {0}")]
    Protocol(String),
    /// The watcher aborted the stream.
    #[error("stream aborted: {reason}")]
    Aborted {
        /// Why.
        reason: String,
        /// Text received before the abort.
        partial: String,
    },
    /// The turn was cancelled.
    #[error("model call cancelled")]
    Cancelled,
    /// The provider is misconfigured (missing key, bad URL, bad script).
    #[error("model provider misconfigured: {0}")]
    Config(String),
    /// A scripted model was told to fail.
    #[error("scripted failure: {0}")]
    Scripted(String),
    /// A failure of a fleet's provider (`[providers.NAME]`) as the
    /// operator reads it: which provider, the URL it posted to and the
    /// likely fix, before the failure itself. Only a provider that knows
    /// its name in the fleet file wraps its errors so; what a caller acts
    /// on (cancelled, aborted, refused) is never wrapped.
    #[error("{}", at_provider_text(provider, url, advice, error))]
    AtProvider {
        /// The provider's name in the fleet file.
        provider: String,
        /// The URL posted to, without its userinfo; empty when the
        /// failure's own text names it.
        url: String,
        /// What to change or check, a sentence; empty when the failure's
        /// own text says it.
        advice: String,
        /// The failure.
        error: Box<ModelError>,
    },
}

/// The text of [`ModelError::AtProvider`]: `providers.NAME (POST URL):`,
/// the advice, then the failure.
fn at_provider_text(provider: &str, url: &str, advice: &str, error: &ModelError) -> String {
    let place = if url.is_empty() {
        format!("providers.{provider}")
    } else {
        format!("providers.{provider} (POST {url})")
    };
    if advice.is_empty() {
        format!("{place}: {error}")
    } else {
        format!("{place}: {advice}. Error: {error}")
    }
}

impl ModelError {
    /// The error with each of its texts scrubbed of `redactor`'s secrets.
    pub fn scrubbed(self, redactor: &crate::safety::Redactor) -> ModelError {
        if redactor.is_empty() {
            return self;
        }
        let clean = |text: String| match redactor.scrub(&text) {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(scrubbed) => scrubbed,
        };
        match self {
            ModelError::Unreachable { attempts, detail } => ModelError::Unreachable {
                attempts,
                detail: clean(detail),
            },
            ModelError::Http {
                status,
                attempts,
                body,
            } => ModelError::Http {
                status,
                attempts,
                body: clean(body),
            },
            ModelError::WaitTooLong {
                status,
                attempts,
                wait,
                max_wait,
                body,
            } => ModelError::WaitTooLong {
                status,
                attempts,
                wait,
                max_wait,
                body: clean(body),
            },
            ModelError::WaitPastDeadline {
                status,
                attempts,
                wait,
                limit,
                body,
            } => ModelError::WaitPastDeadline {
                status,
                attempts,
                wait,
                limit,
                body: clean(body),
            },
            ModelError::ContextOverflow {
                status,
                window,
                advice,
                body,
            } => ModelError::ContextOverflow {
                status,
                window,
                advice: clean(advice),
                body: clean(body),
            },
            ModelError::QuotaExhausted { status, body } => ModelError::QuotaExhausted {
                status,
                body: clean(body),
            },
            ModelError::StreamBroken { attempts, detail } => ModelError::StreamBroken {
                attempts,
                detail: clean(detail),
            },
            ModelError::Refused { refusal, usage } => ModelError::Refused {
                refusal: clean(refusal),
                usage,
            },
            ModelError::Protocol(text) => ModelError::Protocol(clean(text)),
            ModelError::Aborted { reason, partial } => ModelError::Aborted {
                reason: clean(reason),
                partial: clean(partial),
            },
            ModelError::Config(text) => ModelError::Config(clean(text)),
            ModelError::Scripted(text) => ModelError::Scripted(clean(text)),
            ModelError::AtProvider {
                provider,
                url,
                advice,
                error,
            } => ModelError::AtProvider {
                provider,
                url: clean(url),
                advice: clean(advice),
                error: Box::new(error.scrubbed(redactor)),
            },
            ModelError::TimedOut { .. }
            | ModelError::TooLarge { .. }
            | ModelError::ContentFiltered { .. }
            | ModelError::Cancelled => self,
        }
    }

    /// Whether the same request may succeed if tried again later.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Unreachable { .. } => true,
            ModelError::Http { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            ModelError::WaitTooLong { .. } => true,
            ModelError::WaitPastDeadline { .. } => true,
            // the same request is as long, the account as empty
            ModelError::ContextOverflow { .. } => false,
            ModelError::QuotaExhausted { .. } => false,
            ModelError::TimedOut { .. } => true,
            ModelError::TooLarge { .. } => false,
            ModelError::StreamBroken { .. } => true,
            // the same request would most likely be refused or filtered again
            ModelError::Refused { .. } => false,
            ModelError::ContentFiltered { .. } => false,
            ModelError::Protocol(_) => false,
            ModelError::Aborted { .. } => false,
            ModelError::Cancelled => false,
            ModelError::Config(_) => false,
            ModelError::Scripted(_) => false,
            ModelError::AtProvider { error, .. } => error.is_retryable(),
        }
    }
}

/// How [`ModelError::QuotaExhausted`] came: an error status, or inside an
/// answer whose status (200) said nothing of it.
fn quota_said_by(status: Option<u16>) -> String {
    match status {
        Some(status) => format!("HTTP {status}"),
        None => "said inside its answer".to_owned(),
    }
}

/// A wait as a person reads it: tenths of a second below 10 s ("0.5 s",
/// "3 s"), whole seconds rounded up above ("40 s", where an HTTP-date
/// `Retry-After` gave 39.792746228), with days beside a wait of more than
/// two ("2299840654 s, about 26618 days").
pub(crate) fn wait_text(wait: Duration) -> String {
    let secs = wait.as_secs_f64();
    if secs < 10.0 {
        let tenths = (secs * 10.0).ceil() / 10.0;
        return format!("{tenths} s");
    }
    // in integers: through f64, 2^63 - 1 s read as 2^63 (QA)
    let whole = wait
        .as_secs()
        .saturating_add(u64::from(wait.subsec_nanos() > 0));
    if whole > 2 * 86_400 {
        format!("{whole} s, about {} days", whole / 86_400)
    } else {
        format!("{whole} s")
    }
}
