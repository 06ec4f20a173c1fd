//! `/v1/secrets`: a person supplies a secret for their bots' tools through
//! the API (for example from a login card a bot sent), so the value never
//! passes through a model. Values are never returned.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::SecretValue;
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

/// Longest secret value.
const MAX_SECRET_BYTES: usize = 16 * 1024;

/// Longest secret name (`secret_name_problem`'s rule).
const MAX_NAME_CHARS: usize = 64;

/// Checks a secret name: `reserved_too` also refuses the names that steer
/// what commands run or trust (for a new value); without it, only the
/// shape is checked, so a secret stored before its name was reserved can
/// still be deleted.
fn check_name(name: &str, reserved_too: bool) -> Result<(), ApiError> {
    // the rule's own refusal quotes the name whole, however long
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::BadRequest(format!(
            "{} is not a secret name: a secret name has at most {MAX_NAME_CHARS} characters \
             (A-Z, 0-9 and _, not starting with a digit), such as GITHUB_TOKEN",
            botfleet_memory::quote_short(name)
        )));
    }
    let problem = if reserved_too {
        botfleet_actors::secret_name_problem(name)
    } else {
        botfleet_actors::secret_name_shape_problem(name)
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(ApiError::BadRequest(problem)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretBody {
    value: String,
}

pub(crate) async fn put(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(name): Path<String>,
    _: NoQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    check_name(&name, true)?;
    let body = read_body(body, state.limits.max_body_bytes)?;
    let parsed: SecretBody = json_object(&body, "a secret", r#"{"value": "..."}"#)?;
    if parsed.value.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "the value is empty: send 1-{MAX_SECRET_BYTES} bytes of it"
        )));
    }
    // empty as a message of it is: no secret is only spaces (QA: stored)
    if parsed.value.trim().is_empty() {
        return Err(ApiError::BadRequest(
            "the value is only whitespace: send the secret's value itself".into(),
        ));
    }
    if parsed.value.len() > MAX_SECRET_BYTES {
        // in bytes of UTF-8, as the environment variable holds it: a
        // character past ASCII is 2-4 of them (QA: "must be 1-16384 bytes"
        // said neither how many were sent nor that)
        let bytes = parsed.value.len();
        let chars = parsed.value.chars().count();
        let counted = if chars == bytes {
            String::new()
        } else {
            format!(" ({chars} characters: one past ASCII takes 2-4 bytes in UTF-8)")
        };
        return Err(ApiError::BadRequest(format!(
            "the value has {bytes} bytes{counted}; the limit is {MAX_SECRET_BYTES} bytes of \
             UTF-8: send a shorter value"
        )));
    }
    // tools get the value as an environment variable, which cannot hold NUL
    if parsed.value.contains('\0') {
        return Err(ApiError::BadRequest(
            "the value contains a NUL byte (\\u0000); a secret reaches tools as an environment \
             variable, which cannot hold one: send the value without it"
                .into(),
        ));
    }
    // at most MAX_SECRETS_PER_USER, checked by the writer (QA: 2,000
    // values of 16 KiB were taken, and every turn of a bot with a secret
    // read and searched them all)
    let written = state
        .fleet
        .store()
        .write(vec![Mutation::SetSecret {
            owner: user.0.clone(),
            name: name.clone(),
            value: SecretValue::new(parsed.value),
        }])
        .await?;
    if let Some(botfleet_memory::MutationResult::SecretLimit { stored }) = written.first() {
        return Err(ApiError::Conflict(format!(
            "you have {stored} secrets, the most a user may store: delete one you no longer use \
             (DELETE /v1/secrets/NAME, or on the page's Secrets) and send this again; a stored \
             name may still be given a new value"
        )));
    }
    Ok((
        StatusCode::OK,
        Json(json!({ "name": name, "stored": true })),
    ))
}

pub(crate) async fn list(
    State(state): State<ApiState>,
    user: AuthUser,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let secrets = state.fleet.store().user_secrets(&user.0).await?;
    let names: Vec<Value> = secrets
        .iter()
        .map(|(name, _, at)| json!({ "name": name, "updated_at": at }))
        .collect();
    Ok(Json(json!({ "secrets": names })))
}

pub(crate) async fn delete(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(name): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    check_name(&name, false)?;
    let n = match state
        .fleet
        .store()
        .write(vec![Mutation::DeleteSecret {
            owner: user.0.clone(),
            name: name.clone(),
        }])
        .await?
        .pop()
    {
        Some(MutationResult::Count(n)) => n,
        Some(other) => {
            return Err(ApiError::Internal(format!(
                "the store answered {other:?} to a secret's deletion"
            )));
        }
        None => 0,
    };
    if n == 0 {
        return Err(ApiError::NotFound(format!("you have no secret {name}")));
    }
    Ok(Json(json!({ "name": name, "deleted": true })))
}
