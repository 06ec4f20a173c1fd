//! The HTTP API (`/v1`, JSON, bearer auth) and the web page.
//! docs/api.md documents every route; docs/openapi.yaml is its schema.

mod auth;
mod bots;
mod error;
mod events;
mod sessions;
mod ui;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::routing::post;
use botfleet_actors::FleetHandle;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;

pub use auth::AuthUser;
pub use auth::Tokens;
pub use error::ApiError;

/// Limits the API enforces.
#[derive(Debug, Clone)]
pub struct ApiLimits {
    /// Largest request body in bytes.
    pub max_body_bytes: usize,
    /// Longest message text in characters.
    pub max_text_chars: usize,
}

/// What every handler shares.
#[derive(Clone)]
pub struct ApiState {
    /// The running fleet.
    pub fleet: FleetHandle,
    /// Bearer tokens.
    pub tokens: Tokens,
    /// Limits.
    pub limits: ApiLimits,
}

/// The whole HTTP surface.
pub fn router(state: ApiState) -> Router {
    let limit = state.limits.max_body_bytes;
    Router::new()
        .route("/", get(ui::page))
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/bots", get(bots::list))
        .route("/v1/bots/{bot}", get(bots::get_one))
        .route("/v1/bots/{bot}/messages", post(bots::post_message))
        .route("/v1/bots/{bot}/session", get(bots::dm_session))
        .route("/v1/bots/{bot}/cancel", post(bots::cancel))
        .route("/v1/bots/{bot}/turns", get(sessions::turns_of_bot))
        .route("/v1/sessions/{session}/entries", get(sessions::entries))
        .route("/v1/turns/{turn}", get(sessions::turn))
        .route("/v1/turns/{turn}/retry", post(sessions::retry))
        .route("/v1/events", get(events::stream))
        .fallback(|| async { ApiError::NotFound("no such route; see docs/api.md".into()) })
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// A bot the user may use: it exists and the user owns it. Other users'
/// bots are reported as missing, so ids do not leak across users.
pub(crate) async fn owned_bot(
    state: &ApiState,
    user: &AuthUser,
    bot: &str,
) -> Result<BotRecord, ApiError> {
    let id = BotId::new(bot).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    match state.fleet.store().get_bot(&id).await? {
        Some(b) if b.owner == user.0 => Ok(b),
        _ => Err(ApiError::NotFound(format!(
            "no bot {bot:?} for you; list your bots with GET /v1/bots"
        ))),
    }
}
