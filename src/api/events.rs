//! `GET /v1/events`: server-sent, payload-free change signals. Each event
//! says that a session of the user has entries up to a seq; clients fetch
//! what they lack with `GET /v1/sessions/{session}/entries?after=SEQ`. When
//! a client falls behind, a `resync` event tells it to re-fetch everything
//! it shows; it says nothing of how many signals were missed (the host's
//! one channel of signals holds every user's, so that count would be the
//! host's, not the user's). Open streams are capped per user and in all
//! (`event_slots.rs`).

use std::convert::Infallible;
use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::response::sse::Event;
use axum::response::sse::KeepAlive;
use axum::response::sse::Sse;
use botfleet_memory::UserId;
use futures::Stream;
use futures::StreamExt;
use serde_json::json;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::ApiState;
use super::AuthUser;
use super::event_slots::RETRY_AFTER_S;
use super::event_slots::StreamSlot;
use super::extract::NoQuery;

/// The stream ends when the host stops: the host's stop token is given
/// to the router as an `Extension<CancellationToken>` (src/host.rs), and
/// the graceful shutdown of the server waits for open responses.
///
/// A stream over a cap is refused with `Retry-After` and `Connection:
/// close`: the refused client's connection is given back at once rather
/// than held idle until the header timeout.
pub(crate) async fn stream(
    State(state): State<ApiState>,
    user: AuthUser,
    _: NoQuery,
    stop: Option<Extension<CancellationToken>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Response> {
    let slot = state.limits.streams.open(&user.0).map_err(|refused| {
        let headers = [
            (header::RETRY_AFTER, RETRY_AFTER_S.to_string()),
            (header::CONNECTION, "close".to_owned()),
        ];
        (headers, refused).into_response()
    })?;
    let stop = stop.map(|Extension(token)| token).unwrap_or_default();
    let follow = Follow {
        rx: state.fleet.store().subscribe(),
        user: user.0,
        first: true,
        _slot: slot,
    };
    let events = futures::stream::unfold(follow, |mut f| async move {
        if f.first {
            f.first = false;
            let hello = Event::default().event("ready").data("{}");
            return Some((Ok(hello), f));
        }
        loop {
            match f.rx.recv().await {
                Ok(change) if change.owner == f.user => {
                    let data =
                        json!({"session": change.session, "seq": change.seq, "bot": change.bot});
                    let event = Event::default().event("change").data(data.to_string());
                    return Some((Ok(event), f));
                }
                Ok(_) => continue,
                // `n` counts the signals of every user that this stream
                // did not read, and those of this user among them are
                // gone unread: it is no count of what this user missed,
                // and it would tell them how busy the others are
                Err(RecvError::Lagged(_)) => {
                    let event = Event::default().event("resync").data("{}");
                    return Some((Ok(event), f));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    });
    let events = events.take_until(stop.cancelled_owned());
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// What one stream follows, and its slot under the caps, held for as long
/// as the response body lives.
struct Follow {
    rx: broadcast::Receiver<botfleet_memory::Change>,
    user: UserId,
    first: bool,
    _slot: StreamSlot,
}
