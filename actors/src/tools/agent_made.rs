//! What CreateAgent may make: no more than `runtime.max_created_agents`
//! bots per owner (it had no limit: a model made 300 in one turn), and no
//! id of a subagent's form, `<bot>.sub-<hex digits>` (an id Task gives
//! its subagents: a made bot by such an id read as one of them, listed
//! among them, and CheckSubagent knew nothing of it). fleet.toml refuses
//! such an id too (`src/config_bots.rs`, its own copy of the rule: the
//! binary does not reach into the tools). And what UpdateAgent may give
//! a made bot: only tools its maker has; a bot it takes tools from takes
//! them from the bots it made and its subagents too.

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Limit;
use botfleet_memory::WriteLimit;

use super::ToolContext;
use super::ToolError;
use super::refused_outcome;
use super::store_error;

/// What follows the parent in a subagent's id, before its hex digits.
const SUBAGENT_MARK: &str = ".sub-";

/// Whether `id` has the form of a subagent's id: a bot's id, `.sub-` and
/// hex digits (in any case: ids are told apart ignoring case). The rule
/// of CreateAgent and of fleet.toml (`src/config_bots.rs`).
pub fn subagent_shaped(id: &str) -> bool {
    let id = id.to_ascii_lowercase();
    id.rsplit_once(SUBAGENT_MARK).is_some_and(|(parent, hash)| {
        !parent.is_empty() && !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// Refuses a new bot's id of a subagent's form.
pub(super) fn check_not_subagent_shaped(id: &str) -> Result<(), ToolError> {
    if !subagent_shaped(id) {
        return Ok(());
    }
    Err(ToolError::new(
        format!(
            "the id {id:?} has the form of a subagent's id (`<bot>.sub-<hex digits>`), which \
             only Task gives its subagents"
        ),
        "pass another `id`, without `.sub-`, or leave `id` out to make one from the name",
    ))
}

/// Whether `bot` was made by CreateAgent (origin `agent:<maker>`) and is
/// still in the fleet: what `runtime.max_created_agents` counts.
fn counts(bot: &BotRecord) -> bool {
    bot.made_by_agent() && bot.removed_at().is_none()
}

/// Refuses one more bot of the caller's owner made by CreateAgent when
/// `runtime.max_created_agents` of them are in the fleet. Read before the
/// bot is written (CreateAgent writes it itself, during the call): the
/// calls of one turn run one after another, so only makers of one owner
/// creating at the same moment may pass it, by one bot each.
pub(super) async fn check_room_to_make(ctx: &ToolContext<'_>) -> Result<(), ToolError> {
    let max = ctx.rt.settings.max_created_agents;
    // bots made by CreateAgent are no subagents: an index that holds
    // none, not every record of the owner (thousands, for an owner whose
    // bots delegate)
    let made = ctx
        .store()
        .main_bots_of(&ctx.bot.owner)
        .await
        .map_err(store_error)?
        .iter()
        .filter(|b| counts(b))
        .count();
    if made < max {
        return Ok(());
    }
    if max == 0 {
        return Err(ToolError::new(
            "this host makes no agents (runtime.max_created_agents is 0); no agent was created",
            "give the work to an agent that exists (SendToAgent), or do it yourself",
        ));
    }
    Err(ToolError::new(
        format!(
            "your owner already has {made} agents made by CreateAgent (the limit is {max}, \
             runtime.max_created_agents); no agent was created"
        ),
        "give the work to an agent that exists (SendToAgent), or ask your person to remove \
         agents no longer needed",
    ))
}

/// The tool a made bot keeps whatever its maker has (every bot speaks
/// with it; `fleet_derived.rs` keeps it too).
const ALWAYS: &str = "SendMessage";

/// Refuses giving `target`, a bot made by CreateAgent (origin
/// `agent:<maker>`), a tool its maker does not have now: such a bot
/// keeps only its maker's tools, and each start takes any other away
/// (`fleet_derived.rs`, `follow_makers`). A maker removed (or gone) has
/// none: its bots keep only SendMessage. (UpdateAgent of another bot
/// with the tool gave it, said "updated", and the next restart took it
/// away, with a line in the host's log only.)
pub(super) async fn check_maker_has(
    ctx: &ToolContext<'_>,
    target: &BotRecord,
    tools: &[String],
) -> Result<(), ToolError> {
    let Some(maker) = target.origin.strip_prefix("agent:") else {
        return Ok(());
    };
    let maker_tools: Vec<String> = match BotId::new(maker) {
        Ok(id) => match ctx.store().get_bot(&id).await.map_err(store_error)? {
            Some(m) if m.removed_at().is_none() => m.tools,
            Some(_) | None => Vec::new(),
        },
        Err(_) => Vec::new(),
    };
    let has = |t: &str| t == ALWAYS || maker_tools.iter().any(|m| m == t);
    let lacking: Vec<&str> = tools
        .iter()
        .map(String::as_str)
        .filter(|t| !has(t))
        .collect();
    if lacking.is_empty() {
        return Ok(());
    }
    // what the caller may give it: the caller's tools its maker has too
    let givable: Vec<&str> = ctx
        .bot
        .tools
        .iter()
        .map(String::as_str)
        .filter(|t| has(t))
        .collect();
    let names: Vec<String> = lacking.iter().map(|t| format!("{t:?}")).collect();
    Err(ToolError::new(
        format!(
            "{} was made by {maker} with CreateAgent and may have only tools {maker} has; \
             {maker} does not have {} (a restart would take {} away again): nothing was changed",
            target.id,
            names.join(", "),
            if lacking.len() == 1 { "it" } else { "them" },
        ),
        format!(
            "give {} only tools both you and {maker} have: {}",
            target.id,
            givable.join(", ")
        ),
    ))
}

/// The bots that follow `updated` (its new record, with the tools
/// UpdateAgent gives it), cut to the tools they may keep now, at `now`:
/// the bots it made (origin `agent:<id>`) and its subagents (origin
/// `subagent:<id>`) keep only its tools (and SendMessage), and theirs in
/// turn, down the chain. A start cuts them so too (`fleet_derived.rs`);
/// until then they kept a tool taken from their maker or parent: its
/// running subagent went on with the Shell its parent had just lost.
/// Removed bots run nothing and are left as they are.
pub(super) async fn cut_followers(
    ctx: &ToolContext<'_>,
    updated: &BotRecord,
    now: i64,
) -> Result<Vec<BotRecord>, ToolError> {
    let mut bots = ctx
        .store()
        .list_bots(Some(&updated.owner))
        .await
        .map_err(store_error)?;
    // as the step's earlier calls left them, the bots they made included
    for written in super::targets::written_in_step(ctx) {
        match bots.iter_mut().find(|b| b.id == written.id) {
            Some(stored) => stored.clone_from(written),
            None if written.owner == updated.owner => bots.push(written.clone()),
            None => {}
        }
    }
    let mut cut: Vec<BotRecord> = Vec::new();
    // the bots whose tools shrank, whose followers are cut next
    let mut shrunk: Vec<BotRecord> = vec![updated.clone()];
    while let Some(leader) = shrunk.pop() {
        let made = format!("agent:{}", leader.id);
        let parent = format!("subagent:{}", leader.id);
        for bot in bots
            .iter_mut()
            .filter(|b| b.removed_at().is_none() && (b.origin == made || b.origin == parent))
        {
            let before = bot.tools.len();
            bot.tools
                .retain(|t| t == ALWAYS || leader.tools.iter().any(|l| l == t));
            if bot.tools.len() == before {
                continue;
            }
            bot.updated_at = now;
            cut.retain(|b| b.id != bot.id);
            cut.push(bot.clone());
            shrunk.push(bot.clone());
        }
    }
    Ok(cut)
}

/// The bound of UpdateAgent's write of `follower` (one of
/// [`cut_followers`]): refused, with nothing written, when its owner
/// removed it since it was read (the record as read would bring it back).
pub(super) fn follower_not_removed(ctx: &ToolContext<'_>, follower: &BotRecord) -> Limit {
    Limit {
        bound: WriteLimit::BotNotRemoved {
            bot: follower.id.clone(),
        },
        refused: vec![refused_outcome(
            ctx,
            "UpdateAgent",
            &ToolError::new(
                format!(
                    "{} was removed while this call ran, so its tools could not be cut with \
                     the change; nothing was changed",
                    follower.id
                ),
                "call UpdateAgent again",
            ),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::subagent_shaped;

    #[test]
    fn ids_of_a_subagents_form_are_told_apart() {
        for id in [
            "boss.sub-000000000000",
            "boss.sub-abc123",
            "Boss.SUB-ABCDEF",
            "a.b.sub-1",
        ] {
            assert!(subagent_shaped(id), "{id}");
        }
        for id in [
            "boss",
            "boss.sub-",
            ".sub-abc",
            "boss.sub-team",
            "boss-sub-abc",
            "boss.sub-abc.x",
            "sub-abc",
        ] {
            assert!(!subagent_shaped(id), "{id}");
        }
    }
}
