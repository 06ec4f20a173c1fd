//! Which bots may have open approvals, kept in memory so the gate's check
//! before every side effect reads the store only for bots that have one.
//!
//! A bot enters the set when a batch that requests an approval for it is
//! submitted (before the writer commits it: the set may over-approximate,
//! never miss), again right after that batch's commit (on the writer
//! thread, before anyone is answered), and at open for every bot with an
//! open row. A read that finds none of the bot's approvals open removes it,
//! unless a request for it was submitted or committed since the read began
//! (the generation says so). The second entry matters: a read that began
//! after the submission but read the database before the commit finds
//! nothing and removes the bot; the commit puts it back. An
//! approval that expired by time stays open in the store until its expiry
//! is persisted, so the bot stays in the set and is read: the read reports
//! the effective status.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use rusqlite::Connection;

use super::Mutation;
use crate::error::Result;
use crate::ids::BotId;

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct OpenApprovalHint {
    generation: AtomicU64,
    /// Bot → the generation of the newest request submitted for it.
    bots: parking_lot::Mutex<HashMap<BotId, u64>>,
}

impl OpenApprovalHint {
    /// The bots with open rows in a freshly opened store.
    pub(crate) fn load(conn: &Connection) -> Result<Self> {
        let mut stmt = conn.prepare(
            "SELECT DISTINCT bot_id FROM approvals
             WHERE status IN ('pending', 'approved') AND consumed_at IS NULL",
        )?;
        let mut bots = HashMap::new();
        for id in stmt.query_map([], |r| r.get::<_, String>(0))? {
            // a malformed id cannot be asked for by the gate: skip it
            if let Ok(bot) = BotId::new(id?) {
                bots.insert(bot, 0);
            }
        }
        Ok(Self {
            generation: AtomicU64::new(0),
            bots: parking_lot::Mutex::new(bots),
        })
    }

    /// Notes the approval requests of a batch about to be submitted; the
    /// bots it names, to hand to [`Self::committed`] after its commit.
    pub(crate) fn note(&self, batch: &[Mutation]) -> Vec<BotId> {
        let bots: Vec<BotId> = batch
            .iter()
            .filter_map(|m| {
                if let Mutation::RequestApproval(new) = m {
                    Some(new.bot.clone())
                } else {
                    None
                }
            })
            .collect();
        self.enter(&bots);
        bots
    }

    /// After the commit (or failure) of a batch [`Self::note`]d: a read
    /// that raced it may have removed these bots, so they enter again.
    pub(crate) fn committed(&self, bots: &[BotId]) {
        self.enter(bots);
    }

    fn enter(&self, bots: &[BotId]) {
        for bot in bots {
            let g = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
            self.bots.lock().insert(bot.clone(), g);
        }
    }

    /// `None` when `bot` has no open approval (no read needed); otherwise
    /// the generation to hand to [`Self::settle`] after the read.
    pub(crate) fn check(&self, bot: &BotId) -> Option<u64> {
        let g = self.generation.load(Ordering::SeqCst);
        self.bots.lock().contains_key(bot).then_some(g)
    }

    /// After a read begun at generation `at` found no open approval of
    /// `bot`: forget it, unless a request was submitted since.
    pub(crate) fn settle(&self, bot: &BotId, at: u64) {
        let mut bots = self.bots.lock();
        if bots.get(bot).is_some_and(|g| *g <= at) {
            bots.remove(bot);
        }
    }
}

#[cfg(test)]
#[path = "approval_hint_tests.rs"]
mod tests;
