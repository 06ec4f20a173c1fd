//! Which bot SendToAgent and UpdateAgent address: a bot of the caller's
//! owner, by id or display name ([`resolve_bot`]). A name that finds none
//! is answered with the bots most likely meant, at most [`MAX_LISTED`]:
//! fleet.toml bots first, then the latest of the others (made by
//! CreateAgent), never a subagent or a removed bot, and how many more
//! there are. (It listed every bot of the owner: 3 KB at 327 bots, read
//! into the model's context for good.)
//!
//! A name is looked up among the bots answering to it
//! (`Store::bots_answering_to`, by index), not in the owner's whole list;
//! that is read only to answer a name that finds none.
//!
//! A subagent is no target of theirs. It works on its parent's task,
//! which the parent steers with MessageSubagent (checked against
//! `runtime.max_subagents`) and stops with StopSubagent. A message from
//! SendToAgent (or SendMessage in a conversation with it) ran it again
//! outside its task: CheckSubagent said `done` while it worked, past the
//! limit, and another bot could give work to a subagent it could neither
//! check nor stop. UpdateAgent wrote tools it can never use into its
//! record and rewrote its task (its role).
//!
//! Nor is a removed bot UpdateAgent's: refused as the call reads it, and
//! by the writer as the call's write commits, when its owner removed it
//! in between (the record read before the removal, written after it,
//! dropped `removed_at` and brought the bot back).

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Limit;
use botfleet_memory::Mutation;
use botfleet_memory::SubagentStatus;
use botfleet_memory::WriteLimit;
use botfleet_memory::bot_projects;
use botfleet_memory::name_key;

use crate::group::room::shareable;

use super::ToolContext;
use super::ToolError;
use super::names;
use super::refused_outcome;
use super::store_error;

/// The bot records the step's earlier calls wrote (CreateAgent,
/// UpdateAgent and the tool cuts that follow it), not committed yet: the
/// calls of a step commit together, so each read the store as it was
/// before the step, wrote its whole record, and the last write won (two
/// UpdateAgent calls in one step kept only the second change; a tool cut
/// was undone by a role change; QA). A call that changes a bot starts
/// from the latest of these.
pub(super) fn written_in_step<'a>(ctx: &'a ToolContext<'_>) -> Vec<&'a BotRecord> {
    let mut latest: Vec<&BotRecord> = Vec::new();
    for m in ctx.step_effects.iter().flat_map(Mutation::within_limits) {
        if let Mutation::UpsertBot(bot) = m {
            latest.retain(|b| b.id != bot.id);
            latest.push(bot);
        }
    }
    latest
}

/// `record` as the step's earlier calls left it ([`written_in_step`]).
pub(super) fn as_in_step(ctx: &ToolContext<'_>, record: BotRecord) -> BotRecord {
    match written_in_step(ctx).into_iter().find(|b| b.id == record.id) {
        Some(written) => written.clone(),
        None => record,
    }
}

/// Most bots an unknown agent's refusal names.
pub(super) const MAX_LISTED: usize = 10;

