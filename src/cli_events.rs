//! What a waiting `send` or `group send` sleeps on between two polls: the
//! host's change signals (`GET /v1/events`), reopened whenever the stream
//! ends or cannot be opened, so that a host restart only delays the wait.
//!
//! A stream that has ended is dropped, never polled again; while the host
//! is unreachable, each wait tries to reopen it after a short, growing
//! backoff. The caller keeps polling on its own schedule and only its
//! overall timeout ends the wait. The same backoff paces the message's
//! POST when it got no answer and is sent again
//! ([`Changes::pause_after_no_answer`]).

use std::time::Duration;

use futures::StreamExt;
use futures::stream::LocalBoxStream;
use tokio::time::Instant;

use crate::client::Client;
use crate::client::HostAnswered;
use crate::client::ServerEvent;
use reqwest::StatusCode;

/// How often a wait with no stream (the user's streams are all in use:
/// `429 too_many_streams`) lets the caller poll.
const POLL_EVERY: Duration = Duration::from_secs(1);
/// How often such a wait tries to open a stream again (a slot may free).
const REOPEN_EVERY: Duration = Duration::from_secs(5);

/// The first pause before reopening a stream that ended or failed to open.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The change signals of the user's sessions, reconnecting.
pub(crate) struct Changes<'a> {
    client: &'a Client,
    /// The open stream; `None` once it ended, until it is reopened.
    stream: Option<LocalBoxStream<'static, anyhow::Result<ServerEvent>>>,
    /// No attempt to reopen before this.
    retry_at: Instant,
    /// The pause after the next failure; back to the first once an event
    /// arrives.
    backoff: Duration,
    /// The loss of the host was told on stderr (once per outage).
    told: bool,
    /// When the host stopped answering (ms since the epoch), while it
    /// does not: a wait that ends unanswered says so (QA: "no reply
    /// within 360 s" of a host that had died, read as a slow bot).
    lost_since: Option<i64>,
    /// A stream that broke off with an error was told on stderr (once:
    /// each reopened stream would break the same way).
    told_broken: bool,
    /// No stream could be opened because the user's are all in use: the
    /// caller polls every [`POLL_EVERY`] instead.
    polling: bool,
}

impl<'a> Changes<'a> {
    /// Subscribes, or `None` if the host has not answered by `deadline`
    /// (a stopped host accepts the connection and says nothing). An error
    /// here is the command's error: nothing was sent yet.
    pub(crate) async fn subscribe(
        client: &'a Client,
        deadline: Instant,
    ) -> anyhow::Result<Option<Self>> {
        let Ok(stream) = tokio::time::timeout_at(deadline, client.checked_events()).await else {
            return Ok(None);
        };
        // every stream the user may open is in use (other waiting sends,
        // open pages): the message still goes, and its reply is polled for
        let (stream, polling) = match stream {
            Ok(stream) => (Some(stream.boxed_local()), false),
            Err(e) if is_stream_cap(&e) => {
                errln!(
                    "(all your event streams are in use; checking for the reply every {} s instead)",
                    POLL_EVERY.as_secs()
                );
                (None, true)
            }
            // the host's streams are all in use (`503 streams_full`): the
            // API works as ever, so the message goes too, and its reply is
            // polled for (QA, 2026-12-05: the send stopped before the
            // message, which was never saved)
            Err(e) if is_host_stream_cap(&e) => {
                errln!(
                    "(the host's event streams are all in use; checking for the reply every {} s \
                     instead)",
                    POLL_EVERY.as_secs()
                );
                (None, true)
            }
            Err(e) => return Err(e),
        };
        Ok(Some(Self {
            client,
            stream,
            retry_at: Instant::now() + REOPEN_EVERY,
            backoff: FIRST_BACKOFF,
            told: false,
            lost_since: None,
            told_broken: false,
            polling,
        }))
    }

