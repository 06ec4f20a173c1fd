//! The deterministic heart of a group room: one run (the work one user
//! message starts) as a pure state machine. No I/O, no clock: the
//! [`GroupActor`](super::GroupActor) asks [`Run::advance`] who speaks next,
//! runs that member's turn, and feeds back [`Turn::Spoke`] or
//! [`Turn::Skipped`] with [`Run::record`]. The state serializes into the
//! run's checkpoint, so a restarted host continues exactly where it was.
//!
//! Rules (DESIGN.md §7, issue 4 part 4):
//! - the selected members run one at a time in the room's fixed order,
//!   round after round;
//! - a member runs only if the run has public messages it has not seen
//!   that someone else wrote (the user's message counts for everyone in
//!   the first round); otherwise it is skipped without waking it — waking
//!   a bot to read nothing new would cost a model call and could not
//!   change the outcome;
//! - per user message: at most [`Limits::max_rounds`] rounds and
//!   [`Limits::max_replies`] public replies; per member turn at most
//!   [`Limits::max_per_turn`] of its messages are published (the rest are
//!   withheld and reported);
//! - a full round in which nobody published anything ends the run; if a
//!   member's turn in it failed, the end says so rather than calling it
//!   silence ([`End::FailedRound`]); if no member had anything new to
//!   read in it (so none was offered a turn), the end says the discussion
//!   ran out of news after the round before, not that a round passed in
//!   silence ([`Run::describe_end`]);
//! - a member whose turn failed (or was cancelled) takes no more turns in
//!   the run: what failed it (a spent budget, a provider down past its
//!   retries, a crash loop) would fail it again in the next round, and
//!   the room's notice already tells people to mention it in a new
//!   message.

use serde::Deserialize;
use serde::Serialize;

use crate::prompts::prompts;

/// Hard limits of a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Most members of a room (creating one with more is refused).
    pub max_members: usize,
    /// Most rounds per user message.
    pub max_rounds: u32,
    /// Most public replies per user message.
    pub max_replies: u32,
    /// Most published messages per member turn.
    pub max_per_turn: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_members: 6,
            max_rounds: 3,
            max_replies: 10,
            max_per_turn: 2,
        }
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum End {
    /// Nobody was selected (the message only named unknown members).
    NoMembers,
    /// A full round passed in which nobody spoke.
    SilentRound {
        /// The silent round (1-based).
        round: u32,
    },
    /// A full round passed in which nobody spoke, and some of the member
    /// turns in it failed (or were cancelled): not a silence.
    FailedRound {
        /// The round (1-based).
        round: u32,
        /// Member turns of the round that failed.
        failed: u32,
        /// Member turns run in the round.
        turns: u32,
    },
    /// The last allowed round ended.
    RoundLimit,
    /// The reply limit was reached.
    ReplyLimit,
}

/// What the coordinator does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run this member's turn.
    Run {
        /// Index of the member in the room's member list.
        member: usize,
        /// The round (1-based).
        round: u32,
        /// Position of the member among the selected ones (0-based).
        slot: usize,
    },
    /// The run is over.
    Done(End),
}

/// How a member's turn went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// It delivered this many messages (0 counts as a skip).
    Spoke(u32),
    /// It delivered nothing.
    Skipped,
    /// It failed or was cancelled after delivering this many messages
    /// (they count as if it had spoken).
    Failed(u32),
    /// It took no turn: it takes none any more (removed from the fleet's
    /// config, a stopped subagent, withdrawn by its owner). The machine
    /// moves on as for [`Turn::Skipped`], but the member did not pass:
    /// [`MemberOutcome`] does not count it as answering.
    Absent,
    /// It published nothing: auto-review refused what it tried to say (a
    /// room's message is refused, not asked about: `tools::gate`). The
    /// machine moves on as for [`Turn::Skipped`], but the member did not
    /// pass, and a round with nothing else said is not a silence.
    Held,
    /// It published nothing and asked its owner to approve an action (a
    /// side effect review would have a person decide): it did not pass,
    /// and a round with nothing else said is not a silence. What it says
    /// once the action runs is held for its next turn (`super::held`).
    Asked,
}

