//! What an error response says beyond its status, when that changes what
//! to do about it: a request longer than the model's context window (sent
//! again it fails again, the context must shrink), an account out of
//! credit (retrying only spends the retries). Both end the call at once
//! with their own [`ModelError`], which says what to change, whether the
//! server answered with an error status ([`rejection`]) or reported the
//! failure inside a 200 answer, an `error` event or line of its stream or
//! a whole answer that is `{"error": …}` ([`reported`]).
//!
//! Providers word these differently: OpenAI and OpenRouter send
//! `{"error": {"code": "context_length_exceeded", "message": ..}}`, vLLM
//! `{"message": "This model's maximum context length is N tokens..", ..}`
//! or `.. the maximum model length of N ..`, llama.cpp's server
//! `{"error": {"type": "exceed_context_size_error", "n_ctx": N, ..}}`,
//! xAI `maximum prompt length is N`, LM Studio `{"error": "Trying to keep
//! the first N tokens when context the overflows. However, the model is
//! loaded with context length of only N tokens, .."}`, SGLang `The input
//! (N tokens) is longer than the model's context length (N tokens).` or
//! `Requested token count exceeds the model's maximum context length of N
//! tokens. ..`, TGI a 422 `{"error": "Input validation error: `inputs`
//! tokens + `max_new_tokens` must be <= N. ..", "error_type":
//! "validation"}`, and Gemini's OpenAI endpoint a list of one error,
//! `[{"error": {"message": "The input token count (N) exceeds the maximum
//! number of tokens allowed (N).", ..}}]`; OpenAI's empty account is a 429
//! with `code: "insufficient_quota"`, OpenRouter's a 402.

use reqwest::StatusCode;
use serde_json::Value;

use super::super::ModelError;
use super::ERROR_BODY_LIMIT;
use super::OpenAiOptions;
use super::advice::SENT_AN_ERROR;
use super::redact::Redactor;
use super::retry::Failure;
use super::wire::error_message;

/// What the provider's error says, read off its JSON body (any of the
/// shapes above) or, when the body is not JSON, its text.
#[derive(Debug, Default, PartialEq)]
struct Said {
    /// `error.code` or `code`, when a string.
    code: String,
    /// `error.type` or `type`.
    kind: String,
    /// `error.message`, `message`, `error` as a string, else the body.
    message: String,
    /// llama.cpp's `n_ctx`.
    n_ctx: Option<u64>,
}

impl Said {
    fn of(body: &str) -> Said {
        let Ok(mut value) = serde_json::from_str::<Value>(body) else {
            return Said {
                message: body.to_owned(),
                ..Said::default()
            };
        };
        // Gemini's OpenAI endpoint answers a list of one error
        if let Value::Array(list) = &mut value
            && list.len() == 1
        {
            value = list.swap_remove(0);
        }
        let error = match value.get("error") {
            Some(inner @ Value::Object(_)) => inner,
            Some(Value::String(message)) => {
                return Said {
                    message: message.clone(),
                    ..Said::default()
                };
            }
            Some(_) | None => &value,
        };
        let text = |key: &str| error.get(key).and_then(Value::as_str).unwrap_or_default();
        Said {
            code: text("code").to_owned(),
            kind: text("type").to_owned(),
            message: match error.get("message").and_then(Value::as_str) {
                Some(message) => message.to_owned(),
                None => body.to_owned(),
            },
            n_ctx: error.get("n_ctx").and_then(Value::as_u64),
        }
    }
}

/// What the providers say of a request too long for the context window,
/// lowercase.
const OVERFLOW_WORDS: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "maximum model length",
    "max-model-len",
    "max_model_len",
    "maximum prompt length",
    "exceeds the available context size",
    "exceed_context_size",
    "context window",
    "prompt is too long",
    // LM Studio (its words, in this order), and its later wording
    "when context the overflows",
    "when context overflows",
    "tokens to keep from the initial prompt is greater than the context length",
    // SGLang (and Together, which serves with it)
    "is longer than the model's context length",
    // TGI (and the Hugging Face router in front of it)
    "tokens + `max_new_tokens` must be <=",
    "`inputs` must have less than",
    // Gemini
    "exceeds the maximum number of tokens allowed",
];

