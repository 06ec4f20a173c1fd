//! Bots the config does not list, brought in line with it at each start:
//! a bot made by CreateAgent keeps only the tools its maker still has and
//! takes its maker's daily token budget as it now is, a subagent follows
//! its parent (removed with it, back with it, never a
//! tool or a provider its parent no longer has), and a bot whose provider
//! the config no longer has is named in the log.

use std::collections::HashMap;
use std::collections::HashSet;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::REMOVED_AT;
use serde_json::Value;

/// Key of [`BotRecord::settings`] on a bot made by CreateAgent that was
/// removed because its owner is no longer a user of the fleet
/// ([`hold_for_absent_owners`]): it comes back when they are again.
pub(crate) const OWNER_ABSENT: &str = "owner_absent";

/// Whether `bot`, made by CreateAgent, is held because its owner is no
/// longer a user of the host ([`hold_for_absent_owners`]).
pub(crate) fn owner_absent(bot: &BotRecord) -> bool {
    bot.settings.get(OWNER_ABSENT).is_some()
}

/// The writes that hold each bot made by CreateAgent whose owner is no
/// longer among the fleet's `users` (their `[[users]]` table removed), at
/// `now_ms`: it is marked removed, as a bot the config dropped, so it runs
/// no turns and its routines do not fire; its inputs and sessions wait in
/// the store. (QA: such bots went on running their routines and queued
/// turns on their absent owner's memory and workspace, where no user could
/// see, stop or remove them.) A bot held so comes back when its owner is a
/// user again; one its owner removed stays removed. Subagents follow
/// their parents afterwards ([`follow_parents`]). Nothing when `users` is
/// empty: a runtime built without the fleet's users (tests, benchmarks)
/// does not know them.
pub(crate) fn hold_for_absent_owners(
    bots: &HashMap<BotId, BotRecord>,
    users: &[botfleet_memory::UserId],
    now_ms: i64,
) -> Vec<Mutation> {
    if users.is_empty() {
        return Vec::new();
    }
    let mut writes = Vec::new();
    for bot in bots.values().filter(|b| b.origin.starts_with(MADE_BY)) {
        let present = users.contains(&bot.owner);
        let held = owner_absent(bot);
        if !present && bot.removed_at().is_none() {
            tracing::warn!(bot = %bot.id, owner = %bot.owner, "bot made with CreateAgent belongs to a user no longer in the fleet's config: it runs no turns and its routines do not fire until [[users]] lists them again; its sessions and inputs are kept");
            let mut want = bot.clone().mark_removed(now_ms);
            if let Value::Object(map) = &mut want.settings {
                map.insert(OWNER_ABSENT.into(), Value::Bool(true));
            }
            writes.push(Mutation::UpsertBot(want));
        } else if present && held {
            tracing::info!(bot = %bot.id, owner = %bot.owner, "the owner of a bot made with CreateAgent is a user of the fleet again: so is the bot");
            let mut want = bot.clone();
            if let Value::Object(map) = &mut want.settings {
                map.remove(OWNER_ABSENT);
                map.remove(REMOVED_AT);
            }
            want.updated_at = now_ms;
            writes.push(Mutation::UpsertBot(want));
        }
    }
    writes
}

/// The tool every bot keeps: a subagent is given it even when its parent's
/// list (which the config requires to have it) did not name it.
const ALWAYS: &str = "SendMessage";

/// The writes that bring the bots among `bots` that the config does not
/// list in line with it, at `now_ms`: first the bots made by CreateAgent
/// ([`follow_makers`]), then the subagents ([`follow_parents`]), so a
/// subagent of a made bot follows its parent's tools as they now are.
pub(crate) fn follow_origins(bots: &HashMap<BotId, BotRecord>, now_ms: i64) -> Vec<Mutation> {
    let mut writes = follow_makers(bots, now_ms);
    let mut now = bots.clone();
    for w in &writes {
        if let Mutation::UpsertBot(b) = w {
            now.insert(b.id.clone(), b.clone());
        }
    }
    writes.extend(follow_parents(&now, now_ms));
    writes
}

