//! `POST /v1/hooks/{bot}/{hook}`: webhooks. No bearer token: a delivery is
//! authenticated by `X-Botfleet-Signature: sha256=<hex>`, the HMAC-SHA256
//! with the hook's secret (compared in constant time) of the raw body, or,
//! when the sender also sends `X-Botfleet-Timestamp: <Unix seconds>`, of
//! `"{timestamp}.{raw body}"` (Stripe's scheme: a captured request is
//! refused once its timestamp is past the hook's tolerance). Deliveries
//! are deduplicated by `X-Botfleet-Delivery` through the idempotency
//! ledger (source `hook:<bot>/<hook>`), and by their signature: one sent
//! again under another delivery id (a replay of a captured request) is
//! answered as a duplicate of the first, after a restart too (the store
//! remembers a signature in the transaction that admits its delivery;
//! `memory/src/store/signatures.rs`). The payload becomes an
//! *untrusted* event in the session `{bot, hook, <hook>}` at background
//! priority; the engine shows it to the model as quoted data.
//!
//! Checks, in order: unknown bot or hook → 404; a declared
//! `Content-Length` over the hook's limit → 413 before the body is read;
//! a `Content-Encoding` other than `identity` (a compressed payload) →
//! 415; missing or malformed headers → 400; payload over the hook's limit →
//! 413; wrong signature, a timestamp outside the tolerance, or none where
//! the hook requires one → 401; payload not UTF-8, or empty or only
//! whitespace → 400; no token left in the hook's rate → 429; then
//! admission.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::FromRequest;
use axum::extract::Request;
use axum::extract::State;
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
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use hmac::Hmac;
use hmac::KeyInit;
use hmac::Mac;
use serde_json::Value;
use serde_json::json;
use sha2::Sha256;

use super::ApiState;
use super::AuthUser;
use super::error::ApiError;
use super::extract::NoQuery;
use super::extract::Path;
use super::extract::read_body;
use super::extract::single_header;
use super::owned_bot;

#[path = "hook_headers.rs"]
mod hook_headers;
#[path = "hook_rate.rs"]
mod hook_rate;

use hook_headers::delivery_problem;
use hook_headers::header;
use hook_headers::parse_timestamp;
use hook_headers::refuse_encoded;

use hook_rate::DEFAULT_DELIVERIES_PER_MINUTE;
use hook_rate::HookRate;
use hook_rate::MAX_REMEMBERED;
use hook_rate::Seen;
use hook_rate::SignatureTurns;
use hook_rate::Signed;
use hook_rate::first_delivery;

/// Header with the delivery id (the idempotency key of a delivery).
pub const DELIVERY_HEADER: &str = "x-botfleet-delivery";
/// Header with the signature, `sha256=<hex>`.
pub const SIGNATURE_HEADER: &str = "x-botfleet-signature";
/// Header with the time a timestamped signature was made, Unix seconds.
pub const TIMESTAMP_HEADER: &str = "x-botfleet-timestamp";
/// Longest delivery id.
const MAX_DELIVERY_LEN: usize = 200;
/// A hook's timestamp tolerance when fleet.toml sets none, in seconds.
const DEFAULT_TIMESTAMP_TOLERANCE_S: u64 = 300;
/// How long a body-only signature is remembered, to answer a replay of it
/// under another delivery id as a duplicate.
const BODY_ONLY_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// A hook's settings beyond its secret and payload limit (fleet.toml
/// `[[bots.hooks]]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HookOptions {
    /// How far a signature's `X-Botfleet-Timestamp` may be from the host's
    /// clock, in seconds (`timestamp_tolerance_s`).
    timestamp_tolerance_s: u64,
    /// Whether a body-only signature is refused (`require_timestamp`).
    require_timestamp: bool,
    /// New deliveries admitted per minute (`deliveries_per_minute`).
    deliveries_per_minute: u32,
}

impl Default for HookOptions {
    fn default() -> Self {
        Self {
            timestamp_tolerance_s: DEFAULT_TIMESTAMP_TOLERANCE_S,
            require_timestamp: false,
            deliveries_per_minute: DEFAULT_DELIVERIES_PER_MINUTE,
        }
    }
}

/// Where the webhooks' routes start (`POST /v1/hooks/{bot}/{hook}`).
pub(crate) const HOOKS_PREFIX: &str = "/v1/hooks/";