/// How a member's part in a run went, as clients read it (the room's
/// `turn_end` entry, `botfleet group send`'s exit status): whether a
/// discussion with no public reply had members that chose to say
/// nothing or only turns that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberOutcome {
    /// It published at least one reply (whatever failed after).
    Spoke,
    /// A turn of it failed or was cancelled, and it published nothing.
    Failed,
    /// It ran its turns and published nothing: it had nothing to add.
    Passed,
    /// It ran no turn: nothing new to answer when its turn came, or it
    /// takes no turns ([`Turn::Absent`]).
    NoTurn,
    /// It tried to speak and published nothing: auto-review refused its
    /// messages ([`Turn::Held`]).
    Held,
    /// It published nothing and waits for its owner to approve an action
    /// ([`Turn::Asked`]).
    AwaitingApproval,
}

/// What happened to a member's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recorded {
    /// Messages published to the timeline (the first ones of the turn).
    pub published: u32,
    /// Messages kept back by the limits.
    pub withheld: u32,
}

/// A member's progress within a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Slot {
    /// Index in the room's member list.
    member: usize,
    /// Length of the public log when it last ran (it has seen up to there).
    seen: usize,
    /// Turns it ran.
    turns: u32,
    /// Messages of it that were published.
    published: u32,
    /// Its turn failed, or it could take none ([`Slot::absent`]): it takes
    /// no more turns in this run.
    #[serde(default)]
    out: bool,
    /// Turns it ran to their end without publishing (0 in checkpoints
    /// written before: a run resumed across the upgrade may call such a
    /// member's part [`MemberOutcome::NoTurn`]).
    #[serde(default)]
    passed: u32,
    /// It could take no turn when its came (no longer in the fleet's
    /// config, a stopped subagent, or taken out of the room): it takes no
    /// more in this run, and the end names it.
    #[serde(default)]
    absent: bool,
    /// Its turns whose messages auto-review refused, none published
    /// ([`Turn::Held`]; 0 in checkpoints written before).
    #[serde(default)]
    held: u32,
    /// Its turns that published nothing and asked for an approval
    /// ([`Turn::Asked`]; 0 in checkpoints written before).
    #[serde(default)]
    asked: u32,
}

/// One run's state. See the module docs for the rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    limits: Limits,
    slots: Vec<Slot>,
    /// Round (0-based).
    round: u32,
    /// Position in `slots` of the member whose turn is next.
    position: usize,
    /// Whether anyone published in the current round.
    spoke_in_round: bool,
    /// Public messages of the run in order: `None` is the user's message,
    /// `Some(i)` a message of member `i`.
    log: Vec<Option<usize>>,
    /// Set once the run is over.
    end: Option<End>,
    /// Member turns run in the current round.
    #[serde(default)]
    round_turns: u32,
    /// Member turns of the current round that failed.
    #[serde(default)]
    round_failed: u32,
    /// Member turns of the whole run that failed.
    #[serde(default)]
    failed: u32,
    /// Member turns of the current round whose messages auto-review
    /// refused ([`Turn::Held`]).
    #[serde(default)]
    round_held: u32,
    /// Member turns of the current round that asked for an approval and
    /// published nothing ([`Turn::Asked`]).
    #[serde(default)]
    round_asked: u32,
}

impl Run {
    /// A run over `selected` (indices of the room's members; run in
    /// ascending order, duplicates dropped) after a user message.
    pub fn new(mut selected: Vec<usize>, limits: Limits) -> Self {
        selected.sort_unstable();
        selected.dedup();
        let end = if selected.is_empty() {
            Some(End::NoMembers)
        } else {
            None
        };
        Self {
            limits,
            slots: selected
                .into_iter()
                .map(|member| Slot {
                    member,
                    seen: 0,
                    turns: 0,
                    published: 0,
                    out: false,
                    passed: 0,
                    absent: false,
                    held: 0,
                    asked: 0,
                })
                .collect(),
            round: 0,
            position: 0,
            spoke_in_round: false,
            log: vec![None],
            end,
            round_turns: 0,
            round_failed: 0,
            failed: 0,
            round_held: 0,
            round_asked: 0,
        }
    }

    /// Who runs next, skipping members with nothing new to read (those
    /// skips are part of the state, so calling it again is stable).
    pub fn advance(&mut self) -> Next {
        loop {
            if let Some(end) = self.end {
                return Next::Done(end);
            }
            let Some(slot) = self.slots.get(self.position) else {
                // unreachable by construction: `finish_slot` wraps positions
                self.end = Some(End::RoundLimit);
                continue;
            };
            if self.has_new(slot) {
                return Next::Run {
                    member: slot.member,
                    round: self.round + 1,
                    slot: self.position,
                };
            }
            self.finish_slot();
        }
    }

