//! `/v1/bots/{bot}/routines`: list, create or replace, and delete a bot's
//! routines (the bot's owner only).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use botfleet_actors::scheduler::RoutineSpec;
use botfleet_actors::scheduler::SchedulerError;
use botfleet_actors::scheduler::local_rfc3339;
use botfleet_memory::BotId;
use botfleet_memory::CatchUp;
use botfleet_memory::RoutineRecord;
use botfleet_memory::RoutineRun;
use botfleet_memory::TurnRecord;
use chrono::DateTime;
use chrono::Utc;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::ApiState;
use super::AuthUser;
use super::error::ApiError;
use super::extract::NoQuery;
use super::extract::Path;
use super::extract::json_object;
use super::extract::read_body;
use super::owned_bot;

/// Refuses a path `name` no routine can have, quoting at most its start
/// (the scheduler's refusal would quote a name of any length whole).
fn check_name(name: &str) -> Result<(), ApiError> {
    if botfleet_actors::scheduler::valid_name(name) {
        return Ok(());
    }
    Err(ApiError::BadRequest(format!(
        "routine name {} is not valid: {}",
        botfleet_memory::quote_short(name),
        botfleet_actors::scheduler::NAME_RULE
    )))
}

/// How the last runs of `bot`'s routines went: for each routine that has
/// fired, its name and the turn that took its last fire, or `None` while
/// none has. The store knows the turns stored; a turn is stored with its
/// first step, so one still on its first model call is the bot's running
/// turn, found on the live board when it lists the fire among its inputs
/// (`GET /v1/turns/{turn}` and `GET /v1/bots/{bot}/turns` answer it the
/// same way). Before, such a run showed `waiting`, as if the bot had not
/// got to it. So is a retry of a stored run that ended, running now.
async fn last_runs(
    state: &ApiState,
    bot: &BotId,
) -> Result<Vec<(String, Option<TurnRecord>)>, ApiError> {
    let runs = state.fleet.store().routine_runs(bot).await?;
    let ended = |t: &TurnRecord| t.status != botfleet_memory::TurnStatus::Running;
    let running = if runs.iter().any(|r| r.turn.as_ref().is_none_or(ended)) {
        // the board is not there while the router restarts: the stored
        // runs are still told
        state.fleet.running_record(bot).await.ok().flatten()
    } else {
        None
    };
    Ok(runs
        .into_iter()
        .map(|RoutineRun { name, fire, turn }| {
            // a running turn that took the fire is its newest: one not
            // stored yet, or a retry of a stored turn that ended (the view
            // told the cancelled run while its retry ran, QA 2026-12-06)
            let live = running
                .as_ref()
                .filter(|t| t.inputs.contains(&fire))
                .cloned();
            (name, live.or(turn))
        })
        .collect())
}

/// How a routine looks over the API: the record, plus its next and last
/// slots as RFC 3339 times in UTC and in the routine's time zone, and how
/// its last run went (`runs`, from [`last_runs`]): `last_status` is the
/// status of the turn that took the last fire (`running`, `completed`,
/// `failed`, …), `waiting` while no turn has taken it, `null` before the
/// first fire; `last_turn` that turn's id (what `botfleet retry` takes),
/// `last_error` why it failed.
fn view(r: &RoutineRecord, runs: &[(String, Option<TurnRecord>)]) -> Value {
    let times = |ms: Option<i64>| {
        (
            ms.and_then(DateTime::<Utc>::from_timestamp_millis)
                .map(|t| t.to_rfc3339()),
            ms.and_then(|ms| local_rfc3339(&r.timezone, ms)),
        )
    };
    let (next_utc, next_local) = times(r.next_fire_ms);
    let (last_utc, last_local) = times(r.last_fire_ms);
    let mut v = json!(r);
    if let Some(o) = v.as_object_mut() {
        o.insert("next_fire".into(), json!(next_utc));
        o.insert("next_fire_local".into(), json!(next_local));
        o.insert("last_fire".into(), json!(last_utc));
        o.insert("last_fire_local".into(), json!(last_local));
        let run = runs
            .iter()
            .find(|(name, _)| *name == r.name)
            .map(|(_, t)| t);
        let (status, turn, error) = match run {
            None => (json!(null), json!(null), json!(null)),
            Some(None) => (json!("waiting"), json!(null), json!(null)),
            Some(Some(t)) => (json!(t.status.as_str()), json!(t.id), json!(t.error)),
        };
        o.insert("last_status".into(), status);
        o.insert("last_turn".into(), turn);
        o.insert("last_error".into(), error);
    }
    v
}

