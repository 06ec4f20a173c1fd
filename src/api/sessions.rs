//! Sessions and turns: entries after a seq, turn records, retries.

use std::collections::HashMap;

use axum::Json;
use axum::extract::Query;
use axum::extract::State;
use axum::extract::rejection::QueryRejection;
use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
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

/// How to write the query of a page of entries, with the ranges
/// [`entries_page`] takes: the hint after a query serde could not read
/// (a constant, not made for each request; `the_hints_give_the_ranges`
/// holds it to `MAX_PAGE`).
pub(crate) const PAGE_HINT: &str = "use ?after=SEQ (0 for the first page)&limit=N (1 to 1000)";

/// The hint of the turns route's query, with [`MAX_TURNS`].
const TURNS_HINT: &str = "use ?limit=N (1 to 100) and ?before=TURN (the last turn of a page)";

/// `after` and `limit` of a page of entries (a session's, a room's
/// timeline), checked: one wording for both routes (QA: a room's said
/// only "`limit` must be 1-1000").
pub(crate) fn entries_page(after: Option<i64>, limit: Option<i64>) -> Result<(i64, i64), ApiError> {
    let after = after.unwrap_or(0);
    if after < 0 {
        return Err(ApiError::BadRequest(format!(
            "`after` {after} is out of range: give 0 for the first page, or the last `seq` of \
             the page you read"
        )));
    }
    let limit = limit.unwrap_or(200);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "`limit` {limit} is out of range: give 1 to {MAX_PAGE} entries per page (default \
             200), and read on with `after` set to the last `seq` of the page"
        )));
    }
    Ok((after, limit))
}

pub(crate) async fn entries(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(session): Path<String>,
    query: Result<Query<EntriesQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = super::extract::query(query, PAGE_HINT)?;
    let id: SessionId = session
        .parse()
        .map_err(|e: botfleet_memory::IdError| ApiError::BadRequest(e.to_string()))?;
    let (after, limit) = entries_page(q.after, q.limit)?;
    let store = state.fleet.store();
    // one read: `last_seq` is never older than the entries beside it, and
    // a session given to the user with its bot is read from that change on
    let (record, entries) = match store.session_page_for(id, &user.0, after, limit).await? {
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
                "peer": user.0,
                "last_seq": 0,
                "entries": [],
            })));
        }
    };
    Ok(Json(json!({
        "session": id,
        "bot": record.key.bot,
        "kind": record.key.kind,
        "peer": record.key.peer,
        "last_seq": record.last_seq,
        "entries": with_author_names(&state, shown_to_people(entries)).await?,
    })))
}

/// `entries` as JSON, each message a bot wrote (`delivery`,
/// `agent_message`) with `author_name`, the bot's display name when it
/// has a record: a subagent's report read only `boss.sub-334003c86248`
/// in `botfleet transcript` (and on the web page, once the bot list
/// leaves the finished subagent out), eight of them alike, where
/// `botfleet bots` names it `Boss · job six`; in a room's timeline
/// (groups.rs), another user's bot or a member since removed read as its
/// bare id. A person's entries get none: a person's id may also be a
/// bot's.
pub(crate) async fn with_author_names(
    state: &ApiState,
    entries: Vec<Entry>,
) -> Result<Vec<Value>, ApiError> {
    let store = state.fleet.store();
    let mut names: HashMap<String, Option<String>> = HashMap::new();
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let bot = match &entry.kind {
            EntryKind::AgentMessage { from, .. } => Some(from.clone()),
            EntryKind::Delivery { .. } => BotId::new(&entry.author).ok(),
            EntryKind::UserMessage { .. }
            | EntryKind::Event { .. }
            | EntryKind::Assistant { .. }
            | EntryKind::ToolResult { .. }
            | EntryKind::Reaction { .. }
            | EntryKind::Reminder { .. }
            | EntryKind::Notice { .. }
            | EntryKind::Approval { .. }
            | EntryKind::TurnEnd { .. }
            | EntryKind::Summary { .. } => None,
        };
        let name = match bot {
            Some(bot) => match names.get(bot.as_str()) {
                Some(name) => name.clone(),
                None => {
                    // served from the store's cache of bot records
                    let name = store.get_bot(&bot).await?.map(|b| b.name);
                    names.insert(bot.to_string(), name.clone());
                    name
                }
            },
            None => None,
        };
        let mut value = serde_json::to_value(&entry).map_err(|e| {
            ApiError::Internal(format!(
                "entry {} could not be written as JSON: {e}",
                entry.id
            ))
        })?;
        if let (Some(name), Value::Object(map)) = (name, &mut value) {
            map.insert("author_name".into(), json!(name));
        }
        out.push(value);
    }
    Ok(out)
}