/// Finds a bot the caller may address (`agent` of SendToAgent and
/// UpdateAgent): same owner, by id or display name. `lead` starts the next
/// step of an unknown name, before the bots most likely meant ("message
/// one of").
pub(crate) async fn resolve_bot(
    ctx: &ToolContext<'_>,
    name: &str,
    lead: &str,
) -> Result<BotRecord, ToolError> {
    // `@Bravo`, as a person mentions a bot (and models write it): the bot
    let name = name.trim();
    let name = name.strip_prefix('@').map_or(name, str::trim_start);
    if name.is_empty() {
        // (QA: `there is no agent ""`, as if a bot could have no id)
        return refused(
            ctx,
            "`agent` is empty: give the id or name of one of your bots".into(),
            lead,
        )
        .await;
    }
    // the usual case, an exact id: one keyed read, not the owner's whole list
    if let Ok(id) = BotId::new(name)
        && let Some(b) = ctx.store().get_bot(&id).await.map_err(store_error)?
        && b.owner == ctx.bot.owner
    {
        return Ok(b);
    }
    // a name: only the bots answering to it can be meant (a few index
    // searches); it read every bot of the owner, subagents included (an
    // owner whose bots delegate for months has thousands), at each
    // message to a bot by name
    let key = name_key(name);
    let mut answering: Vec<BotRecord> = ctx
        .store()
        .bots_answering_to(std::slice::from_ref(&key))
        .await
        .map_err(store_error)?
        .into_iter()
        .filter(|b| b.owner == ctx.bot.owner)
        .collect();
    // as the step's earlier calls left them: a bot renamed there answers
    // to its new name already, and no more to its old one (QA: "there is
    // no agent" for the name the step had just given it)
    for written in written_in_step(ctx) {
        answering.retain(|b| b.id != written.id);
        if written.owner == ctx.bot.owner
            && (name_key(&written.name) == key || name_key(written.id.as_str()) == key)
        {
            answering.push(written.clone());
        }
    }
    // a made bot its owner removed gave up its name (`check_name_free`):
    // one answering to it now is meant, not the removed one (the two were
    // "ambiguous"); the removed one alone still is, to be told it left
    let (gone, here): (Vec<BotRecord>, Vec<BotRecord>) = answering
        .into_iter()
        .partition(|b| b.removed_at().is_some() && b.made_by_agent());
    if let Some(b) = names::pick(&here, name)? {
        return Ok(b.clone());
    }
    if let Some(b) = names::pick(&gone, name)? {
        return Ok(b.clone());
    }
    refused(ctx, format!("there is no agent {name:?}"), lead).await
}

/// The refusal of an `agent` that names none of the caller's bots:
/// `message`, then `lead` and the bots most likely meant (the owner's,
/// read from an index that holds no subagent, not every record of the
/// owner).
async fn refused(
    ctx: &ToolContext<'_>,
    message: String,
    lead: &str,
) -> Result<BotRecord, ToolError> {
    let bots = ctx
        .store()
        .main_bots_of(&ctx.bot.owner)
        .await
        .map_err(store_error)?;
    Err(ToolError::new(message, likely_meant(&bots, lead)))
}

/// The parent of `bot` when it is a subagent (origin `subagent:<parent>`).
fn parent_of(bot: &BotRecord) -> Option<&str> {
    bot.origin.strip_prefix("subagent:")
}

/// The next step of an unknown agent: `lead` and at most [`MAX_LISTED`]
/// of `bots` (an owner's), fleet.toml bots first (by id), then the others
/// latest first; subagents and removed bots left out, and a count of the
/// rest with how to reach them.
pub(super) fn likely_meant(bots: &[BotRecord], lead: &str) -> String {
    let mut listed: Vec<&BotRecord> = bots
        .iter()
        .filter(|b| parent_of(b).is_none() && b.removed_at().is_none())
        .collect();
    listed.sort_by(|a, b| {
        let newer_first = if a.from_config() {
            std::cmp::Ordering::Equal
        } else {
            b.created_at.cmp(&a.created_at)
        };
        b.from_config()
            .cmp(&a.from_config())
            .then(newer_first)
            .then_with(|| a.id.as_str().cmp(b.id.as_str()))
    });
    let more = listed.len().saturating_sub(MAX_LISTED);
    let ids: Vec<&str> = listed
        .iter()
        .take(MAX_LISTED)
        .map(|b| b.id.as_str())
        .collect();
    let hint = format!("{lead}: {}", ids.join(", "));
    if more == 0 {
        return hint;
    }
    format!(
        "{hint} ({more} more not listed: pass the exact id or name of the one you mean; your \
         person sees them all with `botfleet bots`)"
    )
}

