//! Whether a past discussion of a room ran with the shared surface, for
//! a retry of a member's turn: a member turn's tools follow the
//! discussion the coordinator runs now (`GroupRegistry::member_runner`),
//! so a retried turn of an earlier discussion of another user's message
//! got the owner's private tools once the room was no longer shared or
//! the host had restarted (audit, 2026-12-07).

use botfleet_memory::RoomRecord;
use botfleet_memory::Store;

use super::actor::RunState;
use super::error::GroupError;

/// Whether the discussion of the message at `trigger_seq` in `room` ran
/// with the shared surface: its message was posted to a shared room or
/// by a user other than the room's owner ([`RunState::shared`]). `None`
/// when its run is not stored, or its checkpoint cannot be read.
pub async fn discussion_was_shared(
    store: &Store,
    room: &RoomRecord,
    trigger_seq: i64,
) -> Result<Option<bool>, GroupError> {
    let Some(record) = store.get_room_run(&room.id, trigger_seq).await? else {
        return Ok(None);
    };
    let Ok(state) = serde_json::from_value::<RunState>(record.state) else {
        return Ok(None);
    };
    if state.shared {
        return Ok(Some(true));
    }
    let timeline = room.timeline().id();
    let message = store
        .entries_after(timeline, trigger_seq - 1, 1)
        .await?
        .into_iter()
        .find(|e| e.seq == trigger_seq);
    Ok(Some(
        message.is_some_and(|m| m.author != room.owner.as_str()),
    ))
}