    /// Records the turn of the member [`Run::advance`] returned and moves
    /// on. Without a pending member (the run is over) it does nothing.
    pub fn record(&mut self, turn: Turn) -> Recorded {
        if self.end.is_some() {
            return Recorded::default();
        }
        let (delivered, failed, ran) = match turn {
            Turn::Spoke(n) => (n, false, true),
            Turn::Skipped | Turn::Held | Turn::Asked => (0, false, true),
            Turn::Failed(n) => (n, true, true),
            Turn::Absent => (0, false, false),
        };
        let held = turn == Turn::Held;
        let asked = turn == Turn::Asked;
        // a member that could not take its turn ran none: a round of only
        // such members is not one that "passed in silence"
        if ran {
            self.round_turns += 1;
        }
        if failed {
            self.round_failed += 1;
            self.failed += 1;
        }
        if held {
            self.round_held += 1;
        }
        if asked {
            self.round_asked += 1;
        }
        let published = self.publishable(delivered);
        let Some(slot) = self.slots.get_mut(self.position) else {
            return Recorded::default();
        };
        slot.turns += 1;
        slot.published += published;
        slot.out |= failed || !ran;
        slot.absent |= !ran;
        if held {
            slot.held += 1;
        } else if asked {
            slot.asked += 1;
        } else if ran && !failed && published == 0 {
            slot.passed += 1;
        }
        for _ in 0..published {
            self.log.push(Some(slot.member));
        }
        slot.seen = self.log.len();
        if published > 0 {
            self.spoke_in_round = true;
        }
        self.finish_slot();
        Recorded {
            published,
            withheld: delivered - published,
        }
    }

    /// How many of the first `delivered` messages of the pending member's
    /// turn [`Run::record`] publishes: within the limit per member turn
    /// and the run's reply cap (none once the run is over). The
    /// coordinator publishes a turn's messages while it runs, as they come,
    /// up to this many, so the timeline and the machine agree.
    pub fn publishable(&self, delivered: u32) -> u32 {
        if self.end.is_some() {
            return 0;
        }
        let room_left = self.limits.max_replies.saturating_sub(self.replies());
        delivered.min(self.limits.max_per_turn).min(room_left)
    }

    /// Whether the log has messages after what `slot` saw, by someone else
    /// (never for a member whose turn failed).
    fn has_new(&self, slot: &Slot) -> bool {
        !slot.out
            && self
                .log
                .iter()
                .skip(slot.seen)
                .any(|author| *author != Some(slot.member))
    }

    fn finish_slot(&mut self) {
        self.position += 1;
        if self.replies() >= self.limits.max_replies {
            self.end = Some(End::ReplyLimit);
            return;
        }
        if self.position < self.slots.len() {
            return;
        }
        if !self.spoke_in_round {
            let round = self.round + 1;
            self.end = Some(if self.round_failed > 0 {
                End::FailedRound {
                    round,
                    failed: self.round_failed,
                    turns: self.round_turns,
                }
            } else {
                End::SilentRound { round }
            });
            return;
        }
        self.round += 1;
        self.position = 0;
        self.spoke_in_round = false;
        self.round_turns = 0;
        self.round_failed = 0;
        self.round_held = 0;
        self.round_asked = 0;
        if self.round >= self.limits.max_rounds {
            self.end = Some(End::RoundLimit);
        }
    }

    /// Member turns of the run that failed (or were cancelled).
    pub fn failed(&self) -> u32 {
        self.failed
    }

    /// Public replies published so far.
    pub fn replies(&self) -> u32 {
        self.log.len().saturating_sub(1) as u32
    }

    /// The round in progress (1-based), or the last one once over.
    pub fn round(&self) -> u32 {
        (self.round + 1).min(self.limits.max_rounds)
    }

    /// Why the run ended, once it has.
    pub fn end(&self) -> Option<End> {
        self.end
    }

    /// Members in the run (indices in the room's member list).
    pub fn members(&self) -> Vec<usize> {
        self.slots.iter().map(|s| s.member).collect()
    }

    /// Turns each selected member ran, as `(member, turns)`.
    pub fn turns(&self) -> Vec<(usize, u32)> {
        self.slots.iter().map(|s| (s.member, s.turns)).collect()
    }

