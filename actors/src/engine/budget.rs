//! The daily token budget (bot setting `daily_token_budget`): whether it
//! is spent and until when the bot is paused, and the check before each
//! model request the bot makes for a turn (each step's, each chunk of a
//! compaction's: `Runner::budget_checkpoint`, `compaction::compact`).
//!
//! What that check counts: the bot's usage stored today, the tokens the
//! running turn or compaction used and has not stored yet, and the fact
//! extractions in flight. An extraction's usage is stored only when it
//! ends, so the check read it as unspent while it ran; now each one
//! reserves what it may spend (`memory/extract_reserved.rs`), and when
//! the stored and pending usage is under the budget but the reservations
//! would reach it, the request waits for those extractions to end (at
//! most their timeout) and is checked with their real usage. A request far
//! from the budget never waits; one past it stops without waiting.

use botfleet_memory::BotRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;

/// `bot`'s daily token budget (setting `daily_token_budget`), if it has one.
pub(crate) fn budget_of(bot: &BotRecord) -> Option<u64> {
    bot.settings
        .get("daily_token_budget")
        .and_then(|v| v.as_u64())
}

/// `bot`'s tokens stored today (UTC, by the store's clock), and the day.
async fn used_today(
    store: &Store,
    bot: &BotRecord,
) -> Result<(chrono::DateTime<chrono::Utc>, String, u64), StoreError> {
    let now = store.clock().now();
    let day = now.format("%Y-%m-%d").to_string();
    let (_, stored, _) = store.bot_usage(&bot.id, &day).await?;
    Ok((now, day, stored.total()))
}

/// Whether `bot`'s daily token budget (setting `daily_token_budget`) is
/// spent today (UTC), counting `pending` tokens besides its stored usage
/// (a running turn's, committed only with its end), and until when it is
/// paused if so.
pub(crate) async fn budget_pause(
    store: &Store,
    bot: &BotRecord,
    pending: u64,
) -> Result<Option<BudgetPause>, StoreError> {
    let Some(budget) = budget_of(bot) else {
        return Ok(None);
    };
    let (now, day, stored) = used_today(store, bot).await?;
    let used = stored.saturating_add(pending);
    let Some(midnight) = budget_paused_until(now, used, Some(budget)) else {
        return Ok(None);
    };
    Ok(Some(BudgetPause {
        used,
        budget,
        until: midnight.format("%Y-%m-%d %H:%M").to_string(),
        until_ms: midnight.timestamp_millis(),
        day,
    }))
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
/// without a budget). When the bot's fact extractions in flight could
/// spend what is left ([`waits_for_extractions`]), it first waits for them
/// to end (their usage is then stored), or for `stop`.
pub(crate) async fn pause_before_request(
    rt: &Runtime,
    bot: &BotRecord,
    pending: u64,
    stop: &CancellationToken,
) -> Result<Option<BudgetPause>, StoreError> {
    let Some(budget) = budget_of(bot) else {
        return Ok(None);
    };
    let mut reserved = rt.extractions.reserved_watch();
    let mut told = false;
    loop {
        let held = reserved.of(&bot.id);
        if held == 0 {
            break;
        }
        let (_, _, stored) = used_today(&rt.store, bot).await?;
        let used = stored.saturating_add(pending);
        if !waits_for_extractions(budget, used, held) {
            break;
        }
        if !told {
            told = true;
            tracing::info!(bot = %bot.id, used, reserved = held, budget,
                "a model request waits for the bot's fact extractions in flight: their usage may spend its daily token budget");
        }
        tokio::select! {
            more = reserved.changed() => if !more {
                break;
            },
            () = stop.cancelled() => break,
        }
    }
    budget_pause(&rt.store, bot, pending).await
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
/// budget, from its usage stored today (by the store's clock): what its
/// next turn would find, whether or not the bot is active.
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
}

impl BudgetPause {
    /// Why a turn it cannot put off fails.
    pub(crate) fn reason(&self) -> String {
        format!(
            "its daily token budget is spent ({} of {} tokens); it is paused until {} UTC",
            self.used, self.budget, self.until
        )
    }
}

#[cfg(test)]
mod tests {
    use super::waits_for_extractions;

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
