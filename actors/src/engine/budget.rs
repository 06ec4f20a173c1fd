//! The daily token budget (bot setting `daily_token_budget`): whether it
//! is spent and until when the bot is paused, and the check before each
//! model request the bot makes for a turn (each step's, each chunk of a
//! compaction's: `Runner::budget_checkpoint`, `compaction::compact`).
//!
//! The budget is a family's: a subagent's model requests count against
//! its parent's budget, and a parent's check counts its subagents' usage
//! too (before, subagents ran without a budget and their usage counted
//! nowhere: a bot budgeted at 500 tokens delegated thousands). A
//! subagent's record has no budget; its parent's is read at each check.
//!
//! What that check counts: the family's usage stored today, the tokens
//! the family's running turns (and compactions) used and have not stored
//! yet, and the fact extractions in flight. An extraction's usage is stored only when it
//! ends, so the check read it as unspent while it ran; now each one
//! reserves what it may spend (`memory/extract_reserved.rs`), and when
//! the stored and pending usage is under the budget but the reservations
//! would reach it, the request waits for those extractions to end (at
//! most their timeout) and is checked with their real usage. A request far
//! from the budget never waits; one past it stops without waiting.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;

/// `bot`'s daily token budget (setting `daily_token_budget`), if it has one.
pub(crate) fn budget_of(bot: &BotRecord) -> Option<u64> {
    bot.settings
        .get("daily_token_budget")
        .and_then(|v| v.as_u64())
}

/// The bot whose daily token budget `bot`'s model requests spend: its
/// parent for a subagent (origin `subagent:<parent>`; subagents do not
/// delegate, so there is no deeper level), else the bot itself.
fn family_root(bot: &BotRecord) -> BotId {
    bot.origin
        .strip_prefix("subagent:")
        .and_then(|p| BotId::new(p).ok())
        .unwrap_or_else(|| bot.id.clone())
}

/// The daily token budget `bot`'s model requests count against, and the
/// parent whose budget it is when `bot` is a subagent: its parent's as
/// the store has it now (a subagent's record has no budget of its own; a
/// parent that is gone leaves it none), else its own.
async fn family_budget(
    store: &Store,
    bot: &BotRecord,
) -> Result<Option<(u64, Option<BotId>)>, StoreError> {
    let root = family_root(bot);
    if root == bot.id {
        return Ok(budget_of(bot).map(|b| (b, None)));
    }
    let parent = store.get_bot(&root).await?;
    Ok(parent.as_ref().and_then(budget_of).map(|b| (b, Some(root))))
}

/// What `bot`'s family (its budget's bot and that one's subagents) used
/// today (UTC, by the store's clock).
struct FamilyUse {
    now: chrono::DateTime<chrono::Utc>,
    day: String,
    /// Tokens stored today, the pending ones counted by the caller added.
    used: u64,
    /// The family's bots known to have spent or to be spending today.
    members: BTreeSet<BotId>,
}

impl FamilyUse {
    /// The family's usage stored today (one read: `Store::family_usage`),
    /// plus `pending` tokens not stored yet.
    async fn read(
        store: &Store,
        bot: &BotRecord,
        root: &BotId,
        pending: u64,
    ) -> Result<Self, StoreError> {
        let now = store.clock().now();
        let day = now.format("%Y-%m-%d").to_string();
        let rows = store.family_usage(root, &day).await?;
        let stored = rows
            .iter()
            .fold(0u64, |sum, (_, u)| sum.saturating_add(u.total()));
        let mut members: BTreeSet<BotId> = rows.into_iter().map(|(id, _)| id).collect();
        members.insert(root.clone());
        members.insert(bot.id.clone());
        Ok(Self {
            now,
            day,
            used: stored.saturating_add(pending),
            members,
        })
    }

    /// The pause this usage means for a `budget` (of `payer`, for a
    /// subagent), `None` while it is not spent.
    fn pause(self, budget: u64, payer: Option<BotId>) -> Option<BudgetPause> {
        let midnight = budget_paused_until(self.now, self.used, Some(budget))?;
        Some(BudgetPause {
            used: self.used,
            budget,
            until: midnight.format("%Y-%m-%d %H:%M").to_string(),
            until_ms: midnight.timestamp_millis(),
            day: self.day,
            payer,
        })
    }
}

