//! The API's HTTP server: our own accept loop over hyper's HTTP/1
//! connections, in place of `axum::serve`, with the limits a host needs
//! against slow and idle clients (a client trickling header lines held
//! its socket forever; at `ulimit -n` 1024 a thousand of them left no file
//! descriptor for the API, the store or the index):
//!
//! - a header-read timeout (`host.header_timeout_s`): a connection that has
//!   not sent a whole request head within it is closed, whether it sent
//!   nothing, trickles header lines or sits idle (keep-alive) after a
//!   response;
//! - a cap on open connections (`host.max_connections`): at the cap the
//!   loop stops accepting until one closes (new clients wait in the listen
//!   backlog), so file descriptors are left for the store, the index and
//!   Shell;
//! - after an accept error (`EMFILE` …) a pause that doubles up to a
//!   second, logged once per episode (until accepts have gone a minute
//!   without an error) rather than at every error;
//! - graceful shutdown as `axum::serve` had it: once `stop` is cancelled
//!   the listener closes, idle connections close, requests in flight end,
//!   and [`serve`] returns when every connection has closed.
//!
//! - hyper's own answers to a request it cannot read (`400`, `414`, `431`)
//!   carry the API's JSON error shape (`http_parse_errors.rs`).
//!
//! The request timeout ([`with_request_timeout`]) is a layer on the router.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::extract::Request;
use axum::extract::State;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use hyper_util::rt::TokioIo;
use hyper_util::rt::TokioTimer;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::Layer;

use crate::api::ApiError;

#[path = "http_parse_errors.rs"]
mod parse_errors;

use parse_errors::JsonParseErrors;
use parse_errors::MAX_HEAD_BYTES;

/// Limits of the connections [`serve`] accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    /// Longest a connection may take to send a request head, counted from
    /// its start or from the end of its previous response.
    pub header_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: u32,
}

/// Serves `app` on `listener` until `stop` is cancelled and every
/// connection has closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let max = limits.max_connections.max(1);
    // every open connection holds one slot; all slots free again means all
    // connections closed (the semaphore is never closed)
    let slots = Arc::new(Semaphore::new(max as usize));
    let mut errors = AcceptErrors::default();
    loop {
        let slot = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            slot = slots.clone().acquire_owned() => slot,
        };
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                errors.recovered(Instant::now());
                tokio::spawn(serve_connection(
                    stream,
                    peer,
                    app.clone(),
                    limits.header_timeout,
                    stop.clone(),
                    slot,
                ));
            }
            Err(e) => {
                drop(slot);
                let pause = errors.failed(&e, Instant::now());
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
    drop(listener);
    let _ = slots.acquire_many(max).await;
}

/// How long data sent on a connection may go unacknowledged before the
/// kernel drops it (`TCP_USER_TIMEOUT`), and how long an idle one waits
/// for its first keep-alive probe: a client gone without a word (a laptop
/// asleep, a network changed, a link down) is let go within about a minute.
/// An event stream sends a keep-alive comment every 15 s, so its peer's
/// silence shows. (QA: such a stream held its slot under
/// `host.max_streams_per_user` for the kernel's default of ~15 minutes of
/// retransmissions, and its user got `429` meanwhile.)
const DEAD_PEER: Duration = Duration::from_secs(60);

/// Sets [`DEAD_PEER`] on an accepted socket: TCP keep-alive (first probe
/// after 30 s idle, then every 10 s, 3 of them) and the user timeout. A
/// failure is logged and the connection served as it is.
fn watch_for_dead_peer(stream: &TcpStream) {
    use rustix::net::sockopt;
    let set = || -> rustix::io::Result<()> {
        sockopt::set_socket_keepalive(stream, true)?;
        sockopt::set_tcp_keepidle(stream, DEAD_PEER / 2)?;
        sockopt::set_tcp_keepintvl(stream, Duration::from_secs(10))?;
        sockopt::set_tcp_keepcnt(stream, 3)?;
        #[cfg(any(target_os = "linux", target_os = "android"))]
        sockopt::set_tcp_user_timeout(
            stream,
            u32::try_from(DEAD_PEER.as_millis()).unwrap_or(u32::MAX),
        )?;
        Ok(())
    };
    if let Err(e) = set() {
        tracing::debug!(error = %e, "could not set TCP keep-alive on a connection");
    }
}

