//! The sessions' contexts a bot keeps in memory between turns, at most
//! [`MAX_TAILS`] of them, the least recently used left out first.
//!
//! A bot that stays active (a message every few minutes keeps it from
//! passivating) kept the context of every session it ever ran a turn in:
//! one per person it talks to, per bot that messages it, per room it sits
//! in. Each holds up to a window of rendered entries, so a hub bot that
//! many bots write to grew without bound for as long as it was busy. A
//! context left out is read again from the store by the session's next
//! turn ([`SessionTail::needs_load`]), which builds what memory held: the
//! same messages, so the prompt a provider cached stays the same.
//!
//! Whether a session is a room's is kept for the contexts left out too
//! (a paused bot still runs a room's turn, to say why it cannot take
//! part, and knows an input without its entry for a room's by that).

use std::collections::HashMap;
use std::collections::HashSet;

use botfleet_memory::SessionId;
use botfleet_memory::SessionKind;

use crate::engine::SessionTail;

/// The most session contexts one bot keeps in memory.
pub(crate) const MAX_TAILS: usize = 16;

/// A bot's session contexts, by session, with when each was last used.
#[derive(Debug, Default)]
pub(crate) struct Tails {
    held: HashMap<SessionId, (SessionTail, u64)>,
    /// Sessions known to be rooms' (their contexts held or left out).
    rooms: HashSet<SessionId>,
    /// Counts uses: the higher, the more recent.
    clock: u64,
}

impl Tails {
    /// Takes the context of `session` out: a run holds it while it runs,
    /// and it counts as one of the [`MAX_TAILS`] the bot keeps (see
    /// [`Tails::len`]). A session whose context is not held gets a new
    /// one to read, and the least recently used held one is left out if
    /// the bot holds as many as it may.
    pub(crate) fn take(&mut self, session: &SessionId) -> Option<SessionTail> {
        let taken = self.held.remove(session).map(|(tail, _)| tail);
        if taken.is_none() {
            self.shrink_to(MAX_TAILS - 1);
        }
        taken
    }

    /// Drops the context of `session` (its run crashed: what it held is
    /// not known to match the store).
    pub(crate) fn drop_session(&mut self, session: &SessionId) {
        self.held.remove(session);
    }

    /// Keeps the context a run gave back as the most recently used; the
    /// least recently used one is left out when more than [`MAX_TAILS`]
    /// are held.
    pub(crate) fn put(&mut self, session: SessionId, tail: SessionTail) {
        if tail
            .record
            .as_ref()
            .is_some_and(|r| r.key.kind == SessionKind::Group)
        {
            self.rooms.insert(session);
        }
        self.clock += 1;
        self.held.insert(session, (tail, self.clock));
        self.shrink_to(MAX_TAILS);
    }

    /// Leaves out the least recently used contexts until at most `n` are
    /// held.
    fn shrink_to(&mut self, n: usize) {
        while self.held.len() > n {
            let oldest = self
                .held
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(s, _)| *s);
            match oldest {
                Some(s) => {
                    self.held.remove(&s);
                }
                None => break,
            }
        }
    }

    /// Whether `session` is known to be a room's.
    pub(crate) fn is_room(&self, session: &SessionId) -> bool {
        self.rooms.contains(session)
    }

    /// How many contexts are held between turns (a running turn's is
    /// not among them: the bot counts it, `BotState::status`).
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
#[path = "bot_tails_tests.rs"]
mod tests;