/// Whether the daily token budget that `bot`'s model requests count
/// against is spent today (UTC), and until when it is paused if so. That
/// budget is the bot's own (setting `daily_token_budget`), or its
/// parent's for a subagent; it counts the usage stored today of that bot
/// and of all its subagents ([`Store::family_usage`]), plus `pending`
/// tokens (a running turn's, committed only with its end).
pub(crate) async fn budget_pause(
    store: &Store,
    bot: &BotRecord,
    pending: u64,
) -> Result<Option<BudgetPause>, StoreError> {
    let Some((budget, payer)) = family_budget(store, bot).await? else {
        return Ok(None);
    };
    let root = family_root(bot);
    Ok(FamilyUse::read(store, bot, &root, pending)
        .await?
        .pause(budget, payer))
}

/// The tokens the running turns of a runtime used and have not stored
/// yet (their usage is committed with their end), by bot, with the bot
/// whose budget they spend: what a model request of another bot of the
/// same family counts besides the stored usage. Without it, a parent and
/// its subagents, running at once, each saw only its own running turn,
/// and together spent their budget once per bot. Kept by the runtime
/// (`Runtime::running_budget`); an entry lives while its turn's
/// [`RunningUsage`] does.
#[derive(Debug, Default, Clone)]
pub(crate) struct RunningTurns(Arc<Mutex<HashMap<BotId, Running>>>);

/// One running turn's entry in [`RunningTurns`].
#[derive(Debug)]
struct Running {
    /// The bot whose budget it spends ([`family_root`]).
    root: BotId,
    /// Tokens used and not stored yet.
    tokens: u64,
}

/// A running turn's entry in [`RunningTurns`], updated by each of its
/// budget checks (`pause_before_request`), dropped with the turn's run
/// (its end, a panic, the host's stop): its usage is stored by then, or
/// never. A bot runs one turn at a time.
#[derive(Debug)]
pub(crate) struct RunningUsage {
    table: RunningTurns,
    bot: BotId,
}

impl RunningUsage {
    /// Enters `bot`'s running turn of `rt`, with nothing used yet.
    pub(crate) fn enter(rt: &Runtime, bot: &BotRecord) -> Self {
        let table = rt.running_budget.clone();
        table.0.lock().insert(
            bot.id.clone(),
            Running {
                root: family_root(bot),
                tokens: 0,
            },
        );
        Self {
            table,
            bot: bot.id.clone(),
        }
    }
}

impl Drop for RunningUsage {
    fn drop(&mut self) {
        self.table.0.lock().remove(&self.bot);
    }
}

/// Notes that `bot`'s running turn (if it has entered one) used `pending`
/// tokens not stored yet.
fn publish(rt: &Runtime, bot: &BotId, pending: u64) {
    if let Some(r) = rt.running_budget.0.lock().get_mut(bot) {
        r.tokens = pending;
    }
}

/// The tokens the running turns of `root`'s family in `rt` other than
/// `bot`'s used and have not stored yet, and their bots.
fn running_in_family(rt: &Runtime, root: &BotId, bot: &BotId) -> (u64, Vec<BotId>) {
    let mut tokens = 0u64;
    let mut bots = Vec::new();
    for (id, run) in rt.running_budget.0.lock().iter() {
        if run.root == *root && id != bot {
            tokens = tokens.saturating_add(run.tokens);
            bots.push(id.clone());
        }
    }
    (tokens, bots)
}

/// Whether a model request of a bot that `used` tokens of its `budget`
/// (stored today and pending) waits for its extractions in flight, which
/// reserved `reserved` tokens: when their usage could spend what is left.
/// Not when none runs, nor when the budget is spent already (the request
/// stops at once).
pub(crate) fn waits_for_extractions(budget: u64, used: u64, reserved: u64) -> bool {
    reserved > 0 && used < budget && used.saturating_add(reserved) >= budget
}