/// The writes that cut the tools of each bot among `bots` made by
/// CreateAgent (origin `agent:<maker>`) to those its maker still has, at
/// `now_ms`. CreateAgent gives only tools the maker has; the cap holds
/// over time, so a tool taken from a bot in fleet.toml is taken from the
/// bots it made too (and from theirs, down a chain of makers). A maker
/// that is removed (or gone) has no tools: its bots keep only
/// [`ALWAYS`], so they can still answer their owner. Nothing comes back
/// by itself when the maker gets a tool again. One `WARN` per bot whose
/// tools shrank, naming what it lost and why.
///
/// In the same writes, each such bot takes its maker's daily token budget
/// as it now is ([`maker_budgets`]), with one `WARN` per bot whose budget
/// changed.
pub(crate) fn follow_makers(bots: &HashMap<BotId, BotRecord>, now_ms: i64) -> Vec<Mutation> {
    let made: Vec<&BotRecord> = bots
        .values()
        .filter(|b| b.origin.starts_with(MADE_BY))
        .collect();
    // a made bot's maker may be a made bot whose tools shrink here too:
    // cut again until nothing shrinks (each pass that goes on takes at
    // least one tool, so this ends)
    let mut tools: HashMap<&BotId, Vec<String>> =
        made.iter().map(|b| (&b.id, b.tools.clone())).collect();
    loop {
        let mut shrank = false;
        for bot in &made {
            let kept = maker_tools(bot, bots, &tools);
            let mut want = tools.get(&bot.id).cloned().unwrap_or_default();
            let before = want.len();
            want.retain(|t| t == ALWAYS || kept.as_ref().is_some_and(|k| k.contains(t)));
            if want.len() < before {
                shrank = true;
                tools.insert(&bot.id, want);
            }
        }
        if !shrank {
            break;
        }
    }
    let budgets = maker_budgets(&made, bots);
    let mut writes = Vec::new();
    for bot in made {
        let Some(want) = tools.get(&bot.id) else {
            continue;
        };
        let budget = budgets
            .get(&bot.id)
            .copied()
            .unwrap_or_else(|| budget_of(bot));
        if *want == bot.tools && budget == budget_of(bot) {
            continue;
        }
        let maker = bot.origin.strip_prefix(MADE_BY).unwrap_or_default();
        let mut settings = bot.settings.clone();
        if budget != budget_of(bot) {
            tracing::warn!(bot = %bot.id, maker, from = ?budget_of(bot), to = ?budget, "bot made by CreateAgent takes its maker's daily_token_budget as it now is");
            settings = with_budget(settings, budget);
        }
        if *want == bot.tools {
            writes.push(Mutation::UpsertBot(BotRecord {
                settings,
                updated_at: now_ms,
                ..bot.clone()
            }));
            continue;
        }
        let lost: Vec<&str> = bot
            .tools
            .iter()
            .map(String::as_str)
            .filter(|t| !want.iter().any(|k| k == t))
            .collect();
        let listed = BotId::new(maker)
            .ok()
            .and_then(|id| bots.get(&id))
            .is_some_and(|m| m.removed_at().is_none());
        if listed {
            tracing::warn!(bot = %bot.id, maker, lost = %lost.join(", "), "bot made by CreateAgent loses the tools its maker no longer has in the fleet's config (nothing comes back by itself: a bot of its owner with UpdateAgent and the tool can give it again)");
        } else {
            tracing::warn!(bot = %bot.id, maker, lost = %lost.join(", "), "bot made by CreateAgent keeps only SendMessage: its maker is no longer in the fleet's config (the bot stays its owner's and still answers them; nothing comes back by itself)");
        }
        writes.push(Mutation::UpsertBot(BotRecord {
            tools: want.clone(),
            settings,
            updated_at: now_ms,
            ..bot.clone()
        }));
    }
    writes
}

/// The setting of a bot's daily token budget.
const DAILY_TOKEN_BUDGET: &str = "daily_token_budget";

/// `bot`'s daily token budget, if it has one.
fn budget_of(bot: &BotRecord) -> Option<u64> {
    bot.settings.get(DAILY_TOKEN_BUDGET).and_then(Value::as_u64)
}

