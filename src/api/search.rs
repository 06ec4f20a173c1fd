//! `GET /v1/search?q=...&bot=...&session=...&limit=...&offset=...`: full-text search
//! over the transcripts the user may see (docs/search.md, docs/api.md).
//!
//! Visibility is [`VisibleSessions`]: the sessions of the user's bots and
//! the timelines of the rooms they may use; `bot` narrows it to what that
//! bot itself may search (the same rule as its SearchTranscript tool). A
//! room another user shared with them after it began is searched from the
//! change that gave it to them on (`Store::history_floors`).

use std::collections::HashMap;
use std::num::IntErrorKind;

use axum::Json;
use axum::extract::Query;
use axum::extract::RawQuery;
use axum::extract::State;
use axum::extract::rejection::QueryRejection;
use botfleet_actors::tools::VisibleSessions;
use botfleet_actors::tools::describe_session;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryKind;
use botfleet_memory::IndexError;
use botfleet_memory::MAX_SEARCH_LIMIT;
use botfleet_memory::MAX_SEARCH_OFFSET;
use botfleet_memory::SearchHit;
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
    #[serde(default)]
    offset: Option<String>,
}

/// When `bot` names no bot of the user but a room whose timeline they may
/// search (a room hit's `bot` is its room id), the error that says so and
/// how to search only that room: `bot` takes a bot, `session` the room's
/// timeline. `None` for anything else (the caller's "no bot" stands, with
/// the same answer whether a room of another user has that id or not).
async fn room_as_bot(
    state: &ApiState,
    user: &AuthUser,
    bot: &str,
) -> Result<Option<ApiError>, ApiError> {
    // found in any case, as every route taking a room finds it (QA:
    // `bot=standup` for the room `Standup` lost the hint)
    let Ok(room) = botfleet_actors::group::room_for(state.fleet.runtime(), &user.0, bot).await
    else {
        return Ok(None);
    };
    let timeline = botfleet_memory::room_timeline(&room.id).id();
    let visible = VisibleSessions::of_user(state.fleet.runtime(), &user.0).await?;
    if !visible.contains(timeline) {
        return Ok(None);
    }
    Ok(Some(ApiError::NotFound(format!(
        "no bot {bot:?} for you: {:?} is a room; `bot` takes one of your bots. To search \
         only the room's public timeline, give its session: \
         GET /v1/search?q=WORDS&session={timeline} or `botfleet search WORDS --session \
         {timeline}`",
        room.id.as_str()
    ))))
}

/// Whether a bot wrote `hit` (its reply, its call's result, its message
/// to another bot), so that its author is a bot's id. A person's message
/// is never given a bot's name, even where their user id is also a bot's
/// (QA: user `zed`'s message showed as written by the bot `zed`).
fn by_a_bot(hit: &SearchHit) -> bool {
    matches!(hit.role.as_str(), "assistant" | "agent" | "tool")
}

/// Maps an index error to the API's answer: a refused query is the
/// client's to fix (400, the message says what to change).
fn index_error(e: IndexError) -> ApiError {
    if let IndexError::Query(q) = &e {
        return ApiError::BadRequest(format!("q: {q}"));
    }
    // a damaged index (being rebuilt), a search past its deadline, or every
    // search slot taken: 503 with the index's own words, which say how long
    if matches!(
        e,
        IndexError::Damaged { .. }
            | IndexError::SearchTimeout { .. }
            | IndexError::SearchesBusy { .. }
    ) {
        return ApiError::Unavailable(e.to_string());
    }
    if e.is_retryable() {
        ApiError::Unavailable(format!("the search index is busy ({e}); retry shortly"))
    } else {
        ApiError::Internal(format!("search index error: {e}"))
    }
}

/// `raw` read as the other routes read a number: digits (a `-` first
/// for a negative one, out of range), no sign `+` or space around them.
fn whole_number(raw: &str) -> Result<i64, std::num::ParseIntError> {
    if raw.starts_with('+') || raw.trim() != raw {
        // what the parse says of any other stray character
        return "x".parse();
    }
    raw.parse()
}

