//! The API's one error type and its JSON form:
//! `{"error": {"code": "...", "message": "..."}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;
use botfleet_actors::ActorError;
use botfleet_memory::StoreError;
use serde_json::json;

/// The most characters of an error's message answered whole.
const MESSAGE_CHARS: usize = 2_000;
/// Characters kept from a longer message's start, and from its end.
const MESSAGE_HEAD: usize = 1_200;
const MESSAGE_TAIL: usize = 600;

/// Characters of a backquoted run (a field's name as serde quotes it)
/// kept in a message; a longer one is cut, its length said.
const QUOTE_CHARS: usize = 100;

/// `text` with each backquoted run over [`QUOTE_CHARS`] cut: serde quotes
/// an unknown field's name, twice, and the cut of a long message fell
/// inside them, losing the words "unknown field" between (QA).
fn short_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4096));
    let mut parts = text.split('`');
    if let Some(first) = parts.next() {
        out.push_str(first);
    }
    for (i, part) in parts.enumerate() {
        out.push('`');
        // odd parts (0, 2, …) are inside the quotes
        let n = part.chars().count();
        if i % 2 == 0 && n > QUOTE_CHARS {
            out.extend(part.chars().take(QUOTE_CHARS));
            out.push_str(&format!("… ({n} characters)"));
        } else {
            out.push_str(part);
        }
    }
    out
}

