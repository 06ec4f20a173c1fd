//! What a room's audience reads of it bounds what a member is shown.
//!
//! A user who gained the room with a change of members (their first bot
//! joined) reads its timeline from that change's notice on
//! (`Store::room_visible_from`), so their bots' inputs start there too —
//! a bot added to alice's room is not handed what was said before it
//! joined (perhaps answered from her private memory).
//!
//! Every other member starts there too, whoever owns it: the change
//! began a new context epoch in each member's session (nothing before it
//! is carried over), and what a member is shown of the room's earlier
//! era it could repeat in the shared room, where the new user reads it.
//! Without this floor, alice's bot whose last turn came before her
//! private discussion was handed that discussion as "new public
//! messages" in its first turn after bob joined (QA, 2026-12-04).

use super::actor::GroupState;
use super::error::GroupError;
use super::member::Cursor;

impl GroupState {
    /// `cursor` of the member at `member` (an index into the run's
    /// members), moved up to where the room's current audience starts
    /// reading it: its owner's first seq, and `mark`, the room's latest
    /// change that gave it to another user (0: none;
    /// [`GroupState::audience_mark`], read once for the input and kept
    /// as its era).
    pub(super) async fn within_audience(
        &self,
        member: usize,
        cursor: Cursor,
        mark: i64,
    ) -> Result<Cursor, GroupError> {
        let latest = (mark > 0).then_some(mark);
        let own = match self.owners.get(member) {
            Some(owner) if *owner != self.room.owner => {
                self.rt
                    .store
                    .room_visible_from(&self.room.id, owner)
                    .await?
            }
            _ => None,
        };
        let Some(from) = latest.max(own) else {
            return Ok(cursor);
        };
        Ok(Cursor {
            user: cursor.user.max(from - 1),
            delivery: cursor.delivery.max(from - 1),
            answered: cursor.answered,
        })
    }
}