/// Phrases followed by the window's size in tokens, lowercase.
const WINDOW_BEFORE: &[&str] = &[
    "maximum context length is",
    "maximum model length of",
    "maximum model length is",
    "maximum prompt length is",
    "maximum context length of",
    "max-model-len",
    "max_model_len",
    "context length of only",
    "is longer than the model's context length",
    "tokens + `max_new_tokens` must be <=",
    "`inputs` must have less than",
    "maximum number of tokens allowed",
];

/// The error an HTTP error status ends the call with at once, when its
/// body says the request is too long or the account empty; `None` for
/// every other error (retried or reported as it is).
pub(super) fn rejection(
    status: StatusCode,
    body: &str,
    options: &OpenAiOptions,
) -> Option<ModelError> {
    judged(status, Some(status.as_u16()), body, options)
}

/// [`rejection`] of a failure judged as `status`; `shown` is the status
/// the error names (`None`: the provider sent it inside a 200 answer, and
/// a status it never sent is not named).
fn judged(
    status: StatusCode,
    shown: Option<u16>,
    body: &str,
    options: &OpenAiOptions,
) -> Option<ModelError> {
    let said = Said::of(body);
    let code = status.as_u16();
    let quota = said.code == "insufficient_quota" || said.kind == "insufficient_quota";
    if status == StatusCode::PAYMENT_REQUIRED || (status.is_client_error() && quota) {
        return Some(ModelError::QuotaExhausted {
            status: shown,
            body: super::redact::escape_controls(body),
        });
    }
    if !status.is_client_error() || status == StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let message = said.message.to_lowercase();
    let overflow = [said.code.as_str(), said.kind.as_str()]
        .iter()
        .any(|c| OVERFLOW_WORDS.contains(&c.to_lowercase().as_str()))
        || OVERFLOW_WORDS.iter().any(|w| message.contains(w));
    if !overflow {
        return None;
    }
    let window = said.n_ctx.or_else(|| window_in(&message));
    Some(ModelError::ContextOverflow {
        status: code,
        window,
        advice: advice(window, options),
        body: super::redact::escape_controls(body),
    })
}

/// The failure of an answer that carried the provider's `error` (a
/// stream's `error` event or `error:` line, a whole answer that is
/// `{"error": …}`) instead of finishing: one that says the request
/// outgrew the context window or the account is out of credit ends the
/// call at once with the error that says what to change, as under an
/// error status (llama.cpp's server reports a prompt longer than its
/// context so once its stream has begun; sent again it fails again, yet
/// it was retried, and the turn failed as an answer that "broke off");
/// any other is broken, and retried. Its texts are cleaned with
/// `redactor`.
pub(super) fn reported(error: &Value, redactor: &Redactor, options: &OpenAiOptions) -> Failure {
    let text = match error {
        Value::String(message) => message.clone(),
        other => other.to_string(),
    };
    // redacted whole before it is cut (redact.rs)
    let body = redactor.cut(&text, ERROR_BODY_LIMIT);
    if let Some(rejected) = reported_rejection(error, &body, options) {
        return Failure::Final(rejected);
    }
    // a rate limit reported inside a 200 answer (OpenRouter's
    // `{"error": {"code": 429, …}}`) is waited out as a 429 status is,
    // and named so: it was retried at once as an answer that broke off
    // (QA, 2026-12-05)
    if error.get("code").and_then(Value::as_u64) == Some(429) {
        return Failure::Status {
            status: StatusCode::TOO_MANY_REQUESTS,
            body: super::redact::escape_controls(&body),
            retry_after: None,
        };
    }
    Failure::Broken {
        detail: super::redact::escape_controls(&format!(
            "{}: {}",
            SENT_AN_ERROR,
            error_message(error)
        )),
    }
}