/// `entries` as the API shows them to people: without the reasoning of a
/// thinking model's steps (`reasoning_content`), which the store keeps
/// for the model's own later requests of the turn only. Emptied, the
/// field is left out of the JSON.
pub(crate) fn shown_to_people(mut entries: Vec<Entry>) -> Vec<Entry> {
    for entry in &mut entries {
        if let EntryKind::Assistant { reasoning, .. } = &mut entry.kind {
            *reasoning = None;
        }
    }
    entries
}

fn no_session(session: &str) -> ApiError {
    ApiError::NotFound(format!("no session {session} for you"))
}

/// The bot whose DM with `user` is session `id`, among the user's bots
/// (the id is derived from the key, as `GET /v1/bots/{bot}/session` does).
/// Their ids only, read through the owner index: the id cannot be undone
/// into its bot, but an owner with thousands of bots (CreateAgent,
/// subagents) no longer has every record decoded at each read of an
/// empty DM or of an unknown session.
pub(crate) async fn unwritten_dm(
    state: &ApiState,
    user: &AuthUser,
    id: SessionId,
) -> Result<Option<BotId>, ApiError> {
    let bots = state.fleet.store().bot_ids_of(&user.0).await?;
    Ok(bots.into_iter().find(|bot| super::dm_of(bot, user) == id))
}

/// A turn `user` may read, with its session: one in a session they own
/// (the rule of `entries`), from when it was given to them if it was. A
/// bot given to another owner keeps its DMs
/// with its former owner, and their turns, the person's: the new owner
/// gets the `404` of an unknown id for them, the person still reads them.
/// Any other turn is missing too, with the same body, so ids do not leak
/// across users.
async fn visible_turn(
    state: &ApiState,
    user: &AuthUser,
    turn: &str,
) -> Result<(botfleet_memory::TurnRecord, SessionRecord), ApiError> {
    let id: TurnId = turn
        .parse()
        .map_err(|e: botfleet_memory::IdError| ApiError::BadRequest(e.to_string()))?;
    let missing = || ApiError::NotFound(format!("no turn {turn}"));
    let store = state.fleet.store();
    let record = match store.get_turn(id).await? {
        Some(record) => record,
        // not stored yet: it may be running its first step, on a bot of
        // the user's. The board of active bots names the one running it
        // (in memory), and that bot's record (cached) says whose it is:
        // no read of every bot the user has, at each look at a turn.
        None => {
            let running = state.fleet.bot_running(id).await?.ok_or_else(missing)?;
            match store.get_bot(&running).await? {
                Some(bot) if bot.owner == user.0 => {}
                Some(_) | None => return Err(missing()),
            }
            state
                .fleet
                .turn_record(id, &[running])
                .await?
                .ok_or_else(missing)?
        }
    };
    match store.get_session(record.session).await? {
        Some(session) if session.owner == user.0 => {
            // a session given to the user with its bot: its turns from
            // that change on (the turns before ran for the former owner)
            if let Some((_, since)) = store.session_floor(session.id, &user.0).await?
                && record.started_at < since
            {
                return Err(missing());
            }
            Ok((record, session))
        }
        Some(_) | None => Err(missing()),
    }
}