/// One hook's secret, limits, and what it remembers of recent deliveries.
#[derive(Clone)]
pub struct HookSecret {
    secret: Vec<u8>,
    max_payload_bytes: usize,
    /// Whether `max_payload_bytes` is the host's `max_body_bytes`: the
    /// hook sets none and the host's is below the default, so a payload
    /// over it is let in by raising the host's (the hook's own is refused
    /// above the host's).
    host_limited: bool,
    options: HookOptions,
    /// Shared by every clone of the API state.
    seen: Arc<Mutex<Seen>>,
    /// Deliveries of one signature take turns.
    turns: Arc<SignatureTurns>,
    rate: Arc<HookRate>,
}

impl HookSecret {
    /// A secret and the largest payload the hook accepts, with the default
    /// [`HookOptions`].
    pub fn new(secret: impl Into<Vec<u8>>, max_payload_bytes: usize) -> Self {
        Self {
            secret: secret.into(),
            max_payload_bytes,
            host_limited: false,
            options: HookOptions::default(),
            seen: Arc::default(),
            turns: Arc::default(),
            rate: Arc::new(HookRate::new(DEFAULT_DELIVERIES_PER_MINUTE)),
        }
    }

    /// The same hook with the settings of its `[[bots.hooks]]` entry.
    pub fn with_config(self, config: &crate::config::HookConfig) -> Self {
        let defaults = HookOptions::default();
        self.with_options(HookOptions {
            timestamp_tolerance_s: config
                .timestamp_tolerance_s
                .unwrap_or(defaults.timestamp_tolerance_s),
            require_timestamp: config.require_timestamp,
            deliveries_per_minute: config
                .deliveries_per_minute
                .unwrap_or(defaults.deliveries_per_minute),
        })
    }

    /// The same hook, its payload limit being the host's
    /// `max_body_bytes` (see [`HookSecret`]'s `host_limited`).
    #[must_use]
    pub fn limited_by_host(self, host_limited: bool) -> Self {
        Self {
            host_limited,
            ..self
        }
    }

    /// The same hook with `options`.
    fn with_options(self, options: HookOptions) -> Self {
        Self {
            options,
            rate: Arc::new(HookRate::new(options.deliveries_per_minute)),
            ..self
        }
    }

    /// Checks the signature `tag` of `body`, made at `timestamp` (the
    /// header's text) if the sender sent one, against the secret and the
    /// clock (`now_ms`); how long to remember the signature for.
    fn verify(
        &self,
        tag: &[u8],
        timestamp: Option<&str>,
        body: &[u8],
        now_ms: i64,
    ) -> Result<Duration, ApiError> {
        let Some(timestamp) = timestamp else {
            if self.options.require_timestamp {
                return Err(ApiError::BadSignature(
                    "this webhook requires a timestamped signature (require_timestamp): send \
                     X-Botfleet-Timestamp: <Unix time in seconds> and sign \"{timestamp}.{raw \
                     body}\" (the header's value, a dot, the exact raw body) with HMAC-SHA256 \
                     and the hook's secret"
                        .into(),
                ));
            }
            let mut mac = new_mac(&self.secret)?;
            mac.update(body);
            if mac.verify_slice(tag).is_err() {
                return Err(ApiError::BadSignature(
                    "the X-Botfleet-Signature does not match: sign the exact raw body with \
                     HMAC-SHA256 and the hook's secret, and send sha256=<hex> (or send \
                     X-Botfleet-Timestamp and sign \"{timestamp}.{raw body}\")"
                        .into(),
                ));
            }
            // a body that starts as a timestamped signature's signed text
            // does (`{timestamp}.`) may be a timestamped delivery replayed
            // without its header, the timestamp moved into the body: the
            // signature is the same, so it is held to that timestamp's age
            // (QA: a capture was replayed this way long past the tolerance)
            return match signed_timestamp(body) {
                // the prefix quoted as sent (QA: `0001600000000.` was
                // quoted as "1600000000.", and its age as the header's)
                Some((seconds, prefix)) => self
                    .check_age(seconds, now_ms, "the Unix time this payload starts with")
                    .map_err(|e| match e {
                        ApiError::BadSignature(why) => ApiError::BadSignature(format!(
                            "this payload starts as the text a timestamped signature signs \
                             (Unix time, a dot: \"{prefix}\"), so it is held to that time: \
                             {why}; a sender whose payload starts so sends \
                             X-Botfleet-Timestamp"
                        )),
                        other => other,
                    }),
                None => Ok(BODY_ONLY_WINDOW),
            };
        };
        let seconds = parse_timestamp(timestamp)?;
        let mut mac = new_mac(&self.secret)?;
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        if mac.verify_slice(tag).is_err() {
            return Err(ApiError::BadSignature(
                "the X-Botfleet-Signature does not match: with X-Botfleet-Timestamp, sign \
                 \"{timestamp}.{raw body}\" (the header's value exactly as sent, a dot, the \
                 exact raw body) with HMAC-SHA256 and the hook's secret, and send sha256=<hex>"
                    .into(),
            ));
        }
        self.check_age(seconds, now_ms, "the X-Botfleet-Timestamp")
    }

