//! OpenAI-compatible chat completions over HTTP: OpenAI, xAI, Ollama, vLLM,
//! llama.cpp server, OpenRouter.
//!
//! One call of [`Model::complete`] is one logical request, made in up to
//! `1 + max_retries` HTTP attempts:
//!
//! 1. POST `{base_url}/chat/completions` (the segments go at the end of the
//!    base URL's path, before a query it has: Azure's `?api-version=`). A
//!    connection error, no response headers within `timeout`, HTTP 408,
//!    429 or 5xx is retried after a backoff
//!    (exponential from `backoff_base`, equal jitter, capped at
//!    `backoff_max`), or after the server's `Retry-After` / `retry-after-ms`
//!    when it sends one. A server that asks for more than `backoff_max` is
//!    not waited for: the call fails at once with
//!    [`ModelError::WaitTooLong`], which names the wait asked and is
//!    retryable, so the caller can schedule it later; nor is one whose
//!    wait would end past `call_timeout` ([`ModelError::WaitPastDeadline`]).
//!    `Retry-After` may be seconds or an HTTP date. A wait the server asked
//!    for holds every call of the provider until it ends, not only the call
//!    it answered (the bots sharing an endpoint do not each meet the same
//!    429), unless it ends past a call's `call_timeout`. A 429 without one is
//!    waited out longer (`rate_limit_backoff_base`, 2 s, doubling, plus up
//!    to half again), and given up at once when that wait would end past
//!    `call_timeout`. Other statuses fail at once, with the start of the
//!    response body (the provider's message; an HTML error page, a
//!    proxy's or a CDN's, by its title or its text: `endpoint.rs`,
//!    `html_error_page`). So do, whatever their status
//!    says of retrying, a request longer than the model's context window
//!    ([`ModelError::ContextOverflow`], naming `compact_at_tokens`) and an
//!    account out of credit ([`ModelError::QuotaExhausted`]), read off the
//!    body (`rejection.rs`).
//! 2. Read the body as SSE or as one JSON completion, whichever it is, so
//!    a server that ignores `stream` still works. Its first bytes tell,
//!    not its content type alone: a body that starts as SSE does (`data:`,
//!    a `:` comment) is a stream under any label (some servers label
//!    theirs `application/json` or `text/plain`), and one that starts
//!    with `{` is a whole completion even labelled `text/event-stream`
//!    (a `data: [DONE]` after it is dropped) (`body.rs`). An HTML page in
//!    its place is a wrong `base_url` ([`ModelError::Config`], naming the
//!    URL). Text deltas go to the [`StreamSink`] as they
//!    arrive; a sink's abort (the loop detector) ends a stream at once,
//!    which saves the tokens still to come, but only cuts the text of a
//!    whole answer, which is used with its tool calls (`body.rs`,
//!    `forward_whole`). While streaming, `timeout` bounds the silence between two
//!    pieces of the body rather than the whole stream, so a long generation
//!    is not cut off while it is still producing.
//! 3. A body that breaks off (network error, idle timeout, an `error` event,
//!    end of body; for a whole completion, a body empty or ending before
//!    its JSON does) before the finish reason arrived, or an answer without
//!    any choice (streamed or not), is retried as a whole request, even after text reached the sink: that text is the model's
//!    working output, seen by nobody but the sink, which is told to start
//!    over ([`StreamSink::on_restart`]) before the deltas of the new attempt.
//!    Past the retries the call fails with [`ModelError::StreamBroken`].
//!    A break after the finish reason only loses the usage chunk and
//!    `[DONE]` (not after an answer that went on past a finish reason: a
//!    finish reason on every chunk; a `""` is no finish reason, as Ollama,
//!    SGLang and LocalAI send on every chunk); the response is returned
//!    (without usage), as it is when
//!    the body stays open after the finish reason: at once after the
//!    usage chunk, else after 5 s of silence ([`AFTER_FINISH`]), not
//!    `timeout`. A choice whose finish reason is `error` or `abort` (a
//!    generation the server stopped: vLLM, SGLang) is a cut answer,
//!    retried as a broken one (`wire.rs`). A choice whose
//!    finish reason never came is accepted at `[DONE]` (or at the end of
//!    a whole completion), its reason inferred. A body that ends only by
//!    the connection's close (HTTP/1.1 with neither a length nor chunks)
//!    may be cut there, so its end counts as a break does, not as the
//!    server's end: a stream with a finish reason on every chunk (or on
//!    its only chunk) and no `[DONE]` is retried. A complete
//!    answer that is a refusal or a content filter's stop fails at once
//!    with [`ModelError::Refused`] or [`ModelError::ContentFiltered`]
//!    (`wire.rs`). An error the provider reports inside an answer (an
//!    `error` event or `error:` line, a whole answer that is `{"error":
//!    …}`) that says the request outgrew the context window or the
//!    account is empty fails at once, as under an error status
//!    (`rejection.rs`, `reported`): llama.cpp's server reports
//!    a prompt longer than its context so once its stream has begun.
//! 4. Two limits bound the whole call. `call_timeout` runs from the first
//!    request to the last byte, retries and their waits included, and
//!    nothing extends it (a server that only sends `: keep-alive` comments
//!    still meets it): past it the call fails with the retryable
//!    [`ModelError::TimedOut`] while an attempt runs; a failed attempt
//!    whose retry would start past it fails the call at once with its own
//!    error, which names the cause. `max_response_bytes` caps the answer (text
//!    plus tool-call arguments), a non-streamed body, and one streamed
//!    event still being read: past it the call fails at once with
//!    [`ModelError::TooLarge`], not retried (the same request would grow
//!    the same way).
//!
//! 5. A provider that knows its name in the fleet file (`provider`) ends a
//!    failed call with [`ModelError::AtProvider`]: the provider, the URL
//!    and the likely fix named by the fleet file's key, before the failure
//!    (`advice.rs`); its retry WARN names the provider too.
//!
//! Every request says `User-Agent: botfleet/VERSION` (an extra header may
//! replace it) and sends the key without the whitespace around it.
//! The cancellation token is watched while connecting, while reading and
//! while waiting to retry. Neither the API key nor request bodies are
//! logged; the key is marked sensitive in the header map and redacted from
//! `Debug`. Error texts, log lines and `Debug` show the base URL's userinfo
//! as `***`, and a credential echoed in an error body as `***` too
//! (`redact.rs`); reqwest still sends the userinfo as basic auth.