/// The budget check before a model request of `bot` (a turn's step, a
/// compaction's chunk) that used `pending` tokens not stored yet: the
/// pause when the budget is spent, `None` while the request may go (always
/// without a budget). The budget is the family's ([`budget_pause`]): the
/// usage stored today by the bot whose budget it is and by its subagents,
/// `pending`, and what the family's other running turns in this process
/// used and have not stored yet ([`RunningTurns`]). So the family spends at
/// most its budget plus one model request per bot of it making requests
/// at the same time (each request passed a check that saw every other
/// bot's usage but its one request in flight). When the family's fact
/// extractions in flight could spend what is left
/// ([`waits_for_extractions`]), it first waits for them to end (their
/// usage is then stored), or for `stop`.
pub(crate) async fn pause_before_request(
    rt: &Runtime,
    bot: &BotRecord,
    pending: u64,
    stop: &CancellationToken,
) -> Result<Option<BudgetPause>, StoreError> {
    publish(rt, &bot.id, pending);
    let Some((budget, payer)) = family_budget(&rt.store, bot).await? else {
        return Ok(None);
    };
    let root = family_root(bot);
    let mut reserved = rt.extractions.reserved_watch();
    let mut told = false;
    let mut may_wait = true;
    loop {
        let (running, running_bots) = running_in_family(rt, &root, &bot.id);
        let mut family =
            FamilyUse::read(&rt.store, bot, &root, pending.saturating_add(running)).await?;
        family.members.extend(running_bots);
        let held = reserved.of_all(&family.members);
        if !may_wait || !waits_for_extractions(budget, family.used, held) {
            return Ok(family.pause(budget, payer));
        }
        if !told {
            told = true;
            tracing::info!(bot = %bot.id, used = family.used, reserved = held, budget,
                "a model request waits for the bot's fact extractions in flight: their usage may spend its daily token budget");
        }
        tokio::select! {
            more = reserved.changed() => may_wait = more,
            () = stop.cancelled() => may_wait = false,
        }
    }
}

/// Until when a bot that used `used` tokens on `now`'s UTC day is paused
/// by its daily token `budget`: the next UTC midnight once the budget is
/// spent, `None` while it is not (or without a budget). The one rule for
/// the engine (which holds the bot's turns) and the API (which shows the
/// pause, also of a bot that is not active).
pub fn budget_paused_until(
    now: chrono::DateTime<chrono::Utc>,
    used: u64,
    budget: Option<u64>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    if used < budget? {
        return None;
    }
    Some(
        (now.date_naive() + chrono::Days::new(1))
            .and_hms_opt(0, 0, 0)
            .map_or(now, |t| t.and_utc()),
    )
}

/// Until when (ms since the epoch) `bot` is paused by its daily token
/// budget (its parent's for a subagent), from the usage stored today (by
/// the store's clock) of the bot whose budget it is and of that one's
/// subagents: what its next turn would find, whether or not the bot is
/// active.
pub async fn stored_budget_pause(
    store: &Store,
    bot: &BotRecord,
) -> Result<Option<i64>, StoreError> {
    Ok(budget_pause(store, bot, 0).await?.map(|p| p.until_ms))
}

/// A bot paused because its daily token budget is spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BudgetPause {
    /// Tokens used today.
    pub used: u64,
    /// The daily budget.
    pub budget: u64,
    /// When it runs again (UTC, `%Y-%m-%d %H:%M`).
    pub until: String,
    /// When it runs again (ms since the epoch).
    pub until_ms: i64,
    /// The day whose budget is spent (UTC, `%Y-%m-%d`).
    pub day: String,
    /// Whose budget it is when not the bot's own: a subagent's parent.
    pub payer: Option<BotId>,
}

