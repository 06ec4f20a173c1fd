//! What of a session a turn's context may hold ([`ContextBound`]), split
//! from `tail.rs`.

use std::collections::HashMap;
use std::collections::HashSet;

use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;

/// What of a session a turn's context may hold: the entries up to its
/// last input, its own entries after that, those of earlier turns over the
/// same inputs (a turn interrupted by a person's message, whose inputs went
/// back to the queue; a failed turn retried), and those of prior turns over
/// inputs it sees (up to its last input, none of its own: the turn before
/// it, still working when this one's input arrived): what they did is
/// done, and a context without it would do it again. And a turn that ended
/// before this one began over later inputs, none of this one's, for good
/// (completed, undelivered or cancelled), with those inputs: a message
/// routed after a later one of its session (each sender routes what it
/// admitted after its own commit returns) is answered by the turn after
/// the later one's, and must see what the bot said there. Never a message
/// admitted after its inputs that no turn ended over for good, nor what a
/// turn over one did: that belongs to the turn that claims it. And what
/// it must hold: its inputs, from the first on, whatever the window.
/// Nor an earlier input still waiting in the inbox, not the turn's own,
/// nor what a turn over one did ([`ContextBound::without_pending`]): a
/// message routed after a later one is still unclaimed when the later
/// one's turn reads the session from the store, and the model answered it
/// there, then again in its own turn.
///
/// (A context rebuilt from the store — a turn resumed after a crash, a
/// new turn after a restart — left out what the turn before it wrote
/// after its input arrived: that turn's call got a made-up "no result
/// recorded" and its reply was gone, so the model answered its message
/// again. And a turn over a bot's message that reached its bot after a
/// later message of the same session had had its turn stopped at its own
/// input: the model answered without seeing what it had just said.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContextBound {
    /// Seq of the turn's first input in the session.
    pub(crate) from: i64,
    /// Seq of the turn's last input in the session.
    pub(crate) upto: i64,
    /// The turn, once it has entries of its own (a resumed turn, or a
    /// reload in the middle of one).
    pub(crate) own: Option<TurnId>,
    /// Seqs of the turn's inputs in the session.
    inputs: Vec<i64>,
    /// Seqs of the session's inputs still waiting in the inbox, none of
    /// the turn's own (`without_pending`).
    pending: Vec<i64>,
}

/// The other turns a bound lets in, by their ends among the entries read.
pub(super) struct Others {
    /// Earlier turns over some of the turn's inputs.
    same: HashSet<TurnId>,
    /// Prior turns over inputs the turn sees (none of its own).
    prior: HashSet<TurnId>,
    /// Turns over inputs after the turn's last (none of its own) that
    /// ended for good.
    later: HashSet<TurnId>,
    /// The inputs of the turns in `later`: let in with them.
    later_inputs: HashSet<i64>,
    /// The inputs of each turn in `same`, `prior` and `later` (their
    /// `turn_end`s).
    inputs: HashMap<TurnId, Vec<i64>>,
    /// Earlier runs over an input that waits in the inbox again (none of
    /// the turn's own): left out with it.
    waiting: HashSet<TurnId>,
}

/// Whether a turn that ended with `status` is done with its inputs for
/// good: no other turn will claim them. An interrupted turn's inputs go
/// back to the queue and a failed turn's may be retried: the turn that
/// takes them again answers them.
fn done_with_inputs(status: TurnStatus) -> bool {
    match status {
        TurnStatus::Completed | TurnStatus::Undelivered | TurnStatus::Cancelled => true,
        TurnStatus::Running | TurnStatus::Interrupted | TurnStatus::Failed => false,
    }
}

impl ContextBound {
    /// The bound of a turn over inputs at `seqs` (`None` without inputs).
    pub(crate) fn of_inputs(seqs: impl Iterator<Item = i64>, own: Option<TurnId>) -> Option<Self> {
        let mut inputs: Vec<i64> = seqs.collect();
        inputs.sort_unstable();
        inputs.dedup();
        Some(Self {
            from: *inputs.first()?,
            upto: *inputs.last()?,
            own,
            inputs,
            pending: Vec::new(),
        })
    }

