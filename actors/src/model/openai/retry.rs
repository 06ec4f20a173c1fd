//! What went wrong with one attempt, and whether and when to try again.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::hash::Hasher;
use std::time::Duration;

use chrono::DateTime;
use chrono::NaiveDateTime;
use chrono::Utc;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use reqwest::header::RETRY_AFTER;

use super::super::ModelError;
use super::OpenAiOptions;

/// Why one attempt failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// No response: connection refused or reset, DNS, TLS, no headers in time.
    Unreachable(String),
    /// An HTTP error status.
    Status {
        /// The status.
        status: StatusCode,
        /// Start of the body.
        body: String,
        /// What the server asked us to wait, if it did.
        retry_after: Option<Duration>,
    },
    /// A success response whose body broke off or carried an error. It is
    /// retried even after text went to the sink: that text is the model's
    /// own working output, and the sink is told to start over
    /// ([`super::super::StreamSink::on_restart`]).
    Broken {
        /// What happened.
        detail: String,
    },
    /// A failure no retry can fix: cancelled, aborted, malformed.
    Final(ModelError),
}

impl Failure {
    /// Whether another attempt may succeed and is allowed.
    pub(super) fn is_transient(&self) -> bool {
        match self {
            Failure::Unreachable(_) => true,
            // 408: the server or a proxy in front of it gave up waiting
            // (OpenAI's own clients retry it too)
            Failure::Status { status, .. } => {
                *status == StatusCode::REQUEST_TIMEOUT
                    || *status == StatusCode::TOO_MANY_REQUESTS
                    || status.is_server_error()
            }
            Failure::Broken { .. } => true,
            Failure::Final(_) => false,
        }
    }

    /// The error the call ends with; `max_wait` is the longest
    /// `Retry-After` honoured (`backoff_max`), named when a server asked
    /// for more.
    pub(super) fn into_error(self, attempts: u32, max_wait: Duration) -> ModelError {
        let transient = self.is_transient();
        match self {
            Failure::Unreachable(detail) => ModelError::Unreachable { attempts, detail },
            Failure::Status {
                status,
                body,
                retry_after: Some(wait),
            } if transient && wait > max_wait => ModelError::WaitTooLong {
                status: status.as_u16(),
                attempts,
                wait,
                max_wait,
                body,
            },
            Failure::Status { status, body, .. } => ModelError::Http {
                status: status.as_u16(),
                attempts,
                body,
            },
            Failure::Broken { detail } => ModelError::StreamBroken { attempts, detail },
            Failure::Final(error) => error,
        }
    }

    /// Whether this is a 429 without `Retry-After`, waited out with the
    /// longer backoff of [`rate_limit_backoff`].
    pub(super) fn rate_limited_without_wait(&self) -> bool {
        match self {
            Failure::Status {
                status,
                retry_after,
                ..
            } => *status == StatusCode::TOO_MANY_REQUESTS && retry_after.is_none(),
            Failure::Unreachable(_) | Failure::Broken { .. } | Failure::Final(_) => false,
        }
    }

    /// Whether the server said how long to wait (`Retry-After`).
    pub(super) fn asked_to_wait(&self) -> bool {
        self.asked_wait().is_some()
    }

    /// How long the server said to wait (`Retry-After`), if it did, on a
    /// status that is retried.
    pub(super) fn asked_wait(&self) -> Option<Duration> {
        match self {
            Failure::Status { retry_after, .. } if self.is_transient() => *retry_after,
            Failure::Status { .. }
            | Failure::Unreachable(_)
            | Failure::Broken { .. }
            | Failure::Final(_) => None,
        }
    }

    /// The error the call ends with when the server asked to wait `wait`,
    /// which would end past the call's deadline (`call_timeout`): waiting
    /// would only time the call out without saying why.
    pub(super) fn into_wait_past_deadline(
        self,
        attempts: u32,
        wait: Duration,
        call_timeout: Duration,
    ) -> ModelError {
        match self {
            Failure::Status { status, body, .. } => ModelError::WaitPastDeadline {
                status: status.as_u16(),
                attempts,
                wait,
                limit: call_timeout,
                body,
            },
            other @ (Failure::Unreachable(_) | Failure::Broken { .. } | Failure::Final(_)) => {
                other.into_error(attempts, wait)
            }
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable(detail) => write!(f, "unreachable: {detail}"),
            Failure::Status { status, body, .. } => write!(f, "HTTP {status}: {body}"),
            Failure::Broken { detail, .. } => write!(f, "stream broken: {detail}"),
            Failure::Final(error) => write!(f, "{error}"),
        }
    }
}

