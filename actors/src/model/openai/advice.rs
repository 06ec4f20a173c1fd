//! What a fleet provider's failure tells the operator: which provider
//! (`providers.NAME`), the URL it posted to, and the likely fix, named by
//! the fleet file's key (`api_key_env`, `timeout_s`, `stream_usage`, ...). With
//! several providers (a reviewer, fallbacks, made bots keeping theirs) a
//! bare "HTTP 401" does not say which endpoint refused what.
//!
//! Only a provider that knows its name in the fleet file
//! ([`OpenAiOptions::provider`]) wraps its errors
//! ([`ModelError::AtProvider`]); errors a caller acts on (cancelled,
//! aborted by the stream's watcher, refused by the model) are kept as
//! they are, and so are the texts that already name the URL and the fix
//! (a 404, an HTML page in place of an answer).

use std::time::Duration;

use super::super::ModelError;
use super::MaxTokensField;
use super::OpenAiOptions;

/// The start of an attempt's detail when no response headers came within
/// `timeout` (the server took the connection and said nothing).
pub(super) const NO_RESPONSE: &str = "no response within";

/// The detail of a body that went silent for `timeout` mid-answer.
pub(super) const STALLED: &str = "the response body stalled";

/// The detail of a whole (non-streamed) answer whose body had not ended
/// `timeout` after the request: it may have kept coming, only slowly
/// (QA: a body sent a little at a time was said to have gone silent).
pub(super) const WHOLE_TOO_SLOW: &str = "the whole answer took longer than timeout_s";

/// The start of the detail of an answer that carried an error.
pub(super) const SENT_AN_ERROR: &str = "the provider sent an error";

/// The start of the error of an answer sent compressed, which says what
/// to change itself.
pub(super) const COMPRESSED: &str = "the model server sent its answer compressed";

/// The start of the detail of a stream event that is no completion chunk
/// after some that were.
pub(super) const CORRUPT_EVENT: &str = "the server sent a corrupt or cut-off event";

/// The start of the detail of an answer the server stopped generating
/// (finish reason `abort`).
pub(super) const STOPPED: &str = "the server stopped generating the answer";

/// The detail of an answer whose finish reason `reason` (`error`,
/// `abort`) says the server did not finish it.
pub(super) fn failed_finish(reason: &str) -> String {
    match reason {
        "abort" => format!(
            "{STOPPED}: it ended it with finish_reason \"abort\" (the request was aborted on \
             the server), so what came is cut"
        ),
        _ => format!(
            "{SENT_AN_ERROR}: it ended the answer with finish_reason \"{reason}\" (generation \
             failed on the server), so what came is cut"
        ),
    }
}

