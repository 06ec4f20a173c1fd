//! `GET /v1/events`: server-sent, payload-free change signals. Each event
//! says that a session of the user has entries up to a seq; clients fetch
//! what they lack with `GET /v1/sessions/{session}/entries?after=SEQ`. When
//! a client falls behind, a `resync` event tells it to re-fetch everything
//! it shows.

use std::convert::Infallible;
use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::response::sse::Event;
use axum::response::sse::KeepAlive;
use axum::response::sse::Sse;
use futures::Stream;
use futures::StreamExt;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::ApiState;
use super::AuthUser;
use super::extract::NoQuery;

/// The stream ends when the host stops: the host's stop token is given
/// to the router as an `Extension<CancellationToken>` (src/host.rs), and
/// the graceful shutdown of the server waits for open responses.
pub(crate) async fn stream(
    State(state): State<ApiState>,
    user: AuthUser,
    _: NoQuery,
    stop: Option<Extension<CancellationToken>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stop = stop.map(|Extension(token)| token).unwrap_or_default();
    let rx = state.fleet.store().subscribe();
    let user = user.0;
    let events = futures::stream::unfold((rx, user, true), |(mut rx, user, first)| async move {
        if first {
            let hello = Event::default().event("ready").data("{}");
            return Some((Ok(hello), (rx, user, false)));
        }
        loop {
            match rx.recv().await {
                Ok(change) if change.owner == user => {
                    let data =
                        json!({"session": change.session, "seq": change.seq, "bot": change.bot});
                    let event = Event::default().event("change").data(data.to_string());
                    return Some((Ok(event), (rx, user, false)));
                }
                Ok(_) => continue,
                Err(RecvError::Lagged(n)) => {
                    let event = Event::default()
                        .event("resync")
                        .data(json!({ "missed": n }).to_string());
                    return Some((Ok(event), (rx, user, false)));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    });
    let events = events.take_until(stop.cancelled_owned());
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
