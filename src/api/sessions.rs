//! Sessions and turns: entries after a seq, turn records, retries.

use axum::Json;
use axum::extract::Query;
use axum::extract::State;
use axum::extract::rejection::QueryRejection;
use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKind;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::ApiState;
use super::AuthUser;
use super::error::ApiError;
use super::extract::NoQuery;
use super::extract::Path;
use super::owned_bot;

/// Most entries one page returns.
const MAX_PAGE: i64 = 1000;
/// Most turns one listing of a bot's turns returns (and its default).
const MAX_TURNS: i64 = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EntriesQuery {
    #[serde(default)]
    after: Option<i64>,
    #[serde(default)]
    limit: Option<i64>,
}

pub(crate) async fn entries(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(session): Path<String>,
    query: Result<Query<EntriesQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) =
        query.map_err(|e| ApiError::BadRequest(format!("{e}; use ?after=SEQ&limit=N")))?;
    let id: SessionId = session
        .parse()
        .map_err(|e: botfleet_memory::IdError| ApiError::BadRequest(e.to_string()))?;
    let after = q.after.unwrap_or(0);
    if after < 0 {
        return Err(ApiError::BadRequest("`after` must be 0 or more".into()));
    }
    let limit = q.limit.unwrap_or(200);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "`limit` {limit} is out of range: give 1 to {MAX_PAGE} entries per page (default \
             200), and read on with `after` set to the last `seq` of the page"
        )));
    }
    let store = state.fleet.store();
    // one read: `last_seq` is never older than the entries beside it
    let (record, entries) = match store.session_page(id, after, limit).await? {
        Some((s, entries)) if s.owner == user.0 => (s, entries),
        Some(_) => return Err(no_session(&session)),
        None => {
            // the user's DM with one of their bots, not written to yet
            // (`GET /v1/bots/{bot}/session` names it): empty so far
            let bot = unwritten_dm(&state, &user, id)
                .await?
                .ok_or_else(|| no_session(&session))?;
            return Ok(Json(json!({
                "session": id,
                "bot": bot,
                "kind": SessionKind::Dm,
                "last_seq": 0,
                "entries": [],
            })));
        }
    };
    Ok(Json(json!({
        "session": id,
        "bot": record.key.bot,
        "kind": record.key.kind,
        "last_seq": record.last_seq,
        "entries": shown_to_people(entries),
    })))
}

/// `entries` as the API shows them to people: without the reasoning of a
/// thinking model's steps (`reasoning_content`), which the store keeps
/// for the model's own later requests of the turn only. Emptied, the
/// field is left out of the JSON.
pub(crate) fn shown_to_people(mut entries: Vec<Entry>) -> Vec<Entry> {
    for entry in &mut entries {
        if let EntryKind::Assistant { reasoning, .. } = &mut entry.kind {
            reasoning.clear();
        }
    }
    entries
}

fn no_session(session: &str) -> ApiError {
    ApiError::NotFound(format!("no session {session} for you"))
}

/// The bot whose DM with `user` is session `id`, among the user's bots
/// (the id is derived from the key, as `GET /v1/bots/{bot}/session` does).
pub(crate) async fn unwritten_dm(
    state: &ApiState,
    user: &AuthUser,
    id: SessionId,
) -> Result<Option<BotId>, ApiError> {
    let bots = state.fleet.store().list_bots(Some(&user.0)).await?;
    Ok(bots
        .into_iter()
        .map(|b| b.id)
        .find(|bot| super::dm_of(bot, user) == id))
}

async fn owned_turn(
    state: &ApiState,
    user: &AuthUser,
    turn: &str,
) -> Result<botfleet_memory::TurnRecord, ApiError> {
    let id: TurnId = turn
        .parse()
        .map_err(|e: botfleet_memory::IdError| ApiError::BadRequest(e.to_string()))?;
    let record = match state.fleet.store().get_turn(id).await? {
        Some(record) => record,
        // not stored yet: it may be running its first step
        None => {
            let mine: Vec<BotId> = state
                .fleet
                .store()
                .list_bots(Some(&user.0))
                .await?
                .into_iter()
                .map(|b| b.id)
                .collect();
            state
                .fleet
                .turn_record(id, &mine)
                .await?
                .ok_or_else(|| ApiError::NotFound(format!("no turn {turn}")))?
        }
    };
    owned_bot(state, user, record.bot.as_str())
        .await
        .map_err(|_| ApiError::NotFound(format!("no turn {turn}")))?;
    Ok(record)
}

pub(crate) async fn turn(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(turn): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let record = owned_turn(&state, &user, &turn).await?;
    let calls = state.fleet.store().tool_calls(record.id).await?;
    Ok(Json(json!({ "turn": record, "tool_calls": calls })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TurnsQuery {
    #[serde(default)]
    limit: Option<i64>,
}

/// `GET /v1/bots/{bot}/turns?limit=N`: the bot's last turns, newest first.
pub(crate) async fn turns_of_bot(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    query: Result<Query<TurnsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::BadRequest(format!("{e}; use ?limit=N")))?;
    let limit = q.limit.unwrap_or(MAX_TURNS);
    if !(1..=MAX_TURNS).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "`limit` must be 1-{MAX_TURNS}"
        )));
    }
    let b = owned_bot(&state, &user, &bot).await?;
    let mut turns = state.fleet.store().turns_of_bot(&b.id, limit).await?;
    // a running turn is listed before its first step is stored
    if let Some(running) = state.fleet.running_record(&b.id).await?
        && !turns.iter().any(|t| t.id == running.id)
    {
        turns.insert(0, running);
        turns.truncate(limit as usize);
    }
    Ok(Json(json!({ "turns": turns })))
}

pub(crate) async fn retry(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(turn): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let record = owned_turn(&state, &user, &turn).await?;
    if record.status == TurnStatus::Running {
        return Err(ApiError::Conflict(format!(
            "turn {turn} is still running; wait for it to end, or cancel it first"
        )));
    }
    let requeued = state.fleet.retry(record.id).await?;
    Ok(Json(json!({ "turn": record.id, "requeued": requeued })))
}