    /// How each selected member's part went so far, as `(member,
    /// outcome)` in speaking order ([`MemberOutcome`]).
    pub fn outcomes(&self) -> Vec<(usize, MemberOutcome)> {
        self.slots
            .iter()
            .map(|s| {
                let outcome = if s.published > 0 {
                    MemberOutcome::Spoke
                } else if s.out && !s.absent {
                    MemberOutcome::Failed
                } else if s.held > 0 {
                    MemberOutcome::Held
                } else if s.asked > 0 {
                    MemberOutcome::AwaitingApproval
                } else if s.passed > 0 {
                    MemberOutcome::Passed
                } else {
                    MemberOutcome::NoTurn
                };
                (s.member, outcome)
            })
            .collect()
    }

    /// Selected members that could take no turn when theirs came
    /// (indices in the room's member list), in speaking order.
    pub fn absent(&self) -> Vec<usize> {
        self.slots
            .iter()
            .filter(|s| s.absent)
            .map(|s| s.member)
            .collect()
    }

    /// Selected members whose messages auto-review refused and that
    /// published nothing ([`MemberOutcome::Held`]), in speaking order.
    pub fn held(&self) -> Vec<usize> {
        self.outcomes()
            .into_iter()
            .filter(|(_, o)| *o == MemberOutcome::Held)
            .map(|(m, _)| m)
            .collect()
    }

    /// Selected members that published nothing and wait for their owner
    /// to approve an action ([`MemberOutcome::AwaitingApproval`]), in
    /// speaking order.
    pub fn awaiting_approval(&self) -> Vec<usize> {
        self.outcomes()
            .into_iter()
            .filter(|(_, o)| *o == MemberOutcome::AwaitingApproval)
            .map(|(m, _)| m)
            .collect()
    }

    /// Authors of the public messages: `None` is the user's message.
    pub fn log(&self) -> &[Option<usize>] {
        &self.log
    }

    /// The limits the run applies.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// One line for people: why the run stopped with `end`. A round that
    /// ended with nobody speaking is called silent only if members were
    /// offered a turn in it and all passed; when nobody had anything new
    /// to answer (e.g. the one member addressed spoke in round 1 and has
    /// only its own messages to read), no turn ran, and saying the round
    /// "passed in silence" would suggest members chose to stay quiet.
    pub fn describe_end(&self, end: End) -> String {
        if let End::SilentRound { round } = end
            && (self.round_held > 0 || self.round_asked > 0)
        {
            // members tried to speak, or wait for an approval: not a
            // silence (the caller names them)
            return prompts()
                .group_refused_round
                .render(&[
                    ("round", &round.to_string()),
                    ("held", &self.round_held.to_string()),
                    ("turns", &self.round_turns.to_string()),
                ])
                .unwrap_or_default();
        }
        if let End::SilentRound { round } = end
            && self.round_turns == 0
        {
            // round 1 with no turn: every member addressed was absent
            if round == 1 {
                return prompts().group_no_turn.render(&[]).unwrap_or_default();
            }
            return prompts()
                .group_no_news
                .render(&[("round", &(round - 1).to_string())])
                .unwrap_or_default();
        }
        end.describe(&self.limits)
    }
}

impl End {
    /// One line for people: why the discussion stopped.
    pub fn describe(self, limits: &Limits) -> String {
        match self {
            End::NoMembers => {
                "nobody was addressed: no member that takes turns matches the mentions".into()
            }
            End::SilentRound { round } => {
                format!("nobody had more to say (round {round} passed in silence)")
            }
            End::FailedRound {
                round,
                failed,
                turns,
            } => prompts()
                .group_failed_round
                .render(&[
                    ("round", &round.to_string()),
                    ("failed", &failed.to_string()),
                    ("turns", &turns.to_string()),
                ])
                .unwrap_or_default(),
            End::RoundLimit => format!("the {}-round limit was reached", limits.max_rounds),
            End::ReplyLimit => format!("the {}-reply limit was reached", limits.max_replies),
        }
    }

    /// Machine-readable code.
    pub fn code(self) -> &'static str {
        match self {
            End::NoMembers => "no_members",
            End::SilentRound { .. } => "silent_round",
            End::FailedRound { .. } => "failed_round",
            End::RoundLimit => "round_limit",
            End::ReplyLimit => "reply_limit",
        }
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
