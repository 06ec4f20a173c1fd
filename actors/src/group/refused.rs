//! A member turn whose messages auto-review refused: not a silence.
//!
//! In a room shared with other users a member's SendMessage is reviewed
//! (the `delivery` surface), and one review would ask a person about is
//! refused rather than asked (a discussion does not wait for approvals:
//! `tools::gate`). The model is told why and may say it otherwise; if its
//! turn ends having published nothing, the member did not choose to stay
//! quiet, and the room's end must not say its round "passed in silence"
//! (QA, 2026-12-05). The review log (`reviews`, written by the gate as
//! it refuses) tells the coordinator so, after a restart too.

use botfleet_memory::BotId;
use botfleet_memory::SessionId;
use botfleet_memory::TurnId;

use super::actor::GroupState;
use super::error::GroupError;

/// How many of the bot's newest review rows are read: a turn is bounded
/// by its step limit, and every refused call of it is logged there.
const REVIEWS_READ: i64 = 200;

impl GroupState {
    /// Whether auto-review, enforcing, refused a SendMessage of `turn` in
    /// `session` (the member `bot`'s session of the room).
    pub(super) async fn review_refused(
        &self,
        bot: &BotId,
        session: SessionId,
        turn: Option<TurnId>,
    ) -> Result<bool, GroupError> {
        let Some(turn) = turn else {
            return Ok(false);
        };
        let reviews = self.rt.store.reviews_of_bot(bot, REVIEWS_READ).await?;
        Ok(reviews.iter().any(|r| {
            r.turn == Some(turn)
                && r.session == session
                && r.tool == "SendMessage"
                && r.mode == "enforce"
                && matches!(r.decision.as_str(), "ask" | "deny")
        }))
    }
}
