//! A member turn that ended asking its owner to approve an action: not a
//! silence.
//!
//! In a room that is not shared, a member's side effect (a Shell command,
//! a file write) that review would have a person decide waits for its
//! owner's approval as it would in a DM (`tools::gate`); the discussion
//! does not wait. A turn that published nothing then did not choose to
//! stay quiet: the room's end said "round 1 passed in silence" and
//! listed the member as `passed`, with no word of the approval (QA,
//! 2026-12-06). The approvals table tells the coordinator, after a
//! restart too.

use botfleet_memory::ApprovalStatus;
use botfleet_memory::BotId;
use botfleet_memory::SessionId;
use botfleet_memory::TurnId;

use super::actor::GroupState;
use super::error::GroupError;

impl GroupState {
    /// Whether `turn` of the member `bot`, in its session `session` of
    /// the room, asked for an approval that is still waiting for its
    /// owner. A bot that never asked for one costs no read
    /// (`Store::open_approvals`).
    pub(super) async fn asked_approval(
        &self,
        bot: &BotId,
        session: SessionId,
        turn: Option<TurnId>,
    ) -> Result<bool, GroupError> {
        let Some(turn) = turn else {
            return Ok(false);
        };
        let open = self.rt.store.open_approvals(bot).await?;
        Ok(open.iter().any(|a| {
            a.turn == Some(turn) && a.session == session && a.status == ApprovalStatus::Pending
        }))
    }
}