/// `error` as the operator reads it: wrapped with the provider's name,
/// `url` (already without credentials) and the fix, when the options name
/// the provider; as it is otherwise. For a call allowed `retries`
/// retries: fewer than `max_retries` for a summariser's call, whose
/// failure then says so rather than point at a setting that does not
/// change it (QA: "failed on every attempt (providers.dyn.max_retries =
/// 4)" after 2 attempts).
pub(super) fn located_after(
    error: ModelError,
    url: &str,
    options: &OpenAiOptions,
    retries: u32,
) -> ModelError {
    let Some(provider) = options.provider.as_deref() else {
        return error;
    };
    let advice = match &error {
        // what the caller acts on, and what is wrapped already
        ModelError::Cancelled
        | ModelError::Aborted { .. }
        | ModelError::Refused { .. }
        | ModelError::ContentFiltered { .. }
        | ModelError::Scripted(_)
        | ModelError::AtProvider { .. } => return error,
        // these name the URL and the fix themselves
        ModelError::Http { status: 404, .. } | ModelError::Config(_) => {
            return wrap(error, provider, "", String::new());
        }
        ModelError::Http { status, body, .. } => {
            let tries = tries_said(provider, options, retries);
            http(*status, body, provider, options, &tries)
        }
        ModelError::Unreachable { detail, .. } => unreachable(detail, url, provider, options),
        ModelError::StreamBroken { detail, .. } => broken(detail, provider, options),
        ModelError::TimedOut { limit, .. } => format!(
            "the whole call, its retries and their waits included, may take \
             providers.{provider}.call_timeout_s ({} s): raise it for a slow model or server \
             (providers.{provider}.timeout_s, {} s, bounds each silence within it)",
            seconds(*limit),
            seconds(options.timeout)
        ),
        ModelError::TooLarge { .. } => format!(
            "raise providers.{provider}.max_response_bytes if answers this long are expected; \
             otherwise the model ran away"
        ),
        // the server's or its proxy's setting, not the URL (QA: the
        // base_url advice came first, the cause after it)
        ModelError::Protocol(detail) if detail.starts_with(COMPRESSED) => String::new(),
        ModelError::Protocol(_) => format!(
            "the answer is not an OpenAI chat completion: check that providers.{provider}.base_url \
             is the API root of an OpenAI-compatible server (it usually ends in /v1)"
        ),
        // these say what to change (compact_at_tokens, call_timeout_s,
        // the account's credit, the wait asked)
        ModelError::ContextOverflow { .. }
        | ModelError::QuotaExhausted { .. }
        | ModelError::WaitTooLong { .. }
        | ModelError::WaitPastDeadline { .. } => String::new(),
    };
    wrap(error, provider, url, advice)
}

fn wrap(error: ModelError, provider: &str, url: &str, advice: String) -> ModelError {
    ModelError::AtProvider {
        provider: provider.to_owned(),
        url: url.to_owned(),
        advice,
        error: Box::new(error),
    }
}

/// `d` in seconds as the fleet file writes it (`10`, `0.4`).
fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Whether the requests carry a key (`Authorization`).
fn sends_key(options: &OpenAiOptions) -> bool {
    options
        .api_key
        .as_deref()
        .is_some_and(|key| !key.trim().is_empty())
}

/// Whether `base_url` carries credentials (`https://user:pass@host/v1`):
/// the requests then carry them as basic authentication.
fn sends_url_credentials(options: &OpenAiOptions) -> bool {
    reqwest::Url::parse(&options.base_url)
        .is_ok_and(|url| !url.username().is_empty() || url.password().is_some())
}

/// The key's variable as the operator sets it: `$VAR
/// (providers.NAME.api_key_env)`.
fn key_variable(provider: &str, options: &OpenAiOptions) -> String {
    match options.api_key_env.as_deref() {
        Some(var) => format!("${var} (providers.{provider}.api_key_env)"),
        None => format!("the environment variable providers.{provider}.api_key_env names"),
    }
}

/// The fix an HTTP error status (and its body) points at.
/// How many attempts the call was allowed, as a failure on every one
/// says it: the setting, or why a summariser's call made fewer.
fn tries_said(provider: &str, options: &OpenAiOptions, retries: u32) -> String {
    if retries == options.max_retries {
        return format!("providers.{provider}.max_retries = {retries}");
    }
    let times = if retries == 1 { "once" } else { "fewer times" };
    format!(
        "{} attempts: a summariser's call is retried at most {times}, whatever \
         providers.{provider}.max_retries ({}) allows",
        retries + 1,
        options.max_retries
    )
}