mod advice;
mod body;
mod encode;
mod endpoint;
mod options;
mod redact;
mod rejection;
mod retry;
mod sse;
mod surrogates;
mod wire;

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use reqwest::Url;
use reqwest::header::CONTENT_TYPE;
use reqwest::header::HeaderMap;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::warn;

use super::ChatMessage;
use super::Model;
use super::ModelError;
use super::ModelRequest;
use super::ModelResponse;
use super::Purpose;
use super::StreamSink;
use body::body_start;
use body::error_chain;
use body::finished;
use body::forward;
use body::forward_whole;
use body::framed_body;
use body::looks_like_sse;
use body::next_chunk;
use body::too_large;
use body::whole_json;
use body::without_done;
use endpoint::chat_completions_url;
use endpoint::compressed;
use endpoint::html_error_page;
use endpoint::html_page;
use endpoint::not_found;
use endpoint::redirected;
use endpoint::request_headers;
use endpoint::shown_url;
use redact::Redactor;
use redact::shown_base_url;
use rejection::rejection;
use rejection::reported;
use retry::Failure;
use retry::jitter;
use retry::retry_after;
use retry::retry_delay;
use sse::SseDecoder;
use wire::Assembler;
use wire::Completion;
use wire::StreamChunk;

pub use encode::MaxTokensField;
pub use options::OpenAiOptions;

/// What is wrong with `base_url` as a provider's API root (not a URL, not
/// http(s), a fragment), as the provider would refuse it at start; for a
/// config check that names the file and key (`None`: none of that).
pub fn base_url_problem(base_url: &str) -> Option<String> {
    chat_completions_url(base_url).err().map(|e| match e {
        ModelError::Config(text) => text,
        other => other.to_string(),
    })
}

