//! `/v1/groups`: group rooms — create, list, post a message, read the
//! public timeline, and (its owner) change its members or close it. The
//! rules (who may add which bot, who may read a room, mentions, limits)
//! are in `botfleet_actors::group`.

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
use botfleet_actors::group;
use botfleet_actors::group::GroupError;
use botfleet_actors::group::NewRoom;
use botfleet_memory::AdmitOutcome;
use botfleet_memory::RoomRecord;
use botfleet_memory::UserId;
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

impl From<GroupError> for ApiError {
    fn from(e: GroupError) -> Self {
        match e {
            GroupError::Invalid(m) => ApiError::BadRequest(m),
            GroupError::NotFound(m) => ApiError::NotFound(m),
            GroupError::Conflict(m) => ApiError::Conflict(m),
            // only the owner's routes refuse a user who sees the room, and
            // they answer 403 themselves (`AdminError`); to any other route
            // a room one may not use does not exist
            GroupError::Forbidden(m) => ApiError::NotFound(m),
            GroupError::Store(s) => s.into(),
            GroupError::Actor(a) => a.into(),
        }
    }
}

/// An error of the routes only a room's owner may use: a member's owner,
/// who reads a shared room, gets `403 forbidden` (in the API's error
/// shape) rather than a `404` for a room they can see; everything else as
/// [`ApiError`].
#[derive(Debug)]
pub(crate) enum AdminError {
    /// The user may see the room but not change it.
    Forbidden(String),
    /// Any other error.
    Api(ApiError),
}

impl From<ApiError> for AdminError {
    fn from(e: ApiError) -> Self {
        AdminError::Api(e)
    }
}

impl From<GroupError> for AdminError {
    fn from(e: GroupError) -> Self {
        match e {
            GroupError::Forbidden(m) => AdminError::Forbidden(m),
            GroupError::Invalid(_)
            | GroupError::NotFound(_)
            | GroupError::Conflict(_)
            | GroupError::Store(_)
            | GroupError::Actor(_) => AdminError::Api(e.into()),
        }
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        match self {
            AdminError::Forbidden(message) => (
                StatusCode::FORBIDDEN,
                Json(json!({"error": {"code": "forbidden", "message": message}})),
            )
                .into_response(),
            AdminError::Api(e) => e.into_response(),
        }
    }
}

