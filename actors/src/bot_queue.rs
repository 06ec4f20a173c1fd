//! A bot's queue of admitted inputs: three priority classes, batched by
//! session. Bots and background work are FIFO inside their class; direct
//! messages take turns by session (each is one person's, or a parent
//! bot's task to a subagent): the session served longest ago goes first,
//! so one conversation's stream of messages cannot keep another waiting
//! behind it turn after turn.

use std::collections::HashMap;
use std::collections::VecDeque;

use botfleet_memory::Entry;
use botfleet_memory::InboxItem;
use botfleet_memory::Priority;
use botfleet_memory::SessionId;

/// An admitted input waiting for a turn.
#[derive(Debug, Clone)]
pub struct QueuedInput {
    /// Where it is in the inbox.
    pub item: InboxItem,
    /// Its transcript entry, when the sender had it at hand.
    pub entry: Option<Entry>,
}

/// The queue.
#[derive(Debug, Default)]
pub(crate) struct BotQueue {
    classes: [VecDeque<QueuedInput>; 3],
    /// Highest gid accepted. Inputs mostly arrive in commit order, but not
    /// always: each sender routes what it admitted after its own commit
    /// returns, so a lower gid can come after a higher one.
    last_gid: i64,
    /// Sessions whose direct messages were taken for a turn, the one
    /// taken last at the back, at most [`SERVED_KEPT`]: a session not
    /// here was served longer ago than any that is.
    served: VecDeque<SessionId>,
    /// Sessions given to the bot's owner read from a seq on (an owner
    /// change in fleet.toml: `session_floors`), with that seq: inputs
    /// below it came while the work was the former owner's, and are
    /// never taken into one turn with inputs at or past it (review: one
    /// such input ended the whole turn `owner_changed`, the new owner's
    /// own routine runs with it).
    floors: HashMap<SessionId, i64>,
}

/// Most sessions [`BotQueue`] remembers serving. Past it the oldest is
/// forgotten, which only ranks it with the sessions never served: still
/// behind none that waits.
const SERVED_KEPT: usize = 64;

/// What [`BotQueue::push`] did with an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Queued.
    Added,
    /// A copy of one already queued: dropped.
    Copy,
    /// Below the highest gid seen and not queued: a late arrival, or a
    /// copy of one a turn took already. Only the store can tell: the caller
    /// re-reads the pending inbox ([`BotQueue::refresh`]).
    OutOfOrder,
}

/// What [`BotQueue::refresh`] added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Refreshed {
    /// Inputs added.
    pub count: usize,
    /// Whether a person's direct message was among them.
    pub user_dm: bool,
}

fn class(p: Priority) -> usize {
    match p {
        Priority::UserDm => 0,
        Priority::Bot => 1,
        Priority::Background => 2,
    }
}

impl BotQueue {
    /// Adds an input from the router or the inbox.
    pub(crate) fn push(&mut self, input: QueuedInput) -> Pushed {
        let gid = input.item.gid;
        if gid > self.last_gid {
            self.last_gid = gid;
            self.classes[class(input.item.priority)].push_back(input);
            Pushed::Added
        } else if self.contains(gid) {
            Pushed::Copy
        } else {
            Pushed::OutOfOrder
        }
    }

    /// Puts inputs of an interrupted turn back, ahead of their class
    /// (skipping any already queued); a session whose direct messages were
    /// just served still lets other sessions' go first
    /// ([`BotQueue::next_batch`]).
    pub(crate) fn requeue(&mut self, inputs: Vec<QueuedInput>) {
        for input in inputs.into_iter().rev() {
            if self.contains(input.item.gid) {
                continue;
            }
            self.classes[class(input.item.priority)].push_front(input);
        }
    }

