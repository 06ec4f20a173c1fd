//! `POST /v1/hooks/{bot}/{hook}`: webhooks. No bearer token: a delivery is
//! authenticated by `X-Botfleet-Signature: sha256=<hex>`, the HMAC-SHA256
//! of the raw body with the hook's secret (compared in constant time), and
//! deduplicated by `X-Botfleet-Delivery` through the idempotency ledger
//! (source `hook:<bot>/<hook>`). The payload becomes an *untrusted* event
//! in the session `{bot, hook, <hook>}` at background priority; the engine
//! shows it to the model as quoted data.
//!
//! Checks, in order: unknown bot or hook → 404; missing or malformed
//! headers → 400; payload over the hook's limit → 413; wrong signature →
//! 401; payload not UTF-8, or empty or only whitespace → 400; then
//! admission.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmitRequest;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use hmac::Hmac;
use hmac::KeyInit;
use hmac::Mac;
use serde_json::json;
use sha2::Sha256;

use super::ApiState;
use super::error::ApiError;
use super::extract::Path;
use super::extract::read_body;
use super::extract::single_header;

/// Header with the delivery id (the idempotency key of a delivery).
pub const DELIVERY_HEADER: &str = "x-botfleet-delivery";
/// Header with the signature, `sha256=<hex>`.
pub const SIGNATURE_HEADER: &str = "x-botfleet-signature";
/// Longest delivery id.
const MAX_DELIVERY_LEN: usize = 200;

/// One hook's secret and limit.
#[derive(Clone)]
pub struct HookSecret {
    secret: Vec<u8>,
    max_payload_bytes: usize,
}

impl HookSecret {
    /// A secret and the largest payload the hook accepts.
    pub fn new(secret: impl Into<Vec<u8>>, max_payload_bytes: usize) -> Self {
        Self {
            secret: secret.into(),
            max_payload_bytes,
        }
    }
}

/// The configured webhooks, by (bot, hook).
#[derive(Clone, Default)]
pub struct Hooks {
    by_key: Arc<HashMap<(String, String), HookSecret>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // never the secrets
        f.debug_list().entries(self.by_key.keys()).finish()
    }
}

impl Hooks {
    /// From `(bot, hook, secret)` triples.
    pub fn new(hooks: impl IntoIterator<Item = (String, String, HookSecret)>) -> Self {
        Self {
            by_key: Arc::new(
                hooks
                    .into_iter()
                    .map(|(bot, hook, secret)| ((bot, hook), secret))
                    .collect(),
            ),
        }
    }

    fn get(&self, bot: &str, hook: &str) -> Option<&HookSecret> {
        self.by_key.get(&(bot.to_owned(), hook.to_owned()))
    }
}

/// `sha256=<hex>` of the HMAC-SHA256 of `body` with `secret` (what a
/// sender puts in `X-Botfleet-Signature`).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    match new_mac(secret) {
        Ok(mut mac) => {
            mac.update(body);
            format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
        }
        Err(_) => String::new(),
    }
}

/// HMAC takes keys of any length (longer ones are hashed, shorter ones
/// padded), so this does not fail in practice.
fn new_mac(secret: &[u8]) -> Result<Hmac<Sha256>, ApiError> {
    <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
        .map_err(|e| ApiError::Internal(format!("HMAC key: {e}")))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    single_header(headers, name)?
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::BadRequest(format!("the {name} header is not ASCII text")))
        })
        .transpose()
}

/// Why `id` is not a delivery id, if it is not one. The id is the
/// idempotency key and is compared byte for byte, so it is taken as sent:
/// trimming it would make `" w1 "` a duplicate of `w1`, and a tab (the one
/// control character an HTTP header value may hold) is refused likewise.
/// (HTTP/1 parsing already drops spaces and tabs around a header value, as
/// RFC 9110 says; the check keeps this handler from trimming on its own.)
fn delivery_problem(id: &str) -> Option<String> {
    if id.is_empty() || id.len() > MAX_DELIVERY_LEN {
        return Some(format!(
            "the X-Botfleet-Delivery header must be 1-{MAX_DELIVERY_LEN} characters"
        ));
    }
    if id.starts_with(char::is_whitespace) || id.ends_with(char::is_whitespace) {
        return Some(
            "the X-Botfleet-Delivery header must not start or end with whitespace: send the \
             delivery id exactly as generated, without padding"
                .into(),
        );
    }
    if id.contains(char::is_control) {
        return Some(
            "the X-Botfleet-Delivery header must not contain control characters (a tab \
             included): use visible ASCII, e.g. a UUID"
                .into(),
        );
    }
    None
}

