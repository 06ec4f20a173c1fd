//! OpenAI-compatible chat completions over HTTP: OpenAI, xAI, Ollama, vLLM,
//! llama.cpp server, OpenRouter.
//!
//! One call of [`Model::complete`] is one logical request, made in up to
//! `1 + max_retries` HTTP attempts:
//!
//! 1. POST `{base_url}/chat/completions`. A connection error, no response
//!    headers within `timeout`, HTTP 429 or 5xx is retried after a backoff
//!    (exponential from `backoff_base`, equal jitter, capped at
//!    `backoff_max`), or after the server's `Retry-After` / `retry-after-ms`
//!    when it sends one. A server that asks for more than `backoff_max` is
//!    not waited for: the call fails at once with
//!    [`ModelError::WaitTooLong`], which names the wait asked and is
//!    retryable, so the caller can schedule it later; nor is one whose
//!    wait would end past `call_timeout` ([`ModelError::WaitPastDeadline`]).
//!    `Retry-After` may be seconds or an HTTP date. Other statuses fail at
//!    once, with the start of the response body (the provider's message).
//! 2. Read the body as SSE (`text/event-stream`) or as one JSON completion,
//!    whichever the response's content type says, so a server that ignores
//!    `stream` still works. Text deltas go to the [`StreamSink`] as they
//!    arrive. While streaming, `timeout` bounds the silence between two
//!    pieces of the body rather than the whole stream, so a long generation
//!    is not cut off while it is still producing.
//! 3. A body that breaks off (network error, idle timeout, an `error` event,
//!    end of body) before the finish reason arrived, or an answer without
//!    any choice (streamed or not), is retried as a whole request, even after text reached the sink: that text is the model's
//!    working output, seen by nobody but the sink, which is told to start
//!    over ([`StreamSink::on_restart`]) before the deltas of the new attempt.
//!    Past the retries the call fails with [`ModelError::StreamBroken`].
//!    A break after the finish reason only loses the usage chunk and
//!    `[DONE]`; the response is returned (without usage). A choice whose
//!    finish reason never came is accepted at `[DONE]` (or at the end of
//!    a whole completion), its reason inferred. A complete
//!    answer that is a refusal or a content filter's stop fails at once
//!    with [`ModelError::Refused`] or [`ModelError::ContentFiltered`]
//!    (`wire.rs`).
//! 4. Two limits bound the whole call. `call_timeout` runs from the first
//!    request to the last byte, retries and their waits included, and
//!    nothing extends it (a server that only sends `: keep-alive` comments
//!    still meets it): past it the call fails with the retryable
//!    [`ModelError::TimedOut`]. `max_response_bytes` caps the answer (text
//!    plus tool-call arguments), a non-streamed body, and one streamed
//!    event still being read: past it the call fails at once with
//!    [`ModelError::TooLarge`], not retried (the same request would grow
//!    the same way).
//!
//! The cancellation token is watched while connecting, while reading and
//! while waiting to retry. Neither the API key nor request bodies are
//! logged; the key is marked sensitive in the header map and redacted from
//! `Debug`. Error texts, log lines and `Debug` show the base URL's userinfo
//! as `***`, and a credential echoed in an error body as `***` too
//! (`redact.rs`); reqwest still sends the userinfo as basic auth.

mod body;
mod encode;
mod endpoint;
mod redact;
mod retry;
mod sse;
mod surrogates;
mod wire;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use reqwest::Url;
use reqwest::header::CONTENT_TYPE;
use reqwest::header::HeaderMap;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::warn;

use super::Model;
use super::ModelError;
use super::ModelRequest;
use super::ModelResponse;
use super::StreamSink;
use body::error_chain;
use body::finished;
use body::forward;
use body::next_chunk;
use body::too_large;
use endpoint::chat_completions_url;
use endpoint::not_found;
use endpoint::request_headers;
use redact::Redactor;
use redact::shown_base_url;
use retry::Failure;
use retry::jitter;
use retry::retry_after;
use retry::retry_delay;
use sse::SseDecoder;
use wire::Assembler;
use wire::Completion;
use wire::StreamChunk;

/// How much of an error response body is kept.
const ERROR_BODY_LIMIT: usize = 4 * 1024;

/// How much of a body that is not a completion (or of such a streamed
/// event) an error quotes.
const QUOTE_LIMIT: usize = 200;

