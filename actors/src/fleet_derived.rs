//! Bots the config does not list, brought in line with it at each start:
//! a subagent follows its parent (removed with it, back with it, never a
//! tool or a provider its parent no longer has), and a bot whose provider
//! the config no longer has is named in the log.

use std::collections::HashMap;
use std::collections::HashSet;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::REMOVED_AT;
use serde_json::Value;

/// The tool every bot keeps: a subagent is given it even when its parent's
/// list (which the config requires to have it) did not name it.
const ALWAYS: &str = "SendMessage";

/// The writes that bring the subagents among `bots` (every bot, as it is
/// once this start's config is applied) in line with their parents, at
/// `now_ms`:
///
/// - a subagent whose parent is removed (or gone) is removed too, so it
///   runs no turns and takes no messages, as its parent; one whose parent
///   is listed again comes back;
/// - it keeps only the tools its parent still has (its record was a copy
///   of them when it was made);
/// - it runs on its parent's provider (a copy too, which the config may
///   have dropped since).
pub(crate) fn follow_parents(bots: &HashMap<BotId, BotRecord>, now_ms: i64) -> Vec<Mutation> {
    let mut writes = Vec::new();
    for bot in bots.values() {
        let Some(parent) = bot.origin.strip_prefix("subagent:") else {
            continue;
        };
        let parent = BotId::new(parent).ok().and_then(|id| bots.get(&id));
        let want = match parent {
            Some(p) if p.removed_at().is_none() => follow(bot, p),
            Some(_) | None if bot.removed_at().is_some() => continue,
            Some(_) | None => {
                tracing::warn!(bot = %bot.id, parent = %bot.origin, "subagent's parent is no longer in the fleet's config: the subagent takes no more messages and runs no turns; its sessions are kept");
                bot.clone().mark_removed(now_ms)
            }
        };
        if want != *bot {
            writes.push(Mutation::UpsertBot(BotRecord {
                updated_at: now_ms,
                ..want
            }));
        }
    }
    writes
}

/// `sub` as its listed `parent` has it now: not removed, its tools cut to
/// the parent's, on the parent's provider, of the parent's owner.
fn follow(sub: &BotRecord, parent: &BotRecord) -> BotRecord {
    let mut want = sub.clone();
    if want.removed_at().is_some() {
        tracing::info!(bot = %sub.id, parent = %parent.id, "subagent's parent is in the fleet's config again: so is the subagent");
        if let Value::Object(map) = &mut want.settings {
            map.remove(REMOVED_AT);
        }
    }
    let kept: HashSet<&str> = parent.tools.iter().map(String::as_str).collect();
    want.tools
        .retain(|t| t == ALWAYS || kept.contains(t.as_str()));
    if want.tools.len() < sub.tools.len() {
        let lost: Vec<&str> = sub
            .tools
            .iter()
            .map(String::as_str)
            .filter(|t| !want.tools.iter().any(|k| k == t))
            .collect();
        tracing::info!(bot = %sub.id, parent = %parent.id, ?lost, "subagent loses the tools its parent no longer has");
    }
    // the store gives a bot's subagents to its new owner as the parent's
    // record is written (earlier in the same batch): this write must not
    // give them back
    want.owner.clone_from(&parent.owner);
    if want.provider != parent.provider {
        tracing::info!(bot = %sub.id, parent = %parent.id, from = %sub.provider, to = %parent.provider, "subagent runs on its parent's provider");
        want.provider.clone_from(&parent.provider);
    }
    want
}

/// Warns of each bot in `bots` that is not removed and uses a provider
/// not in `providers` (a bot made by CreateAgent keeps the provider its
/// creator had): its turns fail, with a retry, until a config lists the
/// provider again.
pub(crate) fn warn_missing_providers<'a>(
    bots: impl IntoIterator<Item = &'a BotRecord>,
    providers: &HashSet<&str>,
) {
    for bot in bots {
        if bot.removed_at().is_none() && !providers.contains(bot.provider.as_str()) {
            tracing::warn!(bot = %bot.id, provider = %bot.provider, origin = %bot.origin, "bot uses a provider the fleet's config does not have: its turns fail, each with a retry, until a config lists the provider again");
        }
    }
}