impl BudgetPause {
    /// Why a turn it cannot put off fails.
    pub(crate) fn reason(&self) -> String {
        match &self.payer {
            None => format!(
                "its daily token budget is spent ({} of {} tokens); it is paused until {} UTC",
                self.used, self.budget, self.until
            ),
            Some(parent) => format!(
                "the daily token budget of {parent}, which its subagents share, is spent ({} of {} tokens); {parent} and its subagents are paused until {} UTC",
                self.used, self.budget, self.until
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use botfleet_memory::BotId;
    use botfleet_memory::BotRecord;
    use botfleet_memory::Mutation;
    use botfleet_memory::SubagentRecord;
    use botfleet_memory::SubagentStatus;
    use botfleet_memory::TokenUsage;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::RunningUsage;
    use super::budget_pause;
    use super::pause_before_request;
    use super::publish;
    use super::waits_for_extractions;
    use crate::tools::test_support::ToolFixture;

    fn usage(bot: &BotRecord, day: &str, tokens: u64) -> Mutation {
        Mutation::AddUsage {
            bot: bot.id.clone(),
            day: day.to_owned(),
            turns: 1,
            usage: TokenUsage {
                calls: 1,
                prompt_tokens: tokens,
                ..TokenUsage::default()
            },
        }
    }

    /// A subagent's requests count against its parent's budget; the
    /// check of any bot of the family counts the family's usage stored
    /// today and what its other running turns have not stored yet, not
    /// another family's, and a running turn's pending tokens go with it.
    #[tokio::test]
    async fn a_check_counts_the_whole_family_and_only_it() {
        let fx = ToolFixture::new();
        let rt = &fx.rt;
        let stop = CancellationToken::new();
        let record = |id: &str, origin: &str, settings| BotRecord {
            id: BotId::new(id).unwrap(),
            origin: origin.into(),
            settings,
            ..fx.bot.clone()
        };
        let parent = record("p", "config", json!({ "daily_token_budget": 1000 }));
        let sub = record("p.sub-1", "subagent:p", json!({}));
        let other = record("q", "config", json!({ "daily_token_budget": 1000 }));
        let day = rt.store.clock().now().format("%Y-%m-%d").to_string();
        rt.store
            .write(vec![
                Mutation::UpsertBot(parent.clone()),
                Mutation::UpsertBot(sub.clone()),
                Mutation::UpsertBot(other.clone()),
                Mutation::CreateSubagent(SubagentRecord {
                    id: sub.id.clone(),
                    parent: parent.id.clone(),
                    parent_session: fx.scope.session.id,
                    description: "a task".into(),
                    status: SubagentStatus::Running,
                    result: None,
                    created_at: 0,
                    updated_at: 0,
                }),
                usage(&parent, &day, 400),
                usage(&other, &day, 5_000),
            ])
            .await
            .unwrap();
        let check = async |bot: &BotRecord, pending| {
            pause_before_request(rt, bot, pending, &stop)
                .await
                .unwrap()
                .map(|p| (p.used, p.budget, p.payer.map(|b| b.to_string())))
        };

        // the parent's stored 400 and the subagent's own 500: under
        assert_eq!(check(&sub, 500).await, None);
        // the parent's running turn used 100 more, not stored yet
        let running = RunningUsage::enter(rt, &parent);
        publish(rt, &parent.id, 100);
        assert_eq!(
            check(&sub, 500).await,
            Some((1000, 1000, Some("p".to_owned())))
        );
        // another family's running turn is not counted
        let theirs = RunningUsage::enter(rt, &other);
        publish(rt, &other.id, 5_000);
        assert_eq!(check(&sub, 499).await, None);
        drop(theirs);
        // the parent's turn ended: its pending tokens are not counted
        // (its usage is stored with its end)
        drop(running);
        assert_eq!(check(&sub, 599).await, None);

        // the parent's check counts its subagent's stored usage
        assert_eq!(check(&parent, 599).await, None);
        rt.store.write(vec![usage(&sub, &day, 1)]).await.unwrap();
        assert_eq!(check(&parent, 599).await, Some((1000, 1000, None)));
        let pause = budget_pause(&rt.store, &sub, 599).await.unwrap().unwrap();
        assert_eq!(pause.used, 1000);
        assert!(
            pause
                .reason()
                .starts_with("the daily token budget of p, which its subagents share, is spent (1000 of 1000 tokens); p and its subagents are paused until "),
            "{}",
            pause.reason()
        );
        // without a parent's budget, a subagent has none
        let orphan = record("r.sub-1", "subagent:r", json!({}));
        assert_eq!(check(&orphan, u64::MAX).await, None);
    }

    /// A request waits for the extractions in flight only when their
    /// reservations could spend what is left of the budget.
    #[test]
    fn a_request_waits_only_when_extractions_could_spend_the_rest() {
        // (budget, used, reserved) → waits
        let cases = [
            // nothing in flight: no wait, however close
            ((1000, 999, 0), false),
            // far from the budget: the request goes at once
            ((100_000, 100, 1_600), false),
            // the reservation reaches the budget: wait for the real usage
            ((1000, 100, 900), true),
            ((1000, 100, 5_000), true),
            // spent already: stop at once, nothing to wait for
            ((1000, 1000, 5_000), false),
            ((1000, 4000, 5_000), false),
            // no overflow at the top
            ((u64::MAX, u64::MAX - 1, u64::MAX), true),
        ];
        for ((budget, used, reserved), waits) in cases {
            assert_eq!(
                waits_for_extractions(budget, used, reserved),
                waits,
                "budget {budget}, used {used}, reserved {reserved}"
            );
        }
    }
}
