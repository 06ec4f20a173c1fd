//! What a member says when it is not its turn: held, never published.
//!
//! A member speaks to the room only in its turn of a discussion — while
//! the coordinator awaits the answer to the input it gave the member
//! ([`Floor::Yours`]). A member's session also runs turns no discussion
//! awaits: another bot's reply to a question the member sent from the
//! room comes back there, and a person may retry a member's failed turn.
//! Publishing what such a turn sends would let a model speak out of the
//! fixed order, past the limits of the discussion that ended (DESIGN.md
//! §7), so SendMessage holds it instead ([`Floor::NotYours`]):
//!
//! - the model is told it was not published, and why;
//! - a `room_message_held` notice in the member's session keeps the text
//!   for the member's owner (notices are not shown to the model);
//! - the member's next input in the room counts those notices and says
//!   they were not published.
//!
//! Whose turn it is is read from the store, not from the coordinator's
//! memory, so a coordinator still resuming after a restart gets the same
//! answer: the member has the floor iff the newest coordinator input in
//! its session is not yet answered by a turn that ended for good. Turns of
//! one bot run one at a time, so a delivery written on that answer is
//! read by the coordinator before the input is answered.

use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::NewEntry;
use botfleet_memory::SessionId;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::TurnId;

use super::member::answers;
use super::member::input_author;
use crate::prompts::prompts;

/// Code of the notice holding a message a member sent out of turn.
pub const HELD_CODE: &str = "room_message_held";
/// Entries read per page when looking back through a member's session.
const PAGE: i64 = 64;

/// Whether a member may speak to its room now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floor {
    /// A discussion awaits its turn: what it sends is its public message
    /// (within the room's limits).
    Yours,
    /// No discussion awaits it: what it sends is held.
    NotYours,
}

/// Whose turn it is in the member session `session` of room `room`.
pub async fn floor(store: &Store, session: SessionId, room: &str) -> Result<Floor, StoreError> {
    let author = input_author(room);
    // inputs answered by turns newer than the entries read so far
    let mut answered: Vec<i64> = Vec::new();
    let mut page = store.tail_entries(session, PAGE).await?;
    loop {
        for e in page.iter().rev() {
            if let EntryKind::TurnEnd { status, inputs, .. } = &e.kind
                && answers(*status)
            {
                answered.extend(inputs);
            }
            if matches!(e.kind, EntryKind::Event { .. }) && e.author == author {
                return Ok(if answered.contains(&e.seq) {
                    Floor::NotYours
                } else {
                    Floor::Yours
                });
            }
        }
        let oldest = page.first().map_or(1, |e| e.seq);
        if (page.len() as i64) < PAGE || oldest <= 1 {
            // never given an input: nobody asked it to speak
            return Ok(Floor::NotYours);
        }
        page = store
            .entries_between(session, (oldest - PAGE).max(1), oldest - 1)
            .await?;
    }
}

/// How many messages the member sent out of turn in `session` after
/// `answered` (the end of the turn that answered its last input), up to
/// its next input: that bound keeps a resumed run's input text the same.
pub(super) async fn count_held(
    store: &Store,
    session: SessionId,
    room: &str,
    answered: i64,
) -> Result<u32, StoreError> {
    let author = input_author(room);
    let mut after = answered;
    let mut held = 0;
    loop {
        let entries = store.entries_after(session, after, 1000).await?;
        for e in &entries {
            if matches!(e.kind, EntryKind::Event { .. }) && e.author == author {
                return Ok(held);
            }
            if is_held(e) {
                held += 1;
            }
        }
        match entries.last() {
            Some(last) if entries.len() == 1000 => after = last.seq,
            Some(_) | None => return Ok(held),
        }
    }
}

fn is_held(e: &Entry) -> bool {
    matches!(&e.kind, EntryKind::Notice { code, .. } if code == HELD_CODE)
}

/// A message held because it was not the member's turn.
#[derive(Debug)]
pub struct Held {
    /// What the model is told.
    pub result: String,
    /// The notice keeping the message in the member's session.
    pub notice: NewEntry,
}

/// Holds `text`, sent by `bot` in call `call_id` of `turn`, in its
/// session `session` of room `room`.
pub fn hold(
    session: SessionId,
    room: &str,
    bot: &BotId,
    turn: TurnId,
    call_id: &str,
    text: &str,
) -> Held {
    let p = prompts();
    let result = p
        .group_held_result
        .render(&[("room", room)])
        .unwrap_or_default();
    let notice = p
        .group_held_notice
        .render(&[("room", room), ("bot", bot.as_str()), ("text", text)])
        .unwrap_or_default();
    Held {
        result,
        notice: NewEntry {
            id: EntryId::derive(turn, call_id, "held"),
            session,
            author: bot.to_string(),
            turn: Some(turn),
            kind: EntryKind::Notice {
                code: HELD_CODE.into(),
                text: notice,
                retry_turn: None,
            },
        },
    }
}

#[cfg(test)]
#[path = "held_tests.rs"]
mod tests;
