//! The usage of one model call: as its provider reported it, or, when the
//! provider reported none (`usage` missing, `{}` or unusable), counted
//! with the provider's encoding — the request as sent and everything the
//! answer made: its reasoning, its text and its tool calls' names and
//! arguments. One rule for every kind of call (a turn's, a compaction's,
//! a fact extraction's, the reviewer's), so each counts toward its bot's
//! daily budget alike. (Before, each kind counted on its own: a
//! compaction from a server without usage counted no token at all, and
//! none of them counted a finished answer's reasoning.)

use botfleet_memory::Encoding;
use botfleet_memory::TokenUsage;

use super::ModelRequest;
use super::ModelResponse;

/// The tokens `response` made, by `encoding`: reasoning, text, and each
/// tool call's name and arguments.
pub(crate) fn made_tokens(response: &ModelResponse, encoding: Encoding) -> u64 {
    let mut made = u64::from(encoding.count(response.reasoning.as_deref().unwrap_or_default()));
    made += u64::from(encoding.count(&response.text));
    for call in &response.tool_calls {
        made += u64::from(encoding.count(&call.name));
        made += u64::from(encoding.count(&call.arguments));
    }
    made
}

/// The tokens `request` sent, by `encoding`, each message counted as a
/// chat message.
pub(crate) fn sent_tokens(request: &ModelRequest, encoding: Encoding) -> u64 {
    request
        .messages
        .iter()
        .map(|m| u64::from(encoding.count_message(&m.token_text())))
        .sum()
}

/// The usage of one call of `request` answered by `response`.
pub(crate) fn call_usage(
    request: &ModelRequest,
    response: &ModelResponse,
    encoding: Encoding,
) -> TokenUsage {
    let mut usage = TokenUsage {
        calls: 1,
        ..TokenUsage::default()
    };
    match response.usage {
        Some(u) => {
            usage.prompt_tokens = u.prompt_tokens;
            usage.cached_tokens = u.cached_prompt_tokens;
            usage.completion_tokens = u.completion_tokens;
        }
        None => {
            usage.prompt_tokens = sent_tokens(request, encoding);
            usage.completion_tokens = made_tokens(response, encoding);
        }
    }
    usage
}
