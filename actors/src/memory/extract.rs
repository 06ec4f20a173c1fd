//! Fact extraction after a turn: the bot's model (purpose `extract`) reads
//! what the person wrote and the final reply, with the memory the turn
//! showed, and proposes `{add, replace, remove}` as strict JSON
//! (`prompts/extract_facts.md`, `prompts/extract_input.md`).
//!
//! Validation, per proposed op (a bad op is rejected alone, with its
//! reason in the report; a reply that is not the JSON object rejects
//! everything):
//! - `add`: a known layer, a scope the bot may write ([`super::writable_scope`]),
//!   importance 1..=5, `expires_in_hours` only for notes (default 24, at
//!   most 720; counted from the turn's end, and a note already expired
//!   when the extraction runs is refused); at most [`MAX_OPS`] adds;
//! - `replace` / `remove`: the id must be among the ids this turn showed
//!   (the caller passes them), so the extractor cannot touch a fact it has
//!   not seen; at most [`MAX_OPS`] each.
//!
//! Removes run first, then replaces, then adds (so a replaced or removed
//! fact frees its room). An add is a `MemoryOp::AddExtracted` with the
//! turn: a Forget committed after the turn started wins over it (the
//! person asked to forget what they had said), answered
//! `AlreadyForgotten` and logged (`memory/src/layers/forget_marks.rs`).
//! Replaces and removes are `MemoryOp::ChangeExtracted`: an item changed
//! after the turn ended keeps its newer text (`Unchanged`). Every write goes through the scope actors, so
//! limits hold and a full profile comes back as a rejected op. Ids of adds
//! derive from the session, the turn's id and its text (`turn_seed`), so
//! running the extraction twice for the same turn adds nothing the second
//! time, while a later turn with the same text and reply gets ids of its
//! own (it may have a new fact to add).
//!
//! Nothing here panics or blocks a reply: the engine spawns it after the
//! turn ([`super::spawn_extract_after_turn`]; the turn's end recorded it
//! as owed so a restart does not lose it, `extract_owed.rs`) and only
//! logs the outcome. The extraction's token usage and the end of its owed
//! record are one write; until then its tokens are reserved
//! (`extract_reserved.rs`), so the bot's budget check counts them.

use std::time::Duration;

use botfleet_memory::BotRecord;
use botfleet_memory::IdError;
use botfleet_memory::Importance;
use botfleet_memory::Layer;
use botfleet_memory::MAX_NOTE_HOURS;
use botfleet_memory::MemoryError;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemoryOp;
use botfleet_memory::MemoryOpResult;
use botfleet_memory::Mutation;
use botfleet_memory::NewMemory;
use botfleet_memory::SessionId;
use botfleet_memory::StoreError;
use botfleet_memory::TurnId;
use botfleet_memory::bot_scopes;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use sha2::Digest;
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use super::extract_answer::proposal_json;
use super::extract_bounds::ExtractBounds;
use super::extract_owed::Reservation;
use super::render::extraction_line;
use super::render::oldest_set_first;
use super::writable_scope;
use crate::engine::quoted;
use crate::model::ChatMessage;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::Purpose;
use crate::model::call_usage::call_usage;
use crate::model::call_usage::sent_tokens;
use crate::prompts::prompts;
use crate::runtime::Runtime;

/// Most adds, replaces and removes each that one extraction may apply.
pub const MAX_OPS: usize = 10;
/// Longest wait for the extractor's answer.
const EXTRACT_TIMEOUT: Duration = Duration::from_secs(90);
/// Longest extractor answer asked for.
const EXTRACT_MAX_TOKENS: u32 = 1500;

/// Why an extraction did nothing.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// The bot's provider is not configured.
    #[error("bot {bot} uses provider {provider:?}, which is not configured")]
    NoModel {
        /// Bot.
        bot: String,
        /// Its provider.
        provider: String,
    },
    /// The model call failed.
    #[error("the extractor's model call failed: {0}")]
    Model(#[from] ModelError),
    /// The model took too long.
    #[error("the extractor did not answer within {0:?}")]
    Timeout(Duration),
    /// The answer was not the JSON object asked for.
    #[error("the extractor's answer is not the JSON asked for: {0}")]
    NotJson(String),
    /// Reading memory failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A proposed op that was not applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedOp {
    /// The op (`add "…"`, `replace m-…`, `remove m-…`).
    pub op: String,
    /// Why.
    pub reason: String,
}

