//! `/v1/bots`: list bots, send a message, find the DM session, cancel,
//! remove a bot made by CreateAgent.

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::Query;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::QueryRejection;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmittedRecord;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::ApiState;
use super::AuthUser;
use super::error::ApiError;
use super::extract::NoQuery;
use super::extract::Path;
use super::extract::idempotency_key;
use super::extract::json_object;
use super::extract::read_body;
use super::owned_bot;

/// Finished subagents of a parent that `GET /v1/bots` lists, the latest
/// ones (as CheckSubagent's list): each Task makes a bot, and a bot that
/// delegates for months would list thousands, refetched by the web page at
/// every change.
const FINISHED_SUBAGENTS_LISTED: usize = 20;

/// `GET /v1/bots?subagents=recent|all`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    #[serde(default)]
    subagents: Option<String>,
}

pub(crate) async fn list(
    State(state): State<ApiState>,
    user: AuthUser,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = super::extract::query(query, "use ?subagents=recent or all")?;
    let keep = match q.subagents.as_deref() {
        None | Some("recent") => FINISHED_SUBAGENTS_LISTED,
        Some("all") => usize::MAX,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "`subagents` is {other:?}; use `recent` (the default: running subagents and the \
                 {FINISHED_SUBAGENTS_LISTED} latest finished ones of each parent) or `all`"
            )));
        }
    };
    // counts and usage of every bot in one read: a few index lookups per
    // bot (the store keeps turn counts as turns end, migration 11), where
    // counting each bot's turns used to scan the whole `turns` table
    // (docs/performance.md, "The bot list's turn counts")
    // the day of the store's clock, which usage is counted by
    let now = state.fleet.store().clock().now();
    let today = now.format("%Y-%m-%d").to_string();
    let listing = state
        .fleet
        .store()
        .list_bots_keeping(&user.0, &today, keep)
        .await?;
    // what the bots publish (docs/architecture.md, "Router"): read at
    // once however busy they are. With no router running, which bots are
    // awake is not known, and a list that showed them all idle would be
    // wrong: the whole answer is refused instead, to be asked again
    let active: HashMap<_, _> = state
        .fleet
        .active()
        .await
        .map_err(|e| {
            ApiError::Unavailable(format!(
                "what the bots are doing is not known right now ({e}); retry shortly"
            ))
        })?
        .into_iter()
        .map(|s| (s.id.clone(), s))
        .collect();
    let mut out = Vec::with_capacity(listing.bots.len());
    for (b, activity) in listing.bots {
        let counts: serde_json::Map<String, Value> = activity
            .turns
            .into_iter()
            .map(|(s, n)| (s.as_str().to_owned(), json!(n)))
            .collect();
        let budget = b.settings.get("daily_token_budget").and_then(Value::as_u64);
        let live = active.get(&b.id);
        // the live bot's pause, else what its usage stored today says: the
        // bot pauses as the turn that spends the budget ends, and one that
        // is not active finds the budget spent at its next turn
        let paused_until = live.and_then(|s| s.paused_until).or_else(|| {
            botfleet_actors::budget_paused_until(now, activity.usage_today.total(), budget)
                .map(|t| t.timestamp_millis())
        });
        out.push(json!({
            "id": b.id,
            "name": b.name,
            "role": b.role,
            "owner": b.owner,
            "provider": b.provider,
            "tools": b.tools,
            "origin": b.origin,
            // a subagent's task: running, done, failed or stopped (null
            // for any other bot)
            "subagent_status": activity.subagent_status.map(|s| s.as_str()),
            // set when the fleet's config stopped listing the bot: it
            // takes no more messages until a config lists it again
            "removed_at": b.removed_at(),
            // awake in the fleet (docs/api.md): a removed bot's actor may
            // be in memory, holding work that waits for a config to list
            // it again, but it does nothing
            "active": live.is_some() && b.removed_at().is_none(),
            "running_turn": live.and_then(|s| s.turn.as_ref()).map(|t| t.turn),
            "queued": live.map(|s| s.queued).unwrap_or(0),
            // sessions whose context the awake bot holds in memory
            "contexts_in_memory": live.map(|s| s.contexts).unwrap_or(0),
            // false while the bot's actor is starting (reading its queue
            // and unfinished turns): `running_turn` and `queued` are not
            // known yet, which does not make it idle
            "live": live.is_none_or(|s| !s.starting),
            // its daily token budget is spent: it answers after this time
            "paused_until": paused_until,
            "turns": counts,
            "usage": {
                "turns": activity.usage_turns,
                "total": activity.usage_total,
                "today": activity.usage_today,
                "daily_token_budget": budget,
            },
        }));
    }
    Ok(Json(json!({
        // who asks: the web page tells your own messages by it, also when
        // you own no bot (it read the first bot's owner, and showed the
        // messages of a user without bots as another person's: QA)
        "user": user.0.as_str(),
        "bots": out,
        "subagents_left_out": listing.left_out,
    })))
}

