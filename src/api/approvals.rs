//! `/v1/approvals`: the actions a user's bots wait to have approved, and
//! the user's decisions.

use axum::Json;
use axum::body::Bytes;
use axum::extract::Query;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::QueryRejection;
use botfleet_actors::safety::approvals;
use botfleet_actors::safety::approvals::ApprovalError;
use botfleet_memory::ApprovalDecision;
use botfleet_memory::ApprovalId;
use botfleet_memory::ApprovalRecord;
use botfleet_memory::ApprovalStatus;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use std::collections::HashMap;

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

/// Most approvals one listing returns.
const MAX_LIMIT: i64 = 500;

/// The hints of the two routes' queries, with [`MAX_LIMIT`] (constants,
/// not made for each request; `the_hints_give_the_range` holds them to it).
const LIST_HINT: &str = "use ?status=pending|approved|denied|expired&limit=N (1 to 500)";
const REVIEWS_HINT: &str = "use ?limit=N (1 to 500)";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only this status (`pending`, `approved`, `denied`, `expired`).
    #[serde(default)]
    status: Option<ApprovalStatus>,
    #[serde(default)]
    limit: Option<i64>,
}

/// `GET /v1/approvals`: the user's approvals, pending first (oldest
/// first), then the others newest first; with `?status=`, only those whose
/// status is that one, however old.
pub(crate) async fn list(
    State(state): State<ApiState>,
    user: AuthUser,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = super::extract::query(query, LIST_HINT)?;
    let limit = super::extract::list_limit(q.limit, 100, MAX_LIMIT, "approvals")?;
    let store = state.fleet.store();
    // the cards in the sessions catch up with what the listing reports
    approvals::write_expiries(state.fleet.runtime(), &user.0).await?;
    // filtered in the store's query, before its limit: filtering a page of
    // the newest would miss older approvals of that status
    // one more than asked: whether more match than the page shows (QA:
    // `botfleet approvals --all` showed 100 of 105, saying nothing)
    let mut listed = match q.status {
        Some(status) => {
            store
                .approvals_of_owner_with_status(&user.0, status, limit + 1)
                .await?
        }
        None => store.approvals_of_owner(&user.0, limit + 1).await?,
    };
    let more = listed.len() > usize::try_from(limit).unwrap_or(usize::MAX);
    listed.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let mut bots = HashMap::new();
    let mut shown = Vec::with_capacity(listed.len());
    for a in listed {
        shown.push(with_obstacle(&state, &mut bots, a).await?);
    }
    Ok(Json(json!({ "approvals": shown, "more": more })))
}

/// Approval `a` as the API shows it: the record, with `cannot_run` and
/// `decidable` ([`approvals::standing`]). `bots` keeps the bots already
/// read, for a listing.
async fn with_obstacle(
    state: &ApiState,
    bots: &mut HashMap<BotId, Option<BotRecord>>,
    a: ApprovalRecord,
) -> Result<Value, ApiError> {
    let bot = match bots.get(&a.bot) {
        Some(b) => b.clone(),
        None => {
            let b = state.fleet.store().get_bot(&a.bot).await?;
            bots.insert(a.bot.clone(), b.clone());
            b
        }
    };
    let standing = approvals::standing(state.fleet.store(), &a, bot.as_ref()).await?;
    let mut v = serde_json::to_value(&a).map_err(|e| ApiError::Internal(e.to_string()))?;
    if let Value::Object(map) = &mut v {
        map.insert("cannot_run".to_owned(), json!(standing.cannot_run));
        map.insert("decidable".to_owned(), json!(standing.decidable));
    }
    Ok(v)
}

fn parse_id(id: &str) -> Result<ApprovalId, ApiError> {
    id.parse()
        .map_err(|e: botfleet_memory::IdError| ApiError::BadRequest(e.to_string()))
}