impl From<SchedulerError> for ApiError {
    fn from(e: SchedulerError) -> Self {
        match e {
            SchedulerError::Invalid(e) => ApiError::BadRequest(format!("`{}`: {e}", e.field())),
            SchedulerError::ConfigOwned { .. } | SchedulerError::NameClash { .. } => {
                ApiError::Conflict(e.to_string())
            }
            SchedulerError::UnknownBot(bot) => ApiError::no_such_bot(bot.as_str()),
            SchedulerError::Actor(a) => a.into(),
        }
    }
}

pub(crate) async fn list(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let b = owned_bot(&state, &user, &bot).await?;
    let routines = state.scheduler.list(&b.id).await?;
    let runs = last_runs(&state, &b.id).await?;
    let views: Vec<Value> = routines.iter().map(|r| view(r, &runs)).collect();
    Ok(Json(json!({ "bot": b.id, "routines": views })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutineBody {
    cron: String,
    timezone: String,
    prompt: String,
    #[serde(default = "yes")]
    silent_ok: bool,
    #[serde(default)]
    catch_up: CatchUp,
}

fn yes() -> bool {
    true
}

pub(crate) async fn put(
    State(state): State<ApiState>,
    user: AuthUser,
    Path((bot, name)): Path<(String, String)>,
    _: NoQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = read_body(body, state.limits.max_body_bytes)?;
    let b = owned_bot(&state, &user, &bot).await?;
    check_name(&name)?;
    if b.removed_at().is_some() && b.made_by_agent() {
        // made by CreateAgent: no config lists it, so it does not come back
        return Err(ApiError::Conflict(format!(
            "bot {} was removed by its owner and runs no routines (it runs no more turns); \
             put the routine on another of your bots",
            b.id
        )));
    }
    if b.removed_at().is_some() && !b.origin.starts_with("subagent:") {
        return Err(ApiError::Conflict(format!(
            "bot {} is no longer in the fleet's config and runs no routines; list it in \
             fleet.toml again and restart the host first",
            b.id
        )));
    }
    if let Some(parent) = b.origin.strip_prefix("subagent:") {
        return Err(ApiError::Conflict(format!(
            "{} is a subagent of {parent}: it works on one task for its parent and runs no \
             routines; put the routine on {parent}",
            b.id
        )));
    }
    let parsed: RoutineBody = json_object(
        &body,
        "a routine",
        r#"{"cron": "0 8 * * *", "timezone": "Asia/Shanghai", "prompt": "..."} and optionally "silent_ok" (true/false) and "catch_up" ("once"/"skip")"#,
    )?;
    let spec = RoutineSpec {
        name,
        cron: parsed.cron,
        timezone: parsed.timezone,
        prompt: parsed.prompt,
        silent_ok: parsed.silent_ok,
        catch_up: parsed.catch_up,
    };
    // the write that created the routine says so, not a read before it:
    // of parallel puts of a new routine exactly one answers 201
    let put = state.scheduler.put(&b.id, spec).await?;
    let status = if put.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let runs = last_runs(&state, &b.id).await?;
    Ok((status, Json(json!({ "routine": view(&put.record, &runs) }))).into_response())
}

pub(crate) async fn delete(
    State(state): State<ApiState>,
    user: AuthUser,
    Path((bot, name)): Path<(String, String)>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let b = owned_bot(&state, &user, &bot).await?;
    check_name(&name)?;
    if state.scheduler.delete(&b.id, &name).await? {
        Ok(Json(json!({ "deleted": true })))
    } else {
        Err(ApiError::NotFound(format!(
            "bot {bot:?} has no routine {name:?}; list them with GET /v1/bots/{bot}/routines"
        )))
    }
}