fn http(status: u16, body: &str, provider: &str, options: &OpenAiOptions, tries: &str) -> String {
    let model = &options.model;
    match status {
        401 if sends_key(options) => format!(
            "the server refused the API key: check that {} holds a key this server accepts",
            key_variable(provider, options)
        ),
        // (QA: "sends none" while the URL's credentials went with every request)
        401 if sends_url_credentials(options) => format!(
            "the server refused the credentials in providers.{provider}.base_url \
             (user:password@…): check them, or, if the server takes a bearer key, set \
             providers.{provider}.api_key_env to the name of the environment variable that \
             holds it"
        ),
        401 => format!(
            "the server asks for an API key and providers.{provider} sends none: set \
             providers.{provider}.api_key_env to the name of the environment variable that holds \
             it"
        ),
        403 if sends_key(options) => format!(
            "the server refused the request made with the key in {}: check that the key may use \
             model {model:?} (its project, permissions or region), and the gateway headers in \
             providers.{provider}.headers / headers_env if the server needs any",
            key_variable(provider, options)
        ),
        403 => format!(
            "the server refused the request: it may need a key (providers.{provider}.api_key_env) \
             or a gateway header (providers.{provider}.headers_env)"
        ),
        400 | 422 => refused_request(body, provider, options),
        408 => format!(
            "the server, or a proxy in front of it, gave up waiting for the request on every \
             attempt ({tries}): check its load, then retry"
        ),
        413 => format!(
            "the request is larger than the server (or a proxy in front of it) takes: lower \
             providers.{provider}.compact_at_tokens, or raise the proxy's body limit"
        ),
        429 => format!(
            "the server rate-limited every attempt ({tries}): retry later, spread the bots \
             over more providers, or raise the key's limits with the provider"
        ),
        500..=599 => format!(
            "the server failed on every attempt ({tries}): check that it is up and healthy \
             (its logs, its load), then retry"
        ),
        _ => String::new(),
    }
}