pub(crate) async fn deliver(
    State(state): State<ApiState>,
    Path((bot, hook)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let Some(secret) = state.hooks.get(&bot, &hook) else {
        return Err(ApiError::NotFound(format!(
            "no webhook {} for bot {}; webhooks are defined in fleet.toml under [[bots.hooks]]",
            botfleet_memory::quote_short(&hook),
            botfleet_memory::quote_short(&bot)
        )));
    };
    let body = read_body(body, secret.max_payload_bytes)?;
    let delivery = header(&headers, DELIVERY_HEADER)?.ok_or_else(|| {
        ApiError::BadRequest(format!(
            "missing the X-Botfleet-Delivery header: a unique id per delivery (1-{MAX_DELIVERY_LEN} \
             characters); a retry of the same delivery sends the same id"
        ))
    })?;
    if let Some(problem) = delivery_problem(delivery) {
        return Err(ApiError::BadRequest(problem));
    }
    // padding around the signature changes nothing it says, unlike an id's
    let signature = header(&headers, SIGNATURE_HEADER)?
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::BadRequest(
                "missing the X-Botfleet-Signature header: send sha256=<hex of HMAC-SHA256 of the \
                 raw body with the hook's secret>"
                    .into(),
            )
        })?;
    let tag = signature
        .strip_prefix("sha256=")
        .and_then(|h| hex::decode(h).ok())
        .filter(|t| t.len() == 32)
        .ok_or_else(|| {
            ApiError::BadRequest(
                "the X-Botfleet-Signature header must be sha256=<64 hex digits>".into(),
            )
        })?;
    if body.len() > secret.max_payload_bytes {
        return Err(ApiError::TooLarge {
            limit: secret.max_payload_bytes,
        });
    }
    let mut mac = new_mac(&secret.secret)?;
    mac.update(&body);
    if mac.verify_slice(&tag).is_err() {
        return Err(ApiError::BadSignature(
            "the X-Botfleet-Signature does not match: sign the exact raw body with HMAC-SHA256 \
             and the hook's secret, and send sha256=<hex>"
                .into(),
        ));
    }
    let text = std::str::from_utf8(&body).map_err(|_| {
        ApiError::BadRequest("the payload is not UTF-8 text; send JSON or text".into())
    })?;
    if text.trim().is_empty() {
        return Err(ApiError::BadRequest(
            "the payload is empty: a delivery wakes the bot with its body, so send the event \
             as JSON or text"
                .into(),
        ));
    }
    let id = botfleet_memory::BotId::new(bot.as_str())
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let record = state.fleet.store().get_bot(&id).await?.ok_or_else(|| {
        ApiError::NotFound(format!("bot {bot:?} of webhook {hook:?} does not exist"))
    })?;
    let req = hook_event(&record, &hook, delivery, text);
    let outcome = state.fleet.admit(req).await?;
    let (status, body) = match &outcome {
        AdmitOutcome::Accepted(_) => (StatusCode::ACCEPTED, json!(outcome)),
        AdmitOutcome::Duplicate(_) => (StatusCode::OK, json!(outcome)),
        AdmitOutcome::Conflict(original) => (
            StatusCode::CONFLICT,
            json!({
                "status": "conflict",
                "error": {"code": "conflict", "message": "this X-Botfleet-Delivery id was used with a different payload; send a new id for a new delivery"},
                "original": original,
            }),
        ),
        // why it cannot be checked: pruned past retention, or a restore
        AdmitOutcome::Unknown { reason } => (
            StatusCode::CONFLICT,
            json!({"status": "unknown", "error": {"code": "unknown", "message": format!(
                "this X-Botfleet-Delivery id cannot be checked against earlier deliveries: {reason}; \
                 a redelivery this old is not admitted: send the event with a new delivery id if \
                 it is still wanted"
            )}}),
        ),
    };
    Ok((status, Json(body)).into_response())
}

/// The admission of one delivery: an untrusted `webhook <hook>` event.
fn hook_event(bot: &BotRecord, hook: &str, delivery: &str, text: &str) -> AdmitRequest {
    let key = SessionKey {
        bot: bot.id.clone(),
        kind: SessionKind::Hook,
        peer: hook.to_owned(),
    };
    AdmitRequest {
        source: format!("hook:{}/{hook}", bot.id),
        nonce: delivery.to_owned(),
        nonce_time_ms: botfleet_actors::nonce_time_ms(delivery),
        digest: InputDigest::of_parts([
            b"hook".as_slice(),
            bot.id.as_str().as_bytes(),
            hook.as_bytes(),
            text.as_bytes(),
        ]),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: key.id(),
            author: format!("hook:{hook}"),
            turn: None,
            kind: EntryKind::Event {
                origin: format!("webhook {hook}"),
                text: text.to_owned(),
                trusted: false,
                hop: None,
                chain: None,
            },
        },
        session: key,
        owner: bot.owner.clone(),
        priority: Priority::Background,
    }
}