/// `settings` with the daily token budget `budget` (none: the setting
/// dropped).
fn with_budget(settings: Value, budget: Option<u64>) -> Value {
    let mut map = match settings {
        Value::Object(map) => map,
        // settings are always an object; anything else holds nothing
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            serde_json::Map::new()
        }
    };
    match budget {
        Some(b) => {
            map.insert(DAILY_TOKEN_BUDGET.to_owned(), Value::from(b));
        }
        None => {
            map.remove(DAILY_TOKEN_BUDGET);
        }
    }
    Value::Object(map)
}

/// The daily token budget each bot among `made` (made by CreateAgent)
/// takes from its maker at this start: its maker's as it now is (down a
/// chain of makers, a maker's own as taken here), so a made bot never
/// spends more a day than its maker may — a budget lowered in fleet.toml
/// is lowered for the bots the bot made too, and a raised one raised: a
/// made bot has no budget of its own (CreateAgent gives it its maker's,
/// and neither it nor UpdateAgent takes settings). The budget is a
/// separate one, counted on the made bot's own usage. A bot whose maker
/// is removed (or gone) keeps the budget it has.
fn maker_budgets<'a>(
    made: &[&'a BotRecord],
    bots: &HashMap<BotId, BotRecord>,
) -> HashMap<&'a BotId, Option<u64>> {
    let mut budgets: HashMap<&BotId, Option<u64>> =
        made.iter().map(|b| (&b.id, budget_of(b))).collect();
    // a maker that is itself made takes its maker's first: pass again
    // until nothing changes (a chain of n makers needs n passes; the
    // bound guards against a cycle of origins, which CreateAgent cannot
    // make)
    for _ in 0..=made.len() {
        let mut changed = false;
        for bot in made {
            let Some(maker) = bot
                .origin
                .strip_prefix(MADE_BY)
                .and_then(|m| BotId::new(m).ok())
                .and_then(|id| bots.get(&id))
                .filter(|m| m.removed_at().is_none())
            else {
                continue;
            };
            let want = budgets
                .get(&maker.id)
                .copied()
                .unwrap_or_else(|| budget_of(maker));
            if budgets.get(&bot.id) != Some(&want) {
                budgets.insert(&bot.id, want);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    budgets
}

/// The prefix of the origin of a bot made by CreateAgent.
const MADE_BY: &str = "agent:";

/// The tools the maker of `bot` has now (`made`: the made bots' tools as
/// cut so far), or `None` if it is removed or gone.
fn maker_tools(
    bot: &BotRecord,
    bots: &HashMap<BotId, BotRecord>,
    made: &HashMap<&BotId, Vec<String>>,
) -> Option<HashSet<String>> {
    let id = BotId::new(bot.origin.strip_prefix(MADE_BY)?).ok()?;
    let maker = bots.get(&id).filter(|m| m.removed_at().is_none())?;
    let tools = made.get(&maker.id).unwrap_or(&maker.tools);
    Some(tools.iter().cloned().collect())
}

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
        let Some(parent_id) = bot.origin.strip_prefix("subagent:") else {
            continue;
        };
        let parent = BotId::new(parent_id).ok().and_then(|id| bots.get(&id));
        let want = match parent {
            Some(p) if p.removed_at().is_none() => follow(bot, p),
            // removed with its parent: it stays removed, and its tools
            // still follow the parent's (a start cut the parent's: the
            // subagent's list kept what its parent lost, QA 2026-12-05)
            Some(p) if bot.removed_at().is_some() => cut_to(bot.clone(), p),
            None if bot.removed_at().is_some() => continue,
            Some(_) | None => {
                tracing::warn!(bot = %bot.id, parent = %parent_id, "subagent's parent is no longer in the fleet's config: the subagent takes no more messages and runs no turns; its sessions are kept");
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
    cut_to(want, parent)
}

/// `want` (a subagent's record) with its tools cut to `parent`'s, on the
/// parent's provider, of the parent's owner; removed or not as it is.
fn cut_to(mut want: BotRecord, parent: &BotRecord) -> BotRecord {
    let sub = want.clone();
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

#[cfg(test)]
#[path = "fleet_derived_tests.rs"]
mod tests;
