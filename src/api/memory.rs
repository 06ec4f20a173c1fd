//! `/v1/bots/{bot}/memory` (what a bot remembers) and `/v1/memory/{id}`
//! (forget one item). Only the owner sees and forgets: a user manages
//! their own user scope, the agent scopes of their bots, and the project
//! scopes their bots joined.

use axum::Json;
use axum::extract::Query;
use axum::extract::RawQuery;
use axum::extract::State;
use botfleet_actors::MemoryReach;
use botfleet_actors::MemoryState;
use botfleet_memory::Layer;
use botfleet_memory::MAX_LIVE_NOTES;
use botfleet_memory::MAX_LOG_ENTRIES;
use botfleet_memory::MAX_PROFILE_CHARS;
use botfleet_memory::MAX_PROFILE_FACTS;
use botfleet_memory::MemoryError;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemoryLookup;
use botfleet_memory::MemoryOpResult;
use botfleet_memory::MemoryScope;
use botfleet_memory::bot_projects;
use botfleet_memory::bot_scopes;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::ApiState;
use super::AuthUser;
use super::error::ApiError;
use super::extract::NoQuery;
use super::extract::Path;
use super::owned_bot;

/// Longest `input` accepted for a recall preview.
const MAX_INPUT_CHARS: usize = 4000;

impl From<MemoryError> for ApiError {
    fn from(e: MemoryError) -> Self {
        match e {
            MemoryError::Store(s) => s.into(),
            other if other.is_retryable() => {
                ApiError::Unavailable(format!("{other}; retry shortly"))
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MemoryQuery {
    /// Preview the memory block a DM turn with this input would get.
    #[serde(default)]
    input: Option<String>,
}

/// `GET /v1/bots/{bot}/memory[?input=...]`: every item of every scope
/// the bot reaches, and `prompt`, the memory block its prompt would hold
/// for `input` in a DM, rendered as the turn renders it
/// (`MemoryState::preview`: bounded by its provider's budget): `shown`
/// are the ids the block holds (items of `scopes` not among them, and
/// `recall` entries not among them, are left out of the prompt), `hash`
/// the SHA-256 of the block's text, `recall` the log entries recalled
/// for `input`, best first, before the bound.
pub(crate) async fn of_bot(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    RawQuery(raw): RawQuery,
    query: Result<Query<MemoryQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    super::query_text::check_utf8(raw.as_deref())?;
    let q = super::extract::query(query, "use ?input=TEXT")?;
    let bot = owned_bot(&state, &user, &bot).await?;
    let input = q.input.unwrap_or_default();
    if input.chars().count() > MAX_INPUT_CHARS {
        return Err(ApiError::BadRequest(format!(
            "`input` is longer than {MAX_INPUT_CHARS} characters; send a shorter preview text"
        )));
    }
    let store = state.fleet.store();
    let now = store.clock().now_ms();
    let scopes = bot_scopes(&bot);
    let items = store.memory_items(scopes.clone(), now).await?;
    let mut out = Vec::with_capacity(scopes.len());
    for scope in &scopes {
        let of = |layer: Layer| -> Vec<&MemoryItem> {
            items
                .iter()
                .filter(|i| &i.scope == scope && i.layer == layer)
                .collect()
        };
        let profile = of(Layer::Profile);
        let chars: usize = profile.iter().map(|i| i.chars()).sum();
        let log = of(Layer::Log);
        let notes = of(Layer::Notes);
        out.push(json!({
            "scope": scope,
            "profile": {
                "items": profile,
                "count": profile.len(),
                "chars": chars,
                "max_facts": MAX_PROFILE_FACTS,
                "max_chars": MAX_PROFILE_CHARS,
            },
            "log": {"items": log, "count": log.len(), "max": MAX_LOG_ENTRIES},
            "notes": {"items": notes, "count": notes.len(), "max": MAX_LIVE_NOTES},
        }));
    }
    // the block exactly as the bot's next turn with this input renders it
    // in a DM: the same code, bounded by its provider's settings
    let preview = MemoryState::new(store.clone())
        .bounded_by(&state.fleet.runtime().settings)
        .preview(&bot, &input, MemoryReach::All)
        .await?;
    let recall: Vec<Value> = preview
        .snapshot
        .ranking
        .iter()
        .map(|s| {
            json!({
                "id": s.item.id,
                "score": s.score,
                "relevance": s.relevance,
                "recency": s.recency,
                "weight": s.weight,
            })
        })
        .collect();
    Ok(Json(json!({
        "bot": bot.id,
        "scopes": out,
        "prompt": {
            "hash": hex::encode(preview.block.hash),
            "shown": preview.block.shown,
            "recall": recall,
        },
    })))
}

/// Whether `user` manages `scope`.
async fn manages(state: &ApiState, user: &AuthUser, scope: &MemoryScope) -> Result<bool, ApiError> {
    Ok(match scope {
        MemoryScope::User(u) => u == &user.0,
        MemoryScope::Agent(b) => state
            .fleet
            .store()
            .get_bot(b)
            .await?
            .is_some_and(|b| b.owner == user.0),
        // a project's bots are in the config ([[bots]] `projects`): the
        // user's bots other than subagents, not every subagent record too
        MemoryScope::Project(p) => state
            .fleet
            .store()
            .main_bots_of(&user.0)
            .await?
            .iter()
            .any(|b| bot_projects(b).contains(p)),
    })
}

/// `DELETE /v1/memory/{id}`.
pub(crate) async fn forget(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(id): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let id = MemoryId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let not_found = || {
        ApiError::NotFound(format!(
            "no memory item {id} for you; list what a bot remembers with GET \
             /v1/bots/{{bot}}/memory or `botfleet memory BOT`"
        ))
    };
    let (scope, expired) = match state.fleet.store().memory_lookup(&id).await? {
        MemoryLookup::Found(item) => (item.scope, None),
        MemoryLookup::Forgotten(scope) => (scope, None),
        MemoryLookup::Expired { scope, at } => (scope, Some(at)),
        MemoryLookup::Unknown => return Err(not_found()),
    };
    if !manages(&state, &user, &scope).await? {
        return Err(not_found());
    }
    // a note past its expiry is gone, whether or not it was purged yet
    // (`memory_lookup` says so; forgetting one answered with the model's
    // "list what is remembered")
    if let Some(at) = expired {
        let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(at).unwrap_or_default();
        return Err(ApiError::NotFound(format!(
            "{id} was a note of {scope} that expired at {}; it is gone already",
            at.format("%Y-%m-%d %H:%M UTC")
        )));
    }
    match state.fleet.runtime().memory.forget(&id).await? {
        MemoryOpResult::Removed(item) => Ok(Json(json!({
            "status": "forgotten",
            "id": item.id,
            "scope": item.scope,
            "layer": item.layer,
        }))),
        MemoryOpResult::AlreadyForgotten(id) => Ok(Json(json!({
            "status": "already_forgotten",
            "id": id,
            "scope": scope,
        }))),
        MemoryOpResult::Refused(r) => Err(ApiError::NotFound(format!("{r}"))),
        other @ (MemoryOpResult::Added(_)
        | MemoryOpResult::Unchanged(_)
        | MemoryOpResult::Replaced { .. }
        | MemoryOpResult::Purged(_)) => Err(ApiError::Internal(format!(
            "forgetting {id} answered {other:?}"
        ))),
    }
}
