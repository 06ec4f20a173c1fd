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
//! its session is not yet answered by a turn that ended for good, nor
//! closed by the coordinator (a [`SKIPPED_CODE`] notice: the discussion
//! went on without the member, removed from the fleet's config while it
//! had the floor). Turns of one bot run one at a time, so a delivery
//! written on that answer is read by the coordinator before the input is
//! answered. And the floor is the turn's that took that input (SendMessage
//! checks its turn's inputs): a turn over a bot's reply that was still
//! running when the input came had not read the room, and spoke in the
//! member's place, its message taken for the member's reply and the
//! member's own turn then refused as past the limit per member turn.

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
use crate::prompts::quoted_name;

/// Code of the notice holding a message a member sent out of turn.
pub const HELD_CODE: &str = "room_message_held";

/// Code of the notice closing a member's input that the discussion no
/// longer awaits (the member was removed while it had the floor).
pub const SKIPPED_CODE: &str = "room_turn_skipped";

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
///
/// Reads the newest coordinator input and the turn ends and notices after
/// it (one indexed read, on the calling thread: this runs in every member's SendMessage), not
/// the session's tail.
pub fn floor(store: &Store, session: SessionId, room: &str) -> Result<Floor, StoreError> {
    Ok(match floor_input(store, session, room)? {
        Some(_) => Floor::Yours,
        None => Floor::NotYours,
    })
}

/// The seq of the coordinator input the member answers when it has the
/// floor ([`Floor::Yours`]), `None` when it does not: what it delivered
/// after that seq is what its turn sent to the room so far.
pub fn floor_input(
    store: &Store,
    session: SessionId,
    room: &str,
) -> Result<Option<i64>, StoreError> {
    let Some(since) = store.since_newest_event_now(session, &input_author(room))? else {
        // never given an input: nobody asked it to speak
        return Ok(None);
    };
    // one read: the turn ends and notices after the input
    let answered = since.after.iter().any(|e| {
        matches!(&e.kind, EntryKind::TurnEnd { status, inputs, .. }
            if answers(*status) && inputs.contains(&since.seq))
            || matches!(&e.kind, EntryKind::Notice { code, .. } if code == SKIPPED_CODE)
    });
    Ok((!answered).then_some(since.seq))
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
    let notices = store
        .notices_before_next_event(session, answered, &input_author(room))
        .await?;
    Ok(notices.iter().filter(|e| is_held(e)).count() as u32)
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
///
/// `awaited`: a discussion awaits the member, in the turn that takes its
/// input (not this one, which answers other inputs of the session).
pub fn hold(
    session: SessionId,
    room: &str,
    bot: &BotId,
    (turn, call_id): (TurnId, &str),
    text: &str,
    awaited: bool,
) -> Held {
    let p = prompts();
    let result = if awaited {
        &p.group_held_next_result
    } else {
        &p.group_held_result
    }
    .render(&[("room", &quoted_name(room))])
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