/// Serves one connection; its slot is freed once its socket is closed.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    header_timeout: Duration,
    stop: CancellationToken,
    slot: OwnedSemaphorePermit,
) {
    watch_for_dead_peer(&stream);
    {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .max_buf_size(MAX_HEAD_BYTES)
            .keep_alive(true);
        let io = TokioIo::new(JsonParseErrors::new(stream));
        // the client's address for the handlers (`api/token_guesses.rs`)
        let app = axum::Extension(ConnectInfo(peer)).layer(app);
        let conn = builder.serve_connection(io, TowerToHyperService::new(app));
        let mut conn = std::pin::pin!(conn);
        let result = tokio::select! {
            result = conn.as_mut() => result,
            () = stop.cancelled() => {
                // idle connections close at once, a request in flight ends
                // (`/v1/events` streams end on the same token)
                conn.as_mut().graceful_shutdown();
                conn.as_mut().await
            }
        };
        if let Err(e) = result {
            // a client that timed out, went away or spoke no HTTP: nothing
            // the operator can act on
            tracing::debug!(error = %e, timeout = e.is_timeout(), "HTTP connection ended");
        }
    }
    drop(slot);
}

/// Accept errors: how long to pause before the next accept, and logging
/// once per episode. At the open-file limit accepts flap (one fails, a
/// connection closes, the next succeeds, the next fails), so an episode is
/// not a run of errors in a row: it lasts until accepts have gone
/// [`ACCEPT_QUIET`] without an error.
#[derive(Debug, Default)]
struct AcceptErrors {
    in_a_row: u32,
    /// The episode going on, if any.
    episode: Option<AcceptEpisode>,
    /// Episodes reported so far (one ERROR line each).
    reported: u64,
}

/// An episode of accept errors.
#[derive(Debug)]
struct AcceptEpisode {
    /// Errors in it.
    errors: u64,
    /// When the last one happened.
    last: Instant,
}

/// First pause after an accept error; each further error in a row doubles
/// it up to [`MAX_ACCEPT_PAUSE`].
const FIRST_ACCEPT_PAUSE: Duration = Duration::from_millis(10);
const MAX_ACCEPT_PAUSE: Duration = Duration::from_secs(1);
/// How long accepts go without an error before an episode of errors is
/// over (the next error is logged again).
const ACCEPT_QUIET: Duration = Duration::from_secs(60);

impl AcceptErrors {
    /// Records a failed accept at `now`; returns the pause before the next
    /// one.
    fn failed(&mut self, e: &std::io::Error, now: Instant) -> Duration {
        use std::io::ErrorKind;
        // the client gave up before we accepted: not the host's trouble
        if matches!(
            e.kind(),
            ErrorKind::ConnectionAborted
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionRefused
        ) {
            return Duration::ZERO;
        }
        // an error long after the last one: that episode ended unnoticed
        // (no accept came after the quiet time to say so)
        if self.in_a_row == 0 && self.episode_over(now) {
            self.end_episode();
        }
        match &mut self.episode {
            Some(episode) => {
                episode.errors = episode.errors.saturating_add(1);
                episode.last = now;
            }
            None => {
                tracing::error!(
                    error = %e,
                    "accept error; pausing accepts (at most 1 s at a time) until it passes, \
                     logged once until accepts have gone a minute without one. \
                     Too many open files: raise `ulimit -n` or lower host.max_connections"
                );
                self.reported = self.reported.saturating_add(1);
                self.episode = Some(AcceptEpisode {
                    errors: 1,
                    last: now,
                });
            }
        }
        self.in_a_row = self.in_a_row.saturating_add(1);
        FIRST_ACCEPT_PAUSE
            .saturating_mul(1 << (self.in_a_row - 1).min(10))
            .min(MAX_ACCEPT_PAUSE)
    }

    /// Records a successful accept at `now`.
    fn recovered(&mut self, now: Instant) {
        self.in_a_row = 0;
        if self.episode_over(now) {
            self.end_episode();
        }
    }

    fn episode_over(&self, now: Instant) -> bool {
        self.episode
            .as_ref()
            .is_some_and(|e| now.saturating_duration_since(e.last) >= ACCEPT_QUIET)
    }

    fn end_episode(&mut self) {
        if let Some(episode) = self.episode.take() {
            tracing::warn!(
                errors = episode.errors,
                "accepting connections again: no accept error for a minute"
            );
        }
    }
}

