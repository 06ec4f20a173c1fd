//! The live board: what each active bot is doing, as its actor last
//! published it, readable without messaging anyone.
//!
//! The router used to ask every bot for its status, one after another,
//! inside its own handler: a bot whose actor was held up (waiting for a
//! store reader under load) kept the router from routing anyone's input
//! for seconds, and a bot that did not answer in time was left out, read
//! by the bot list as idle. Now each bot actor writes its status into its
//! own cell after every message it handles, the router files the cells of
//! the bots it activates (and removes them as the bots stop), and status
//! questions read the board.

use std::collections::HashMap;
use std::sync::Arc;

use botfleet_memory::BotId;
use parking_lot::Mutex;
use parking_lot::RwLock;

use crate::bot::BotStatus;

/// The cells of the active bots, by bot. Cheap to read: a read lock over
/// the map and one short lock per cell, never held across an await.
#[derive(Debug, Default)]
pub(crate) struct LiveBoard {
    bots: RwLock<HashMap<BotId, Arc<LiveCell>>>,
}

/// One bot actor's published status. `None` until the actor has read its
/// queue and unfinished turns from the store (it is starting).
#[derive(Debug, Default)]
pub(crate) struct LiveCell {
    status: Mutex<Option<BotStatus>>,
}

impl LiveCell {
    /// Replaces the published status (the bot actor, after each message).
    pub(crate) fn publish(&self, status: BotStatus) {
        *self.status.lock() = Some(status);
    }

    /// What the bot last published, or a status that says it is starting.
    fn read(&self, bot: &BotId) -> BotStatus {
        self.status
            .lock()
            .clone()
            .unwrap_or_else(|| BotStatus::starting(bot.clone()))
    }
}

impl LiveBoard {
    /// Files the cell of a bot actor the router just started.
    pub(crate) fn insert(&self, bot: BotId, cell: Arc<LiveCell>) {
        self.bots.write().insert(bot, cell);
    }

    /// Removes `bot`'s cell if it is still `cell` (a newer actor of the
    /// same bot may have filed its own since).
    pub(crate) fn remove(&self, bot: &BotId, cell: &Arc<LiveCell>) {
        let mut bots = self.bots.write();
        if bots.get(bot).is_some_and(|c| Arc::ptr_eq(c, cell)) {
            bots.remove(bot);
        }
    }

    /// Forgets every bot (a new router starts with no bot active).
    pub(crate) fn clear(&self) {
        self.bots.write().clear();
    }

    /// The status of `bot`, if it is active.
    pub(crate) fn get(&self, bot: &BotId) -> Option<BotStatus> {
        let cell = self.bots.read().get(bot).cloned()?;
        Some(cell.read(bot))
    }

    /// The status of every active bot, by id.
    pub(crate) fn all(&self) -> Vec<BotStatus> {
        let cells: Vec<(BotId, Arc<LiveCell>)> = self
            .bots
            .read()
            .iter()
            .map(|(b, c)| (b.clone(), c.clone()))
            .collect();
        let mut out: Vec<BotStatus> = cells.iter().map(|(b, c)| c.read(b)).collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }
}