/// How long a stream is waited for once a choice's finish reason came
/// (at most `timeout`): for the usage chunk and `[DONE]`, which servers
/// send at once; and the end of a whole answer's body once its JSON is
/// whole (`read_completion`). A server that keeps the body open after
/// the finish reason without them held every step for `timeout` (120 s);
/// past this the answer is taken as it is, without usage (the engine
/// counts its tokens). A gateway that puts a finish reason on every chunk (some in
/// front of Gemini) is still generating after it: once its answer went
/// on after a finish reason, `timeout` applies again (`wire.rs`,
/// `only_the_end_to_come`).
const AFTER_FINISH: std::time::Duration = std::time::Duration::from_secs(5);

/// Most retries of a summariser's call (`Purpose::Compact`), whatever
/// `max_retries` allows.
const COMPACT_RETRIES: u32 = 1;

/// What bounds the attempts of one call: the credentials its texts are
/// cleaned of, how many retries it may make, its cancel and its deadline.
#[derive(Clone, Copy)]
struct CallBounds<'a> {
    redactor: &'a Redactor,
    retries: u32,
    cancel: &'a CancellationToken,
    deadline: Instant,
}

/// How much of an error response body is kept.
const ERROR_BODY_LIMIT: usize = 4 * 1024;

/// How much of a body that is not a completion (or of such a streamed
/// event) an error quotes.
const QUOTE_LIMIT: usize = 200;

/// A [`Model`] served by an OpenAI-compatible `/chat/completions` endpoint.
/// Cheap to share behind an `Arc`; connections are pooled.
pub struct OpenAiModel {
    options: OpenAiOptions,
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    /// Takes the credentials out of every text the model gives out.
    redactor: Redactor,
    /// The server refused tool calls stored without their reasoning (a
    /// thinking-mode server: DeepSeek, Kimi): from then on every request
    /// sends an empty `reasoning_content` with them, rather than being
    /// refused and sent again at each step (QA, 2026-12-05).
    fills_reasoning: AtomicBool,
    /// Until when the server asked to be left alone: the end of the last
    /// `Retry-After` (within `backoff_max`) it sent to any call. Every call
    /// of this provider — the bots that share it — waits it out before
    /// its next attempt, where before only the call told waited, and the
    /// fleet's other turns met the same 429 each in turn (QA leftover,
    /// 2026-12-05).
    held_until: Mutex<Option<Instant>>,
}

