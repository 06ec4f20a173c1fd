//! A member's replies reach the room while its turn runs.
//!
//! SendMessage writes a member's `Delivery` into its own session when the
//! tool call's outcome is recorded; the member's turn then goes on (most
//! often with one closing model call) before it ends. Publishing the
//! turn's replies only once it ended made every reply late by that call,
//! so the coordinator publishes each delivery as soon as it reads it
//! ([`GroupState::publish_live`]), and the end of the turn publishes only
//! what it has not.
//!
//! What stays as it was:
//! - once: each published reply's timeline id (derived from the member's
//!   turn and tool call, [`reply_entry`]) is listed in the run's checkpoint
//!   (`Progress::live`) in the transaction that publishes it, so a
//!   restart between the publication and the end of the turn neither
//!   publishes it again nor loses it;
//! - the limits: a running turn publishes at most what recording it will
//!   publish ([`Run::publishable`](super::run::Run::publishable)), the
//!   first messages of the turn, and the machine counts the turn once,
//!   when it ends, as before; who speaks next is decided then too;
//! - the members' inputs: a member's cursor moves when its turn is
//!   recorded, not before, so a checkpoint taken while the turn runs
//!   renders the same input again after a restart (same text, the
//!   admission a duplicate), and later inputs show each reply once, in
//!   timeline order;
//! - the reply cap SendMessage applies (`super::publish`) reads the
//!   replies of the run before the turn from the checkpoint's machine,
//!   which a live publication does not change.

use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::NewEntry;
use botfleet_memory::RoomRunStatus;
use botfleet_memory::SessionId;

use super::actor::GroupState;
use super::error::GroupError;

/// The timeline entry publishing `delivery`, a `Delivery` of `bot`'s turn
/// in its own session, to the timeline `timeline`: same text, card and
/// call, authored by the member, with an id derived from its turn and
/// call (`None` for an entry that is not a delivery of a turn).
pub(super) fn reply_entry(delivery: &Entry, timeline: SessionId, bot: &BotId) -> Option<NewEntry> {
    let (
        EntryKind::Delivery {
            text,
            card,
            call_id,
        },
        Some(turn),
    ) = (&delivery.kind, delivery.turn)
    else {
        return None;
    };
    Some(NewEntry {
        id: EntryId::derive(turn, call_id, "room"),
        session: timeline,
        author: bot.to_string(),
        turn: Some(turn),
        kind: EntryKind::Delivery {
            text: text.clone(),
            card: card.clone(),
            call_id: call_id.clone(),
        },
    })
}

impl GroupState {
    /// Publishes the replies of the awaited member turn read so far that
    /// are not published yet and that the limits let through, with the
    /// run's checkpoint listing them (one transaction). Does nothing
    /// without a turn awaited or anything new to publish, nor once the
    /// room was given to more people since the member got its input
    /// (`super::era`).
    pub(super) async fn publish_live(&mut self) -> Result<(), GroupError> {
        let Some(cur) = self.current.as_mut() else {
            return Ok(());
        };
        let (Some(wait), Some(progress)) = (cur.wait.as_ref(), cur.state.progress.as_ref()) else {
            return Ok(());
        };
        let delivered = u32::try_from(wait.deliveries().len()).unwrap_or(u32::MAX);
        let allowed = progress.run.publishable(delivered) as usize;
        let fresh: Vec<NewEntry> = wait
            .deliveries()
            .iter()
            .take(allowed)
            .filter_map(|d| reply_entry(d, self.timeline, &wait.bot))
            .filter(|e| !progress.live.contains(&e.id))
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        // the room was given to more people since the turn began: what it
        // writes now is held (`super::era`), its end says so
        if self.input_outlived().await? {
            return Ok(());
        }
        let Some(progress) = self
            .current
            .as_mut()
            .and_then(|c| c.state.progress.as_mut())
        else {
            return Ok(());
        };
        progress.live.extend(fresh.iter().map(|e| e.id));
        tracing::debug!(room = %self.room.id, replies = fresh.len(), "publishing a running member turn's replies");
        self.commit(fresh, RoomRunStatus::Running, Vec::new())
            .await?;
        Ok(())
    }
}
