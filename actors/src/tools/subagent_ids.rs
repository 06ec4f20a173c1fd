//! A subagent's id: `<parent>.sub-<12 hex digits>`, derived from the Task
//! call that starts it (its turn and call id), so the same call computes
//! the same ids again. 48 bits of hash: the chance that two of a
//! thousand subagents draw the same is about 2 in a billion (with the 24
//! bits before, 3%).
//!
//! Bot ids are global (any owner's, made by the config, CreateAgent or
//! Task), so a candidate may still be held: the call then takes the next
//! one of its own sequence, and the id it settles on is what it creates
//! with `CreateBot`, which never takes a bot over. A call that finds the
//! child it made itself (marked with the call, [`CREATED_BY_CALL`]) gives
//! that child back instead of making another.
//!
//! Subagents made before keep their ids (`<parent>.sub-<6 hex>`): nothing
//! reads an id back into its parts.

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::IdError;
use botfleet_memory::Mutation;
use botfleet_memory::TurnId;
use serde_json::Value;
use sha2::Digest;

use super::ToolContext;
use super::ToolError;
use super::store_error;

/// The key, in a child's `settings`, of the Task call that made it (the
/// key CreateAgent marks its bots with too).
pub(super) const CREATED_BY_CALL: &str = "created_by_call";

/// Hex digits of hash in a new subagent's id.
const HASH_HEX: usize = 12;

/// What follows the parent in a subagent's id: `.sub-` and the hash.
const SUFFIX_LEN: usize = ".sub-".len() + HASH_HEX;

/// The longest bot id (`memory/src/ids.rs`).
const MAX_ID_LEN: usize = 64;

/// Candidates a call tries before it gives up (each held one is a chance
/// in 2^48, or a bot named to look like a subagent).
const MAX_CANDIDATES: u32 = 8;

/// Candidate `n` (from 0) of the Task call `call_id` in `turn` of
/// `parent`. The parent is cut to what fits in an id; the hash tells
/// apart the children of parents cut alike.
pub(super) fn candidate(
    parent: &BotId,
    turn: TurnId,
    call_id: &str,
    n: u32,
) -> Result<BotId, IdError> {
    let mut h = sha2::Sha256::new();
    // the turn's id has a fixed length, and 0xFF is in no UTF-8 text: the
    // input of one candidate is never the input of another's
    h.update(turn.to_string().as_bytes());
    if n > 0 {
        h.update([0xFF]);
        h.update(n.to_be_bytes());
    }
    h.update(call_id.as_bytes());
    let hash = hex::encode(&h.finalize()[..HASH_HEX / 2]);
    // ids are ASCII: a byte is a char
    let parent: String = parent
        .as_str()
        .chars()
        .take(MAX_ID_LEN - SUFFIX_LEN)
        .collect();
    BotId::new(format!("{parent}.sub-{hash}"))
}

/// The [`CREATED_BY_CALL`] value of the calling Task call.
pub(super) fn creating_call(ctx: &ToolContext<'_>) -> String {
    format!("{}:{}", ctx.turn, ctx.call_id)
}

/// The id a Task call gives its child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ChildId {
    /// Held by no bot: the call creates its child under it.
    Free(BotId),
    /// This call made its child under it already (a run before a crash):
    /// it is given back, and nothing is created.
    Made(BotId),
}

/// Settles the id of the calling Task's child: the first of its
/// candidates that is free or already its own. A candidate is held when a
/// bot in the store has it (unless this call made it) or an earlier call
/// of the same step creates it.
pub(super) async fn child_id(ctx: &ToolContext<'_>) -> Result<ChildId, ToolError> {
    let mine = creating_call(ctx);
    for n in 0..MAX_CANDIDATES {
        let id = candidate(&ctx.bot.id, ctx.turn, ctx.call_id, n)
            .map_err(|e| ToolError::new(format!("cannot name the subagent: {e}"), "try again"))?;
        if ctx
            .step_effects
            .iter()
            .flat_map(Mutation::within_limits)
            .any(|m| creates(m, &id))
        {
            continue;
        }
        match ctx.store().get_bot(&id).await.map_err(store_error)? {
            None => return Ok(ChildId::Free(id)),
            Some(held) if made_by(&held, ctx, &mine) => return Ok(ChildId::Made(id)),
            Some(_) => {
                tracing::warn!(bot = %ctx.bot.id, %id, n, "subagent id held by another bot; trying the next");
            }
        }
    }
    Err(ToolError::new(
        format!("found no free id for the subagent in {MAX_CANDIDATES} tries"),
        "call Task again",
    ))
}

/// Whether `m` creates bot `id`.
fn creates(m: &Mutation, id: &BotId) -> bool {
    matches!(m, Mutation::CreateBot(b) | Mutation::UpsertBot(b) if b.id == *id)
}

/// Whether `bot` is the child the Task call `call` of `ctx`'s bot made.
fn made_by(bot: &BotRecord, ctx: &ToolContext<'_>, call: &str) -> bool {
    bot.origin == format!("subagent:{}", ctx.bot.id)
        && bot.settings.get(CREATED_BY_CALL).and_then(Value::as_str) == Some(call)
}

#[cfg(test)]
#[path = "subagent_ids_tests.rs"]
mod tests;