/// Without credentials: the URL's userinfo is hidden, the key redacted.
impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("options", &self.options)
            .field("url", &self.shown_url(&self.redactor))
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
            // a redirect is reported, not followed ([`endpoint::redirected`])
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ModelError::Config(format!("HTTP client: {}", error_chain(&e))))?;
        let redactor = Redactor::new(&options, &url);
        Ok(OpenAiModel {
            options,
            url,
            headers,
            client,
            redactor,
            fills_reasoning: AtomicBool::new(false),
            held_until: Mutex::new(None),
        })
    }

    /// The base URL as it may be shown in logs and status: its userinfo,
    /// if any, and a credential in its query as `***`.
    pub fn endpoint(&self) -> String {
        shown_url(&shown_base_url(&self.options.base_url))
    }

    /// The URL requests go to as texts show it: without its userinfo and
    /// without `redactor`'s secrets, a credential in its query as `***`.
    fn shown_url(&self, redactor: &Redactor) -> String {
        shown_url(&redactor.text(self.url.as_str()))
    }

    /// The attempts of one call, counted in `attempts`, until one succeeds
    /// or a failure is not retried; the call ends at `deadline`.
    async fn attempts(
        &self,
        body: Bytes,
        call: &CallBounds<'_>,
        sink: &mut dyn StreamSink,
        attempts: &mut u32,
    ) -> Result<ModelResponse, ModelError> {
        let CallBounds {
            redactor,
            retries,
            cancel,
            deadline,
        } = *call;
        loop {
            if cancel.is_cancelled() {
                return Err(ModelError::Cancelled);
            }
            if *attempts > 0 {
                // what the broken attempt streamed is void
                sink.on_restart();
            }
            self.hold(cancel, deadline).await?;
            *attempts += 1;
            let failure = match self.attempt(body.clone(), redactor, sink, cancel).await {
                Ok(response) => return Ok(response),
                // before it is logged or becomes the call's error
                Err(failure) => redactor.failure(failure),
            };
            if let Some(wait) = failure.asked_wait()
                && wait <= self.options.backoff_max
            {
                // every call of this provider waits it out, not only this one
                let until = Instant::now() + wait;
                let mut held = self.held_until.lock();
                *held = Some(held.map_or(until, |h| h.max(until)));
            }
            let delay = match retry_delay(&failure, *attempts, &self.options, jitter()) {
                Some(delay) if *attempts <= retries => delay,
                _ => return Err(failure.into_error(*attempts, self.options.backoff_max)),
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
            // nor our own backoff: the failure now (a 429, a refused
            // connection), rather than a time-out at the deadline that
            // does not say why (QA: "took longer than 12 s (5 attempts)"
            // for a closed port, its cause and base_url advice lost)
            if Instant::now() + delay > deadline {
                return Err(failure.into_error(*attempts, self.options.backoff_max));
            }
            warn!(
                provider = self.options.provider.as_deref().unwrap_or(""),
                model = %self.options.model,
                url = %self.shown_url(redactor),
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

    /// Waits until the end of a wait the server asked of an earlier
    /// attempt of any call ([`Self::held_until`]). A wait that would end
    /// past this call's `deadline` is not waited: the attempt goes now,
    /// and the server's answer says what it wants, which fails the call
    /// at once naming the wait (rather than at its deadline, naming none).
    async fn hold(&self, cancel: &CancellationToken, deadline: Instant) -> Result<(), ModelError> {
        let Some(until) = *self.held_until.lock() else {
            return Ok(());
        };
        let now = Instant::now();
        if until <= now || until > deadline {
            return Ok(());
        }
        debug!(
            model = %self.options.model,
            wait_ms = u64::try_from((until - now).as_millis()).unwrap_or(u64::MAX),
            "waiting out the Retry-After the server sent to an earlier call"
        );
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ModelError::Cancelled),
            () = tokio::time::sleep_until(until) => Ok(()),
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
        let mut response = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Failure::Final(ModelError::Cancelled)),
            sent = tokio::time::timeout(self.options.timeout, send) => match sent {
                Err(_elapsed) => {
                    return Err(Failure::Unreachable(format!(
                        "{} {:?}",
                        advice::NO_RESPONSE,
                        self.options.timeout
                    )));
                }
                Ok(Err(e)) => return Err(Failure::Unreachable(error_chain(&e))),
                Ok(Ok(response)) => response,
            },
        };
        let status = response.status();
        // the redirects (a 300 or a 304 is no answer to follow: reported
        // as the error status it is, below)
        if matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|to| self.url.join(to).ok())
                .map(|to| redactor.text(to.as_str()));
            return Err(Failure::Status {
                status,
                body: redirected(to.as_deref(), &self.shown_url(redactor)),
                retry_after: None,
            });
        }
        let encoding = compressed(response.headers()).map(|e| redactor.text(&e));
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            if let Some(encoding) = encoding {
                // its bytes say nothing readable: not quoted
                return Err(Failure::Status {
                    status,
                    body: format!(
                        "(a body sent compressed, Content-Encoding: {encoding}, not shown: the \
                         request asked for none)"
                    ),
                    retry_after,
                });
            }
            let mut body = self.error_body(response, redactor, cancel).await?;
            // a request too long for the model, an account out of credit:
            // no retry helps, the error says what does
            if let Some(error) = rejection(status, &body, &self.options) {
                return Err(Failure::Final(error));
            }
            // a proxy's or CDN's error page: what it says, not its markup
            if let Some(page) = html_error_page(&body) {
                // its text joined across tags is redacted again
                body = redactor.text(&page);
            }
            if status == reqwest::StatusCode::NOT_FOUND {
                body = not_found(&body, &self.shown_url(redactor), &self.options);
            }
            if body.is_empty() {
                // the error ends "…attempt(s): " otherwise (QA)
                body = "(an empty body)".to_owned();
            }
            let body = redact::escape_controls(&body);
            return Err(Failure::Status {
                status,
                body,
                retry_after,
            });
        }
        if let Some(encoding) = encoding {
            return Err(Failure::Final(ModelError::Protocol(format!(
                "{} (Content-Encoding: {encoding}) \
                 though the request asked for none (Accept-Encoding: identity), and botfleet \
                 decompresses nothing: have the server, or the proxy in front of it, send \
                 answers uncompressed",
                advice::COMPRESSED
            ))));
        }
        let labelled_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
        // the label is not trusted alone, the body's first bytes tell: a
        // stream labelled `application/json` or `text/plain` is read as
        // the stream it is (it failed as "not a chat completion"), and a
        // whole completion labelled an event stream (with `data: [DONE]`
        // after it, or not) as the completion it is (it failed, after
        // the retries, as a stream that "ended early")
        let start = body_start(
            &mut response,
            cancel,
            self.options.timeout,
            self.options.max_response_bytes,
        )
        .await?;
        let whole = start.trim_ascii_start().starts_with(b"{");
        if looks_like_sse(&start) || (labelled_sse && !whole) {
            self.read_stream(response, start, redactor, sink, cancel)
                .await
        } else {
            self.read_completion(response, start, redactor, sink, cancel)
                .await
        }
    }

    /// Reads an SSE body whose first bytes are `start` (already read),
    /// forwarding text deltas to `sink`.
    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        start: Vec<u8>,
        redactor: &Redactor,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, Failure> {
        let limit = self.options.max_response_bytes;
        let mut decoder = SseDecoder::default();
        decoder.push(&start);
        let mut assembler = Assembler::default();
        // completion chunks read: an event that is none after some is the
        // server's corruption mid-answer, not the wrong URL
        let mut chunks = 0_usize;
        // when the wait for the end after the finish reason ends: set once,
        // so a comment (`: keep-alive`) does not put it off (QA,
        // 2026-12-05: a finished answer followed by a heartbeat every 2 s
        // was held to `call_timeout_s`, then failed, its reply lost)
        let mut end_by: Option<Instant> = None;
        // whether the body's end is the server's word (a chunked body's
        // last chunk, a length, HTTP/2's end of stream) rather than a
        // closed connection, which a cut looks the same as
        let framed = framed_body(&response);
        // the events of what is read so far (the start of the body, then
        // each piece) before the next piece is read
        loop {
            while let Some(data) = decoder.next_event() {
                if data.trim_ascii() == b"[DONE]" {
                    return finished(assembler, &self.options);
                }
                // a surrogate pair cut between two events: each half is
                // marked here and joined when the response is assembled
                let marked = surrogates::mark_lone(&data);
                let chunk: StreamChunk = serde_json::from_slice(&marked)
                    .map_err(|e| not_a_chunk(&marked, &e, chunks > 0, redactor))?;
                chunks += 1;
                let usage_only = chunk.is_usage_only();
                let applied = assembler.apply_chunk(chunk);
                let unshown = assembler.take_unshown();
                if !unshown.is_empty() {
                    sink.on_unshown(&unshown);
                }
                match applied {
                    Ok(Some(delta)) => forward(sink, &delta, &assembler)?,
                    Ok(None) => {}
                    Err(error) => return Err(reported(&error, redactor, &self.options)),
                }
                if assembler.size() > limit {
                    return Err(too_large(limit));
                }
                if cancel.is_cancelled() {
                    return Err(Failure::Final(ModelError::Cancelled));
                }
                // the usage chunk after the finish reason: the answer is
                // whole, only `[DONE]` is still to come (a server that
                // keeps the body open without it held the step for
                // `timeout`)
                if usage_only && assembler.only_the_end_to_come() {
                    return finished(assembler, &self.options);
                }
            }
            // a line or an event that never ends
            if decoder.pending() > limit {
                return Err(too_large(limit));
            }
            // after the finish reason only the usage chunk and `[DONE]`
            // may come: they are not waited for long
            let silence = if assembler.only_the_end_to_come() {
                self.options.timeout.min(AFTER_FINISH)
            } else {
                self.options.timeout
            };
            let until = if assembler.only_the_end_to_come() {
                *end_by.get_or_insert_with(|| Instant::now() + silence)
            } else {
                end_by = None;
                Instant::now() + silence
            };
            let bytes = match next_chunk(&mut response, cancel, until).await {
                Ok(Some(bytes)) => bytes,
                // a lone `\r` that ended the body ended its line: the
                // events it held (`[DONE]`) are read first (audit)
                Ok(None) if decoder.end_of_body() => continue,
                // The finish reason came, and the server ended its body:
                // at most the usage chunk and `[DONE]` are missing.
                Ok(None) if framed && assembler.has_finished() => {
                    return finished(assembler, &self.options);
                }
                // A body that ends only by the connection's close: its
                // end may be a cut, and is taken as a break is (QA: a
                // gateway's finish reason on every chunk, then a clean
                // close mid-answer, was used as the whole answer).
                Ok(None) if !framed && assembler.break_loses_only_the_end() => {
                    return finished(assembler, &self.options);
                }
                Ok(None) if !framed && assembler.has_finished() => {
                    return Err(Failure::Broken {
                        detail: "the connection closed before [DONE] with no sign that the \
                                 answer was whole (its finish reason came on every chunk, or on \
                                 its only one): it may be cut; a server that ends its answers \
                                 by closing the connection must send [DONE]"
                            .to_owned(),
                    });
                }
                // (not after an answer that went on past a finish reason,
                // a gateway's on every chunk: stalled there it was cut,
                // and is retried as a break there is; audit, 2026-12-07)
                Err(Failure::Broken { detail })
                    if detail == advice::STALLED && assembler.break_loses_only_the_end() =>
                {
                    warn!(
                        provider = self.options.provider.as_deref().unwrap_or(""),
                        model = %self.options.model,
                        waited_ms = u64::try_from(silence.as_millis()).unwrap_or(u64::MAX),
                        "the server sent the answer's finish reason, then neither [DONE] nor \
                         the end of its body; the answer is taken as it came"
                    );
                    return finished(assembler, &self.options);
                }
                // A break (a reset, an error in the body) after the finish
                // reason loses only the usage chunk and `[DONE]`; not
                // after an answer that went on past one (a gateway's
                // finish reason on every chunk): that answer was cut, and
                // is retried (QA, 2026-12-05: half a reply was used, its
                // second SendMessage ran with half its arguments).
                Err(Failure::Broken { .. }) if assembler.break_loses_only_the_end() => {
                    return finished(assembler, &self.options);
                }
                // a server that answered a failure with a bare JSON error
                // under the SSE content type: its message, not "ended early"
                Ok(None) => {
                    return Err(match wire::bare_error(&decoder.unread()) {
                        Some(error) => reported(&error, redactor, &self.options),
                        None => Failure::Broken {
                            detail: "the stream ended early, before the finish reason and [DONE]"
                                .to_owned(),
                        },
                    });
                }
                Err(failure) => return Err(failure),
            };
            decoder.push(&bytes);
        }
    }

    /// Reads a whole JSON completion whose first bytes are `start`
    /// (already read); its text goes to `sink` in pieces
    /// (`forward_whole`): an abort cuts the text there, the call goes on.
    async fn read_completion(
        &self,
        mut response: reqwest::Response,
        start: Vec<u8>,
        redactor: &Redactor,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, Failure> {
        let limit = self.options.max_response_bytes;
        let deadline = Instant::now() + self.options.timeout;
        let mut body = start;
        loop {
            // a body that stays open after its whole JSON (the chunked
            // body never ends) is not waited for long: it held the call
            // for `timeout`, then failed as stalled, retries and all
            let whole = whole_json(&body);
            let until = if whole {
                deadline.min(Instant::now() + AFTER_FINISH)
            } else {
                deadline
            };
            match next_chunk(&mut response, cancel, until).await {
                Ok(Some(bytes)) => {
                    if body.len() + bytes.len() > limit {
                        return Err(too_large(limit));
                    }
                    body.extend_from_slice(&bytes);
                }
                Ok(None) => break,
                Err(Failure::Broken { .. }) if whole => break,
                // the deadline is the whole answer's, not a silence's
                Err(Failure::Broken { detail }) if detail == advice::STALLED => {
                    return Err(Failure::Broken {
                        detail: advice::WHOLE_TOO_SLOW.to_owned(),
                    });
                }
                Err(failure) => return Err(failure),
            }
        }
        // a lone surrogate is marked, as in a stream event, and becomes
        // U+FFFD when the response is assembled (serde refuses it); an
        // SSE `data: [DONE]` after the JSON is not part of it
        let marked = surrogates::mark_lone(without_done(&body));
        let completion: Completion = serde_json::from_slice(&marked).map_err(|e| {
            // a body that ends before its JSON does (empty, or cut off by
            // a connection closed early without a Content-Length) broke
            // off in transit: retried, as a broken stream is
            // (asked of the JSON alone: an error inside a field, such as
            // the content's own reader, hides that the text ran out)
            let cut = e.is_eof()
                || serde_json::from_slice::<serde::de::IgnoredAny>(&marked)
                    .is_err_and(|e| e.is_eof());
            if cut {
                return Failure::Broken {
                    detail: if body.trim_ascii().is_empty() {
                        "the answer's body was empty".to_owned()
                    } else {
                        format!(
                            "the answer's body ended after {} bytes, before its JSON did",
                            body.len()
                        )
                    },
                };
            }
            if body.trim_ascii_start().starts_with(b"<") {
                // a web page (a web UI, a proxy's page): base_url is wrong
                return Failure::Final(ModelError::Config(html_page(
                    &self.shown_url(redactor),
                    &self.options,
                )));
            }
            // redacted whole before it is cut (redact.rs)
            let quoted = redactor.quote(&String::from_utf8_lossy(&body), QUOTE_LIMIT);
            Failure::Final(ModelError::Protocol(redactor.text(&format!(
                "response is not a chat completion ({e}): {quoted}"
            ))))
        })?;
        if completion.lacks_choices() {
            // a JSON object with neither `choices` nor `error`, such as
            // Ollama's native `/api/chat` answer (`{"message":…,"done":
            // true}`): the wrong API, said at once rather than retried as
            // an answer that broke off (QA)
            let quoted = redactor.quote(&String::from_utf8_lossy(&body), QUOTE_LIMIT);
            return Err(Failure::Final(ModelError::Protocol(redactor.text(
                &format!("response is not a chat completion (it has no `choices`): {quoted}"),
            ))));
        }
        let mut assembler = Assembler::default();
        match assembler.apply_completion(completion) {
            // complete already: a loop in it cuts the text, not the call
            Ok(Some(text)) => {
                if let Some(cut) = forward_whole(sink, &text, &self.options) {
                    assembler.cut_text(cut);
                }
            }
            Ok(None) => {}
            Err(error) => return Err(reported(&error, redactor, &self.options)),
        }
        finished(assembler, &self.options)
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
        let encode = |fill_reasoning| {
            let fields = encode::Fields {
                stream: self.options.stream,
                stream_usage: self.options.stream_usage,
                temperature: self.options.temperature,
                max_tokens_field: self.options.max_tokens_field,
                fill_reasoning,
            };
            encode::encode_request(&self.options.model, request, &fields).map(Bytes::from)
        };
        let filled = self.fills_reasoning.load(Ordering::Relaxed);
        let body = encode(filled)?;
        debug!(
            model = %self.options.model,
            bot = %request.bot,
            purpose = ?request.purpose,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "model request"
        );
        let mut attempts = 0;
        // a summariser's call is tried twice at most: a turn may wait for
        // it, and one that fails leaves the session to a later compaction
        // (QA, 2026-12-05: five attempts of a summariser that did not
        // answer held a person's reply 150 s)
        let retries = match request.purpose {
            Purpose::Compact => self.options.max_retries.min(COMPACT_RETRIES),
            _ => self.options.max_retries,
        };
        let limit = self.options.call_timeout;
        let deadline = Instant::now() + limit;
        let bounds = CallBounds {
            redactor,
            retries,
            cancel,
            deadline,
        };
        let mut result =
            tokio::time::timeout_at(deadline, self.attempts(body, &bounds, sink, &mut attempts))
                .await;
        if let Ok(Err(ModelError::Http {
            status: 400,
            body: said,
            ..
        })) = &result
            && !filled
            && said.contains("reasoning_content")
            && lacks_reasoning(request)
        {
            // a thinking-mode server (DeepSeek, Kimi) refused tool calls
            // stored without their reasoning: written before it was kept
            // (an older botfleet), or by a model without reasoning the bot
            // used before. Sent again with an empty one, and so from now
            // on, or every later request of the conversation failed alike
            // (QA, 2026-12-05)
            warn!(
                model = %self.options.model,
                bot = %request.bot,
                "the server wants reasoning_content with every earlier tool call: sending it empty where none is stored, from now on"
            );
            self.fills_reasoning.store(true, Ordering::Relaxed);
            let body = encode(true)?;
            result = tokio::time::timeout_at(
                deadline,
                self.attempts(body, &bounds, sink, &mut attempts),
            )
            .await;
        }
        // which provider, where, and what to change (advice.rs)
        let located =
            |error| advice::located_after(error, &self.shown_url(redactor), &self.options, retries);
        match result {
            Ok(result) => result.map_err(located),
            Err(_elapsed) => {
                warn!(
                    provider = self.options.provider.as_deref().unwrap_or(""),
                    model = %self.options.model,
                    attempts,
                    limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                    "model call ran past its deadline"
                );
                Err(located(ModelError::TimedOut { limit, attempts }))
            }
        }
    }
}