/// What one extraction did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExtractReport {
    /// Items added.
    pub added: Vec<MemoryItem>,
    /// Items replaced: (before, after).
    pub replaced: Vec<(MemoryItem, MemoryItem)>,
    /// Items removed.
    pub removed: Vec<MemoryItem>,
    /// Proposals that were already remembered.
    pub unchanged: Vec<MemoryItem>,
    /// Adds dropped because a Forget committed after the turn started
    /// covers them (`MemoryOp::AddExtracted`): the op labels.
    pub forgotten: Vec<String>,
    /// Proposals refused.
    pub rejected: Vec<RejectedOp>,
}

impl ExtractReport {
    /// Whether memory changed.
    pub fn changed(&self) -> bool {
        !(self.added.is_empty() && self.replaced.is_empty() && self.removed.is_empty())
    }
}

/// The answer's three lists, each op as the model wrote it: an op is read
/// on its own ([`op`]), so one that is not as asked (an importance of
/// `"4"` or 300, a `confidence` the prompt did not ask for) is refused
/// alone, not every op beside it (QA: one such field lost the whole
/// answer). So is a key beside the lists (a `"note"`): it is left out
/// ([`parse`]).
#[derive(Debug, Deserialize)]
struct Proposal {
    #[serde(default)]
    add: Vec<Value>,
    #[serde(default)]
    replace: Vec<Value>,
    #[serde(default)]
    remove: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AddProposal {
    text: String,
    #[serde(default)]
    layer: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    importance: Option<serde_json::Number>,
    #[serde(default)]
    expires_in_hours: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceProposal {
    id: String,
    text: String,
    #[serde(default)]
    importance: Option<serde_json::Number>,
}

/// Whether fact extraction for `bot` reads a message written by
/// `author`: only the bot's current owner's. What an extraction learns
/// goes to the owner's memory, so another person's words (another user in
/// a room, the former owner after the bot changed hands) never do. The
/// engine picks a turn's texts with it (`engine/memory_hooks.rs`), and a
/// re-run after a restart checks the owner the turn was owed for
/// (`extract_owed.rs`).
pub(crate) fn extracts_from(bot: &BotRecord, author: &str) -> bool {
    author == bot.owner.as_str()
}

/// Runs the extraction for the finished turn `turn` of `bot` in
/// `session`. `shown` are the ids of the memory items the turn's context
/// showed (`MemorySnapshot::shown_ids`, plus items added by an update);
/// only those may be replaced or removed. Whatever the outcome, the turn's
/// extraction is no longer owed afterwards (a failure is for good: the
/// provider's own retries are behind a model error).
pub async fn extract_after_turn(
    rt: &Runtime,
    bot: &BotRecord,
    session: SessionId,
    turn: TurnId,
    shown: &[MemoryId],
    user_texts: &[String],
    final_reply: &str,
) -> Result<ExtractReport, ExtractError> {
    let texts = (shown, user_texts, final_reply);
    extract_reserved(rt, bot, (session, turn), texts, None).await
}

/// [`extract_after_turn`], narrowing `reserved` (the tokens it reserved
/// for the bot's budget check, released by the caller after this) to its
/// request's tokens and its answer's limit once its request is built.
pub(super) async fn extract_reserved(
    rt: &Runtime,
    bot: &BotRecord,
    (session, turn): (SessionId, TurnId),
    texts: (&[MemoryId], &[String], &str),
    reserved: Option<&Reservation>,
) -> Result<ExtractReport, ExtractError> {
    let mut usage = None;
    let outcome = extract(rt, bot, (session, turn), texts, &mut usage, reserved).await;
    finish(rt, bot, turn, usage).await;
    outcome
}

/// The most tokens an extraction of `bot` can spend before its request is
/// built: its request bare, the bounds of its texts and shown memory
/// (`extract_bounds.rs`), and the answer's limit.
pub(super) fn reservation_bound(rt: &Runtime, bot: &BotRecord) -> u64 {
    let ctx = rt.settings.context_for(&bot.provider);
    let bounds = ExtractBounds::of(ctx.compact_at_tokens, ctx.encoding);
    let bare = request(bot, &[], (&[], ""), &bounds);
    sent_tokens(&bare, ctx.encoding)
        .saturating_add(bounds.texts_budget)
        .saturating_add(bounds.shown_budget)
        .saturating_add(u64::from(EXTRACT_MAX_TOKENS))
}

/// [`extract_after_turn`] up to its last write; `usage` gets the model
/// call's usage once it answered.
async fn extract(
    rt: &Runtime,
    bot: &BotRecord,
    (session, turn): (SessionId, TurnId),
    (shown, user_texts, final_reply): (&[MemoryId], &[String], &str),
    usage: &mut Option<Mutation>,
    reserved: Option<&Reservation>,
) -> Result<ExtractReport, ExtractError> {
    let model = rt
        .models
        .get(&bot.provider)
        .cloned()
        .ok_or_else(|| ExtractError::NoModel {
            bot: bot.id.to_string(),
            provider: bot.provider.clone(),
        })?;
    let reachable = bot_scopes(bot);
    let shown_items: Vec<MemoryItem> = rt
        .store
        .memory_items_by_id(shown.to_vec())
        .await?
        .into_iter()
        .filter(|i| reachable.contains(&i.scope))
        .collect();
    let ctx = rt.settings.context_for(&bot.provider);
    let bounds = ExtractBounds::of(ctx.compact_at_tokens, ctx.encoding);
    let request = request(bot, &shown_items, (user_texts, final_reply), &bounds);
    if let Some(r) = reserved {
        r.narrow(sent_tokens(&request, ctx.encoding).saturating_add(u64::from(EXTRACT_MAX_TOKENS)));
    }
    let cancel = CancellationToken::new();
    // a failure's text goes to the log: cleaned of the host's credentials
    let vault = rt.vault();
    let mut sink = ();
    let call = model.complete_hiding(&request, vault.host_redactor(), &mut sink, &cancel);
    let response = tokio::time::timeout(EXTRACT_TIMEOUT, call)
        .await
        .map_err(|_| {
            cancel.cancel();
            ExtractError::Timeout(EXTRACT_TIMEOUT)
        })??;
    *usage = Some(usage_of(rt, bot, &request, &response));
    let proposal = parse(&response.text)?;
    let seed = turn_seed(session, turn, user_texts, final_reply);
    let shown = Shown {
        ids: shown,
        items: &shown_items,
    };
    Ok(apply(rt, bot, turn, &shown, proposal, &seed).await)
}

/// Ends the extraction of `turn`: its model call's token usage, if it
/// made one, and the end of its owed record (`Mutation::ClearExtraction`),
/// in one write. A failure is only logged: the usage is lost, the memory
/// is not, and the extraction may run again at the next start, which adds
/// nothing twice.
async fn finish(rt: &Runtime, bot: &BotRecord, turn: TurnId, usage: Option<Mutation>) {
    let mut batch: Vec<Mutation> = usage.into_iter().collect();
    batch.push(Mutation::ClearExtraction { turn });
    if let Err(e) = rt.store.write(batch).await {
        tracing::warn!(bot = %bot.id, turn = %turn, error = %e, "could not record the end of the fact extraction and its token usage");
    }
}

/// The extraction call's tokens for the bot's daily usage (no turn): as
/// the provider reported them, or counted with the provider's encoding.
fn usage_of(
    rt: &Runtime,
    bot: &BotRecord,
    request: &ModelRequest,
    response: &crate::model::ModelResponse,
) -> Mutation {
    let encoding = rt.settings.context_for(&bot.provider).encoding;
    let usage = call_usage(request, response, encoding);
    let day = rt.store.clock().now().format("%Y-%m-%d").to_string();
    Mutation::AddUsage {
        bot: bot.id.clone(),
        day,
        turns: 0,
        usage,
    }
}

/// The extraction's request, within `bounds` (`extract_bounds.rs`).
fn request(
    bot: &BotRecord,
    shown: &[MemoryItem],
    (user_texts, final_reply): (&[String], &str),
    bounds: &ExtractBounds,
) -> ModelRequest {
    let scopes = bot_scopes(bot)
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let system = prompts()
        .extract_facts
        .render(&[
            ("bot", bot.id.as_str()),
            ("owner", bot.owner.as_str()),
            ("scopes", &scopes),
        ])
        .unwrap_or_default();
    // oldest first, each with the minute it was last set: two items that
    // disagree (set the same day) can be ordered
    let shown_lines = if shown.is_empty() {
        "(none)".to_owned()
    } else {
        let lines = oldest_set_first(shown)
            .into_iter()
            .map(extraction_line)
            .collect();
        bounds.shown(lines).join("\n")
    };
    let (user_texts, final_reply) = bounds.texts(user_texts, final_reply);
    let user = prompts()
        .extract_input
        .render(&[
            ("shown", &shown_lines),
            ("user_texts", &quoted(&user_texts.join("\n"))),
            ("reply", &quoted(&final_reply)),
        ])
        .unwrap_or_default();
    ModelRequest {
        purpose: Purpose::Extract,
        bot: bot.id.to_string(),
        messages: vec![
            ChatMessage::System { content: system },
            ChatMessage::User { content: user },
        ],
        tools: Vec::new(),
        max_tokens: Some(EXTRACT_MAX_TOKENS),
    }
}

/// `raw` read as an op of type `T`, or why it is not one (`what`: "an add").
fn op<'v, T: Deserialize<'v>>(raw: &'v Value, what: &str) -> Result<T, String> {
    T::deserialize(raw).map_err(|e| format!("not {what} as the prompt asks for: {e}"))
}

/// How a refused op is named: `add "…"` (its text's start), `replace ID`,
/// `remove ID`, or the op itself (its start) when it has neither.
fn op_label(kind: &str, raw: &Value, key: &str) -> String {
    let named = match raw {
        Value::String(s) => Some(s.as_str()),
        other => other.get(key).and_then(Value::as_str),
    };
    match named {
        Some(s) if key == "text" => format!("{kind} {:?}", s.chars().take(60).collect::<String>()),
        Some(s) => format!("{kind} {}", s.chars().take(80).collect::<String>()),
        None => format!(
            "{kind} {}",
            raw.to_string().chars().take(60).collect::<String>()
        ),
    }
}

/// Refuses the ops of a list past the first [`MAX_OPS`] as one entry (an
/// answer of 20,000 adds wrote 20,000 refusals to the report and the log:
/// QA).
fn refuse_past_limit(report: &mut ExtractReport, plural: &str, len: usize) {
    if len > MAX_OPS {
        report.reject(
            format!("{} {plural} after the first {MAX_OPS}", len - MAX_OPS),
            format!("more than {MAX_OPS} {plural}"),
        );
    }
}

/// The proposal in the answer (`extract_answer.rs`: after a reasoning
/// block, in a fence or in prose).
fn parse(text: &str) -> Result<Proposal, ExtractError> {
    let value = proposal_json(text).map_err(ExtractError::NotJson)?;
    let others: Vec<String> = value
        .as_object()
        .into_iter()
        .flat_map(|o| o.keys())
        .filter(|k| !matches!(k.as_str(), "add" | "replace" | "remove"))
        .cloned()
        .collect();
    let proposal: Proposal =
        serde_json::from_value(value).map_err(|e| ExtractError::NotJson(e.to_string()))?;
    if others.is_empty() {
        return Ok(proposal);
    }
    // beside ops, a key the prompt did not ask for (a chatty model's
    // `"note"`) is left out: it lost every op beside it (QA, 2026-12-06);
    // with no op at all, it may be a list under another name (`"adds"`),
    // and is refused, naming it, rather than read as nothing to remember
    if proposal.add.is_empty() && proposal.replace.is_empty() && proposal.remove.is_empty() {
        return Err(ExtractError::NotJson(format!(
            "unknown field(s) {}, expected `add`, `replace` or `remove`",
            others
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    tracing::info!(fields = ?others, "fact extraction: the answer's fields besides its ops are left out");
    Ok(proposal)
}

/// What the ids of one extraction's adds derive from (with each add's
/// position): the same turn extracted again derives the same ids, so a
/// re-run finds its own writes (`Unchanged`) instead of adding twice. The
/// turn's id is part of it because the texts are not unique: a later turn
/// with the same message and reply must not derive the ids of an earlier
/// one, or its new fact would be refused as "id taken".
fn turn_seed(session: SessionId, turn: TurnId, user_texts: &[String], final_reply: &str) -> String {
    let mut h = Sha256::new();
    for t in user_texts {
        h.update(t.as_bytes());
        h.update([0]);
    }
    h.update(final_reply.as_bytes());
    format!(
        "extract\u{0}{session}\u{0}{turn}\u{0}{}",
        hex::encode(h.finalize())
    )
}

/// What the turn's context showed: the ids, and those of them still in
/// the bot's reach as the extraction reads them.
struct Shown<'a> {
    ids: &'a [MemoryId],
    items: &'a [MemoryItem],
}

async fn apply(
    rt: &Runtime,
    bot: &BotRecord,
    turn: TurnId,
    shown: &Shown<'_>,
    proposal: Proposal,
    seed: &str,
) -> ExtractReport {
    let mut report = ExtractReport::default();
    let source = format!("extract:{}", bot.id);
    let shown_item = |raw: &str| -> Result<&MemoryItem, String> {
        let id = MemoryId::parse(raw).map_err(|e| e.to_string())?;
        shown.items.iter().find(|i| i.id == id).ok_or_else(|| {
            // (QA, 2026-12-05: one the turn forgot read "was not shown")
            if shown.ids.contains(&id) {
                format!(
                    "{id} is no longer in this bot's memory: it was forgotten since this turn's \
                     context showed it"
                )
            } else {
                format!("{id} was not shown in this turn's context")
            }
        })
    };
    let mut ops: Vec<(String, MemoryOp)> = Vec::new();
    refuse_past_limit(&mut report, "removes", proposal.remove.len());
    for raw in proposal.remove.iter().take(MAX_OPS) {
        let label = op_label("remove", raw, "id");
        let raw: String = match op(raw, "a remove (a memory id)") {
            Ok(id) => id,
            Err(reason) => {
                report.reject(label, reason);
                continue;
            }
        };
        match shown_item(&raw) {
            Ok(item) => ops.push((
                label,
                MemoryOp::ChangeExtracted {
                    id: item.id.clone(),
                    scope: item.scope.clone(),
                    text: String::new(),
                    importance: None,
                    source: source.clone(),
                    remove: true,
                    turn,
                },
            )),
            Err(reason) => report.reject(label, reason),
        }
    }
    refuse_past_limit(&mut report, "replaces", proposal.replace.len());
    for raw in proposal.replace.iter().take(MAX_OPS) {
        let label = op_label("replace", raw, "id");
        let r: ReplaceProposal = match op(raw, "a replace") {
            Ok(r) => r,
            Err(reason) => {
                report.reject(label, reason);
                continue;
            }
        };
        let importance = match r.importance.as_ref().map(importance_of).transpose() {
            Ok(v) => v,
            Err(e) => {
                report.reject(label, e.to_string());
                continue;
            }
        };
        match shown_item(&r.id) {
            Ok(item) => ops.push((
                label,
                MemoryOp::ChangeExtracted {
                    id: item.id.clone(),
                    scope: item.scope.clone(),
                    text: r.text.clone(),
                    importance,
                    source: source.clone(),
                    remove: false,
                    turn,
                },
            )),
            Err(reason) => report.reject(label, reason),
        }
    }
    let now = rt.store.clock().now_ms();
    // a note's lifetime counts from the turn's end, where the person said
    // it, however late the extraction lands (a slow model, a re-run after
    // a restart): as the store sets what it adds (`MemoryOp::AddExtracted`)
    let notes = proposal
        .add
        .iter()
        .any(|a| a["layer"].as_str().and_then(Layer::parse) == Some(Layer::Notes));
    let end = if notes {
        rt.store.get_turn(turn).await
    } else {
        Ok(None)
    };
    let ended = match end {
        Ok(t) => t.and_then(|t| t.ended_at).map_or(now, |e| e.min(now)),
        Err(e) => {
            tracing::warn!(bot = %bot.id, turn = %turn, error = %e, "fact extraction: could not read the turn's end; notes expire counted from now");
            now
        }
    };
    refuse_past_limit(&mut report, "adds", proposal.add.len());
    for raw in proposal.add.iter().take(MAX_OPS) {
        let label = op_label("add", raw, "text");
        let a: AddProposal = match op(raw, "an add") {
            Ok(a) => a,
            Err(reason) => {
                report.reject(label, reason);
                continue;
            }
        };
        // the id derives from the turn and what is added, not from its
        // place in the answer: a re-run after a crash asks the model
        // again, which may list the facts in another order (QA: its
        // first add took the id of the cut-off run's first, another fact,
        // was refused as `IdTaken`, and was lost for good)
        let what = format!(
            "{seed}\u{0}{}\u{0}{}\u{0}{}",
            a.layer.as_deref().unwrap_or_default(),
            a.scope.as_deref().unwrap_or_default(),
            a.text
        );
        match new_memory(bot, &a, ended, &source, &what) {
            Ok(new) if new.expires_at.is_some_and(|t| t <= now) => report.reject(
                label,
                "the note's lifetime, counted from its turn's end, was over before the extraction ran"
                    .into(),
            ),
            // a Forget after the turn began wins over what it said
            Ok(new) => ops.push((label, MemoryOp::AddExtracted { new, turn })),
            Err(reason) => report.reject(label, reason),
        }
    }
    for (label, op) in ops {
        let result: Result<MemoryOpResult, MemoryError> = rt.memory.apply(op).await;
        match result {
            Ok(MemoryOpResult::Added(item)) => report.added.push(item),
            Ok(MemoryOpResult::Unchanged(item)) => report.unchanged.push(item),
            Ok(MemoryOpResult::Replaced { before, after }) => report.replaced.push((before, after)),
            Ok(MemoryOpResult::Removed(item)) => report.removed.push(item),
            // a remove of an item forgotten in between answers it too:
            // nothing to report
            Ok(MemoryOpResult::AlreadyForgotten(id)) if label.starts_with("add ") => {
                tracing::info!(bot = %bot.id, turn = %turn, id = %id, "fact extraction: an add dropped, a Forget since the turn began covers it");
                report.forgotten.push(label);
            }
            Ok(MemoryOpResult::AlreadyForgotten(_)) => {}
            Ok(MemoryOpResult::Purged(_)) => {}
            Ok(MemoryOpResult::Refused(r)) => report.reject(label, r.to_string()),
            Err(e) => report.reject(label, e.to_string()),
        }
    }
    report
}

/// The item `a` proposes, a note expiring its lifetime after `from`
/// (its turn's end).
fn new_memory(
    bot: &BotRecord,
    a: &AddProposal,
    from: i64,
    source: &str,
    seed: &str,
) -> Result<NewMemory, String> {
    let layer = match a.layer.as_deref() {
        None => Layer::Profile,
        Some(l) => Layer::parse(l)
            .ok_or_else(|| format!("unknown layer {l:?}; use profile, log or notes"))?,
    };
    let scope = writable_scope(bot, a.scope.as_deref(), layer)?;
    let importance = a
        .importance
        .as_ref()
        .map(importance_of)
        .transpose()
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let expires_at = note_expiry(layer, a.expires_in_hours, from)?;
    Ok(NewMemory {
        id: MemoryId::derive(seed),
        scope,
        layer,
        text: a.text.clone(),
        importance,
        expires_at,
        source: source.to_owned(),
    })
}

/// `importance` as the model gave it, checked against 1..=5: a fraction,
/// a negative or a large number gets the same answer as 0 or 6. Remember's
/// and fact extraction's (QA: extraction refused `4.0`, which Remember took).
pub(crate) fn importance_of(given: &serde_json::Number) -> Result<Importance, IdError> {
    // a whole number written as a float (`4.0`, as models write it) is
    // that number; anything that is no u8 is out of range as 0 is
    let whole = given.as_u64().or_else(|| {
        given
            .as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..=255.0).contains(f))
            .map(|f| f as u64)
    });
    let small = whole.and_then(|v| u8::try_from(v).ok()).unwrap_or(0);
    Importance::new(small).map_err(|e| IdError {
        value: given.to_string(),
        ..e
    })
}

/// The expiry of a write to `layer` given `hours` (notes: default
/// [`botfleet_memory::DEFAULT_NOTE_HOURS`], at most [`MAX_NOTE_HOURS`];
/// other layers: none allowed).
pub(crate) fn note_expiry(
    layer: Layer,
    hours: Option<f64>,
    now: i64,
) -> Result<Option<i64>, String> {
    match (layer, hours) {
        (Layer::Notes, None) => Ok(Some(
            now + i64::from(botfleet_memory::DEFAULT_NOTE_HOURS) * 3_600_000,
        )),
        // at least a second: a lifetime shorter ends before the write (QA:
        // 1e-9 was told its expiry "is not in the future", though positive)
        (Layer::Notes, Some(h)) if h * 3_600.0 >= 1.0 && h <= f64::from(MAX_NOTE_HOURS) => {
            Ok(Some(now + (h * 3_600_000.0) as i64))
        }
        (Layer::Notes, Some(h)) => {
            // 1e308 in full is a 309-digit number
            let h = if h.abs() >= 1e6 || (h != 0.0 && h.abs() < 1e-3) {
                format!("{h:e}")
            } else {
                h.to_string()
            };
            Err(format!(
                "expires_in_hours {h} is out of range; give at least a second's worth (0.0003) \
                 and at most {MAX_NOTE_HOURS}"
            ))
        }
        (Layer::Profile | Layer::Log, None) => Ok(None),
        (Layer::Profile | Layer::Log, Some(_)) => Err(
            "expires_in_hours is only for notes; profile facts and log entries stay until forgotten"
                .into(),
        ),
    }
}

impl ExtractReport {
    fn reject(&mut self, op: String, reason: String) {
        self.rejected.push(RejectedOp { op, reason });
    }
}

#[cfg(test)]
#[path = "extract_tests.rs"]
mod tests;