/// What the caller may do with its own subagent instead, of the tools it
/// has: MessageSubagent (not to a `stopped` one), Task, else its person.
fn own_subagent_next_step(ctx: &ToolContext<'_>, stopped: bool) -> String {
    let has = |tool: &str| ctx.bot.tools.iter().any(|t| t == tool);
    match (has("MessageSubagent") && !stopped, has("Task")) {
        (true, true) => {
            "give it more work with MessageSubagent (it counts against your running \
             subagents), or start a new subagent with Task"
        }
        (true, false) => {
            "give it more work with MessageSubagent (it counts against your running subagents)"
        }
        (false, true) => "start a new subagent with Task",
        (false, false) => "tell your person instead",
    }
    .to_owned()
}

/// A subagent's parent and whether it was stopped; `None` for a bot that
/// is no subagent.
async fn as_subagent(
    ctx: &ToolContext<'_>,
    target: &BotRecord,
) -> Result<Option<(String, bool)>, ToolError> {
    let Some(origin_parent) = parent_of(target) else {
        return Ok(None);
    };
    let sub = ctx
        .store()
        .get_subagent(&target.id)
        .await
        .map_err(store_error)?;
    Ok(Some(match sub {
        Some(s) => (s.parent.to_string(), s.status == SubagentStatus::Stopped),
        None => (origin_parent.to_owned(), false),
    }))
}

/// Refuses a message from the calling bot to `target` when it is a
/// subagent (SendToAgent, SendMessage in a conversation with it): its own
/// is steered with its subagent tools, another bot's only by that bot.
pub(super) async fn refuse_message_to_subagent(
    ctx: &ToolContext<'_>,
    target: &BotRecord,
) -> Result<(), ToolError> {
    let Some((parent, stopped)) = as_subagent(ctx, target).await? else {
        return Ok(());
    };
    if parent != ctx.bot.id.as_str() {
        return Err(ToolError::new(
            format!(
                "{} is a subagent of {parent}, and only {parent} gives it work: nothing was sent",
                target.id
            ),
            format!("message {parent}, which started it, or tell your person instead"),
        ));
    }
    let message = if stopped {
        format!(
            "subagent {} was stopped and takes no more messages: nothing was sent",
            target.id
        )
    } else {
        format!(
            "{} is your subagent: it takes work only as a task, through your subagent tools \
             (so its status and your limit of running subagents hold); nothing was sent",
            target.id
        )
    };
    Err(ToolError::new(
        message,
        own_subagent_next_step(ctx, stopped),
    ))
}

/// Refuses UpdateAgent on `target` when it is a subagent: its role is its
/// task, and its tools were set (of its parent's) when Task made it.
pub(super) async fn refuse_update_of_subagent(
    ctx: &ToolContext<'_>,
    target: &BotRecord,
) -> Result<(), ToolError> {
    let Some((parent, stopped)) = as_subagent(ctx, target).await? else {
        return Ok(());
    };
    if parent != ctx.bot.id.as_str() {
        return Err(ToolError::new(
            format!(
                "{} is a subagent of {parent}: its task defines it and only {parent} steers it; \
                 nothing was changed",
                target.id
            ),
            format!("update an agent that is not a subagent, or message {parent}"),
        ));
    }
    Err(ToolError::new(
        format!(
            "{} is your subagent: its role is its task and its tools were set when Task made it, \
             so UpdateAgent does not change it; nothing was changed",
            target.id
        ),
        own_subagent_next_step(ctx, stopped),
    ))
}