fn parse_limit(raw: Option<&str>) -> Result<usize, ApiError> {
    let Some(raw) = raw else {
        return Ok(botfleet_memory::DEFAULT_SEARCH_LIMIT);
    };
    let problem = match whole_number(raw) {
        Ok(n) => match usize::try_from(n) {
            Ok(n) if (1..=MAX_SEARCH_LIMIT).contains(&n) => return Ok(n),
            Ok(_) | Err(_) => "is out of range",
        },
        Err(e)
            if matches!(
                e.kind(),
                IntErrorKind::PosOverflow | IntErrorKind::NegOverflow
            ) =>
        {
            "is out of range"
        }
        Err(_) => "is not a number",
    };
    Err(ApiError::BadRequest(format!(
        "limit {} {problem}: give a number of hits from 1 to {MAX_SEARCH_LIMIT}",
        botfleet_memory::quote_short(raw)
    )))
}

/// The hits to skip (paging), 0 when absent; past [`MAX_SEARCH_OFFSET`]
/// or not a number is the client's to fix.
fn parse_offset(raw: Option<&str>) -> Result<usize, ApiError> {
    let Some(raw) = raw else {
        return Ok(0);
    };
    let problem = match whole_number(raw) {
        Ok(n) => match usize::try_from(n) {
            Ok(n) if n <= MAX_SEARCH_OFFSET => return Ok(n),
            Ok(_) | Err(_) => "is out of range",
        },
        Err(e)
            if matches!(
                e.kind(),
                IntErrorKind::PosOverflow | IntErrorKind::NegOverflow
            ) =>
        {
            "is out of range"
        }
        Err(_) => "is not a number",
    };
    Err(ApiError::BadRequest(format!(
        "offset {} {problem}: give the number of hits to skip, from 0 to {MAX_SEARCH_OFFSET} \
         (the next page starts at `next_offset`); for deeper results narrow the query",
        botfleet_memory::quote_short(raw)
    )))
}

/// Whether `id` is a session the caller may read that nobody has written
/// in yet, so that it has no record (and no hits): the user's DM with one
/// of their bots (`GET /v1/bots/{bot}/session` names it, and
/// `GET /v1/sessions/{id}/entries` answers it empty) or the timeline of a
/// room they may use; with `bot`, only that bot's DM and its rooms. Such
/// a session is searched (no hits), not refused as someone else's.
async fn unwritten_but_readable(
    state: &ApiState,
    user: &AuthUser,
    bot: Option<&BotRecord>,
    id: SessionId,
) -> Result<bool, ApiError> {
    let rt = state.fleet.runtime();
    match bot {
        Some(bot) => {
            if super::dm_of(&bot.id, user) == id {
                return Ok(true);
            }
            let rooms = rt.store.rooms_for(&bot.owner).await?;
            Ok(rooms
                .iter()
                .any(|r| r.members.contains(&bot.id) && r.timeline().id() == id))
        }
        None => {
            if super::sessions::unwritten_dm(state, user, id)
                .await?
                .is_some()
            {
                return Ok(true);
            }
            let rooms = botfleet_actors::group::rooms_for(rt, &user.0).await?;
            Ok(rooms.iter().any(|r| r.timeline().id() == id))
        }
    }
}