pub(crate) async fn get_one(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let b = owned_bot(&state, &user, &bot).await?;
    Ok(Json(json!(b)))
}

/// `DELETE /v1/bots/{bot}`: removes a bot made by CreateAgent (its
/// owner's only: another user's bot is the same `404` as an unknown one),
/// as a start removes a bot the fleet's config dropped
/// ([`botfleet_actors::FleetHandle::remove_made_bot`]); answers its record
/// as `GET /v1/bots/{bot}` gives it, with `settings.removed_at`. A second
/// removal answers the same record. A bot of fleet.toml and a subagent are
/// `409`, saying how they go.
pub(crate) async fn remove(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let b = owned_bot(&state, &user, &bot).await?;
    let removed = state.fleet.remove_made_bot(&b.id).await?;
    Ok(Json(json!(removed)))
}

/// The `404` for `name`, no bot of the user's: said to be a room of
/// theirs when it is one (`botfleet send team …` to room `team` said only
/// "no bot"), with what to do with it (`what`, `{}` standing for its id);
/// else `no_bot`.
pub(crate) async fn named_room(
    state: &ApiState,
    user: &AuthUser,
    name: &str,
    no_bot: String,
    what: &str,
) -> ApiError {
    match botfleet_actors::group::room_for(state.fleet.runtime(), &user.0, name).await {
        Ok(room) => ApiError::NotFound(format!(
            "no bot {name:?} for you: {:?} is a room; {}",
            room.id.as_str(),
            what.replace("{}", room.id.as_str())
        )),
        Err(_) => ApiError::NotFound(no_bot),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    text: String,
}

pub(crate) async fn post_message(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    _: NoQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = read_body(body, state.limits.max_body_bytes)?;
    let record = match owned_bot(&state, &user, &bot).await {
        Err(ApiError::NotFound(no_bot)) => {
            let digest = |text: &str| {
                let id = BotId::new(&bot).ok()?;
                Some(botfleet_actors::user_message_digest(&id, text))
            };
            if let Some(answer) = lost_target_retry(&state, &user, &headers, &body, digest).await? {
                return Ok((StatusCode::OK, Json(json!(answer))).into_response());
            }
            let send = "send to it with POST /v1/groups/{}/messages";
            return Err(named_room(&state, &user, &bot, no_bot, send).await);
        }
        other => other?,
    };
    let retired = super::refuse_retired(&state, &record).await;
    let parsed: MessageBody = json_object(&body, "a message", r#"{"text": "..."}"#)?;
    let text = botfleet_actors::message_text(&parsed.text);
    // nothing but spaces and invisible characters, which a bot would get
    // as a message it cannot see (the text is kept as sent otherwise)
    if botfleet_memory::shows_nothing(text) {
        return Err(blank_text());
    }
    let key = idempotency_key(&headers)?;
    check_length(&state, &user, key.as_deref(), text).await?;
    if let Err(refused) = retired {
        // a retry of a message accepted before the bot stopped taking
        // them is answered as its admission would be (`duplicate`, or
        // `conflict` for another text), as a closed room's is
        let req = botfleet_actors::user_message(&user.0, &record, text, key.as_deref());
        let answer = match key {
            Some(_) => state.fleet.store().ledger_answer(&req).await?,
            None => None,
        };
        let Some(outcome) = answer else {
            return Err(refused);
        };
        return Ok(admit_answer(&state, &record, outcome, req.session.id()).await);
    }
    // the user's share of the host (docs/operations.md, "Limits"): a
    // retry of a message already accepted is let through to be answered
    // `duplicate`
    let rate = &state.limits.messages;
    let admission = rate
        .admit(state.fleet.store(), &user.0, key.as_deref())
        .await?;
    let req = botfleet_actors::user_message(&user.0, &record, text, key.as_deref());
    let target = req.session.id();
    let admitted = state.fleet.admit(req).await;
    // only an accepted message counts against the user's rate
    admission.settle(rate, matches!(admitted, Ok(AdmitOutcome::Accepted(_))));
    let outcome = admitted.map_err(|e| ApiError::from(e).resend_with_key(key.is_some()))?;
    Ok(admit_answer(&state, &record, outcome, target).await)
}

/// A retry, under its Idempotency-Key, of a message this user sent to
/// what they no longer reach (a bot given to another user, a room they
/// were taken out of): answered as its admission was, `duplicate` with
/// the original record, so a client does not show a stored message as
/// not sent (QA: a 404, "no bot for you"). `digest` is the ledger's digest
/// of the text for the path's target (`None`: no such target). Anything
/// else is `None`, and the 404 stands: the user learns nothing of what
/// they never sent to.
pub(super) async fn lost_target_retry(
    state: &ApiState,
    user: &AuthUser,
    headers: &HeaderMap,
    body: &[u8],
    digest: impl FnOnce(&str) -> Option<botfleet_memory::InputDigest>,
) -> Result<Option<AdmitOutcome>, ApiError> {
    let Ok(Some(key)) = idempotency_key(headers) else {
        return Ok(None);
    };
    let Ok(parsed) = json_object::<MessageBody>(body, "a message", "") else {
        return Ok(None);
    };
    let Some(digest) = digest(botfleet_actors::message_text(&parsed.text)) else {
        return Ok(None);
    };
    let source = format!("user:{}", user.0);
    let answer = state
        .fleet
        .store()
        .ledger_answer_to(&source, &key, digest)
        .await?;
    Ok(answer.filter(|a| matches!(a, AdmitOutcome::Duplicate(_))))
}

/// Refuses a message over `host.max_text_chars`, unless its
/// `Idempotency-Key` names a message already accepted: a retry of one
/// accepted before the limit was lowered is answered as its admission
/// would be (`duplicate`, or `conflict` for another text), not told to
/// split a message already answered (QA, 2026-12-05).
pub(super) async fn check_length(
    state: &ApiState,
    user: &AuthUser,
    key: Option<&str>,
    text: &str,
) -> Result<(), ApiError> {
    let chars = text.chars().count();
    if chars <= state.limits.max_text_chars {
        return Ok(());
    }
    if let Some(key) = key
        && state
            .fleet
            .store()
            .ledger_has_key(&format!("user:{}", user.0), key)
            .await?
    {
        return Ok(());
    }
    Err(ApiError::BadRequest(format!(
        "the message has {chars} characters; the limit is {}: split it into several messages",
        state.limits.max_text_chars
    )))
}

/// The response to a message's admission: `202 accepted`, `200
/// duplicate`, `409 conflict` with the original record, `409 unknown`.
async fn admit_answer(
    state: &ApiState,
    record: &BotRecord,
    outcome: AdmitOutcome,
    target: SessionId,
) -> Response {
    let (status, body) = match &outcome {
        AdmitOutcome::Accepted(_) => (
            StatusCode::ACCEPTED,
            with_pause(json!(outcome), state, record).await,
        ),
        AdmitOutcome::Duplicate(_) => (
            StatusCode::OK,
            with_pause(json!(outcome), state, record).await,
        ),
        AdmitOutcome::Conflict(original) => (
            StatusCode::CONFLICT,
            json!({
                "status": "conflict",
                "error": {"code": "conflict", "message": conflict_message(original, target)},
                "original": original,
            }),
        ),
        AdmitOutcome::Unknown { reason } => (
            StatusCode::CONFLICT,
            json!({
                "status": "unknown",
                "error": {"code": "unknown", "message": format!(
                    "this Idempotency-Key cannot be checked against earlier messages: {reason}; \
                     check the transcript, and send with a new key if the message is missing"
                )},
            }),
        ),
    };
    (status, Json(body)).into_response()
}

/// The refusal of a message text that shows nothing
/// ([`botfleet_memory::shows_nothing`]), to a
/// bot or a room.
pub(crate) fn blank_text() -> ApiError {
    ApiError::BadRequest(
        "`text` is empty (nothing but spaces, control characters or invisible characters such \
         as U+200B or U+FEFF); send the message text"
            .into(),
    )
}

/// The answer to an admitted message, with `paused_until` (ms since the
/// epoch) added when the bot is paused by its daily token budget: the
/// message waits for the end of the pause (the bot writes its
/// `budget_exhausted` notice only once per conversation, so a client
/// cannot wait for one). Asked after the admission, as `GET /v1/bots`
/// does: of the live bot (its pause is what holds the message), else of
/// its usage stored today (the turn that spent the budget has ended, and
/// the bot's next turn will find it spent, though the bot may not have
/// taken the end of that turn in yet). The message is admitted whatever
/// the answer, so a failed read leaves the field out.
pub(crate) async fn with_pause(mut body: Value, state: &ApiState, bot: &BotRecord) -> Value {
    let live = match state.fleet.status(&bot.id).await {
        Ok(live) => live.and_then(|s| s.paused_until),
        Err(e) => {
            tracing::debug!(bot = %bot.id, error = %e, "no status for the answer to a message");
            None
        }
    };
    let until = match live {
        Some(until) => Some(until),
        None => botfleet_actors::stored_budget_pause(state.fleet.store(), bot)
            .await
            .unwrap_or_else(|e| {
                tracing::debug!(bot = %bot.id, error = %e, "no usage for the answer to a message");
                None
            }),
    };
    if let Some(until) = until {
        body["paused_until"] = json!(until);
    }
    body
}

/// `GET /v1/bots/{bot}/session`: the person's DM with `bot`, and for a
/// subagent its task conversation too (`task`, [`task_session`]).
pub(crate) async fn dm_session(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let dm = |bot: &BotId| super::dm_of(bot, &user);
    let store = state.fleet.store();
    let b = match owned_bot(&state, &user, &bot).await {
        Ok(b) => b,
        Err(refused) => {
            // a bot given to another owner: the person's DM with it stays
            // theirs (operations.md, "Changing a bot's owner"), and this is
            // the route that names it (`botfleet transcript` starts here);
            // anyone else learns nothing (no DM of theirs, the same 404)
            let Ok(id) = BotId::new(&bot) else {
                return Err(refused);
            };
            return match store.get_session(dm(&id)).await? {
                Some(s) if s.owner == user.0 => Ok(Json(
                    json!({"session": s.id, "bot": id, "kind": "dm", "last_seq": s.last_seq}),
                )),
                Some(_) | None => Err(match refused {
                    // a room's name (QA: `botfleet transcript standup`)
                    ApiError::NotFound(no_bot) => {
                        named_room(
                            &state,
                            &user,
                            &bot,
                            no_bot,
                            "read it with GET /v1/groups/{}/entries",
                        )
                        .await
                    }
                    other => other,
                }),
            };
        }
    };
    let id = dm(&b.id);
    let last_seq = store
        .get_session(id)
        .await?
        .map(|s| s.last_seq)
        .unwrap_or(0);
    let mut body = json!({"session": id, "bot": b.id, "kind": "dm", "last_seq": last_seq});
    if let Some(task) = task_session(&state, &b).await? {
        body["task"] = task;
    }
    Ok(Json(body))
}

/// A subagent's task conversation with its parent, where its work is (the
/// task, its parent's later messages, its progress and its report), for
/// [`dm_session`]'s `task`: `{"session", "parent", "status", "last_seq"}`,
/// the status of its task (`running`, `done`, `failed`, `stopped`; null
/// when the host has no record of it). `None` for any other bot. The web
/// page opened a subagent on its DM with the person, empty unless they
/// wrote to it: as if it had done nothing (its session id is derived,
/// which the page cannot do).
async fn task_session(state: &ApiState, bot: &BotRecord) -> Result<Option<Value>, ApiError> {
    let Some(parent) = bot.origin.strip_prefix("subagent:") else {
        return Ok(None);
    };
    let store = state.fleet.store();
    let key = SessionKey {
        bot: bot.id.clone(),
        kind: SessionKind::Subagent,
        peer: parent.to_owned(),
    };
    let id = key.id();
    let last_seq = store
        .get_session(id)
        .await?
        .map(|s| s.last_seq)
        .unwrap_or(0);
    let status = store
        .get_subagent(&bot.id)
        .await?
        .map(|s| s.status.as_str());
    Ok(Some(json!({
        "session": id,
        "parent": parent,
        "status": status,
        "last_seq": last_seq,
    })))
}

pub(crate) async fn cancel(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let b = owned_bot(&state, &user, &bot).await?;
    let cancelled = state.fleet.cancel(&b.id).await?;
    Ok(Json(json!({ "cancelled": cancelled })))
}

/// Why a key was refused: used with another text here, or for a message
/// elsewhere (keys name one of the user's messages across all bots and
/// rooms, so the same text to another bot is a conflict too).
pub(crate) fn conflict_message(original: &AdmittedRecord, target: SessionId) -> String {
    if original.session == target {
        "this Idempotency-Key was used with a different message; use a new key for a new message"
            .to_owned()
    } else {
        format!(
            "this Idempotency-Key was already used for your message to {} in another conversation (session {}, seq {}); a key names one of your messages across all bots and rooms: use a new key for a new message",
            original.bot, original.session, original.seq
        )
    }
}