pub(crate) async fn turn(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(turn): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let (record, _) = visible_turn(&state, &user, &turn).await?;
    let calls = state.fleet.store().tool_calls(record.id).await?;
    Ok(Json(json!({ "turn": record, "tool_calls": calls })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TurnsQuery {
    #[serde(default)]
    limit: Option<i64>,
    /// The id of the last turn of the page before: older ones follow.
    #[serde(default)]
    before: Option<String>,
}

/// `GET /v1/bots/{bot}/turns?limit=N&before=TURN`: the bot's last turns
/// in sessions the user owns, newest first (not those of a DM that stayed
/// with the bot's former owner: [`visible_turn`]); `before`, the last of
/// a page, gives the next one, and `more` says whether there is one.
/// (It listed the newest 100 and no more, saying nothing: QA.)
pub(crate) async fn turns_of_bot(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    query: Result<Query<TurnsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = super::extract::query(query, TURNS_HINT)?;
    let limit = super::extract::list_limit(q.limit, MAX_TURNS, MAX_TURNS, "turns")?;
    let store = state.fleet.store();
    let id = match owned_bot(&state, &user, &bot).await {
        Ok(b) => b.id,
        // a bot given to another owner: its former owner still reads their
        // DM with it, and its turns there (QA: the session and each turn
        // answered them, the list 404); anyone else learns nothing
        Err(refused) => match BotId::new(&bot) {
            Ok(id)
                if store
                    .get_session(super::dm_of(&id, &user))
                    .await?
                    .is_some_and(|s| s.owner == user.0) =>
            {
                id
            }
            _ => return Err(refused),
        },
    };
    let running = state.fleet.running_record(&id).await?;
    // `Some(None)`: after the running turn a first page listed before its
    // record was stored, i.e. from the newest stored turn on
    let before: Option<Option<botfleet_memory::TurnId>> = match q.before.as_deref() {
        None => None,
        Some(raw) => {
            // one of this bot's turns the user reads, as the page before
            // listed it; any other is the same unknown
            let unknown = || {
                ApiError::BadRequest(format!(
                    "before={}: no turn of bot {id} you may read by that id; give the `id` \
                     of the last turn of the page before",
                    botfleet_memory::quote_short(raw)
                ))
            };
            let turn: botfleet_memory::TurnId = raw.trim().parse().map_err(|_| unknown())?;
            match store.get_turn(turn).await? {
                Some(t)
                    if t.bot == id
                        && store
                            .get_session(t.session)
                            .await?
                            .is_some_and(|s| s.owner == user.0) =>
                {
                    Some(Some(t.id))
                }
                None if running.as_ref().is_some_and(|r| r.id == turn) => Some(None),
                _ => return Err(unknown()),
            }
        }
    };
    let mut turns = store
        .turns_of_bot_for_owner(&id, &user.0, before.flatten(), limit + 1)
        .await?;
    let page = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut more = turns.len() > page;
    turns.truncate(page);
    // a running turn is listed before its first step is stored (on the
    // first page only)
    if before.is_none()
        && let Some(running) = running
        && !turns.iter().any(|t| t.id == running.id)
        && store
            .get_session(running.session)
            .await?
            .is_some_and(|s| s.owner == user.0)
    {
        turns.insert(0, running);
        if turns.len() > page {
            more = true;
        }
        turns.truncate(page);
    }
    Ok(Json(json!({ "turns": turns, "more": more })))
}

pub(crate) async fn retry(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(turn): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let (record, session) = visible_turn(&state, &user, &turn).await?;
    if session.key.kind == SessionKind::Dm
        && let Some(bot) = state.fleet.store().get_bot(&record.bot).await?
        && session.key.is_former_owners_dm(&bot.owner)
    {
        // the person's DM with a bot since given to someone else: theirs
        // to read, but no turn runs there any more (a retried one would
        // end unanswered, docs/operations.md "Changing a bot's owner")
        return Err(ApiError::Conflict(format!(
            "turn {turn} was in your conversation with bot {bot_id}, but {bot_id} now belongs to \
             another user: nothing runs in that conversation any more, so it cannot be retried; \
             ask {bot_id}'s new owner if the work is still needed",
            bot_id = record.bot
        )));
    }
    if record.status == TurnStatus::Running {
        return Err(ApiError::Busy(format!(
            "turn {turn} is still running; wait for it to end, or cancel it first"
        )));
    }
    let requeued = state.fleet.retry(record.id).await?;
    let body = json!({ "turn": record.id, "requeued": requeued });
    // what the inputs wait for, said (QA: "the bot answers them" of a bot
    // paused until midnight, or no longer in the config)
    let Some(bot) = state.fleet.store().get_bot(&record.bot).await? else {
        return Ok(Json(body));
    };
    let mut body = super::bots::with_pause(body, &state, &bot).await;
    if bot.removed_at().is_some() && !bot.made_by_agent() {
        body["waits_for_config"] = json!(true);
    }
    Ok(Json(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hints_give_the_ranges() {
        assert!(PAGE_HINT.ends_with(&format!("(1 to {MAX_PAGE})")));
        assert!(TURNS_HINT.contains(&format!("(1 to {MAX_TURNS})")));
    }
}