/// The fix a 400 or 422 points at: a field botfleet sends that the
/// server does not take (`stream_options`: `stream_usage`, then
/// `stream`; `max_tokens`), tool calls it
/// cannot do, or else its message.
fn refused_request(body: &str, provider: &str, options: &OpenAiOptions) -> String {
    let said = body.to_lowercase();
    let model = &options.model;
    // the lesser change first: without the field the answers still
    // stream, only their token counts are botfleet's own
    if options.stream && options.stream_usage && said.contains("stream_options") {
        return format!(
            "the server does not take the stream_options field botfleet sends when streaming \
             (to ask for token counts): set providers.{provider}.stream_usage = false (botfleet \
             then counts the tokens itself); if the server still refuses, set \
             providers.{provider}.stream = false"
        );
    }
    // a model or server that answers whole only (QA: "Streaming is not
    // supported for this model", `"param": "stream"`, got the general
    // advice)
    // `stream` as a word of its own ("upstream error: tools are not
    // supported" is no refusal to stream, QA) or the field named
    let streaming = [
        "streaming",
        "stream is",
        "stream mode",
        "stream: ",
        "`stream`",
    ]
    .iter()
    .any(|w| said.contains(w))
        && !said.contains("upstream");
    let stream_refused = streaming
        && ["not support", "unsupported", "not available", "not allowed"]
            .iter()
            .any(|t| said.contains(t))
        || said.contains(r#""param":"stream""#)
        || said.contains(r#""param": "stream""#);
    if options.stream && stream_refused {
        return format!(
            "the server does not stream answers for model {model:?}: set \
             providers.{provider}.stream = false (botfleet then asks for whole answers)"
        );
    }
    if options.max_tokens_field == MaxTokensField::MaxTokens
        && said.contains("max_tokens")
        && (said.contains("max_completion_tokens") || said.contains("unsupported"))
    {
        return format!(
            "the model takes its token limit as max_completion_tokens: set \
             providers.{provider}.max_tokens_field = \"max_completion_tokens\""
        );
    }
    let tools = [
        "tool-call-parser",
        "tool choice",
        "support tools",
        "tools are not supported",
    ];
    if tools.iter().any(|t| said.contains(t)) {
        return format!(
            "the server does not take tool calls for model {model:?}, and bots need them: start \
             it with tool calling on (vLLM: --enable-auto-tool-choice --tool-call-parser NAME; \
             llama.cpp: --jinja), or set providers.{provider}.model to a model with tools"
        );
    }
    format!(
        "the server refused the request; its message says what it did not accept (check \
         providers.{provider}.model = {model:?}, and that the server speaks the OpenAI \
         chat-completions API)"
    )
}

/// The fix when no response came: a silent server (`timeout_s`) or none
/// at all (`base_url`, a proxy).
fn unreachable(detail: &str, url: &str, provider: &str, options: &OpenAiOptions) -> String {
    // TLS spoken to a plain-HTTP server fails after the connection was
    // made (rustls: "received corrupt message of type InvalidContentType"):
    // the server runs, so "check that it is running" misled (QA)
    let tls = url
        .get(.."https://".len())
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
    let connected = !detail.contains("tcp connect error") && !detail.contains("dns error");
    if tls && connected && !detail.starts_with(NO_RESPONSE) {
        // the base URL as configured (`url` is the endpoint under it),
        // its secrets hidden as everywhere it is shown
        let base = super::endpoint::shown_url(&super::redact::shown_base_url(&options.base_url));
        let rest = base.get("https://".len()..).unwrap_or_default();
        return format!(
            "the connection was made but the TLS handshake failed: if the server speaks plain \
             HTTP (as local servers such as vLLM, llama.cpp and Ollama do), set \
             providers.{provider}.base_url = \"http://{rest}\"; otherwise check its TLS \
             certificate and setup"
        );
    }
    if detail.starts_with(NO_RESPONSE) {
        return format!(
            "no answer came within providers.{provider}.timeout_s ({} s) on any attempt: a \
             slow server (a long prompt on a CPU), or one with stream = false, where timeout_s \
             bounds the whole answer, needs a higher timeout_s; one that does not answer at all, \
             a look at providers.{provider}.base_url",
            seconds(options.timeout)
        );
    }
    let proxy = ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"]
        .into_iter()
        .chain(["https_proxy", "http_proxy", "all_proxy"])
        .find(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()));
    let via = match proxy {
        Some(var) => format!(
            "; the host's {var} is set, so requests go through that proxy (NO_PROXY exempts \
             hosts)"
        ),
        None => String::new(),
    };
    format!(
        "check that the server is running and reachable at this address \
         (providers.{provider}.base_url){via}"
    )
}

/// The fix when the answer broke off on every attempt.
fn broken(detail: &str, provider: &str, options: &OpenAiOptions) -> String {
    if detail == WHOLE_TOO_SLOW {
        return format!(
            "the server's whole answer took longer than providers.{provider}.timeout_s ({} s) \
             on every attempt (with stream = false it bounds the whole answer, however steadily \
             it comes): raise timeout_s for a slow server, or set stream = true, where it \
             bounds only a silence",
            seconds(options.timeout)
        );
    }
    if detail == STALLED {
        return format!(
            "the server went silent for providers.{provider}.timeout_s ({} s) in the middle of \
             its answer on every attempt: raise timeout_s for a slow server (with stream = false \
             it bounds the whole answer)",
            seconds(options.timeout)
        );
    }
    if detail.starts_with(STOPPED) {
        return "the server aborted the answer before its end on every attempt (vLLM and SGLang \
                do when the engine restarts, shuts down, pauses or preempts a request): check \
                its logs"
            .to_owned();
    }
    if detail.starts_with(CORRUPT_EVENT) {
        return "the server's stream carried an event that is not a whole completion chunk on \
                every attempt (not JSON, or not the chunk's shape): check the server's logs and \
                anything between botfleet and it that may rewrite or cut the stream (a proxy)"
            .to_owned();
    }
    if detail.starts_with(SENT_AN_ERROR) {
        return "the server reported an error instead of finishing its answer, on every \
                attempt: check its logs"
            .to_owned();
    }
    "the answer broke off on every attempt: check the server's logs, and anything between \
     botfleet and it (a proxy, a load balancer's idle timeout)"
        .to_owned()
}

#[cfg(test)]
#[path = "advice_tests.rs"]
mod tests;