/// An error answered to an API client.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No or wrong bearer token.
    #[error("{0}")]
    Unauthorized(String),
    /// A webhook delivery whose signature does not match: `401` like a
    /// wrong token, but without the `Bearer` challenge, as the hook's
    /// route takes no token.
    #[error("{0}")]
    BadSignature(String),
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The body is sent in a content coding the route does not take
    /// (`Content-Encoding: gzip` on a webhook): answered `415` with
    /// `Accept-Encoding: identity`.
    #[error("{0}")]
    UnsupportedEncoding(String),
    /// The body is sent in a transfer coding other than `chunked`
    /// (`Transfer-Encoding: gzip, chunked`): answered `501` (RFC 9112
    /// §6.1), a client's fault that is logged as none of the host's.
    #[error("{0}")]
    UnsupportedTransferCoding(String),
    /// The body is over the host's limit (`host.max_body_bytes`; a
    /// webhook's own limit is [`ApiError::TooLargeFor`]).
    #[error(
        "the request body is larger than {limit} bytes, the host's limit (max_body_bytes under \
         [host] in fleet.toml); send less"
    )]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The body is over a limit of its own route, named with the setting
    /// that makes it (a webhook's `max_payload_bytes`).
    #[error("{0}")]
    TooLargeFor(String),
    /// No such thing (or not yours).
    #[error("{0}")]
    NotFound(String),
    /// The request's URI is longer than the host reads (hyper refuses it
    /// before the router sees it; `http_server.rs` gives its answer this
    /// shape).
    #[error("{0}")]
    UriTooLong(String),
    /// The request's headers are more or larger than the host reads (as
    /// with [`ApiError::UriTooLong`]).
    #[error("{0}")]
    HeadersTooLarge(String),
    /// The path exists, the method does not (the `allow` header lists
    /// those that do).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The request conflicts with the state (e.g. an idempotency key reused
    /// with a different body).
    #[error("{0}")]
    Conflict(String),
    /// A conflict with something running (a turn, the subagent limit):
    /// `409` like [`ApiError::Conflict`], with `"transient": true`, as
    /// the same request may pass once that ends.
    #[error("{0}")]
    Busy(String),
    /// The host cannot serve now; retry later.
    #[error("{0}")]
    Unavailable(String),
    /// The user holds as many `/v1/events` streams as one user may.
    #[error("{0}")]
    TooManyStreams(String),
    /// The user sent as many messages as `host.user_messages_per_minute`
    /// allows: answered `429` with `Retry-After`.
    #[error("{message}")]
    RateLimited {
        /// What happened and what to do.
        message: String,
        /// The limit's name (`user_messages_per_minute`).
        limit: &'static str,
        /// The config key that sets it.
        key: &'static str,
        /// Seconds until a message is taken again.
        retry_after_s: u64,
    },
    /// The host holds as many `/v1/events` streams as it keeps room for.
    #[error("{0}")]
    StreamsFull(String),
    /// The host's data directory is full: nothing was saved.
    #[error("{0}")]
    StorageFull(String),
    /// The host's disk failed a read or write: nothing was saved.
    #[error("{0}")]
    StorageError(String),
    /// A bug or a broken store.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::Unauthorized(_) | ApiError::BadSignature(_) => {
                (StatusCode::UNAUTHORIZED, "unauthorized")
            }
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::TooLarge { .. } | ApiError::TooLargeFor(_) => {
                (StatusCode::PAYLOAD_TOO_LARGE, "too_large")
            }
            ApiError::UnsupportedEncoding(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_encoding")
            }
            ApiError::UnsupportedTransferCoding(_) => {
                (StatusCode::NOT_IMPLEMENTED, "unsupported_transfer_coding")
            }
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::UriTooLong(_) => (StatusCode::URI_TOO_LONG, "uri_too_long"),
            ApiError::HeadersTooLarge(_) => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers_too_large",
            ),
            ApiError::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            ApiError::Conflict(_) | ApiError::Busy(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::TooManyStreams(_) => (StatusCode::TOO_MANY_REQUESTS, "too_many_streams"),
            ApiError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ApiError::StreamsFull(_) => (StatusCode::SERVICE_UNAVAILABLE, "streams_full"),
            ApiError::StorageFull(_) => (StatusCode::INSUFFICIENT_STORAGE, "storage_full"),
            ApiError::StorageError(_) => (StatusCode::SERVICE_UNAVAILABLE, "storage_error"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl ApiError {
    /// The status of the answer.
    pub(crate) fn status(&self) -> StatusCode {
        self.status_and_code().0
    }

    /// The message as answered: whole up to [`MESSAGE_CHARS`]; past that its
    /// start and its end (where the advice is), what lies between left out
    /// and counted. Some refusals quote what they were sent whole (an
    /// unknown field's name, twice; a 60 KB time zone): answers of 30–120
    /// KB (QA).
    fn shown(&self) -> String {
        let text = short_quotes(&self.to_string());
        let total = text.chars().count();
        if total <= MESSAGE_CHARS {
            return text;
        }
        let head: String = text.chars().take(MESSAGE_HEAD).collect();
        let tail: String = text.chars().skip(total - MESSAGE_TAIL).collect();
        format!(
            "{head} … ({} characters left out) … {tail}",
            total - MESSAGE_HEAD - MESSAGE_TAIL
        )
    }

    /// The body of the answer: `{"error": {"code", "message"}}`.
    pub(crate) fn body(&self) -> serde_json::Value {
        let (_, code) = self.status_and_code();
        if let ApiError::RateLimited {
            limit,
            key,
            retry_after_s,
            ..
        } = self
        {
            // the limit and its key as fields too, for clients that act
            // on them
            return json!({"error": {
                "code": code,
                "message": self.shown(),
                "limit": limit,
                "key": key,
                "retry_after_s": retry_after_s,
            }});
        }
        if let ApiError::Busy(_) = self {
            // for clients that act on it (the page's Retry stays on)
            return json!({"error": {
                "code": code,
                "message": self.shown(),
                "transient": true,
            }});
        }
        json!({"error": {"code": code, "message": self.shown()}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status().is_server_error()
            && !matches!(self, ApiError::UnsupportedTransferCoding(_))
        {
            log_server_error(&self);
        }
        self.unlogged_response()
    }
}

impl ApiError {
    /// The answer, without the `ERROR` line a server error gets: for a
    /// 503 a client caused (a body it never sent), which must not fill the
    /// operator's error log at a stranger's will (QA).
    pub(crate) fn unlogged_response(self) -> Response {
        let status = self.status();
        if let ApiError::Unauthorized(_) = &self {
            // the challenge every 401 carries (RFC 9110 §11.6.1, RFC 6750
            // §3): the API's scheme is `Bearer`
            let challenge = [(header::WWW_AUTHENTICATE, BEARER_CHALLENGE)];
            return (status, challenge, Json(self.body())).into_response();
        }
        if let ApiError::UnsupportedEncoding(_) = &self {
            // the codings taken (RFC 9110 §15.5.16): none but the body as is
            let taken = [(header::ACCEPT_ENCODING, "identity")];
            return (status, taken, Json(self.body())).into_response();
        }
        if let ApiError::RateLimited { retry_after_s, .. } = &self {
            // as every 429 of the API has it
            let wait = [(header::RETRY_AFTER, retry_after_s.to_string())];
            return (status, wait, Json(self.body())).into_response();
        }
        (status, Json(self.body())).into_response()
    }
}

/// Logs a server error answered to a client. A storage error, which every
/// request repeats while the disk is full or the store damaged, and a
/// `streams_full` refusal are logged once, then at most once a minute
/// with the count of those not logged since (`repeats`) ([`how_logged`]).
fn log_server_error(e: &ApiError) {
    let logged = how_logged(e);
    if logged == Logged::Error {
        tracing::error!(error = %e, "API error");
        return;
    }
    let message = e.to_string();
    let mut last = THROTTLED_LOGGED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((logged, at, repeats)) = last.as_mut()
        && *logged == message
        && at.elapsed() < THROTTLED_LOG_EVERY
    {
        *repeats += 1;
        return;
    }
    let repeats = last
        .as_ref()
        .filter(|(logged, ..)| *logged == message)
        .map_or(0, |(_, _, repeats)| *repeats);
    if logged == Logged::WarnThrottled {
        tracing::warn!(error = %e, repeats, "API request refused");
    } else {
        tracing::error!(error = %e, repeats, "API error");
    }
    *last = Some((message, std::time::Instant::now(), 0));
}

/// How a server error answered to a client is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Logged {
    /// A line at ERROR each time.
    Error,
    /// At ERROR, once a minute at most (a storage error, which every
    /// request repeats while it lasts).
    ErrorThrottled,
    /// At WARN, once a minute at most: a refusal clients cause by using
    /// the host's capacity (`streams_full`), which a client could repeat
    /// at will (QA: 200 refused streams wrote 200 ERROR lines).
    WarnThrottled,
}

pub(super) fn how_logged(e: &ApiError) -> Logged {
    match e {
        ApiError::StorageFull(_) | ApiError::StorageError(_) => Logged::ErrorThrottled,
        ApiError::StreamsFull(_) => Logged::WarnThrottled,
        _ => Logged::Error,
    }
}

/// The last throttled error logged (a storage error, `streams_full`),
/// when, and how many times it was answered since without a line.
static THROTTLED_LOGGED: std::sync::Mutex<Option<(String, std::time::Instant, u64)>> =
    std::sync::Mutex::new(None);

/// How often a repeated throttled error is logged again.
const THROTTLED_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The `WWW-Authenticate` value of a `401` (docs/api.md, docs/openapi.yaml).
const BEARER_CHALLENGE: &str = r#"Bearer realm="botfleet""#;

/// The advice that ends a storage error's message: resending is safe
/// (nothing was saved). [`ApiError::resend_with_key`] names the key on the
/// routes that take one.
const RESEND: &str = "then send the request again (nothing was saved)";

/// [`RESEND`] on a request that carried an `Idempotency-Key`.
const RESEND_WITH_KEY: &str =
    "then send it again with the same Idempotency-Key (nothing was saved)";

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        // the store rolled the write back: sending it again is safe
        match &e {
            StoreError::DiskFull { .. } => {
                return ApiError::StorageFull(format!(
                    "the host's data directory is full: free disk space, {RESEND}"
                ));
            }
            StoreError::DiskIo { detail } => {
                return ApiError::StorageError(format!(
                    "the host's disk failed a read or write ({detail}): check the disk, the host's file-size limit (`ulimit -f`, systemd `LimitFSIZE=`) and the host's log, {RESEND}"
                ));
            }
            // no retry helps: the operator restarts (after a restore)
            StoreError::FileGone { .. } | StoreError::Damaged { .. } => {
                return ApiError::StorageError(format!("{e}; nothing of this request was saved"));
            }
            StoreError::Sqlite(_)
            | StoreError::Io { .. }
            | StoreError::Corrupt { .. }
            | StoreError::WriterGone
            | StoreError::InUse { .. }
            | StoreError::HistoryGone { .. }
            | StoreError::NotWritable { .. }
            | StoreError::Foreign { .. }
            | StoreError::SchemaTooNew { .. }
            | StoreError::SchemaOlder { .. }
            | StoreError::NotFound { .. }
            | StoreError::Rejected(_)
            | StoreError::Taken { .. }
            | StoreError::Id(_)
            | StoreError::Reader(_) => {}
        }
        if e.is_retryable() {
            ApiError::Unavailable(format!("the store is busy ({e}); retry shortly"))
        } else {
            ApiError::Internal(format!("store error: {e}"))
        }
    }
}

impl ApiError {
    /// On a route that takes an `Idempotency-Key` (a message), a storage
    /// error's advice names the key when the request carried one: sent
    /// again with it, the message is admitted once however often it is
    /// retried. Other errors are returned as they are.
    pub(crate) fn resend_with_key(self, has_key: bool) -> Self {
        if !has_key {
            return self;
        }
        match self {
            ApiError::StorageFull(m) => ApiError::StorageFull(m.replace(RESEND, RESEND_WITH_KEY)),
            ApiError::StorageError(m) => ApiError::StorageError(m.replace(RESEND, RESEND_WITH_KEY)),
            other @ (ApiError::Unauthorized(_)
            | ApiError::BadSignature(_)
            | ApiError::BadRequest(_)
            | ApiError::TooLarge { .. }
            | ApiError::TooLargeFor(_)
            | ApiError::UnsupportedEncoding(_)
            | ApiError::UnsupportedTransferCoding(_)
            | ApiError::NotFound(_)
            | ApiError::UriTooLong(_)
            | ApiError::HeadersTooLarge(_)
            | ApiError::MethodNotAllowed(_)
            | ApiError::Conflict(_)
            | ApiError::Busy(_)
            | ApiError::Unavailable(_)
            | ApiError::TooManyStreams(_)
            | ApiError::RateLimited { .. }
            | ApiError::StreamsFull(_)
            | ApiError::Internal(_)) => other,
        }
    }
}

impl ApiError {
    /// The `404` for a bot the user may not use: one that does not exist
    /// and another user's read alike, so ids do not leak across users. It
    /// names both ways to list one's bots, as the CLI passes it on.
    pub(crate) fn no_such_bot(bot: &str) -> Self {
        ApiError::NotFound(Self::no_such_bot_text(bot))
    }

    /// The words of [`ApiError::no_such_bot`].
    pub(crate) fn no_such_bot_text(bot: &str) -> String {
        format!("no bot {bot:?} for you; list your bots with GET /v1/bots or `botfleet bots`")
    }
}

impl From<ActorError> for ApiError {
    fn from(e: ActorError) -> Self {
        match e {
            ActorError::UnknownBot(bot) => ApiError::no_such_bot(bot.as_str()),
            ActorError::Invalid(m) => ApiError::BadRequest(m),
            ActorError::Conflict(m) => ApiError::Conflict(m),
            ActorError::Busy(m) => ApiError::Busy(m),
            ActorError::Store(s) => s.into(),
            // its own words say what to do (no "retry shortly")
            e @ ActorError::CancelNotRecorded(_) => ApiError::Unavailable(e.to_string()),
            other if other.is_retryable() => {
                ApiError::Unavailable(format!("{other}; retry shortly"))
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
