//! Encoding a [`ModelRequest`] as a chat-completions request body.
//!
//! Earlier calls whose arguments are not a JSON object are sent back with
//! `{}` (strict servers refuse malformed arguments anywhere in a request).
//! An assistant message's reasoning goes back as `reasoning_content` (the
//! engine keeps it with the calls of its step, in later turns too), and
//! the limit on generated
//! tokens under the field the provider names ([`MaxTokensField`]).

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Serialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::super::ChatMessage;
use super::super::ModelError;
use super::super::ModelRequest;

/// Which request field carries [`ModelRequest::max_tokens`]
/// (`max_tokens_field` in fleet.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_tokens`: what most OpenAI-compatible servers take.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's reasoning models (o-series,
    /// the gpt-5 family) take; they refuse `max_tokens` as an
    /// unsupported parameter.
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The field's name on the wire (and in fleet.toml).
    pub fn name(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }

    /// The field named `name`, or an error naming the accepted values.
    pub fn parse(name: &str) -> Result<Self, String> {
        [MaxTokensField::MaxTokens, MaxTokensField::MaxCompletionTokens]
            .into_iter()
            .find(|field| field.name() == name)
            .ok_or_else(|| {
                format!(
                    "{name:?} is not a field for the token limit; use \"max_tokens\" (most servers) or \"max_completion_tokens\" (OpenAI's o-series and gpt-5 models)"
                )
            })
    }
}

/// How a request is encoded besides its model and messages.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fields {
    pub stream: bool,
    pub stream_usage: bool,
    pub temperature: Option<f32>,
    pub max_tokens_field: MaxTokensField,
    /// Send an empty `reasoning_content` with tool calls stored without
    /// reasoning: a thinking-mode server refused them without it.
    pub fill_reasoning: bool,
}

/// Encodes the request body, with `fields`: its token limit under `max_tokens_field`.
/// A streamed request asks for the usage chunk (`stream_options`) when
/// `stream_usage` says so (some servers and proxies refuse the field).
/// Field order is fixed, so two requests whose conversations share a
/// prefix share the bytes of that prefix.
pub(super) fn encode_request(
    model: &str,
    request: &ModelRequest,
    fields: &Fields,
) -> Result<Vec<u8>, ModelError> {
    let Fields {
        stream,
        stream_usage,
        temperature,
        max_tokens_field,
        fill_reasoning,
    } = *fields;
    let (max_tokens, max_completion_tokens) = match max_tokens_field {
        MaxTokensField::MaxTokens => (request.max_tokens, None),
        MaxTokensField::MaxCompletionTokens => (None, request.max_tokens),
    };
    let body = WireRequest {
        model,
        messages: request
            .messages
            .iter()
            .map(|m| WireMessage::of(m, fill_reasoning))
            .collect(),
        tools: request
            .tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect(),
        stream,
        stream_options: (stream && stream_usage).then_some(StreamOptions {
            include_usage: true,
        }),
        max_tokens,
        max_completion_tokens,
        temperature,
    };
    serde_json::to_vec(&body)
        .map_err(|e| ModelError::Protocol(format!("request did not encode: {e}")))
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` when the message is only tool calls; some servers reject
        /// an empty string there.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
        /// The thinking behind the calls, for thinking-mode servers
        /// (DeepSeek, Kimi) that refuse a tool-call message without it.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<&'a str>,
    },
    Tool {
        tool_call_id: Cow<'a, str>,
        content: &'a str,
    },
}

impl<'a> WireMessage<'a> {
    /// `message` on the wire; with `fill_reasoning`, tool calls stored
    /// without reasoning go with an empty one.
    fn of(message: &'a ChatMessage, fill_reasoning: bool) -> Self {
        match message {
            ChatMessage::System { content } => WireMessage::System { content },
            ChatMessage::User { content } => WireMessage::User { content },
            ChatMessage::Assistant {
                content,
                tool_calls,
                reasoning,
            } => WireMessage::Assistant {
                content: (!content.is_empty() || tool_calls.is_empty()).then_some(content),
                tool_calls: tool_calls
                    .iter()
                    .map(|call| WireToolCall {
                        id: sendable_id(&call.id),
                        kind: "function",
                        function: WireFunctionCall {
                            name: sendable_name(&call.name),
                            arguments: sendable_arguments(&call.arguments),
                        },
                    })
                    .collect(),
                reasoning_content: reasoning
                    .as_deref()
                    .or((fill_reasoning && !tool_calls.is_empty()).then_some("")),
            },
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => WireMessage::Tool {
                tool_call_id: sendable_id(tool_call_id),
                content,
            },
        }
    }
}

/// Longest function name OpenAI takes.
const MAX_NAME_LEN: usize = 64;

/// The name of an earlier call as sent back: as the model wrote it when
/// it fits OpenAI's pattern (`^[a-zA-Z0-9_-]{1,64}$`), else each other
/// character made `_` and cut to 64 (`functions.SendMessage` →
/// `functions_SendMessage`). OpenAI refuses a conversation holding any
/// other name with a 400 in every later request of the session (QA: a
/// model's dotted name stuck the bot's conversation for good). The call's
/// result already told the model there is no such tool; the transcript
/// keeps the name as written.
fn sendable_name(name: &str) -> Cow<'_, str> {
    let fits = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !name.is_empty() && name.len() <= MAX_NAME_LEN && name.chars().all(fits) {
        return Cow::Borrowed(name);
    }
    let made: String = name
        .chars()
        .map(|c| if fits(c) { c } else { '_' })
        .take(MAX_NAME_LEN)
        .collect();
    if made.is_empty() {
        Cow::Borrowed(super::wire::NAMELESS_CALL)
    } else {
        Cow::Owned(made)
    }
}

/// Longest tool-call id sent back as the model wrote it.
const MAX_ID_LEN: usize = 64;

/// The id of an earlier call as sent back, in its assistant message and
/// in the tool message answering it alike: as the model wrote it when it
/// is 1–64 printable ASCII characters (`call_abc`, `toolu_…`, Kimi's
/// `functions.Read:0`), else `call_` and a hash of it (QA: ids of 100,000
/// characters, or holding a newline, a NUL or U+202E, went back to the
/// server in every later request of the session). The same id always
/// maps to the same one, so each result still answers its call.
fn sendable_id(id: &str) -> Cow<'_, str> {
    if !id.is_empty() && id.len() <= MAX_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic()) {
        return Cow::Borrowed(id);
    }
    // FNV-1a, 64 bits: stable across runs and builds
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Cow::Owned(format!("call_{hash:016x}"))
}

/// The arguments of an earlier call as sent back: `{}` when they are not
/// a JSON object (cut off, malformed), which strict servers (vLLM,
/// llama-server) refuse with a 400 in every later request of the session.
/// The call's result already told the model its arguments were invalid.
fn sendable_arguments(arguments: &str) -> &str {
    match serde_json::from_str::<HashMap<String, IgnoredAny>>(arguments) {
        Ok(_) => arguments,
        Err(_) => "{}",
    }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: Cow<'a, str>,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