/// Settings of an [`OpenAiModel`]. Build with [`OpenAiOptions::new`] and
/// override fields with struct update syntax.
#[derive(Clone)]
pub struct OpenAiOptions {
    /// API root, e.g. `http://127.0.0.1:8000/v1` (a trailing `/` is fine).
    pub base_url: String,
    /// Model name sent with each request (`grok-4`, `gpt-4.1`, `qwen3:8b`).
    pub model: String,
    /// Bearer token, read from the environment by the caller. `None` or an
    /// empty string sends no `Authorization` header (Ollama, llama.cpp).
    pub api_key: Option<String>,
    /// Time allowed for the response headers, then for each silence between
    /// two pieces of a streamed body, or for a whole non-streamed body.
    /// Default 120 s.
    pub timeout: Duration,
    /// Time allowed for the whole call: every attempt, and the waits
    /// between them. Default 300 s.
    pub call_timeout: Duration,
    /// Most bytes of an answer (text and tool-call arguments), of a
    /// non-streamed body, and of one streamed event. Default 4 MiB.
    pub max_response_bytes: usize,
    /// Time allowed to open the TCP (and TLS) connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Attempts after the first one. Default 4.
    pub max_retries: u32,
    /// First backoff delay; it doubles per attempt. Default 500 ms.
    pub backoff_base: Duration,
    /// Longest backoff delay, and the longest `Retry-After` honoured.
    /// Default 30 s.
    pub backoff_max: Duration,
    /// Ask for a streamed (SSE) response. Default `true`.
    pub stream: bool,
    /// Extra headers sent with every request (`OpenAI-Organization`,
    /// `HTTP-Referer`); values are treated as secrets.
    pub extra_headers: Vec<(String, String)>,
    /// Sampling temperature; the server's default when `None`.
    pub temperature: Option<f32>,
}

impl OpenAiOptions {
    /// Default of [`OpenAiOptions::timeout`].
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
    /// Default of [`OpenAiOptions::call_timeout`].
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);
    /// Default of [`OpenAiOptions::max_response_bytes`].
    pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

    /// Options with the defaults above for `model` at `base_url`, no key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiOptions {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout: Self::DEFAULT_TIMEOUT,
            call_timeout: Self::DEFAULT_CALL_TIMEOUT,
            max_response_bytes: Self::DEFAULT_MAX_RESPONSE_BYTES,
            connect_timeout: Duration::from_secs(10),
            max_retries: 4,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            stream: true,
            extra_headers: Vec::new(),
            temperature: None,
        }
    }
}

impl OpenAiOptions {
    /// Every credential these options send, as the provider hides them in
    /// what it says: the key, the extra header values, and the base URL's
    /// password (as written and percent-decoded) with the basic-auth value
    /// made of its userinfo. Secrets shorter than 4 chars are left out.
    /// The host scrubs them from tool results (a bot may read the fleet
    /// file or the host's environment).
    pub fn credentials(&self) -> Vec<String> {
        redact::secrets_of(self, Url::parse(&self.base_url).ok().as_ref())
    }
}