    /// The bound of a run without inputs of its own yet — a background
    /// compaction, a turn resumed or failed before its record is read:
    /// every entry but the inputs waiting in the inbox and what earlier
    /// runs over them did ([`ContextBound::without_pending`], which the
    /// run adds), as a tail kept in memory holds only inputs some turn
    /// claimed. Loaded with none, such a run's tail held a message no turn
    /// had claimed yet (one routed after the turn that was running when it
    /// came had ended) at its place among that turn's entries, where the
    /// turn that claimed it next found it instead of pushing it last,
    /// unless something made it reload (a summary written after it did).
    pub(crate) fn claimed_only() -> Self {
        Self {
            // nothing to read before the window, and all of it let in
            from: i64::MAX,
            upto: i64::MAX,
            own: None,
            inputs: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// The bound without the session's inputs at `seqs` that wait in the
    /// inbox (no turn claimed them, or their turn was interrupted or is
    /// retried), unless they are the turn's own: the turn that claims one
    /// pushes it then, as a tail kept in memory only ever holds inputs
    /// some turn claimed. Left out with each such input is what an earlier
    /// run over it did. Read from the store as the context is (a bot that
    /// had not routed the input yet does not know of it).
    pub(crate) fn without_pending(mut self, seqs: impl Iterator<Item = i64>) -> Self {
        let mut pending: Vec<i64> = seqs.filter(|&s| !self.is_input(s)).collect();
        pending.sort_unstable();
        pending.dedup();
        self.pending = pending;
        self
    }

    fn is_input(&self, seq: i64) -> bool {
        self.inputs.binary_search(&seq).is_ok()
    }

    fn is_pending(&self, seq: i64) -> bool {
        self.pending.binary_search(&seq).is_ok()
    }

    /// The other turns whose entries the context holds, by their ends
    /// among `entries` (every turn ends with a `turn_end` naming its
    /// inputs; one without an end yet is not let in). The view reads from
    /// the turn's first input on, so the end of a turn with entries after
    /// it is among them.
    pub(super) fn others(&self, entries: &[Entry]) -> Others {
        let mut others = Others {
            same: HashSet::new(),
            prior: HashSet::new(),
            later: HashSet::new(),
            later_inputs: HashSet::new(),
            inputs: HashMap::new(),
            waiting: HashSet::new(),
        };
        for e in entries {
            let (EntryKind::TurnEnd { inputs, status, .. }, Some(turn)) = (&e.kind, e.turn) else {
                continue;
            };
            if Some(turn) == self.own || inputs.is_empty() {
                continue;
            }
            if inputs.iter().any(|&s| self.is_input(s)) {
                others.same.insert(turn);
            } else if inputs.iter().any(|&s| self.is_pending(s)) {
                // an earlier run over a waiting input: the turn that
                // claims it sees what that run did
                others.waiting.insert(turn);
                continue;
            } else if inputs.iter().all(|&s| s <= self.upto) {
                others.prior.insert(turn);
            } else if done_with_inputs(*status) {
                others.later.insert(turn);
                others.later_inputs.extend(inputs.iter().copied());
            } else {
                continue;
            }
            others.inputs.insert(turn, inputs.clone());
        }
        others
    }

    /// Whether `e` is the turn's own: one of its inputs, or one of its
    /// steps.
    pub(super) fn owns(&self, e: &Entry) -> bool {
        self.is_input(e.seq) || (self.own.is_some() && e.turn == self.own)
    }

    pub(super) fn admits(&self, e: &Entry, others: &Others) -> bool {
        if self.is_pending(e.seq) || e.turn.is_some_and(|t| others.waiting.contains(&t)) {
            return false;
        }
        e.seq <= self.upto
            || (self.own.is_some() && e.turn == self.own)
            || others.later_inputs.contains(&e.seq)
            || e.turn.is_some_and(|t| {
                others.same.contains(&t) || others.prior.contains(&t) || others.later.contains(&t)
            })
    }

    /// Puts each of the turn's inputs after what the other turns it lets
    /// in wrote, unless that turn had the input too, as a tail kept in
    /// memory holds them (a turn's inputs join it when the turn starts):
    /// a context that showed an input before another turn's last steps
    /// ended with that turn's reply, and read as if the input were
    /// answered — also when that turn was an interrupted run over some of
    /// the inputs (webhook B came while run A worked; after a restart the
    /// model saw A's reply last and never answered B), or a turn over a
    /// later input that ran first. The inputs of the other turns it lets
    /// in likewise: each after what the turns that started before the
    /// first turn to have it wrote (QA, 2026-12-05: a subagent's report
    /// that came while its parent's turn ran was, after a restart, shown
    /// inside that turn, before the steps it came after, and the turn that
    /// answered it followed nothing).
    pub(super) fn order(&self, entries: &mut Vec<Entry>, others: &Others) {
        // the index of each other turn's first and last entry
        let mut first: HashMap<TurnId, usize> = HashMap::new();
        let mut last: HashMap<TurnId, usize> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            if let Some(t) = e.turn.filter(|t| others.inputs.contains_key(t)) {
                first.entry(t).or_insert(i);
                last.insert(t, i);
            }
        }
        // the last entry of a turn that did not have input `seq` and
        // started before the first turn that had it (the running turn, if
        // it is its own: it started after every other)
        let after = |seq: i64| {
            let start = if self.is_input(seq) {
                usize::MAX
            } else {
                others
                    .inputs
                    .iter()
                    .filter(|(_, inputs)| inputs.contains(&seq))
                    .filter_map(|(t, _)| first.get(t).copied())
                    .min()?
            };
            others
                .inputs
                .iter()
                .filter(|(_, inputs)| !inputs.contains(&seq))
                .filter(|(t, _)| first.get(*t).is_some_and(|&f| f < start))
                .filter_map(|(t, _)| last.get(t).copied())
                .max()
        };
        // each entry keyed by where it goes: its own place, or just after
        // the entry it must follow (inputs moved there keep seq order)
        let mut keyed: Vec<((usize, bool, usize), Entry)> = std::mem::take(entries)
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let input = self.is_input(e.seq) || others.claimed(e.seq);
                let to = if input {
                    after(e.seq).filter(|&a| a > i)
                } else {
                    None
                };
                (to.map_or((i, false, i), |a| (a, true, i)), e)
            })
            .collect();
        keyed.sort_by_key(|(key, _)| *key);
        *entries = keyed.into_iter().map(|(_, e)| e).collect();
    }
}

impl Others {
    /// Whether `seq` is an input of one of the other turns.
    fn claimed(&self, seq: i64) -> bool {
        self.inputs.values().any(|inputs| inputs.contains(&seq))
    }
}