    /// Adds inputs found pending in the store that are neither queued nor
    /// in `running` (gids of the running turn), in gid order.
    pub(crate) fn refresh(&mut self, pending: Vec<QueuedInput>, running: &[i64]) -> Refreshed {
        let mut added = Refreshed::default();
        for input in pending {
            let gid = input.item.gid;
            if self.contains(gid) || running.contains(&gid) {
                continue;
            }
            self.last_gid = self.last_gid.max(gid);
            added.user_dm |= input.item.priority == Priority::UserDm;
            let c = &mut self.classes[class(input.item.priority)];
            let at = c.iter().position(|q| q.item.gid > gid).unwrap_or(c.len());
            c.insert(at, input);
            added.count += 1;
        }
        added
    }

    fn contains(&self, gid: i64) -> bool {
        self.classes
            .iter()
            .any(|c| c.iter().any(|q| q.item.gid == gid))
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.classes.iter().all(VecDeque::is_empty)
    }

    /// Inputs waiting.
    pub(crate) fn len(&self) -> usize {
        self.classes.iter().map(VecDeque::len).sum()
    }

    /// Whether a user's direct message waits.
    pub(crate) fn has_user_dm(&self) -> bool {
        !self.classes[0].is_empty()
    }

    /// Whether a user's direct message admitted after `gid` waits.
    pub(crate) fn has_user_dm_after(&self, gid: i64) -> bool {
        self.classes[0].iter().any(|q| q.item.gid > gid)
    }

    /// Like [`BotQueue::next_batch`], for the first session (in class and
    /// gid order) with an input that `pick` accepts.
    pub(crate) fn next_batch_where(
        &mut self,
        pick: impl Fn(&QueuedInput) -> bool,
    ) -> Option<(SessionId, Vec<QueuedInput>)> {
        let session = self
            .classes
            .iter()
            .flat_map(|c| c.iter())
            .find(|q| pick(q))?
            .item
            .session;
        Some((session, self.take_session(session)))
    }

    /// The next turn's inputs: a session of the highest non-empty class,
    /// and every queued input of that session (any class), in gid order.
    /// Bots and background work go in queue order; direct messages take
    /// turns by session: of the sessions with one waiting, the one served
    /// longest ago (never, first), ties in queue order. A turn interrupted
    /// by another session's message so lets that message go next, and is
    /// run again after it.
    pub(crate) fn next_batch(&mut self) -> Option<(SessionId, Vec<QueuedInput>)> {
        let session = match self.fairest_dm() {
            Some(session) => session,
            None => self.classes.iter().find_map(|c| c.front())?.item.session,
        };
        Some((session, self.take_session(session)))
    }

    /// The session of the direct messages to serve next: the one whose
    /// last turn is longest ago, of those with one waiting.
    fn fairest_dm(&self) -> Option<SessionId> {
        // a session's rank: not served lately (0) first, then the oldest
        // served; the first of equals in queue order. A flooded queue is
        // long runs of one session: each run is ranked once, and a session
        // never served lately ends the search (nothing ranks before it)
        let mut best: Option<(usize, SessionId)> = None;
        let mut last = None;
        for session in self.classes[0].iter().map(|q| q.item.session) {
            if last == Some(session) {
                continue;
            }
            last = Some(session);
            let rank = self
                .served
                .iter()
                .position(|s| *s == session)
                .map_or(0, |at| at + 1);
            if rank == 0 {
                return Some(session);
            }
            if best.is_none_or(|(r, _)| rank < r) {
                best = Some((rank, session));
            }
        }
        best.map(|(_, session)| session)
    }

    /// Notes the floors of the bot's sessions (see `floors`).
    pub(crate) fn set_floors(&mut self, floors: HashMap<SessionId, i64>) {
        self.floors = floors;
    }

    /// The floor of `session`, if it has one (see `floors`).
    pub(crate) fn floor_of(&self, session: SessionId) -> Option<i64> {
        self.floors.get(&session).copied()
    }

