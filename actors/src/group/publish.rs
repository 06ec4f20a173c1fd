//! How many messages a member's turn may still publish, decided when it
//! calls SendMessage rather than after its turn.
//!
//! The room publishes at most [`Limits::max_per_turn`] messages per member
//! turn. The coordinator counts a turn's messages once the turn has ended
//! (`run.rs`), which is too late for the model: told `delivered` for a
//! message past the limit, it went on for the rest of its turn believing
//! the room had read it. So SendMessage counts first, the same way the
//! coordinator will (`member.rs`): the member's deliveries after the input
//! it answers — stored ones, from earlier steps or from an interrupted
//! turn that handed the input on — plus those of earlier calls of the
//! same step, run but not yet committed (`ToolContext::step_effects`: the
//! calls of one step run one after another, in memory). A message past
//! the limit is not written as a delivery (so the coordinator never sees
//! it): the model is told it was not published, and a
//! [`OVER_LIMIT_CODE`] notice in the member's session keeps the text for
//! the member's owner, as a held message's does ([`super::held`]).

use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::SessionId;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::TurnId;

use super::held::Held;
use super::run::Limits;
use crate::prompts::prompts;
use crate::prompts::quoted_name;

/// Code of the notice keeping a message a member sent past the room's
/// limit of messages per member turn.
pub const OVER_LIMIT_CODE: &str = "room_message_over_limit";

/// The limits member turns run under: every room runs with the default
/// ones (the coordinator's, `actor.rs`).
pub fn limits() -> Limits {
    Limits::default()
}

/// How many messages the member has sent to the room in the turn that
/// answers its input at `input_seq` of `session`: its deliveries after the
/// input in the store, and those in `step` (earlier calls of the running
/// step, not yet committed).
pub async fn sent_in_turn(
    store: &Store,
    session: SessionId,
    input_seq: i64,
    step: &[Mutation],
) -> Result<u32, StoreError> {
    let stored = store
        .entries_between(session, input_seq.saturating_add(1), i64::MAX)
        .await?
        .iter()
        // what the coordinator counts (`MemberWait::feed`)
        .filter(|e| matches!(e.kind, EntryKind::Delivery { .. }) && e.turn.is_some())
        .count();
    let pending = step
        .iter()
        .flat_map(Mutation::within_limits)
        .filter(|m| {
            matches!(m, Mutation::Append(e)
                if e.session == session && matches!(e.kind, EntryKind::Delivery { .. }))
        })
        .count();
    Ok(u32::try_from(stored + pending).unwrap_or(u32::MAX))
}

/// Keeps back `text`, sent by `bot` in call `call_id` of `turn` after its
/// turn in room `room` already sent `limits.max_per_turn` messages: what
/// the model is told, and the notice keeping the text in `session`.
pub fn over_limit(
    session: SessionId,
    room: &str,
    bot: &BotId,
    turn: TurnId,
    call_id: &str,
    text: &str,
    limits: &Limits,
) -> Held {
    let p = prompts();
    let per_turn = limits.max_per_turn.to_string();
    let result = p
        .group_over_limit_result
        .render(&[("room", &quoted_name(room)), ("max_per_turn", &per_turn)])
        .unwrap_or_default();
    let notice = p
        .group_over_limit_notice
        .render(&[
            ("room", room),
            ("bot", bot.as_str()),
            ("max_per_turn", &per_turn),
            ("text", text),
        ])
        .unwrap_or_default();
    Held {
        result,
        notice: NewEntry {
            id: EntryId::derive(turn, call_id, "over_limit"),
            session,
            author: bot.to_string(),
            turn: Some(turn),
            kind: EntryKind::Notice {
                code: OVER_LIMIT_CODE.into(),
                text: notice,
                retry_turn: None,
            },
        },
    }
}