/// `GET /v1/approvals/{id}`.
pub(crate) async fn get_one(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(id): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let parsed = parse_id(&id)?;
    // as the listing does: its card says what this answer does
    approvals::write_expiries(state.fleet.runtime(), &user.0).await?;
    match state.fleet.store().approval(parsed).await? {
        Some(a) if a.owner == user.0 => {
            let shown = with_obstacle(&state, &mut HashMap::new(), a).await?;
            Ok(Json(json!({ "approval": shown })))
        }
        _ => Err(ApiError::NotFound(
            ApprovalError::NotFound(parsed).to_string(),
        )),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecisionBody {
    /// Read as any JSON value and checked by [`DecisionBody::decision`]:
    /// serde's own error for `true` or `1` where an enum's name is
    /// expected is "expected value", a JSON syntax error's words.
    decision: Value,
}

/// `value` as JSON, as sent (`true`, `"approved"`), cut when long.
fn shown_json(value: &Value) -> String {
    let json = value.to_string();
    if json.chars().count() <= 40 {
        json
    } else {
        botfleet_memory::quote_short(&json)
    }
}

impl DecisionBody {
    fn decision(&self) -> Result<ApprovalDecision, ApiError> {
        match self.decision.as_str() {
            Some("approve") => Ok(ApprovalDecision::Approve),
            Some("deny") => Ok(ApprovalDecision::Deny),
            _ => Err(ApiError::BadRequest(format!(
                "`decision` is {}; it must be the string \"approve\" or \"deny\": send \
                 {{\"decision\": \"approve\"}} or {{\"decision\": \"deny\"}}",
                shown_json(&self.decision)
            ))),
        }
    }
}

/// `POST /v1/approvals/{id}` with `{"decision": "approve" | "deny"}`. The
/// body is JSON whatever its `Content-Type`, as for every other route.
pub(crate) async fn decide(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(id): Path<String>,
    _: NoQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = read_body(body, state.limits.max_body_bytes)?;
    let parsed = parse_id(&id)?;
    let body: DecisionBody = json_object(
        &body,
        "a decision",
        r#"{"decision": "approve"} or {"decision": "deny"}"#,
    )?;
    let decision = body.decision()?;
    approvals::write_expiries(state.fleet.runtime(), &user.0).await?;
    match approvals::decide(state.fleet.runtime(), &user.0, parsed, decision).await {
        Ok(a) => {
            let shown = with_obstacle(&state, &mut HashMap::new(), a).await?;
            Ok(Json(json!({ "approval": shown })))
        }
        Err(e) => Err(match e {
            ApprovalError::NotFound(_) => ApiError::NotFound(e.to_string()),
            ApprovalError::NotPending { .. }
            | ApprovalError::OwnerChanged { .. }
            | ApprovalError::PeerOwnerChanged { .. } => ApiError::Conflict(e.to_string()),
            // decided once one of the parent's subagents finishes
            ApprovalError::SubagentLimit { .. } => ApiError::Busy(e.to_string()),
            ApprovalError::Store(s) => s.into(),
            ApprovalError::Actor(a) => a.into(),
            ApprovalError::Prompt(p) => ApiError::Internal(p.to_string()),
        }),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReviewsQuery {
    #[serde(default)]
    limit: Option<i64>,
}

/// `GET /v1/bots/{bot}/reviews`: the bot's review log, newest first: what
/// auto-review asked about or blocked, in `shadow` mode (logged only, the
/// action ran) as in `enforce` mode. Allowed actions are not logged. Only
/// the rows of sessions the user owns, as for the bot's turns: not those
/// of a DM that stayed with the bot's former owner.
pub(crate) async fn reviews_of_bot(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    query: Result<Query<ReviewsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = super::extract::query(query, REVIEWS_HINT)?;
    let limit = super::extract::list_limit(q.limit, 100, MAX_LIMIT, "reviews")?;
    let record = super::owned_bot(&state, &user, &bot).await?;
    // one more than asked: whether more rows are kept than the page shows
    // (there is no paging past the newest 500: QA found it silent)
    let mut reviews = state
        .fleet
        .store()
        .reviews_of_bot_for_owner(&record.id, &user.0, limit + 1)
        .await?;
    let page = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = reviews.len() > page;
    reviews.truncate(page);
    Ok(Json(json!({ "reviews": reviews, "more": more })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hints_give_the_range() {
        for hint in [LIST_HINT, REVIEWS_HINT] {
            assert!(hint.ends_with(&format!("(1 to {MAX_LIMIT})")), "{hint}");
        }
    }
}
