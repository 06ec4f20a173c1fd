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
//!
//! The room's cap of [`Limits::max_replies`] replies per user message is
//! decided the same way ([`kept_back`]): the run's checkpoint, committed
//! with the member's input, holds the replies published before its turn,
//! and the coordinator publishes no more than the cap. Counted only after
//! the turn, the message past the cap was answered `delivered` and then
//! withheld (the model went on believing the room had read it); now it
//! is refused when sent ([`ROOM_FULL_CODE`]), and the run ends after the
//! turn with its `room_run_reply_limit` notice as before.

use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::RoomId;
use botfleet_memory::SessionId;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::TurnId;

use super::actor::RunState;
use super::era::BEFORE_SHARING_CODE;
use super::era::outlived;
use super::held::Held;
use super::run::Limits;
use crate::prompts::prompts;
use crate::prompts::quoted_name;

/// Code of the notice keeping a message a member sent past the room's
/// limit of messages per member turn.
pub const OVER_LIMIT_CODE: &str = "room_message_over_limit";

/// Code of the notice keeping a message a member sent once the room's
/// run had published its cap of replies.
pub const ROOM_FULL_CODE: &str = "room_message_over_reply_cap";

/// Why a member's message is not published though it has the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Its turn already sent `max_per_turn` messages.
    PerTurn {
        /// The room's limits.
        limits: Limits,
    },
    /// The run already has `max_replies` replies with the ones its turn
    /// sent.
    RoomFull {
        /// The room's limits.
        limits: Limits,
    },
    /// The room was given to more people since the member got its input:
    /// its turn began with what they may not read (`super::era`).
    BeforeSharing,
}

/// Whether the next message of a member that has the floor in `room` (its
/// input at `input_seq` of its `session`; `step`: the earlier calls of
/// the running step) is kept back, and why: the room was given to more
/// people since the member got its input (`super::era`), or past the
/// limit per member turn, or past the run's reply cap (the replies
/// published before the turn, from the run's checkpoint, plus the turn's
/// own). `None`: it is published.
pub async fn kept_back(
    store: &Store,
    session: SessionId,
    room: &str,
    input_seq: i64,
    step: &[Mutation],
) -> Result<Option<Kept>, StoreError> {
    let checkpoint = awaiting(store, room).await?;
    if let Some(c) = &checkpoint
        && c.era.is_some()
        && outlived(c.era, store.room_audience_seq(&c.room).await?)
    {
        return Ok(Some(Kept::BeforeSharing));
    }
    let sent = sent_in_turn(store, session, input_seq, step).await?;
    let (before, limits) = checkpoint.map_or_else(|| (0, limits()), |c| (c.replies, c.limits));
    if sent >= limits.max_per_turn {
        return Ok(Some(Kept::PerTurn { limits }));
    }
    if before.saturating_add(sent) >= limits.max_replies {
        return Ok(Some(Kept::RoomFull { limits }));
    }
    Ok(None)
}

/// What the running discussion of a room says about the member turn it
/// awaits, from the run's checkpoint.
struct Awaiting {
    /// The room.
    room: RoomId,
    /// The replies it published before the turn.
    replies: u32,
    /// The limits it runs under.
    limits: Limits,
    /// The room's latest audience change when the member got its input
    /// (`Progress::era`).
    era: Option<i64>,
}

/// The running discussion of `room` as its checkpoint was committed in
/// the transaction that gave the awaited member its input (runs are
/// sequential: the oldest open run, once started, is the one awaiting
/// it). `None` when none is found (no run in progress, or a checkpoint
/// that cannot be read): then the default limits apply.
async fn awaiting(store: &Store, room: &str) -> Result<Option<Awaiting>, StoreError> {
    let Ok(id) = RoomId::new(room) else {
        return Ok(None);
    };
    // one row by index, on this thread: cheaper than a hop to the
    // blocking pool and back, at every SendMessage in a room
    let run = store.oldest_open_room_run_now(&id)?;
    let progress = run.and_then(|r| {
        serde_json::from_value::<RunState>(r.state)
            .ok()
            .and_then(|s| s.progress)
    });
    Ok(progress.map(|p| Awaiting {
        room: id,
        replies: p.run.replies(),
        limits: p.run.limits(),
        era: p.era,
    }))
}

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

/// Keeps back `text`, sent by `bot` in call `call_id` of `turn` in its
/// turn in room `room` for the reason `kept` ([`kept_back`]): what the
/// model is told, and the notice keeping the text in `session`.
pub fn over_limit(
    session: SessionId,
    room: &str,
    bot: &BotId,
    turn: TurnId,
    call_id: &str,
    text: &str,
    kept: Kept,
) -> Held {
    let p = prompts();
    let (result, notice, code, limits) = match kept {
        Kept::PerTurn { limits } => (
            &p.group_over_limit_result,
            &p.group_over_limit_notice,
            OVER_LIMIT_CODE,
            limits,
        ),
        Kept::RoomFull { limits } => (
            &p.group_room_full_result,
            &p.group_room_full_notice,
            ROOM_FULL_CODE,
            limits,
        ),
        Kept::BeforeSharing => (
            &p.group_era_result,
            &p.group_era_notice,
            BEFORE_SHARING_CODE,
            limits(),
        ),
    };
    let per_turn = limits.max_per_turn.to_string();
    let replies = limits.max_replies.to_string();
    let result = result
        .render(&[
            ("room", &quoted_name(room)),
            ("max_per_turn", &per_turn),
            ("max_replies", &replies),
        ])
        .unwrap_or_default();
    let notice = notice
        .render(&[
            ("room", room),
            ("bot", bot.as_str()),
            ("max_per_turn", &per_turn),
            ("max_replies", &replies),
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
                code: code.into(),
                text: notice,
                retry_turn: None,
            },
        },
    }
}