    /// Refuses a signature made at `seconds` (Unix time) that is further
    /// from the host's clock (`now_ms`) than the hook's tolerance, either
    /// way; else how long to remember it: until its age passes the
    /// tolerance, when a replay is refused for its age. `what` names where
    /// the time was read.
    fn check_age(&self, seconds: i64, now_ms: i64, what: &str) -> Result<Duration, ApiError> {
        let tolerance = i64::try_from(self.options.timestamp_tolerance_s).unwrap_or(i64::MAX);
        let now = now_ms.div_euclid(1000);
        let age = now.saturating_sub(seconds);
        if age > tolerance {
            return Err(ApiError::BadSignature(format!(
                "{what} is {age} s old, past this webhook's tolerance of \
                 {tolerance} s (timestamp_tolerance_s): an old signed request is refused so \
                 that a captured one cannot be replayed; sign the delivery again with the \
                 current time (and check the sender's clock)"
            )));
        }
        if -age > tolerance {
            return Err(ApiError::BadSignature(format!(
                "{what} is {} s ahead of this host's clock, past this \
                 webhook's tolerance of {tolerance} s (timestamp_tolerance_s): check the \
                 sender's clock (Unix time in seconds, not milliseconds)",
                -age
            )));
        }
        // a replay is refused for its age once the tolerance is past: it
        // is remembered until then
        let left = seconds.saturating_add(tolerance).saturating_sub(now).max(1);
        Ok(Duration::from_secs(u64::try_from(left).unwrap_or(1)))
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        // each change leaves the two maps consistent before it can panic
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The Unix time a body starts with when it starts as a timestamped
/// signature's signed text does: digits, then a dot, whose value has 9 to
/// 11 digits (from 2001 to 5138) once any leading zeros are dropped, as
/// the header's value may have them (QA: `00…` moved into the body was
/// taken for a plain body, and admitted at any age).
/// Answers it with the text it was read from, as sent (digits and dot).
fn signed_timestamp(body: &[u8]) -> Option<(i64, &str)> {
    let digits = body.iter().take_while(|b| b.is_ascii_digit()).count();
    if body.get(digits) != Some(&b'.') {
        return None;
    }
    let zeros = body.iter().take_while(|b| **b == b'0').count().min(digits);
    if !(9..=11).contains(&(digits - zeros)) {
        return None;
    }
    // ASCII digits and a dot, checked above
    let prefix = std::str::from_utf8(&body[..=digits]).ok()?;
    Some((prefix[zeros..digits].parse().ok()?, prefix))
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

    /// `bot`'s hooks, by name, with their settings (never the secret).
    fn of(&self, bot: &str) -> Vec<Value> {
        let mut hooks: Vec<_> = self
            .by_key
            .iter()
            .filter(|((b, _), _)| b == bot)
            .map(|((_, name), h)| (name, h))
            .collect();
        hooks.sort_by(|a, b| a.0.cmp(b.0));
        hooks
            .into_iter()
            .map(|(name, h)| {
                json!({
                    "name": name,
                    "path": format!("{HOOKS_PREFIX}{bot}/{name}"),
                    "max_payload_bytes": h.max_payload_bytes,
                    "timestamp_tolerance_s": h.options.timestamp_tolerance_s,
                    "require_timestamp": h.options.require_timestamp,
                    "deliveries_per_minute": h.options.deliveries_per_minute,
                })
            })
            .collect()
    }
}

/// `GET /v1/bots/{bot}/hooks`: the webhooks fleet.toml gives one of the
/// user's bots, by name, with their settings; never their secrets. Before
/// it, no route listed them, so `botfleet transcript BOT --hook NAME`
/// printed the runs of a hook since removed, where a removed routine is
/// refused (QA).
pub(crate) async fn list(
    State(state): State<ApiState>,
    user: AuthUser,
    Path(bot): Path<String>,
    _: NoQuery,
) -> Result<Json<Value>, ApiError> {
    let b = owned_bot(&state, &user, &bot).await?;
    Ok(Json(
        json!({ "bot": b.id, "hooks": state.hooks.of(b.id.as_str()) }),
    ))
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

pub(crate) async fn deliver(
    State(state): State<ApiState>,
    Path((bot, hook)): Path<(String, String)>,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, ApiError> {
    let Some(secret) = state.hooks.get(&bot, &hook) else {
        return Err(ApiError::NotFound(format!(
            "no webhook {} for bot {}; webhooks are defined in fleet.toml under [[bots.hooks]]",
            botfleet_memory::quote_short(&hook),
            botfleet_memory::quote_short(&bot)
        )));
    };
    let over = |e: ApiError| over_hook_limit(e, &bot, &hook, secret.host_limited);
    // refused from the headers, before a byte of the body is waited for
    crate::http_server::refuse_declared_over(&headers, secret.max_payload_bytes).map_err(over)?;
    refuse_encoded(&headers)?;
    let body = read_body(
        Bytes::from_request(request, &state).await,
        secret.max_payload_bytes,
    )
    .map_err(over)?;
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
    let timestamp = header(&headers, TIMESTAMP_HEADER)?.map(str::trim);
    if body.len() > secret.max_payload_bytes {
        return Err(over(ApiError::TooLarge {
            limit: secret.max_payload_bytes,
        }));
    }
    let now_ms = state.fleet.store().clock().now_ms();
    let keep = secret.verify(&tag, timestamp, &body, now_ms)?;
    let text = std::str::from_utf8(&body).map_err(|_| {
        // gzip's magic number: compressed without saying so
        let gzip = if body.starts_with(&[0x1f, 0x8b]) {
            " (it looks gzip-compressed: send the body uncompressed)"
        } else {
            ""
        };
        ApiError::BadRequest(format!(
            "the payload is not UTF-8 text{gzip}; send JSON or text"
        ))
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
    let signed = Signed {
        source: hook_source(&record, &hook),
        signature: InputDigest::of_parts([b"hook-signature".as_slice(), &tag]),
        digest: hook_digest(&record, &hook, text),
        tag,
    };
    let delivery = Delivery {
        record,
        hook,
        id: delivery.to_owned(),
        text: text.to_owned(),
        signed,
        keep,
        now_ms,
    };
    // in a task of its own: a request dropped meanwhile (its sender gone,
    // the request timeout) still ends its turn with its admission answered
    let (outcome, replay_of, seen) =
        tokio::spawn(admit_in_turn(state.clone(), secret.clone(), delivery))
            .await
            .map_err(|e| ApiError::Internal(format!("webhook admission: {e}")))??;
    let (status, mut body) = match &outcome {
        AdmitOutcome::Accepted(_) => (StatusCode::ACCEPTED, json!(outcome)),
        AdmitOutcome::Duplicate(_) => (StatusCode::OK, json!(outcome)),
        AdmitOutcome::Conflict(original) => (
            StatusCode::CONFLICT,
            json!({
                "status": "conflict",
                "error": {"code": "conflict", "message": match &replay_of {
                    // the id is new: its signature is the earlier one's
                    // (QA: "send a new id", which it had)
                    Some(first) => format!(
                        "this signature came before with delivery {} and another payload: a \
                         replay of it, not admitted; a new delivery is signed anew",
                        botfleet_memory::quote_short(first)
                    ),
                    // its signature came with this very id: the same
                    // delivery in another form (QA: "send a new id")
                    None if seen => "this delivery and its signature came before with another \
                                     payload: a replay of it, not admitted; a new delivery is \
                                     signed anew"
                        .to_owned(),
                    None => "this X-Botfleet-Delivery id was used with a different payload; \
                             send a new id for a new delivery"
                        .to_owned(),
                }},
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
    if let (Some(first), Some(fields)) = (replay_of, body.as_object_mut()) {
        // the delivery this one repeats, signature and all
        fields.insert("replay_of".into(), json!(first));
    }
    Ok((status, Json(body)).into_response())
}

/// A delivery checked and signed, to admit.
struct Delivery {
    record: BotRecord,
    hook: String,
    /// Its `X-Botfleet-Delivery`.
    id: String,
    text: String,
    signed: Signed,
    /// How long its signature is remembered.
    keep: Duration,
    now_ms: i64,
}

/// Admits `delivery` in its signature's turn ([`SignatureTurns`]): the
/// outcome, the delivery it is a replay of (the same signature under
/// another id, admitted, so answered, as that delivery), and whether its
/// signature came before at all (under this id too).
async fn admit_in_turn(
    state: ApiState,
    secret: HookSecret,
    delivery: Delivery,
) -> Result<(AdmitOutcome, Option<String>, bool), ApiError> {
    let Delivery {
        record,
        hook,
        id,
        text,
        signed,
        keep,
        now_ms,
    } = delivery;
    let _turn = secret.turns.take(&signed.tag).await;
    let first = first_delivery(&state, &secret, &signed, now_ms).await?;
    let fresh = first.is_none();
    let replay_of = first.filter(|d| *d != id);
    if replay_of.is_some()
        && let Some(taken @ AdmitOutcome::Conflict(_)) = state
            .fleet
            .store()
            .ledger_answer_to(&signed.source, &id, signed.digest)
            .await?
    {
        // its own id is taken by another payload: that is the conflict
        // to tell, whatever delivery the signature repeats (QA: answered
        // as that delivery's duplicate, hiding the reuse of the id)
        return Ok((taken, None, false));
    }
    let nonce = replay_of.as_deref().unwrap_or(&id);
    let taken = match secret.rate.try_take() {
        Ok(taken) => Some(taken),
        // a retry of a delivery already admitted is answered, not counted
        Err(_) if !fresh => None,
        Err(wait) => {
            let known = state
                .fleet
                .store()
                .ledger_has_key(&signed.source, &id)
                .await?;
            if !known {
                return Err(secret.rate.refusal(record.id.as_str(), &hook, wait));
            }
            None
        }
    };
    let event = hook_event(&record, &hook, nonce, &text);
    let outcome = if fresh {
        // remembered by the store in the transaction that admits it: a
        // crash leaves both or neither
        let remember = Mutation::RememberSignature {
            source: signed.source.clone(),
            signature: signed.signature,
            delivery: id.clone(),
            digest: signed.digest,
            until_ms: now_ms.saturating_add(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX)),
            max_kept: MAX_REMEMBERED,
        };
        let admitted = state.fleet.runtime().admit_after(vec![remember], event);
        admitted.await.map(|(_, outcome)| outcome)
    } else {
        state.fleet.admit(event).await
    };
    if fresh
        && matches!(
            outcome,
            Ok(AdmitOutcome::Accepted(_) | AdmitOutcome::Duplicate(_))
        )
    {
        // before the turn ends: the next request of the signature finds it
        let _ = secret.seen().first_or_remember(&signed.tag, &id, keep);
    }
    if let Some(taken) = taken
        && !matches!(outcome, Ok(AdmitOutcome::Accepted(_)))
    {
        secret.rate.give_back(taken);
    }
    Ok((outcome?, replay_of, !fresh))
}

/// The ledger source of a hook's deliveries.
fn hook_source(bot: &BotRecord, hook: &str) -> String {
    format!("hook:{}/{hook}", bot.id)
}

/// The ledger digest of a delivery of `text` to `hook` of `bot`.
fn hook_digest(bot: &BotRecord, hook: &str, text: &str) -> InputDigest {
    InputDigest::of_parts([
        b"hook".as_slice(),
        bot.id.as_str().as_bytes(),
        hook.as_bytes(),
        text.as_bytes(),
    ])
}

/// The admission of one delivery: an untrusted `webhook <hook>` event.
fn hook_event(bot: &BotRecord, hook: &str, delivery: &str, text: &str) -> AdmitRequest {
    let key = SessionKey {
        bot: bot.id.clone(),
        kind: SessionKind::Hook,
        peer: hook.to_owned(),
    };
    AdmitRequest {
        source: hook_source(bot, hook),
        nonce: delivery.to_owned(),
        nonce_time_ms: botfleet_actors::nonce_time_ms(delivery),
        digest: hook_digest(bot, hook, text),
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
                asked: None,
            },
        },
        session: key,
        owner: bot.owner.clone(),
        priority: Priority::Background,
    }
}

/// A payload over a hook's `max_payload_bytes`, refused naming the
/// setting and where it is: "send less" did not help a sender that cannot
/// change what it sends (a GitHub push event with many commits). When the
/// limit is the host's (`host_limited`), the host's setting is the one to
/// raise: the hook's may not exceed it.
fn over_hook_limit(e: ApiError, bot: &str, hook: &str, host_limited: bool) -> ApiError {
    let hook = botfleet_memory::quote_short(hook);
    match e {
        ApiError::TooLarge { limit } if host_limited => ApiError::TooLargeFor(format!(
            "the payload is larger than webhook {hook}'s limit ({limit} bytes, the host's \
             max_body_bytes: the hook sets no max_payload_bytes); raise max_body_bytes under \
             [host] in fleet.toml, or send less"
        )),
        ApiError::TooLarge { limit } => ApiError::TooLargeFor(format!(
            "the payload is larger than webhook {hook}'s max_payload_bytes ({limit} bytes); \
             raise max_payload_bytes under [[bots.hooks]] of bot {} in fleet.toml, or send less",
            botfleet_memory::quote_short(bot)
        )),
        other => other,
    }
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
