//! The tokens the fact extractions in flight may still spend, per bot.
//!
//! An extraction's usage reaches the store only when it ends (with the end
//! of its owed record, `extract.rs`): until then a bot's daily budget check
//! read its tokens as unspent, and the bot's next turn could start a model
//! request after an extraction in flight had spent the budget. So each
//! extraction reserves what it may spend from before it is spawned (the
//! turn that owes it has not reported its end yet) until its usage is
//! stored: first the most its request can hold and its answer's limit,
//! then, once its request is built, that request's tokens and the limit.
//! The engine's budget check reads the reservations
//! (`engine/budget.rs`): when they could spend what is left of the
//! budget, the model request waits for those extractions to end and is
//! checked with their real usage.

use std::collections::HashMap;

use botfleet_memory::BotId;
use tokio::sync::watch;

/// The reservations of the extractions in flight.
#[derive(Debug, Default)]
pub(crate) struct Reserved {
    /// Per bot, per reservation, its tokens.
    by_bot: HashMap<BotId, HashMap<u64, u64>>,
    /// The id of the last reservation made.
    last: u64,
}

impl Reserved {
    /// The tokens reserved for `bot`'s extractions in flight (0 when none
    /// runs).
    pub(crate) fn of(&self, bot: &BotId) -> u64 {
        self.by_bot
            .get(bot)
            .map_or(0, |r| r.values().fold(0, |sum, t| sum.saturating_add(*t)))
    }
}

/// One extraction's reservation: held from before it is spawned until its
/// usage is stored, released when dropped (also when the task is dropped
/// unpolled, or a shutdown cuts it off: then nothing more is spent).
#[derive(Debug)]
pub(crate) struct Reservation {
    all: watch::Sender<Reserved>,
    bot: BotId,
    id: u64,
}

impl Reservation {
    /// Reserves `tokens` for one extraction of `bot` in `all`.
    pub(crate) fn new(all: &watch::Sender<Reserved>, bot: &BotId, tokens: u64) -> Self {
        let mut id = 0;
        all.send_modify(|r| {
            r.last += 1;
            id = r.last;
            r.by_bot.entry(bot.clone()).or_default().insert(id, tokens);
        });
        Self {
            all: all.clone(),
            bot: bot.clone(),
            id,
        }
    }

    /// Sets the reservation to `tokens` (its request is built: its own
    /// tokens and the answer's limit).
    pub(crate) fn narrow(&self, tokens: u64) {
        self.all.send_modify(|r| {
            if let Some(t) = r
                .by_bot
                .get_mut(&self.bot)
                .and_then(|m| m.get_mut(&self.id))
            {
                *t = tokens;
            }
        });
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.all.send_modify(|r| {
            if let Some(m) = r.by_bot.get_mut(&self.bot) {
                m.remove(&self.id);
                if m.is_empty() {
                    r.by_bot.remove(&self.bot);
                }
            }
        });
    }
}

/// A view of the reservations that tells when they change.
#[derive(Debug)]
pub(crate) struct ReservedWatch(watch::Receiver<Reserved>);

impl ReservedWatch {
    pub(crate) fn new(all: &watch::Sender<Reserved>) -> Self {
        Self(all.subscribe())
    }

    /// The tokens reserved for `bots` together now, read from one version
    /// of the reservations; [`ReservedWatch::changed`] waits for a change
    /// after this read. (Read bot by bot, each read marking the newest
    /// version seen, a release between two reads was summed stale and its
    /// change taken as seen: a request waited for extractions that had
    /// ended, until some later, unrelated change. Audit.)
    pub(crate) fn of_all<'a>(&mut self, bots: impl IntoIterator<Item = &'a BotId>) -> u64 {
        let now = self.0.borrow_and_update();
        bots.into_iter()
            .fold(0u64, |sum, bot| sum.saturating_add(now.of(bot)))
    }

    /// Waits until a reservation is made, narrowed or released since the
    /// last read; `false` when none can change any more.
    pub(crate) async fn changed(&mut self) -> bool {
        self.0.changed().await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn a_reservation_counts_until_it_is_dropped() {
        let all = watch::Sender::new(Reserved::default());
        let (a, b) = (BotId::new("a").unwrap(), BotId::new("b").unwrap());
        let mut seen = ReservedWatch::new(&all);
        assert_eq!(seen.of_all([&a]), 0);
        let first = Reservation::new(&all, &a, 5000);
        let second = Reservation::new(&all, &a, 700);
        let other = Reservation::new(&all, &b, 9);
        assert!(seen.changed().await);
        assert_eq!((seen.of_all([&a]), seen.of_all([&b])), (5700, 9));
        first.narrow(1200);
        assert!(seen.changed().await);
        assert_eq!(seen.of_all([&a]), 1900);
        drop(first);
        assert!(seen.changed().await);
        assert_eq!(seen.of_all([&a]), 700);
        drop((second, other));
        assert!(seen.changed().await);
        assert_eq!(seen.of_all([&a, &b]), 0);
        assert!(all.borrow().by_bot.is_empty());
    }

    /// The sum over several bots is of one version: a release after it is
    /// a change still to be seen, whatever bot it was of.
    #[tokio::test]
    async fn a_release_after_a_sum_is_a_change_to_see() {
        let all = watch::Sender::new(Reserved::default());
        let (a, b) = (BotId::new("a").unwrap(), BotId::new("b").unwrap());
        let first = Reservation::new(&all, &a, 600);
        let second = Reservation::new(&all, &b, 1460);
        let mut seen = ReservedWatch::new(&all);
        assert_eq!(seen.of_all([&a, &b]), 2060);
        drop(first);
        let woke = tokio::time::timeout(std::time::Duration::from_secs(5), seen.changed()).await;
        assert_eq!(woke, Ok(true));
        assert_eq!(seen.of_all([&a, &b]), 1460);
        drop(second);
    }
}