/// The wait before the next attempt, or `None` to give up now.
/// `jitter` is uniform in `[0, 1)`.
pub(super) fn retry_delay(
    failure: &Failure,
    attempts: u32,
    options: &OpenAiOptions,
    jitter: f64,
) -> Option<Duration> {
    if !failure.is_transient() || attempts > options.max_retries {
        return None;
    }
    let asked = match failure {
        Failure::Status { retry_after, .. } => *retry_after,
        Failure::Unreachable(_) | Failure::Broken { .. } | Failure::Final(_) => None,
    };
    match asked {
        Some(wait) if wait > options.backoff_max => None,
        Some(wait) => Some(wait),
        None if failure.rate_limited_without_wait() => {
            Some(rate_limit_backoff(options, attempts, jitter))
        }
        None => Some(backoff(options, attempts, jitter)),
    }
}

/// The wait after a 429 that did not say how long: `rate_limit_backoff_base`
/// doubled per attempt after the first, capped at `backoff_max`, plus up to half of it again
/// at random (so clients limited together do not return together), capped
/// at `backoff_max`. From the default 2 s the four retries wait 2-3, 4-6,
/// 8-12 and 16-24 s, about half a minute in all: long enough for a
/// per-minute limit to free up, where the backoff of other failures would
/// spend every retry inside the same minute.
pub(super) fn rate_limit_backoff(options: &OpenAiOptions, attempt: u32, jitter: f64) -> Duration {
    let doublings = attempt.saturating_sub(1).min(20);
    let full = options
        .rate_limit_backoff_base
        .saturating_mul(1u32 << doublings)
        .min(options.backoff_max);
    (full + (full / 2).mul_f64(jitter.clamp(0.0, 1.0))).min(options.backoff_max)
}

/// Equal-jitter exponential backoff: half of `base * 2^(attempt-1)`
/// (capped) plus a random part of the other half.
pub(super) fn backoff(options: &OpenAiOptions, attempt: u32, jitter: f64) -> Duration {
    let doublings = attempt.saturating_sub(1).min(20);
    let full = options
        .backoff_base
        .saturating_mul(1u32 << doublings)
        .min(options.backoff_max);
    full / 2 + (full / 2).mul_f64(jitter.clamp(0.0, 1.0))
}

/// A number in `[0, 1)`, different on each call; std's randomly keyed
/// hasher is plenty for spreading retries.
pub(super) fn jitter() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u8(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `retry-after-ms` (OpenAI), or `Retry-After` in seconds (possibly
/// fractional) or as an HTTP date (RFC 9110), the wait until then from
/// now (none for a date past).
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, Utc::now())
}

/// [`retry_after`] with `now` as the time an HTTP date is counted from.
pub(super) fn retry_after_at(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let text = |name: &str| -> Option<&str> { Some(headers.get(name)?.to_str().ok()?.trim()) };
    let number = |name: &str| -> Option<f64> {
        let value: f64 = text(name)?.parse().ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    // a wait past what a Duration holds is the longest one, which the
    // caller refuses as too long (QA: `18446744073709551615` read as no
    // header and retried after half a second)
    let seconds = |value: f64| Duration::try_from_secs_f64(value).unwrap_or(Duration::MAX);
    if let Some(ms) = number("retry-after-ms") {
        return Some(seconds(ms / 1000.0));
    }
    // whole seconds read exactly (through f64, 2^63 - 1 became 2^63)
    if let Some(s) = text(RETRY_AFTER.as_str()).and_then(|t| t.parse::<u64>().ok()) {
        return Some(Duration::from_secs(s));
    }
    if let Some(value) = number(RETRY_AFTER.as_str()) {
        return Some(seconds(value));
    }
    let date = http_date(text(RETRY_AFTER.as_str())?)?;
    Some((date - now).to_std().unwrap_or(Duration::ZERO))
}

/// An HTTP date: the IMF-fixdate (`Wed, 21 Oct 2099 07:28:00 GMT`, an RFC
/// 2822 date) servers send, or the obsolete RFC 850 and asctime forms
/// RFC 9110 asks recipients to accept.
fn http_date(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(date) = DateTime::parse_from_rfc2822(text) {
        return Some(date.with_timezone(&Utc));
    }
    ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"]
        .into_iter()
        .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
        .map(|naive| naive.and_utc())
}