/// A room as the API shows it to `viewer`.
async fn room_json(
    state: &ApiState,
    room: &RoomRecord,
    viewer: &UserId,
) -> Result<Value, ApiError> {
    let store = state.fleet.store();
    let mut members = Vec::with_capacity(room.members.len());
    for id in &room.members {
        let bot = store.get_bot(id).await?;
        let absent = match &bot {
            Some(b) => group::absence(store, b).await?,
            None => None,
        };
        let mut member = json!({"id": id, "name": bot.map(|b| b.name)});
        // a member that takes no turns says why (QA: a removed bot was
        // listed as any other)
        if let Some(why) = absent {
            member["absent"] = json!(why);
        }
        members.push(member);
    }
    let session = room.timeline().id();
    let last_seq = store
        .get_session(session)
        .await?
        .map(|s| s.last_seq)
        .unwrap_or(0);
    Ok(json!({
        "id": room.id,
        "name": room.name,
        "owner": room.owner,
        "members": members,
        "shared": room.shared,
        "session": session,
        "last_seq": last_seq,
        "visible_from": visible_from(state, room, viewer).await?,
        "created_at": room.created_at,
        "closed_at": room.closed_at,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    #[serde(default)]
    id: Option<String>,
    members: Vec<String>,
}

pub(crate) async fn create(
    State(state): State<ApiState>,
    user: AuthUser,
    _: NoQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = read_body(body, state.limits.max_body_bytes)?;
    let parsed: CreateBody = json_object(
        &body,
        "a room",
        r#"{"name": "standup", "members": ["bot-a", "bot-b"]}"#,
    )?;
    let room = group::create_room(
        state.fleet.runtime(),
        &user.0,
        NewRoom {
            id: parsed.id,
            name: parsed.name,
            members: parsed.members,
        },
    )
    .await?;
    let body = room_json(&state, &room, &user.0).await?;
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// `true`: only rooms that are not closed.
    #[serde(default)]
    open: Option<bool>,
}

pub(crate) async fn list(
    State(state): State<ApiState>,
    user: AuthUser,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = super::extract::query(
        query,
        "use ?open=true for the rooms that are not closed, or no parameter for all",
    )?;
    let rooms = group::rooms_for(state.fleet.runtime(), &user.0).await?;
    let mut out = Vec::with_capacity(rooms.len());
    for r in &rooms {
        if q.open == Some(true) && r.closed_at.is_some() {
            continue;
        }
        out.push(room_json(&state, r, &user.0).await?);
    }
    Ok(Json(json!({ "groups": out })))
}

pub(crate) async fn get_one(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(room): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let room = room_or_bot(&state, &user, &room, NOT_A_ROOM).await?;
    Ok(Json(room_json(&state, &room, &user.0).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MembersBody {
    members: Vec<String>,
}

/// `PUT /v1/groups/{group}/members`: the owner replaces the members.
pub(crate) async fn set_members(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(room): Path<String>,
    _: NoQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, AdminError> {
    let body = read_body(body, state.limits.max_body_bytes)?;
    // the room first: a stranger learns nothing from a body error
    let record = room_or_bot(&state, &user, &room, NOT_A_ROOM).await?;
    let parsed: MembersBody =
        json_object(&body, "a member list", r#"{"members": ["bot-a", "bot-b"]}"#)?;
    let room = group::set_members(
        state.fleet.runtime(),
        &user.0,
        record.id.as_str(),
        &parsed.members,
    )
    .await?;
    let mut v = room_json(&state, &room, &user.0).await?;
    // the same list again writes nothing: said, so the CLI does not tell
    // the readers' floors as if they had just changed (QA)
    v["changed"] = json!(record.members != room.members);
    Ok(Json(v))
}

/// `DELETE /v1/groups/{group}`: the owner closes the room.
pub(crate) async fn close(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(room): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, AdminError> {
    let room = match group::close_room(state.fleet.runtime(), &user.0, &room).await {
        Err(GroupError::NotFound(no_room)) => {
            return Err(bot_named(&state, &user, &room, no_room, NOT_A_ROOM)
                .await
                .into());
        }
        closed => closed?,
    };
    Ok(Json(room_json(&state, &room, &user.0).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    text: String,
}

/// The refusal of a message to `name`, no room of `user`'s, when it is the
/// id of one of the user's bots: where to send it instead (QA: `group send
/// assistant hi` said only that there is no such room). Another user's bot
/// is no room either, and is not named.
/// `instead` says where to go, `{bot}` standing for the bot's id (every
/// route that takes a room: QA found only `group send` pointed there).
async fn bot_named(
    state: &ApiState,
    user: &AuthUser,
    name: &str,
    no_room: String,
    instead: &str,
) -> ApiError {
    let bot = match botfleet_memory::BotId::new(name) {
        Ok(id) => state.fleet.store().get_bot(&id).await.ok().flatten(),
        Err(_) => None,
    };
    match bot.filter(|b| b.owner == user.0) {
        Some(b) => ApiError::NotFound(format!(
            "no room {name:?} for you: {} is a bot; {}",
            b.id,
            instead.replace("{bot}", b.id.as_str())
        )),
        None => ApiError::NotFound(no_room),
    }
}

/// Where to go instead of a room's route given a bot's id, for a read or
/// a change of the room ([`bot_named`]).
const NOT_A_ROOM: &str = "list your rooms with `botfleet group list` or GET /v1/groups, and read your conversation \
     with {bot} with `botfleet transcript {bot}`";

/// The id of the room `room` names, ignoring case, as the store keeps it
/// (whoever may use it), else `room` as given.
async fn stored_room_id(state: &ApiState, room: &str) -> String {
    let Ok(id) = botfleet_memory::RoomId::new(room) else {
        return room.to_owned();
    };
    match state.fleet.store().get_room(&id).await {
        Ok(Some(record)) => record.id.to_string(),
        _ => room.to_owned(),
    }
}

/// The room `name` for `user`, or the 404 of [`bot_named`] with `instead`.
async fn room_or_bot(
    state: &ApiState,
    user: &AuthUser,
    name: &str,
    instead: &str,
) -> Result<botfleet_memory::RoomRecord, ApiError> {
    let error = match group::room_for(state.fleet.runtime(), &user.0, name).await {
        Ok(record) => return Ok(record),
        Err(e @ (GroupError::NotFound(_) | GroupError::Invalid(_))) => e,
        Err(e) => return Err(e.into()),
    };
    // the display name of a room of theirs, which people type for its id
    // (QA: `group send "Daily Standup" hi` was told only that the id is
    // invalid; a bot's name gets "did you mean")
    if let Some(room) = named_room(state, user, name).await {
        return Err(ApiError::NotFound(format!(
            "no room {name:?}: that is the name of your room {}; rooms are given by id: use {}",
            room.id, room.id
        )));
    }
    Err(match error {
        GroupError::NotFound(no_room) => bot_named(state, user, name, no_room, instead).await,
        other => other.into(),
    })
}

/// The room of `user`'s (one they may use) whose display name is `name`,
/// ignoring case and surrounding spaces, when exactly one is.
async fn named_room(
    state: &ApiState,
    user: &AuthUser,
    name: &str,
) -> Option<botfleet_memory::RoomRecord> {
    let wanted = name.trim().to_lowercase();
    let rooms = group::rooms_for(state.fleet.runtime(), &user.0)
        .await
        .ok()?;
    let mut named = rooms
        .into_iter()
        .filter(|r| r.closed_at.is_none() && r.name.to_lowercase() == wanted);
    let room = named.next()?;
    named.next().is_none().then_some(room)
}

pub(crate) async fn post_message(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(room): Path<String>,
    _: NoQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = read_body(body, state.limits.max_body_bytes)?;
    // the room first: a stranger learns nothing from a body error
    let record = match room_or_bot(
        &state,
        &user,
        &room,
        "send to it with POST /v1/bots/{bot}/messages",
    )
    .await
    {
        Err(no_room @ ApiError::NotFound(_)) => {
            // the digest is of the room's id as stored, which the path
            // may spell in another case (audit: such a retry was a 404)
            let stored = stored_room_id(&state, &room).await;
            let digest = |text: &str| Some(group::room_message_digest(&stored, text));
            let retry = super::bots::lost_target_retry(&state, &user, &headers, &body, digest);
            if let Some(duplicate) = retry.await? {
                // the whole record, as a retry the poster may still
                // make gets: whom it addressed, its mentions
                let posted = group::retried_post(state.fleet.runtime(), duplicate).await?;
                return Ok((StatusCode::OK, Json(json!(posted))).into_response());
            }
            return Err(no_room);
        }
        other => other?,
    };
    let parsed: MessageBody = json_object(&body, "a message", r#"{"text": "..."}"#)?;
    let text = botfleet_actors::message_text(&parsed.text);
    // refused as a bot's: a room would run a discussion of it, a turn per
    // member (QA)
    if botfleet_memory::shows_nothing(text) {
        return Err(super::bots::blank_text());
    }
    let key = idempotency_key(&headers)?;
    super::bots::check_length(&state, &user, key.as_deref(), text).await?;
    // one rate for a user's messages to bots and rooms together
    // (host.user_messages_per_minute)
    let rate = &state.limits.messages;
    let admission = rate
        .admit(state.fleet.store(), &user.0, key.as_deref())
        .await?;
    let posted = group::post_message(
        state.fleet.runtime(),
        &user.0,
        record.id.as_str(),
        &parsed.text,
        key.as_deref(),
    )
    .await;
    admission.settle(
        rate,
        matches!(&posted, Ok(p) if matches!(p.outcome, AdmitOutcome::Accepted(_))),
    );
    let posted = posted.map_err(|e| ApiError::from(e).resend_with_key(key.is_some()))?;
    let (status, body) = match &posted.outcome {
        AdmitOutcome::Accepted(_) => (StatusCode::ACCEPTED, json!(posted)),
        AdmitOutcome::Duplicate(_) => (StatusCode::OK, json!(posted)),
        AdmitOutcome::Conflict(original) => (
            StatusCode::CONFLICT,
            json!({
                "status": "conflict",
                "error": {"code": "conflict", "message": super::bots::conflict_message(original, record.timeline().id())},
                "original": original,
                "room": posted.room,
            }),
        ),
        AdmitOutcome::Unknown { reason } => (
            StatusCode::CONFLICT,
            json!({
                "status": "unknown",
                "error": {"code": "unknown", "message": format!(
                    "this Idempotency-Key cannot be checked against earlier messages: {reason}; \
                     check the room's timeline, and send with a new key if the message is missing"
                )},
                "room": posted.room,
            }),
        ),
    };
    Ok((status, Json(body)).into_response())
}

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
    Path(room): Path<String>,
    query: Result<Query<EntriesQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = super::extract::query(query, super::sessions::PAGE_HINT)?;
    let (after, limit) = super::sessions::entries_page(q.after, q.limit)?;
    let room = room_or_bot(&state, &user, &room, NOT_A_ROOM).await?;
    let store = state.fleet.store();
    let session = room.timeline().id();
    // a user who gained the room with a change of members reads it from
    // that change's notice on: what was said before stays hidden
    let visible_from = store
        .room_visible_from(&room.id, &user.0)
        .await?
        .unwrap_or(1);
    let after = after.max(visible_from - 1);
    // one read: `last_seq` is never older than the entries beside it (a
    // room nobody wrote in has no session yet: empty so far)
    let (last_seq, entries) = match store.session_page(session, after, limit).await? {
        Some((s, entries)) => (s.last_seq, entries),
        None => (0, Vec::new()),
    };
    let shown = super::sessions::shown_to_people(entries);
    let mut entries = super::sessions::with_author_names(&state, shown).await?;
    with_member_outcomes(&state, &room, &mut entries).await?;
    Ok(Json(json!({
        "room": room.id,
        "session": session,
        "last_seq": last_seq,
        "visible_from": visible_from,
        "entries": entries,
    })))
}

/// Adds to each run's `turn_end` among `entries` (JSON, as the page
/// returns them) the run's `members`: `[{"id", "outcome"}]`, each member
/// the message addressed, in speaking order, with how its part went
/// (`spoke`, `failed`, `passed`, `no_turn`, `held`: [`group::run::MemberOutcome`]).
/// `botfleet group send` exits 3 when every member that took a turn
/// failed; it guessed that from a `room_run_failed_round` notice with no
/// reply, which also ends a round in which one member failed and another
/// chose to say nothing. One read per run ended in the page.
async fn with_member_outcomes(
    state: &ApiState,
    room: &RoomRecord,
    entries: &mut [Value],
) -> Result<(), ApiError> {
    for entry in entries.iter_mut() {
        if entry["kind"] != "turn_end" {
            continue;
        }
        // a run's end lists the one message that started it
        let Some(trigger) = entry["inputs"].get(0).and_then(Value::as_i64) else {
            continue;
        };
        let Some(outcomes) = group::member_outcomes(state.fleet.store(), &room.id, trigger).await?
        else {
            continue;
        };
        let members: Vec<Value> = outcomes
            .into_iter()
            .map(|(id, outcome)| json!({"id": id, "outcome": outcome}))
            .collect();
        if let Value::Object(map) = entry {
            map.insert("members".into(), Value::Array(members));
        }
    }
    Ok(())
}

/// Where users other than the owner with a bot in `room` read its
/// timeline from: `{user: first seq}`, 1 for the whole timeline — every
/// such user for the room's owner (a change of members shows her that
/// the earlier history stays hidden from the users it gave the room to),
/// only themselves for anyone else (who else is in the room is not theirs
/// to learn).
async fn visible_from(
    state: &ApiState,
    room: &RoomRecord,
    viewer: &UserId,
) -> Result<Value, ApiError> {
    let store = state.fleet.store();
    let mut out = serde_json::Map::new();
    for id in &room.members {
        let Some(bot) = store.get_bot(id).await? else {
            continue;
        };
        if bot.owner == room.owner
            || out.contains_key(bot.owner.as_str())
            || (*viewer != room.owner && bot.owner != *viewer)
        {
            continue;
        }
        let from = store.room_visible_from(&room.id, &bot.owner).await?;
        out.insert(bot.owner.to_string(), json!(from.unwrap_or(1)));
    }
    Ok(Value::Object(out))
}
