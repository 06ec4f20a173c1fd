//! What a member's owner reads of the room bounds what the member is
//! shown: a user who gained the room with a change of members (their
//! first bot joined) reads its timeline from that change's notice on
//! (`Store::room_visible_from`), so their bots' inputs start there too —
//! a bot added to alice's room is not handed what was said before it
//! joined (perhaps answered from her private memory).

use super::actor::GroupState;
use super::error::GroupError;
use super::member::Cursor;

impl GroupState {
    /// `cursor` of the member at `member` (an index into the run's
    /// members), moved up to where its owner starts reading the room.
    pub(super) async fn within_audience(
        &self,
        member: usize,
        cursor: Cursor,
    ) -> Result<Cursor, GroupError> {
        let Some(owner) = self.owners.get(member) else {
            return Ok(cursor);
        };
        if *owner == self.room.owner {
            return Ok(cursor);
        }
        let Some(from) = self
            .rt
            .store
            .room_visible_from(&self.room.id, owner)
            .await?
        else {
            return Ok(cursor);
        };
        Ok(Cursor {
            user: cursor.user.max(from - 1),
            delivery: cursor.delivery.max(from - 1),
            answered: cursor.answered,
        })
    }
}
