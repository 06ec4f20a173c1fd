//! A member turn that began before its room was given to more people
//! publishes nothing after that.
//!
//! A member's tools and context are chosen when its turn starts
//! (`GroupRegistry::member_runner`): in a room of one owner, its owner's
//! private surface and everything its session held. A change of members
//! or an owner change in fleet.toml can give the room to another user
//! while that turn runs; that user reads the timeline from the change's
//! notice on (`room_audience`). A reply the turn writes then was made
//! with what the new reader may not read, so it must not reach the room.
//!
//! Held, not re-run: the run's checkpoint records, with the member's
//! input, the room's latest audience change then (`Progress::era`, the
//! notice's timeline seq from `Store::room_audience_seq`). Once the room
//! was given to someone since:
//! - SendMessage refuses the member's message at call time
//!   (`super::publish::Kept::BeforeSharing`): the model is told it was not
//!   published, and a notice in its session keeps the text for its owner;
//! - the coordinator publishes none of the turn's deliveries it had not
//!   published before the change (a delivery written before it, read
//!   after it: [`GroupState::publish_live`], `complete_member`), and the
//!   end of the turn puts one timeline notice saying so (who reads the
//!   text where, no text), so the room and the member's owner know why.
//!
//! Re-running the member on the shared surface was the alternative; it
//! would hand the member a second input for one slot of the discussion
//! (a new nonce outside the run's `(run, round, slot)` scheme) and spend
//! a second turn on every such change. The discussion goes on: the next
//! members get their inputs after the change, with the shared surface.
//!
//! The turn's own entries after the change (its private tools' results,
//! its held drafts) are put below a second context cut once it ends
//! ([`GroupState::cut_after_private_turn`]), as the change cut what came
//! before: the member's next turn, on the shared surface, is not sent them.
//!
//! The test is the audience (a change after the input), not the surface
//! the turn actually got: a turn that only started after the change has
//! the shared surface, but its input, given before, stands below the
//! context cut the change made in the member's session.

use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::NewEntry;

use super::actor::GroupState;
use super::error::GroupError;
use crate::prompts::prompts;

/// Code of the notices of this file: the one keeping a refused message
/// in the member's session, and the timeline's.
pub const BEFORE_SHARING_CODE: &str = "room_message_before_sharing";

/// Whether a turn whose input was given when the room's latest audience
/// change was `era` (0: none) may no longer publish, the latest now being
/// `now` (`None`: none). `era` unknown (`None`): it may.
pub(crate) fn outlived(era: Option<i64>, now: Option<i64>) -> bool {
    era.is_some_and(|era| now.unwrap_or(0) > era)
}

impl GroupState {
    /// The room's latest audience change as stored now: its notice's
    /// timeline seq, 0 for none.
    pub(super) async fn audience_mark(&self) -> Result<i64, GroupError> {
        Ok(self
            .rt
            .store
            .room_audience_seq(&self.room.id)
            .await?
            .unwrap_or(0))
    }

    /// Whether the room was given to more people since the awaited
    /// member got its input: its turn publishes nothing more.
    pub(super) async fn input_outlived(&self) -> Result<bool, GroupError> {
        let era = self
            .current
            .as_ref()
            .and_then(|c| c.state.progress.as_ref())
            .and_then(|p| p.era);
        if era.is_none() {
            return Ok(false);
        }
        let now = self.rt.store.room_audience_seq(&self.room.id).await?;
        Ok(outlived(era, now))
    }

    /// The timeline notice saying that `count` messages `bot` sent in its
    /// turn on the run's message are not published ([`input_outlived`]).
    ///
    /// [`input_outlived`]: GroupState::input_outlived
    pub(super) fn outlived_notice(&self, bot: &BotId, trigger: i64, count: usize) -> NewEntry {
        let owner = self
            .room
            .members
            .iter()
            .position(|m| m == bot)
            .and_then(|i| self.owners.get(i))
            .unwrap_or(&self.room.owner);
        let text = prompts()
            .group_era_timeline
            .render(&[
                ("id", bot.as_str()),
                ("trigger", &trigger.to_string()),
                ("count", &count.to_string()),
                ("owner", owner.as_str()),
            ])
            .unwrap_or_default();
        NewEntry {
            id: EntryId::new_v7(),
            session: self.timeline,
            author: "system".into(),
            turn: None,
            kind: EntryKind::Notice {
                code: BEFORE_SHARING_CODE.into(),
                text,
                retry_turn: None,
            },
        }
    }
}

impl GroupState {
    /// A new context epoch in `session`, a member's own session of the
    /// room, after its turn that the room outlived ended: a summary
    /// covering everything before (prompts/group_now_shared.md, as the
    /// change's own cut) and the session's epoch moved past it. Nothing
    /// when the session is empty.
    pub(super) async fn cut_after_private_turn(
        &self,
        session: botfleet_memory::SessionId,
    ) -> Result<Vec<botfleet_memory::Mutation>, GroupError> {
        // the users other than its owner it is read by now
        let mut others: Vec<&str> = self
            .owners
            .iter()
            .filter(|u| **u != self.room.owner)
            .map(|u| u.as_str())
            .collect();
        others.sort_unstable();
        others.dedup();
        let readers = if others.is_empty() {
            "other people".to_owned()
        } else {
            others.join(", ")
        };
        let text = super::admin::now_shared_text(&self.room, &readers);
        Ok(super::given::cut(&self.rt.store, session, &text).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_outlives_its_input_only_after_a_later_audience_change() {
        // no change when the input was given, none since
        assert!(!outlived(Some(0), None));
        // the room was given to someone after the input
        assert!(outlived(Some(0), Some(7)));
        assert!(outlived(Some(7), Some(12)));
        // the change the input already came after
        assert!(!outlived(Some(7), Some(7)));
        // a checkpoint from before the mark: unknown, published
        assert!(!outlived(None, Some(7)));
    }
}