/// A request that a route takes longer than `timeout` to answer (reading
/// its body included) is answered 503 `unavailable`. The time runs until
/// the route's response is made, never over the body it then streams: a
/// `GET /v1/events` answers at once and its stream goes on. (Its path was
/// exempt from the time altogether, so a request to it that declared a
/// body and never sent it, with no token, held its connection forever:
/// QA starved the API with 16 of them.)
pub(crate) fn with_request_timeout(app: Router, timeout: Duration) -> Router {
    app.layer(axum::middleware::from_fn_with_state(
        RequestTimeout { timeout },
        time_request,
    ))
}

#[derive(Debug, Clone, Copy)]
struct RequestTimeout {
    timeout: Duration,
}

async fn time_request(
    State(limit): State<RequestTimeout>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    match tokio::time::timeout(limit.timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::debug!(%path, "request not answered within host.request_timeout_s");
            let mut refused = ApiError::Unavailable(format!(
                "the request was not answered within {} s (host.request_timeout_s): its body \
                 came too slowly or the host is busy; retry it (a message with the same \
                 Idempotency-Key)",
                limit.timeout.as_secs()
            ))
            .unlogged_response();
            crate::api::mark_answer(&mut refused);
            refused
        }
    }
}

/// Refuses, from its headers, a request whose declared `Content-Length`
/// is over `limit` bytes: `413 too_large` at once, where reading the body
/// first held the connection until the whole body came (or, for a client
/// that never sends it, until `host.request_timeout_s`).
pub(crate) fn refuse_declared_over(
    headers: &axum::http::HeaderMap,
    limit: usize,
) -> Result<(), ApiError> {
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > u64::try_from(limit).unwrap_or(u64::MAX) => {
            Err(ApiError::TooLarge { limit })
        }
        Some(_) | None => Ok(()),
    }
}

/// Refuses an HTTP/1.1 request without a `Host` header (`400`), as RFC
/// 9112 §3.2 has a server do: it was served (QA). HTTP/1.0 needs none,
/// and HTTP/2 names the host in the request itself.
pub(crate) fn with_host_required(app: Router) -> Router {
    app.layer(axum::middleware::from_fn(require_host))
}

async fn require_host(request: Request, next: Next) -> Response {
    if request.version() == axum::http::Version::HTTP_11
        && !request.headers().contains_key(axum::http::header::HOST)
    {
        let mut refused = ApiError::BadRequest(
            "an HTTP/1.1 request must carry a Host header (RFC 9112 §3.2); send `Host:` with \
             the host's address"
                .into(),
        )
        .into_response();
        crate::api::mark_answer(&mut refused);
        return refused;
    }
    next.run(request).await
}

/// [`refuse_declared_over`] as a layer over every route but the webhooks',
/// with the host's body limit (`host.max_body_bytes`); a webhook's route
/// checks its own limit (`max_payload_bytes`, at most the host's).
pub(crate) fn with_declared_length_limit(app: Router, max_body_bytes: usize) -> Router {
    app.layer(axum::middleware::from_fn_with_state(
        max_body_bytes,
        refuse_declared_length,
    ))
}

async fn refuse_declared_length(
    State(limit): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    // a webhook refuses a declared length over its own limit, never above
    // this one, naming the hook and the setting that makes it (this
    // answer, first, named the host's limit: a sender that trimmed its
    // payload below it was refused again by the hook's)
    if request.uri().path().starts_with(crate::api::HOOKS_PREFIX) {
        return next.run(request).await;
    }
    match refuse_declared_over(request.headers(), limit) {
        Ok(()) => next.run(request).await,
        Err(too_large) => {
            let mut refused = too_large.into_response();
            crate::api::mark_answer(&mut refused);
            refused
        }
    }
}

/// File descriptors to leave for the store, the index, Shell and model
/// connections when the API has all its connections open.
const FDS_FOR_THE_REST: u64 = 256;