    /// Waits at most `wait` for a reason to poll `session` again: a change
    /// signal of it, a `resync`, the end of the stream (the host may be
    /// going away), or the stream reopened (signals may have been missed
    /// while it was closed). Never fails: while the host is unreachable it
    /// retries until `wait` has passed.
    pub(crate) async fn wait(&mut self, session: &str, wait: Duration) {
        let deadline = Instant::now() + wait;
        if self.polling {
            self.poll_wait(deadline).await;
            return;
        }
        loop {
            let Some(stream) = self.stream.as_mut() else {
                if self.reopen(deadline).await || Instant::now() >= deadline {
                    return;
                }
                continue;
            };
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Err(_elapsed) => return,
                Ok(Some(Ok(ev))) => {
                    self.backoff = FIRST_BACKOFF;
                    if ev.event == "resync" || ev.data["session"].as_str() == Some(session) {
                        return;
                    }
                }
                Ok(Some(Err(e))) => {
                    if !self.told_broken {
                        self.told_broken = true;
                        errln!("({e:#}; still waiting, checking for the reply by polling…)");
                    }
                    self.stream = None;
                    self.retry_later();
                    return;
                }
                Ok(None) => {
                    self.stream = None;
                    self.retry_later();
                    return;
                }
            }
        }
    }

    /// Waits for the next attempt (never past `deadline`) and tries once
    /// to reopen the stream; true if it is open again.
    async fn reopen(&mut self, deadline: Instant) -> bool {
        if self.retry_at >= deadline {
            tokio::time::sleep_until(deadline).await;
            return false;
        }
        tokio::time::sleep_until(self.retry_at).await;
        match tokio::time::timeout_at(deadline, self.client.checked_events()).await {
            Ok(Ok(stream)) => {
                self.stream = Some(stream.boxed_local());
                self.told = false;
                self.lost_since = None;
                true
            }
            Ok(Err(_)) => {
                self.lost();
                self.retry_later();
                false
            }
            // cut short by the deadline: tried again at the next wait
            Err(_elapsed) => false,
        }
    }

    /// A wait without a stream: at most [`POLL_EVERY`], then, every
    /// [`REOPEN_EVERY`], one quiet try to open a stream (a slot may have
    /// freed); with one open the waits are on its signals again.
    async fn poll_wait(&mut self, deadline: Instant) {
        tokio::time::sleep_until(deadline.min(Instant::now() + POLL_EVERY)).await;
        if Instant::now() < self.retry_at {
            return;
        }
        self.retry_at = Instant::now() + REOPEN_EVERY;
        if let Ok(Ok(stream)) = tokio::time::timeout(POLL_EVERY, self.client.checked_events()).await
        {
            self.stream = Some(stream.boxed_local());
            self.polling = false;
        }
    }

    fn retry_later(&mut self) {
        self.retry_at = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// A poll failed after the message was accepted. The host unreachable
    /// or failing (no answer, a 5xx) is worth waiting for: says so once and
    /// returns Ok. The host refusing the request (a 4xx: the token or the
    /// session) would refuse it again: returns the error.
    pub(crate) fn poll_failed(&mut self, e: anyhow::Error) -> anyhow::Result<()> {
        if is_refusal(&e) {
            return Err(e);
        }
        self.lost();
        Ok(())
    }

    /// A request that must be sent again got no answer (the message's
    /// POST while the host restarts): says so once, then waits the next
    /// backoff pause, never past `deadline`.
    pub(crate) async fn pause_after_no_answer(&mut self, deadline: Instant) {
        self.lost();
        self.retry_later();
        tokio::time::sleep_until(self.retry_at.min(deadline)).await;
    }

    /// When the host stopped answering (ms since the epoch), if it has
    /// not answered since.
    pub(crate) fn lost_since(&self) -> Option<i64> {
        self.lost_since
    }

    fn lost(&mut self) {
        if self.lost_since.is_none() {
            self.lost_since = Some(chrono::Utc::now().timestamp_millis());
        }
        if !self.told {
            self.told = true;
            errln!("(lost the connection to the host; still waiting, reconnecting…)");
        }
    }
}

/// Whether the host refused a stream because the user's are all open
/// (`429 too_many_streams`, `host.max_streams_per_user`); by its code,
/// not its status (QA: a `429 rate_limited` for unknown tokens was told
/// as "all your event streams are in use").
fn is_stream_cap(e: &anyhow::Error) -> bool {
    e.downcast_ref::<HostAnswered>()
        .is_some_and(|a| a.status == StatusCode::TOO_MANY_REQUESTS && a.code == "too_many_streams")
}

/// Whether the host refused a stream because its own are all open
/// (`503 streams_full`, every stream it keeps room for in use:
/// `host.max_connections`); not another 503 (a host stopping).
fn is_host_stream_cap(e: &anyhow::Error) -> bool {
    e.downcast_ref::<HostAnswered>()
        .is_some_and(|a| a.status == StatusCode::SERVICE_UNAVAILABLE && a.code == "streams_full")
}

/// Whether the host answered with a client error it would give again.
/// Anything else, a failed connection above all, counts as passing.
fn is_refusal(e: &anyhow::Error) -> bool {
    e.downcast_ref::<HostAnswered>().is_some_and(|a| {
        a.status.is_client_error()
            && a.status != StatusCode::REQUEST_TIMEOUT
            && a.status != StatusCode::TOO_MANY_REQUESTS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_client_errors_are_refusals() {
        let answered = |status, message: &str| {
            anyhow::Error::new(HostAnswered {
                status,
                code: String::new(),
                message: message.to_owned(),
            })
        };
        assert!(is_refusal(&answered(
            StatusCode::UNAUTHORIZED,
            "unknown token"
        )));
        assert!(!is_refusal(&answered(
            StatusCode::SERVICE_UNAVAILABLE,
            "starting"
        )));
        assert!(!is_refusal(&answered(
            StatusCode::TOO_MANY_REQUESTS,
            "later"
        )));
        let down = anyhow::anyhow!("cannot reach the host at http://127.0.0.1:9 (refused)");
        assert!(!is_refusal(&down));
    }
}
