//! The HTTP API (`/v1`, JSON, bearer auth) and the web page.
//! docs/api.md documents every route; docs/openapi.yaml is its schema.

mod approvals;
mod auth;
mod bots;
mod error;
mod events;
mod groups;
mod hooks;
mod memory;
mod routines;
mod search;
mod secrets;
mod sessions;
mod ui;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::delete;
use axum::routing::get;
use axum::routing::post;
use botfleet_actors::FleetHandle;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;

pub use auth::AuthUser;
pub use auth::Tokens;
pub use error::ApiError;
pub use hooks::HookSecret;
pub use hooks::Hooks;
pub use hooks::sign as sign_hook;

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
    /// The routines scheduler.
    pub scheduler: botfleet_actors::scheduler::SchedulerHandle,
    /// Webhooks and their secrets.
    pub hooks: Hooks,
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
        .route("/v1/bots/{bot}/memory", get(memory::of_bot))
        .route("/v1/memory/{id}", delete(memory::forget))
        .route("/v1/bots/{bot}/routines", get(routines::list))
        .route(
            "/v1/bots/{bot}/routines/{name}",
            axum::routing::put(routines::put).delete(routines::delete),
        )
        .route("/v1/hooks/{bot}/{hook}", post(hooks::deliver))
        .route("/v1/sessions/{session}/entries", get(sessions::entries))
        .route("/v1/turns/{turn}", get(sessions::turn))
        .route("/v1/turns/{turn}/retry", post(sessions::retry))
        .route("/v1/approvals", get(approvals::list))
        .route(
            "/v1/approvals/{id}",
            get(approvals::get_one).post(approvals::decide),
        )
        .route("/v1/groups", get(groups::list).post(groups::create))
        .route("/v1/groups/{group}", get(groups::get_one))
        .route("/v1/groups/{group}/messages", post(groups::post_message))
        .route("/v1/groups/{group}/entries", get(groups::entries))
        .route("/v1/search", get(search::search))
        .route("/v1/events", get(events::stream))
        .route("/v1/secrets", get(secrets::list))
        .route(
            "/v1/secrets/{name}",
            axum::routing::put(secrets::put).delete(secrets::delete),
        )
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