/// A warning for the start banner when `max_connections` open connections
/// would leave fewer than [`FDS_FOR_THE_REST`] file descriptors of the
/// process's limit, which `limits` (the text of `/proc/self/limits`) says.
pub(crate) fn fd_warning(limits: &str, max_connections: u32) -> Option<String> {
    let soft: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))?
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    (soft < u64::from(max_connections) + FDS_FOR_THE_REST).then(|| {
        format!(
            "WARNING: this process may open {soft} files and host.max_connections is \
             {max_connections}: with the API's connections all open, fewer than \
             {FDS_FOR_THE_REST} are left for the store, the index and Shell; the host \
             raises its soft limit to the hard one at start, so raise the hard limit \
             (`ulimit -Hn` before starting it, systemd `LimitNOFILE=`) or lower \
             host.max_connections"
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// An accepted connection gives a vanished peer about a minute, not
    /// the kernel's ~15 minutes of retransmissions (QA).
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_accepted_socket_lets_a_vanished_peer_go_within_a_minute() {
        use rustix::net::sockopt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        assert!(!sockopt::socket_keepalive(&accepted).unwrap());
        watch_for_dead_peer(&accepted);
        assert!(sockopt::socket_keepalive(&accepted).unwrap());
        assert_eq!(
            sockopt::tcp_keepidle(&accepted).unwrap(),
            Duration::from_secs(30)
        );
        assert_eq!(sockopt::tcp_keepcnt(&accepted).unwrap(), 3);
        assert_eq!(sockopt::tcp_user_timeout(&accepted).unwrap(), 60_000);
    }

    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max processes             127431               127431               processes \n\
        Max open files            1024                 524288               files     \n";

    /// A body declared over the limit is refused from the headers: the
    /// route never runs, and the body (here one that never comes) is not
    /// waited for.
    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_unread() {
        use axum::body::Body;
        use tower::ServiceExt;
        let app = Router::new().route(
            "/",
            axum::routing::post(|body: axum::body::Bytes| async move { body.len().to_string() }),
        );
        let app = with_declared_length_limit(app, 1024);
        let never =
            Body::from_stream(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>());
        let over = Request::post("/")
            .header("content-length", "10000000")
            .body(never)
            .unwrap();
        let answer = app.clone().oneshot(over).await.unwrap();
        assert_eq!(answer.status(), axum::http::StatusCode::PAYLOAD_TOO_LARGE);
        let body = axum::body::to_bytes(answer.into_body(), 4096)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "too_large", "{body}");
        let within = Request::post("/")
            .header("content-length", "5")
            .body(Body::from("hello"))
            .unwrap();
        let answer = app.oneshot(within).await.unwrap();
        assert_eq!(answer.status(), axum::http::StatusCode::OK);
    }

    #[test]
    fn a_cap_near_the_fd_limit_is_warned_about() {
        assert_eq!(fd_warning(LIMITS, 512), None);
        assert_eq!(fd_warning(LIMITS, 768), None);
        let w = fd_warning(LIMITS, 769).unwrap();
        assert!(w.contains("1024") && w.contains("769"), "{w}");
        let unlimited = LIMITS.replace("1024                 524288", "unlimited unlimited");
        assert_eq!(fd_warning(&unlimited, 60_000), None);
        assert_eq!(fd_warning("", 60_000), None);
    }

    #[test]
    fn accept_errors_back_off_up_to_a_second() {
        let mut errors = AcceptErrors::default();
        let now = Instant::now();
        let emfile = std::io::Error::from_raw_os_error(24);
        let pauses: Vec<u128> = (0..10)
            .map(|_| errors.failed(&emfile, now).as_millis())
            .collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        errors.recovered(now);
        assert_eq!(errors.failed(&emfile, now).as_millis(), 10);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionAborted);
        assert_eq!(errors.failed(&reset, now), Duration::ZERO);
    }

    /// At the open-file limit accepts flap: fail, succeed, fail… That is
    /// one episode, logged once (it was logged at every failure after a
    /// success: 64 times in 35 s); a minute without an error ends it, and
    /// the next error is logged again.
    #[test]
    fn flapping_accept_errors_are_logged_once_per_episode() {
        let mut errors = AcceptErrors::default();
        let start = Instant::now();
        let emfile = std::io::Error::from_raw_os_error(24);
        for i in 0..64 {
            let at = start + Duration::from_millis(500 * i);
            errors.failed(&emfile, at);
            errors.recovered(at + Duration::from_millis(100));
        }
        assert_eq!(errors.reported, 1);
        let last = start + Duration::from_millis(500 * 63);
        // accepts go on without an error for a minute: the episode is over
        errors.recovered(last + ACCEPT_QUIET);
        assert!(errors.episode.is_none());
        errors.failed(&emfile, last + ACCEPT_QUIET + Duration::from_secs(1));
        assert_eq!(errors.reported, 2);
        // an error long after the last, with no accept between to end it
        let later = last + ACCEPT_QUIET * 3;
        errors.recovered(last + ACCEPT_QUIET + Duration::from_secs(2));
        errors.failed(&emfile, later);
        assert_eq!(errors.reported, 3);
    }
}