/// Redacts the key and header values.
impl fmt::Debug for OpenAiOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("OpenAiOptions")
            .field("base_url", &shown_base_url(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("call_timeout", &self.call_timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("stream", &self.stream)
            .field("extra_headers", &header_names)
            .field("temperature", &self.temperature)
            .finish()
    }
}

/// A [`Model`] served by an OpenAI-compatible `/chat/completions` endpoint.
/// Cheap to share behind an `Arc`; connections are pooled.
pub struct OpenAiModel {
    options: OpenAiOptions,
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    /// Takes the credentials out of every text the model gives out.
    redactor: Redactor,
}

/// Without credentials: the URL's userinfo is hidden, the key redacted.
impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("options", &self.options)
            .field("url", &self.redactor.text(self.url.as_str()))
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// Checks the options and builds the HTTP client.
    ///
    /// Fails with [`ModelError::Config`] on a malformed URL or header.
    pub fn new(options: OpenAiOptions) -> Result<Self, ModelError> {
        let url = chat_completions_url(&options.base_url)?;
        let headers = request_headers(&options)?;
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .build()
            .map_err(|e| ModelError::Config(format!("HTTP client: {}", error_chain(&e))))?;
        let redactor = Redactor::new(&options, &url);
        Ok(OpenAiModel {
            options,
            url,
            headers,
            client,
            redactor,
        })
    }

    /// The base URL as it may be shown in logs and status: its userinfo,
    /// if any, as `***`.
    pub fn endpoint(&self) -> String {
        shown_base_url(&self.options.base_url)
    }

    /// The attempts of one call, counted in `attempts`, until one succeeds
    /// or a failure is not retried; the call ends at `deadline`.
    async fn attempts(
        &self,
        body: Bytes,
        redactor: &Redactor,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
        attempts: &mut u32,
        deadline: Instant,
    ) -> Result<ModelResponse, ModelError> {
        loop {
            if cancel.is_cancelled() {
                return Err(ModelError::Cancelled);
            }
            if *attempts > 0 {
                // what the broken attempt streamed is void
                sink.on_restart();
            }
            *attempts += 1;
            let failure = match self.attempt(body.clone(), redactor, sink, cancel).await {
                Ok(response) => return Ok(response),
                // before it is logged or becomes the call's error
                Err(failure) => redactor.failure(failure),
            };
            let delay = match retry_delay(&failure, *attempts, &self.options, jitter()) {
                Some(delay) => delay,
                None => return Err(failure.into_error(*attempts, self.options.backoff_max)),
            };
            // a wait the server asked for that outlasts the call: say so now
            // rather than time out at the deadline without saying why
            if failure.asked_to_wait() && Instant::now() + delay > deadline {
                return Err(failure.into_wait_past_deadline(
                    *attempts,
                    delay,
                    self.options.call_timeout,
                ));
            }
            warn!(
                model = %self.options.model,
                attempt = *attempts,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                failure = %failure,
                "model call failed; retrying"
            );
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One HTTP attempt; its texts are cleaned with `redactor`.
    async fn attempt(
        &self,
        body: Bytes,
        redactor: &Redactor,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, Failure> {
        let send = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(body)
            .send();
        let response = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Failure::Final(ModelError::Cancelled)),
            sent = tokio::time::timeout(self.options.timeout, send) => match sent {
                Err(_elapsed) => {
                    return Err(Failure::Unreachable(format!(
                        "no response within {:?}",
                        self.options.timeout
                    )));
                }
                Ok(Err(e)) => return Err(Failure::Unreachable(error_chain(&e))),
                Ok(Ok(response)) => response,
            },
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let mut body = self.error_body(response, redactor, cancel).await?;
            if status == reqwest::StatusCode::NOT_FOUND {
                body = not_found(&body, &redactor.text(self.url.as_str()), &self.options);
            }
            return Err(Failure::Status {
                status,
                body,
                retry_after,
            });
        }
        let is_sse = match response.headers().get(CONTENT_TYPE) {
            Some(value) => value.as_bytes().starts_with(b"text/event-stream"),
            None => self.options.stream,
        };
        if is_sse {
            self.read_stream(response, redactor, sink, cancel).await
        } else {
            self.read_completion(response, redactor, sink, cancel).await
        }
    }

    /// Reads an SSE body, forwarding text deltas to `sink`.
    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        redactor: &Redactor,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, Failure> {
        let limit = self.options.max_response_bytes;
        let mut decoder = SseDecoder::default();
        let mut assembler = Assembler::default();
        loop {
            let deadline = Instant::now() + self.options.timeout;
            let bytes = match next_chunk(&mut response, cancel, deadline).await {
                Ok(Some(bytes)) => bytes,
                // The finish reason came; at most the usage chunk and
                // `[DONE]` are missing.
                Ok(None) | Err(Failure::Broken { .. }) if assembler.has_finished() => {
                    return finished(assembler);
                }
                Ok(None) => {
                    return Err(Failure::Broken {
                        detail: "the stream ended early, before the finish reason and [DONE]"
                            .to_owned(),
                    });
                }
                Err(failure) => return Err(failure),
            };
            decoder.push(&bytes);
            while let Some(data) = decoder.next_event() {
                if data.trim_ascii() == b"[DONE]" {
                    return finished(assembler);
                }
                // a surrogate pair cut between two events: each half is
                // marked here and joined when the response is assembled
                let marked = surrogates::mark_lone(&data);
                let chunk: StreamChunk = serde_json::from_slice(&marked).map_err(|e| {
                    // redacted whole before it is cut (redact.rs)
                    let quoted = redactor.cut(&String::from_utf8_lossy(&data), QUOTE_LIMIT);
                    Failure::Final(ModelError::Protocol(redactor.text(&format!(
                        "stream event is not a completion chunk ({e}): {quoted}"
                    ))))
                })?;
                match assembler.apply_chunk(chunk) {
                    Ok(Some(delta)) => forward(sink, &delta, &assembler)?,
                    Ok(None) => {}
                    Err(message) => {
                        return Err(Failure::Broken {
                            detail: format!("the provider sent an error: {message}"),
                        });
                    }
                }
                if assembler.size() > limit {
                    return Err(too_large(limit));
                }
                if cancel.is_cancelled() {
                    return Err(Failure::Final(ModelError::Cancelled));
                }
            }
            // a line or an event that never ends
            if decoder.pending() > limit {
                return Err(too_large(limit));
            }
        }
    }

    /// Reads a whole JSON completion; its text goes to `sink` as one delta.
    async fn read_completion(
        &self,
        mut response: reqwest::Response,
        redactor: &Redactor,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, Failure> {
        let limit = self.options.max_response_bytes;
        let deadline = Instant::now() + self.options.timeout;
        let mut body = Vec::new();
        while let Some(bytes) = next_chunk(&mut response, cancel, deadline).await? {
            if body.len() + bytes.len() > limit {
                return Err(too_large(limit));
            }
            body.extend_from_slice(&bytes);
        }
        // a lone surrogate is marked, as in a stream event, and becomes
        // U+FFFD when the response is assembled (serde refuses it)
        let marked = surrogates::mark_lone(&body);
        let completion: Completion = serde_json::from_slice(&marked).map_err(|e| {
            // redacted whole before it is cut (redact.rs)
            let quoted = redactor.cut(&String::from_utf8_lossy(&body), QUOTE_LIMIT);
            Failure::Final(ModelError::Protocol(redactor.text(&format!(
                "response is not a chat completion ({e}): {quoted}"
            ))))
        })?;
        let mut assembler = Assembler::default();
        match assembler.apply_completion(completion) {
            Ok(Some(text)) => forward(sink, &text, &assembler)?,
            Ok(None) => {}
            Err(message) => {
                return Err(Failure::Broken {
                    detail: format!("the provider sent an error: {message}"),
                });
            }
        }
        finished(assembler)
    }

    /// The start of an error response's body (the provider's message),
    /// without the credentials: redacted before it is cut, as a cut
    /// through a credential echoed in it would leave a start of it that
    /// redacting no longer finds (redact.rs).
    async fn error_body(
        &self,
        mut response: reqwest::Response,
        redactor: &Redactor,
        cancel: &CancellationToken,
    ) -> Result<String, Failure> {
        let deadline = Instant::now() + self.options.timeout;
        // read on past the limit by the longest credential, so one that
        // crosses the limit is read whole and found
        let read_limit = ERROR_BODY_LIMIT + redactor.longest();
        let mut body = Vec::new();
        while body.len() < read_limit {
            match next_chunk(&mut response, cancel, deadline).await {
                Ok(Some(bytes)) => body.extend_from_slice(&bytes),
                Ok(None) | Err(Failure::Broken { .. }) => break,
                Err(failure) => return Err(failure),
            }
        }
        body.truncate(read_limit);
        let text = String::from_utf8_lossy(&body);
        Ok(redactor.cut(&text, ERROR_BODY_LIMIT).trim().to_owned())
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn describe(&self) -> String {
        format!("openai:{}", self.options.model)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        self.call(request, &self.redactor, sink, cancel).await
    }

    async fn complete_hiding(
        &self,
        request: &ModelRequest,
        hidden: &crate::safety::Redactor,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        if hidden.is_empty() {
            return self.complete(request, sink, cancel).await;
        }
        // the host's credentials are cleaned with the provider's own,
        // before any cut; what the error holds besides is scrubbed after
        let redactor = self.redactor.and(hidden);
        let result = self.call(request, &redactor, sink, cancel).await;
        result.map_err(|e| e.scrubbed(hidden))
    }
}

impl OpenAiModel {
    /// One call (its attempts), its texts cleaned with `redactor`.
    async fn call(
        &self,
        request: &ModelRequest,
        redactor: &Redactor,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let body = Bytes::from(encode::encode_request(
            &self.options.model,
            request,
            self.options.stream,
            self.options.temperature,
        )?);
        debug!(
            model = %self.options.model,
            bot = %request.bot,
            purpose = ?request.purpose,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "model request"
        );
        let mut attempts = 0;
        let limit = self.options.call_timeout;
        let deadline = Instant::now() + limit;
        let result = tokio::time::timeout_at(
            deadline,
            self.attempts(body, redactor, sink, cancel, &mut attempts, deadline),
        )
        .await;
        match result {
            Ok(result) => result,
            Err(_elapsed) => {
                warn!(
                    model = %self.options.model,
                    attempts,
                    limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                    "model call ran past its deadline"
                );
                Err(ModelError::TimedOut { limit, attempts })
            }
        }
    }
}

#[cfg(test)]
mod tests;