pub(crate) async fn search(
    State(state): State<ApiState>,
    user: AuthUser,
    RawQuery(raw): RawQuery,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    super::query_text::check_utf8(raw.as_deref())?;
    let p = super::extract::query(
        params,
        "use ?q=WORDS with optional &bot=ID&session=ID&limit=N&offset=N",
    )?;
    let Some(q) = p.q else {
        return Err(ApiError::BadRequest(
            "missing q: pass the words to search for as ?q=WORDS".into(),
        ));
    };
    let limit = parse_limit(p.limit.as_deref())?;
    let offset = parse_offset(p.offset.as_deref())?;
    let rt = state.fleet.runtime();
    let index = rt.transcript_index().ok_or_else(|| {
        ApiError::Unavailable("transcript search is not running on this host".into())
    })?;
    let bot = match &p.bot {
        Some(bot) => match owned_bot(&state, &user, bot).await {
            Ok(record) => Some(record),
            Err(e) => return Err(room_as_bot(&state, &user, bot).await?.unwrap_or(e)),
        },
        None => None,
    };
    let visible = match &bot {
        Some(record) => VisibleSessions::of_bot(&rt.store, record).await?,
        None => VisibleSessions::of_user(rt, &user.0).await?,
    };
    let sessions = match &p.session {
        Some(raw) => {
            let not_yours = || {
                ApiError::NotFound(format!(
                    "no session {} for you{}; search without `session`, or use the `session` of a hit",
                    botfleet_memory::quote_short(raw),
                    p.bot
                        .as_deref()
                        .map(|b| format!(" among what bot {b:?} may see"))
                        .unwrap_or_default()
                ))
            };
            let id: SessionId = raw.trim().parse().map_err(|_| {
                ApiError::BadRequest(format!(
                    "session {} is not a session id (a UUID of 36 characters); use the \
                     `session` of a hit",
                    botfleet_memory::quote_short(raw)
                ))
            })?;
            if !visible.contains(id)
                && !unwritten_but_readable(&state, &user, bot.as_ref(), id).await?
            {
                return Err(not_yours());
            }
            vec![id]
        }
        None => visible.ids(),
    };
    // rooms shared with the user after they began, sessions given to them
    // with a bot: read from the change that gave them to the user on, the
    // history before it is not found
    let floors = rt.store.history_floors(&user.0).await?;
    // a room's messages once, on its timeline, not again in the sessions
    // of the members that were shown them
    let copies = visible.room_copies(&rt.store, &sessions, &floors).await?;
    // a message between bots once: where it arrived, a subagent's report
    // where the subagent said it
    let sent = visible.bot_copies(&sessions);
    let query = SearchQuery::new(q.clone())
        .in_sessions(sessions)
        .visible_from(floors)
        .without_room_copies(copies)
        .without_bot_copies(sent)
        .with_limit(limit)
        .with_offset(offset);
    let results = index.search(query).await.map_err(index_error)?;
    // display names of the bots that wrote the hits: in a shared room
    // they include other users' bots, which the caller's bot list lacks
    let mut names: HashMap<&str, String> = HashMap::new();
    for h in results.hits.iter().filter(|h| by_a_bot(h)) {
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
    // an approval's card is appended at each status change, one hit each
    // with the same text: each says which status it is (QA: two alike
    // hits, neither saying whether it was asked or decided)
    let mut approval_status: HashMap<(SessionId, i64), &'static str> = HashMap::new();
    for h in results.hits.iter().filter(|h| h.kind == "approval") {
        let entries = rt.store.entries_between(h.session, h.seq, h.seq).await?;
        if let Some(EntryKind::Approval { status, .. }) = entries.first().map(|e| &e.kind) {
            approval_status.insert((h.session, h.seq), status.as_str());
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
                if let Some(name) = names.get(h.author.as_str()).filter(|_| by_a_bot(h)) {
                    map.insert("author_name".into(), json!(name));
                }
                if let Some(status) = approval_status.get(&(h.session, h.seq)) {
                    map.insert("approval_status".into(), json!(status));
                }
            }
            v
        })
        .collect();
    // the hits after this page; `next_offset` is null on the last page and
    // when the next page would start past MAX_SEARCH_OFFSET (refused)
    let end = offset + hits.len();
    let more = !hits.is_empty() && end < results.total;
    let next_offset = (more && end <= MAX_SEARCH_OFFSET).then_some(end);
    Ok(Json(json!({
        "query": q,
        "total": results.total,
        "offset": offset,
        "more": more,
        "next_offset": next_offset,
        "hits": hits,
    })))
}
