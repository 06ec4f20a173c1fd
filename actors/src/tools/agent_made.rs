//! What CreateAgent may make: no more than `runtime.max_created_agents`
//! bots per owner (it had no limit: a model made 300 in one turn), and no
//! id of a subagent's form, `<bot>.sub-<hex digits>` (an id Task gives
//! its subagents: a made bot by such an id read as one of them, listed
//! among them, and CheckSubagent knew nothing of it). fleet.toml refuses
//! such an id too (`src/config_bots.rs`, its own copy of the rule: the
//! binary does not reach into the tools).

use botfleet_memory::BotRecord;

use super::ToolContext;
use super::ToolError;
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
    bot.origin.starts_with("agent:") && bot.removed_at().is_none()
}

/// Refuses one more bot of the caller's owner made by CreateAgent when
/// `runtime.max_created_agents` of them are in the fleet. Read before the
/// bot is written (CreateAgent writes it itself, during the call): the
/// calls of one turn run one after another, so only makers of one owner
/// creating at the same moment may pass it, by one bot each.
pub(super) async fn check_room_to_make(ctx: &ToolContext<'_>) -> Result<(), ToolError> {
    let max = ctx.rt.settings.max_created_agents;
    let made = ctx
        .store()
        .list_bots(Some(&ctx.bot.owner))
        .await
        .map_err(store_error)?
        .iter()
        .filter(|b| counts(b))
        .count();
    if made < max {
        return Ok(());
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