/// Refuses UpdateAgent on `target` when it can do what the caller cannot:
/// a tool, a secret or a project the caller does not have. Its role is
/// what it follows (a message from another bot is only information to it)
/// and its tools, secrets and projects are what it may do and reach: a bot
/// that could rewrite its role could have a stronger bot do what it may
/// not do itself, as a bot without Shell that rewrote the role of one
/// with Shell to run whatever it was sent (or, audit, a bot without a
/// secret that rewrote the role of one with it to send the secret back).
/// A bot's own record, and any bot that can do no more than the caller,
/// stay the caller's to change.
pub(super) fn refuse_update_of_stronger(
    ctx: &ToolContext<'_>,
    target: &BotRecord,
) -> Result<(), ToolError> {
    let quoted = |names: Vec<String>| {
        names
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let tools: Vec<String> = target
        .tools
        .iter()
        .filter(|t| !ctx.bot.tools.contains(t))
        .cloned()
        .collect();
    let held = crate::vault::Vault::names_of(ctx.bot);
    let secrets: Vec<String> = crate::vault::Vault::names_of(target)
        .into_iter()
        .filter(|s| !held.contains(s))
        .collect();
    let joined = bot_projects(ctx.bot);
    let projects: Vec<String> = bot_projects(target)
        .into_iter()
        .filter(|p| !joined.contains(p))
        .map(|p| p.to_string())
        .collect();
    let mut lacking = Vec::new();
    if !tools.is_empty() {
        lacking.push(format!("tools you do not have ({})", quoted(tools)));
    }
    if !secrets.is_empty() {
        lacking.push(format!("secrets you do not have ({})", quoted(secrets)));
    }
    if !projects.is_empty() {
        lacking.push(format!("projects you are not in ({})", quoted(projects)));
    }
    // a shareable bot speaks in other users' rooms, which the caller does
    // not reach (review)
    if shareable(target) && !shareable(ctx.bot) {
        lacking.push("a place in other users' rooms (it is `shareable`; you are not)".into());
    }
    if lacking.is_empty() {
        return Ok(());
    }
    Err(ToolError::new(
        format!(
            "{} has {}: only a bot with every tool, secret and project of another may change \
             its name, role or tools; nothing was changed",
            target.id,
            lacking.join(" and ")
        ),
        format!(
            "message {} with SendToAgent instead (it reads what you send as information, not as \
             its instructions), or ask your person",
            target.id
        ),
    ))
}

/// Refuses UpdateAgent on `target` when it is removed: it runs no turns,
/// so a change would apply to nothing, and a bot made by CreateAgent that
/// its owner removed does not come back.
pub(super) fn refuse_update_of_removed(target: &BotRecord) -> Result<(), ToolError> {
    match target.removed_at() {
        Some(_) => Err(removed(target)),
        None => Ok(()),
    }
}

/// The bound UpdateAgent's write of `target` (read as not removed)
/// commits under: the writer refuses it, with [`removed`] as the call's
/// result and nothing written, when the bot was removed since it was read
/// (its owner's `DELETE /v1/bots/{bot}` landed meanwhile). The record as
/// read, without `removed_at`, would otherwise be written over the
/// removal and bring the bot back.
pub(super) fn not_removed(ctx: &ToolContext<'_>, target: &BotRecord) -> Limit {
    Limit {
        bound: WriteLimit::BotNotRemoved {
            bot: target.id.clone(),
        },
        refused: vec![refused_outcome(ctx, "UpdateAgent", &removed(target))],
    }
}

/// The refusal of UpdateAgent on `target`, removed: by its owner (a bot
/// made by CreateAgent, for good), or from the fleet's config (until it
/// lists the bot again).
fn removed(target: &BotRecord) -> ToolError {
    let id = &target.id;
    if target.made_by_agent() {
        return ToolError::new(
            format!(
                "{id} was removed by its owner: it runs no turns and does not come back, so \
                 UpdateAgent does not change it; nothing was changed"
            ),
            "update another of your agents, or make a new one with CreateAgent if you have it",
        );
    }
    ToolError::new(
        format!(
            "{id} is no longer in the fleet's config: it runs no turns until fleet.toml lists it \
             again, so UpdateAgent does not change it; nothing was changed"
        ),
        "update another of your agents, or ask your person to list it in fleet.toml again",
    )
}

#[cfg(test)]
#[path = "agent_targets_tests.rs"]
mod tests;
