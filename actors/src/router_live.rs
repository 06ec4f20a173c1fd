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
use tokio::sync::watch;

use crate::bot::BotStatus;

/// The cells of the active bots, by bot. Cheap to read: a read lock over
/// the map and one short lock per cell, never held across an await.
#[derive(Debug)]
pub(crate) struct LiveBoard {
    bots: RwLock<HashMap<BotId, Arc<LiveCell>>>,
    /// Counts the statuses published, so a caller can wait for the next
    /// one instead of looking again and again (`FleetHandle::status_changes`).
    published: Arc<watch::Sender<u64>>,
}

impl Default for LiveBoard {
    fn default() -> Self {
        Self {
            bots: RwLock::default(),
            published: Arc::new(watch::Sender::new(0)),
        }
    }
}

/// One bot actor's published status. `None` until the actor has read its
/// queue and unfinished turns from the store (it is starting).
#[derive(Debug)]
pub(crate) struct LiveCell {
    status: Mutex<Option<BotStatus>>,
    published: Arc<watch::Sender<u64>>,
}

impl LiveCell {
    /// Replaces the published status (the bot actor, after each message).
    pub(crate) fn publish(&self, status: BotStatus) {
        *self.status.lock() = Some(status);
        // after the status is in place: one who subscribed later reads it
        // before waiting, so nobody waiting means nothing to tell (most
        // of the time, on this path of every message a bot handles)
        if self.published.receiver_count() > 0 {
            self.published.send_modify(|n| *n = n.wrapping_add(1));
        }
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
    /// A new cell for a bot actor about to start (filed with [`Self::insert`]).
    pub(crate) fn new_cell(&self) -> Arc<LiveCell> {
        Arc::new(LiveCell {
            status: Mutex::new(None),
            published: Arc::clone(&self.published),
        })
    }

    /// Changes each time any bot publishes its status.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.published.subscribe()
    }

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

    /// The active bot running `turn`, if one is: no status is copied.
    pub(crate) fn running(&self, turn: botfleet_memory::TurnId) -> Option<BotId> {
        self.bots
            .read()
            .iter()
            .find(|(_, cell)| {
                cell.status
                    .lock()
                    .as_ref()
                    .and_then(|s| s.turn.as_ref())
                    .is_some_and(|t| t.turn == turn)
            })
            .map(|(bot, _)| bot.clone())
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
