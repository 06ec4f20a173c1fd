//! Calls whose writes the store's writer bounds: a call whose effects
//! would pass a limit another bot's step may reach at the same moment (a
//! chain's breadth, a parent's running subagents) hands its effects to the
//! writer as one `Mutation::Limited`, with the writes of its refusal for
//! each limit. The engine puts the call's result in with its effects
//! (`engine/calls.rs`), so either the result and the effects commit, or
//! the refusal as the call's result and nothing else: the model reads
//! what happened, and the limit is exact.

use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Limit;
use botfleet_memory::Limited;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;

use super::ToolContext;
use super::ToolError;

/// The result of the call of `tool` in `ctx` that was refused with
/// `refusal`: the entry the engine would write for it (same id, so the
/// call counts as done after a restart).
pub(crate) fn refused_outcome(ctx: &ToolContext<'_>, tool: &str, refusal: &ToolError) -> Mutation {
    Mutation::Append(Box::new(NewEntry {
        id: EntryId::derive(ctx.turn, ctx.call_id, "result"),
        session: ctx.session(),
        author: ctx.bot.id.to_string(),
        turn: Some(ctx.turn),
        kind: EntryKind::ToolResult {
            call_id: ctx.call_id.to_owned(),
            name: tool.to_owned(),
            content: refusal.to_string(),
            is_error: true,
        },
    }))
}

/// `effects` bounded by `limits` (themselves when there are none).
pub(crate) fn bounded(effects: Vec<Mutation>, limits: Vec<Limit>) -> Vec<Mutation> {
    if limits.is_empty() {
        return effects;
    }
    vec![Mutation::Limited(Box::new(Limited {
        limits,
        within: effects,
    }))]
}

#[cfg(test)]
#[path = "call_limits_tests.rs"]
mod tests;