    /// Every queued input of `session` (any class), in gid order; the
    /// session is noted as served when it had a direct message. Of a
    /// session with a floor, those below it while any is queued, else
    /// the others.
    fn take_session(&mut self, session: SessionId) -> Vec<QueuedInput> {
        if self.classes[0].iter().any(|q| q.item.session == session) {
            self.served.retain(|s| *s != session);
            if self.served.len() == SERVED_KEPT {
                self.served.pop_front();
            }
            self.served.push_back(session);
        }
        // the floor, while an input below it is queued
        let before = self.floors.get(&session).copied().filter(|f| {
            self.classes
                .iter()
                .flatten()
                .any(|q| q.item.session == session && q.item.seq < *f)
        });
        let taken = |input: &QueuedInput| {
            input.item.session == session && before.is_none_or(|f| input.item.seq < f)
        };
        let mut batch = Vec::new();
        for c in &mut self.classes {
            let mut keep = VecDeque::with_capacity(c.len());
            for input in c.drain(..) {
                if taken(&input) {
                    batch.push(input);
                } else {
                    keep.push_back(input);
                }
            }
            *c = keep;
        }
        batch.sort_by_key(|i| i.item.gid);
        batch
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use botfleet_memory::BotId;
    use proptest::prelude::*;

    use super::*;

    fn input(gid: i64, session: SessionId, priority: Priority) -> QueuedInput {
        QueuedInput {
            item: InboxItem {
                bot: BotId::new("b").unwrap(),
                gid,
                session,
                seq: gid,
                priority,
            },
            entry: None,
        }
    }

    #[test]
    fn user_dms_first_then_bots_then_background() {
        let (a, b, c) = (
            SessionId::new_v7(),
            SessionId::new_v7(),
            SessionId::new_v7(),
        );
        let mut q = BotQueue::default();
        q.push(input(1, c, Priority::Background));
        q.push(input(2, b, Priority::Bot));
        q.push(input(3, a, Priority::UserDm));
        q.push(input(4, a, Priority::UserDm));
        let order: Vec<(SessionId, Vec<i64>)> = std::iter::from_fn(|| q.next_batch())
            .map(|(s, v)| (s, v.iter().map(|i| i.item.gid).collect()))
            .collect();
        assert_eq!(order, vec![(a, vec![3, 4]), (b, vec![2]), (c, vec![1])]);
    }

    /// A session given to the bot's owner read from seq 3 on: the runs
    /// queued before it make a turn of their own, and those after it
    /// (the new owner's) the next; another session is not split.
    #[test]
    fn inputs_below_a_floor_are_never_taken_with_those_past_it() {
        let (s, other) = (SessionId::new_v7(), SessionId::new_v7());
        let mut q = BotQueue::default();
        q.set_floors(HashMap::from([(s, 3)]));
        for gid in 1..=5 {
            q.push(input(gid, s, Priority::Background));
        }
        q.push(input(6, other, Priority::Background));
        q.push(input(7, other, Priority::Background));
        let seqs = |batch: Vec<QueuedInput>| batch.iter().map(|i| i.item.seq).collect::<Vec<_>>();
        let (session, first) = q.next_batch().unwrap();
        assert_eq!((session, seqs(first)), (s, vec![1, 2]));
        let (session, second) = q.next_batch().unwrap();
        assert_eq!((session, seqs(second)), (s, vec![3, 4, 5]));
        let (session, third) = q.next_batch().unwrap();
        assert_eq!((session, seqs(third)), (other, vec![6, 7]));
        assert!(q.next_batch().is_none());
    }

    /// Two people's DMs (or a person's and a parent bot's task) with one
    /// bot: the one who sent a stream of messages while a turn ran does
    /// not go again before the other, whose message was in the queue
    /// behind theirs. Before, the queue was first come first served, and
    /// `b` waited behind `a`'s backlog.
    #[test]
    fn direct_messages_take_turns_by_session() {
        let (a, b) = (SessionId::new_v7(), SessionId::new_v7());
        let mut q = BotQueue::default();
        q.push(input(1, a, Priority::UserDm));
        assert_eq!(q.next_batch().unwrap().0, a);
        // while a's turn runs: a sends more, then b, then a again
        q.push(input(2, a, Priority::UserDm));
        q.push(input(3, a, Priority::UserDm));
        q.push(input(4, b, Priority::UserDm));
        q.push(input(5, a, Priority::UserDm));
        let (session, batch) = q.next_batch().unwrap();
        assert_eq!(session, b, "b's message goes in the next turn");
        assert_eq!(batch.len(), 1);
        // a's messages are one turn (debounce batching is kept)
        let (session, batch) = q.next_batch().unwrap();
        assert_eq!(session, a);
        let gids: Vec<i64> = batch.iter().map(|i| i.item.gid).collect();
        assert_eq!(gids, [2, 3, 5]);
        // a turn of a interrupted by b's message: b goes next, then a's
        // requeued inputs (with what a sent meanwhile)
        q.push(input(6, b, Priority::UserDm));
        q.requeue(batch);
        q.push(input(7, a, Priority::UserDm));
        assert_eq!(q.next_batch().unwrap().0, b);
        let (session, batch) = q.next_batch().unwrap();
        assert_eq!(session, a);
        assert_eq!(batch.len(), 4);
        // the classes keep their order: a DM before a bot's message
        // however lately its session was served
        q.push(input(8, b, Priority::Bot));
        q.push(input(9, a, Priority::UserDm));
        assert_eq!(q.next_batch().unwrap().0, a);
        assert_eq!(q.next_batch().unwrap().0, b);
        assert!(q.is_empty());
    }

    #[test]
    fn copies_are_dropped_and_late_arrivals_sent_to_the_store() {
        let s = SessionId::new_v7();
        let mut q = BotQueue::default();
        assert_eq!(q.push(input(5, s, Priority::UserDm)), Pushed::Added);
        assert_eq!(q.push(input(5, s, Priority::UserDm)), Pushed::Copy);
        // a lower gid routed after a higher one is not a copy: before, it
        // was dropped as one and stranded in the inbox
        assert_eq!(q.push(input(4, s, Priority::UserDm)), Pushed::OutOfOrder);
        assert_eq!(q.len(), 1);
        // found pending in the store: queued, and known as a person's
        // message (it interrupts a running turn as if routed in order)
        assert_eq!(
            q.refresh(vec![input(4, s, Priority::UserDm)], &[]),
            Refreshed {
                count: 1,
                user_dm: true
            }
        );
        assert_eq!(
            q.refresh(
                vec![input(4, s, Priority::UserDm), input(3, s, Priority::Bot)],
                &[]
            ),
            Refreshed {
                count: 1,
                user_dm: false
            }
        );
        assert_eq!(q.push(input(4, s, Priority::UserDm)), Pushed::Copy);
        let (_, batch) = q.next_batch().unwrap();
        let gids: Vec<i64> = batch.iter().map(|i| i.item.gid).collect();
        assert_eq!(gids, [3, 4, 5]);
    }

    proptest! {
        #[test]
        fn every_input_comes_out_once(items in proptest::collection::vec((0u8..3, 0u8..3), 0..60)) {
            let sessions = [SessionId::new_v7(), SessionId::new_v7(), SessionId::new_v7()];
            let mut q = BotQueue::default();
            for (i, (s, p)) in items.iter().enumerate() {
                let p = Priority::from_i64(i64::from(*p)).unwrap();
                q.push(input(i as i64 + 1, sessions[*s as usize], p));
            }
            let mut seen = Vec::new();
            while let Some((s, batch)) = q.next_batch() {
                prop_assert!(batch.iter().all(|i| i.item.session == s));
                prop_assert!(batch.windows(2).all(|w| w[0].item.gid < w[1].item.gid));
                seen.extend(batch.iter().map(|i| i.item.gid));
            }
            seen.sort_unstable();
            prop_assert_eq!(seen, (1..=items.len() as i64).collect::<Vec<_>>());
        }
    }
}
