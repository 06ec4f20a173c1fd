//! `GET /v1/search?q=...&bot=...&session=...&limit=...`: full-text search
//! over the transcripts the user may see (docs/search.md, docs/api.md).
//!
//! Visibility is [`VisibleSessions`]: the sessions of the user's bots and
//! the timelines of the rooms they may use; `bot` narrows it to what that
//! bot itself may search (the same rule as its SearchTranscript tool).

use std::collections::HashMap;

use axum::Json;
use axum::extract::Query;
use axum::extract::State;
use axum::extract::rejection::QueryRejection;
use botfleet_actors::tools::VisibleSessions;
use botfleet_actors::tools::describe_session;
use botfleet_memory::BotId;
use botfleet_memory::IndexError;
use botfleet_memory::MAX_SEARCH_LIMIT;
use botfleet_memory::SearchQuery;
use botfleet_memory::SessionId;
use botfleet_memory::TranscriptSearch;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::ApiState;
use super::AuthUser;
use super::error::ApiError;
use super::owned_bot;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchParams {
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    bot: Option<String>,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    limit: Option<String>,
}

/// Maps an index error to the API's answer: a refused query is the
/// client's to fix (400, the message says what to change).
fn index_error(e: IndexError) -> ApiError {
    if let IndexError::Query(q) = &e {
        return ApiError::BadRequest(format!("q: {q}"));
    }
    if e.is_retryable() {
        ApiError::Unavailable(format!("the search index is busy ({e}); retry shortly"))
    } else {
        ApiError::Internal(format!("search index error: {e}"))
    }
}

fn parse_limit(raw: Option<&str>) -> Result<usize, ApiError> {
    let Some(raw) = raw else {
        return Ok(botfleet_memory::DEFAULT_SEARCH_LIMIT);
    };
    raw.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_SEARCH_LIMIT).contains(n))
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "limit {raw:?} is out of range: give a number of hits from 1 to {MAX_SEARCH_LIMIT}"
            ))
        })
}

pub(crate) async fn search(
    State(state): State<ApiState>,
    user: AuthUser,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(p) = params.map_err(|e| {
        ApiError::BadRequest(format!(
            "{e}; use ?q=WORDS with optional &bot=ID&session=ID&limit=N"
        ))
    })?;
    let Some(q) = p.q else {
        return Err(ApiError::BadRequest(
            "missing q: pass the words to search for as ?q=WORDS".into(),
        ));
    };
    let limit = parse_limit(p.limit.as_deref())?;
    let rt = state.fleet.runtime();
    let index = rt.transcript_index().ok_or_else(|| {
        ApiError::Unavailable("transcript search is not running on this host".into())
    })?;
    let visible = match &p.bot {
        Some(bot) => {
            let record = owned_bot(&state, &user, bot).await?;
            VisibleSessions::of_bot(&rt.store, &record).await?
        }
        None => VisibleSessions::of_user(rt, &user.0).await?,
    };
    let sessions = match &p.session {
        Some(raw) => {
            let not_yours = || {
                ApiError::NotFound(format!(
                    "no session {raw:?} for you{}; search without `session`, or use the `session` of a hit",
                    p.bot
                        .as_deref()
                        .map(|b| format!(" among what bot {b:?} may see"))
                        .unwrap_or_default()
                ))
            };
            let id: SessionId = raw.trim().parse().map_err(|_| {
                ApiError::BadRequest(format!(
                    "session {raw:?} is not a session id (a UUID); use the `session` of a hit"
                ))
            })?;
            if !visible.contains(id) {
                return Err(not_yours());
            }
            vec![id]
        }
        None => visible.ids(),
    };
    let query = SearchQuery::new(q.clone())
        .in_sessions(sessions)
        .with_limit(limit);
    let results = index.search(query).await.map_err(index_error)?;
    // display names of the bots that wrote the hits: in a shared room
    // they include other users' bots, which the caller's bot list lacks
    let mut names: HashMap<&str, String> = HashMap::new();
    for h in &results.hits {
        if names.contains_key(h.author.as_str()) {
            continue;
        }
        let Ok(id) = BotId::new(&h.author) else {
            continue;
        };
        if let Some(bot) = rt.store.get_bot(&id).await? {
            names.insert(h.author.as_str(), bot.name);
        }
    }
    let hits: Vec<Value> = results
        .hits
        .iter()
        .map(|h| {
            let mut v = serde_json::to_value(h).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut v {
                if let Some(s) = visible.get(h.session) {
                    map.insert("session_kind".into(), json!(s.key.kind));
                    map.insert("where".into(), json!(describe_session(s)));
                }
                if let Some(name) = names.get(h.author.as_str()) {
                    map.insert("author_name".into(), json!(name));
                }
            }
            v
        })
        .collect();
    Ok(Json(json!({
        "query": q,
        "total": results.total,
        "hits": hits,
    })))
}