/// The error a failure reported inside an answer (its `error` value,
/// quoted as `body`, redacted) ends the call with at once, as
/// [`rejection`] for an error status. The status is the error's numeric
/// `code` (llama.cpp's 400, OpenRouter's 402) when it is an HTTP error
/// status, else 400: the answer's own 200 says nothing of the failure.
fn reported_rejection(error: &Value, body: &str, options: &OpenAiOptions) -> Option<ModelError> {
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .filter(|status| status.is_client_error() || status.is_server_error())
        .unwrap_or(StatusCode::BAD_REQUEST);
    // the answer came with 200: no error status to name
    judged(status, None, body, options)
}

/// The number after the first of [`WINDOW_BEFORE`] in `message` (digits,
/// maybe grouped with `,` or `_`, after spaces, `=` or `:`).
fn window_in(message: &str) -> Option<u64> {
    WINDOW_BEFORE.iter().find_map(|phrase| {
        let start = message.find(phrase)? + phrase.len();
        let rest = message[start..].trim_start_matches([' ', '=', ':', '(']);
        let digits: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '_')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok().filter(|n| *n > 0)
    })
}

/// What to change: the provider's `compact_at_tokens`, below the window,
/// so the context is compacted before it outgrows it. When it is below
/// the window already, what passed the window is what a request adds to
/// the compacted context (the system prompt, the tool specs, a running
/// turn's own inputs and steps): the advice names a lower value then,
/// never one above the setting (QA: it told a fleet at 6000 to set 6144).
fn advice(window: Option<u64>, options: &OpenAiOptions) -> String {
    let key = match options.provider.as_deref() {
        Some(name) => format!("providers.{name}.compact_at_tokens in the fleet file"),
        None => "compact_at_tokens of this bot's provider in the fleet file".to_owned(),
    };
    let setting = options
        .compact_at_tokens
        .unwrap_or(DEFAULT_COMPACT_AT_TOKENS);
    let now = match options.compact_at_tokens {
        Some(n) => format!("it is {n}"),
        None => format!("the default is {DEFAULT_COMPACT_AT_TOKENS}"),
    };
    match window {
        // three quarters leaves room for the answer and for the
        // difference between botfleet's token count and the model's;
        // compact_at_tokens is at least 1000
        Some(window) if setting >= window / 4 * 3 => format!(
            "the model's window is {window} tokens; set {key} below it (e.g. {}; {now}) so \
             the context is compacted before it grows past the window, then retry",
            (window / 4 * 3).max(1000)
        ),
        // already below, and at the least it may be: only another model
        // helps (it said "set it lower (e.g. 1000)" to a setting of 1000:
        // QA, 2026-12-05)
        Some(window) if setting <= MIN_COMPACT_AT_TOKENS => format!(
            "the model's window is {window} tokens and {key} is {setting}, the least it may be: \
             the system prompt, the tool specs and this turn's own messages took the rest; use a \
             model with a larger window, then retry"
        ),
        // already below: the rest of the request took the difference
        Some(window) => format!(
            "the model's window is {window} tokens and {key} is {setting}, below it: the \
             system prompt, the tool specs and this turn's own messages took the rest; set it \
             lower (e.g. {}) to leave them more room, or use a model with a larger window, \
             then retry",
            (setting / 3 * 2).max(MIN_COMPACT_AT_TOKENS)
        ),
        None => format!(
            "set {key} ({now}) below the model's context window so the context is compacted \
             before it grows past the window, then retry"
        ),
    }
}

/// `compact_at_tokens` when the fleet file does not set it.
const DEFAULT_COMPACT_AT_TOKENS: u64 = 100_000;

/// The least `compact_at_tokens` the fleet file takes.
const MIN_COMPACT_AT_TOKENS: u64 = 1000;

#[cfg(test)]
#[path = "rejection_tests.rs"]
mod tests;