/// Whether `request` has tool calls stored without reasoning, which an
/// encoding with `fill_reasoning` sends with an empty one.
fn lacks_reasoning(request: &ModelRequest) -> bool {
    request.messages.iter().any(|m| {
        matches!(m, ChatMessage::Assistant { tool_calls, reasoning: None, .. } if !tool_calls.is_empty())
    })
}

/// The failure of a stream event `data` that is not a completion chunk:
/// after completion chunks (`mid_answer`) a corrupt or cut-off event, which
/// another attempt may not repeat (retried as a broken answer); as the
/// first event, not an OpenAI chat completion at all (the wrong URL, or
/// not such a server: final). The error is JSON's own when the event is
/// not JSON at all (a field's "expected a string" hid "EOF while parsing").
fn not_a_chunk(
    data: &[u8],
    error: &serde_json::Error,
    mid_answer: bool,
    redactor: &Redactor,
) -> Failure {
    let json = serde_json::from_slice::<serde::de::IgnoredAny>(data).err();
    // redacted whole before it is cut (redact.rs)
    let quoted = redactor.quote(&String::from_utf8_lossy(data), QUOTE_LIMIT);
    let why = match &json {
        Some(e) => format!("not JSON: {e}"),
        None => error.to_string(),
    };
    if mid_answer {
        return Failure::Broken {
            detail: redactor.text(&format!(
                "{} in the middle of the answer ({why}): {quoted}",
                advice::CORRUPT_EVENT
            )),
        };
    }
    // JSON cut off in the first event: the stream broke off, as it does
    // later in an answer, not a server of another kind (soak, 2026-12-07:
    // 98 of 112 turns that failed for good failed so, at once, told to
    // check a `base_url` that had answered thousands of requests)
    if json.as_ref().is_some_and(serde_json::Error::is_eof) {
        return Failure::Broken {
            detail: redactor.text(&format!(
                "{} at the start of the answer ({why}): {quoted}",
                advice::CORRUPT_EVENT
            )),
        };
    }
    Failure::Final(ModelError::Protocol(redactor.text(&format!(
        "stream event is not a completion chunk ({why}): {quoted}"
    ))))
}

#[cfg(test)]
mod tests;
