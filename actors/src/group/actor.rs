//! The coordinator of one room: drives the pure [`Run`] state machine with
//! real member turns.
//!
//! A run is the work one user message started (a `room_runs` row written
//! with the message). The actor takes a room's unfinished runs in order,
//! one at a time, and for each:
//!
//! 1. asks [`Run::advance`] who speaks next (or whether the run is over);
//! 2. admits that member's input — the new public messages — into the
//!    member's own group session through [`Runtime::admit`], with a nonce
//!    derived from (run, round, slot): after a restart the same admission
//!    answers `duplicate` and the coordinator simply waits again;
//! 3. watches the member's session (change signals through the rooms
//!    dispatcher, plus a slow re-check) until the turn that consumed the
//!    input ended, and publishes each delivery it reads there while the
//!    turn runs (within the limits the machine will apply), **in the same
//!    transaction** as a checkpoint listing it (`Progress::live`), so a
//!    reply reaches the room when SendMessage's outcome is recorded, not
//!    after the member's closing model call, and is published once;
//! 4. records the turn in the machine, and publishes what was not yet
//!    published (a turn whose end was read with its deliveries) in the
//!    same transaction as the run's new checkpoint;
//! 5. at the end, appends a notice (why it stopped) and a `turn_end` entry
//!    listing the user message, with the run marked done.
//!
//! After a host restart an unfinished run *resumes where it was*: the
//! checkpoint holds the machine, and the member whose turn was under way is
//! admitted again with the same nonce (a duplicate) and awaited.
//!
//! Waiting on a member's turn is the coordinator's own sequencing: the
//! member bot runs its turn in its own actor like any background input, and
//! knows nothing of the wait.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::NewEntry;
use botfleet_memory::RoomId;
use botfleet_memory::RoomRecord;
use botfleet_memory::SessionId;
use botfleet_memory::UserId;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use serde::Deserialize;
use serde::Serialize;
use tokio::time::Instant;

use super::error::GroupError;
use super::member::Cursor;
use super::member::MemberWait;
use super::member::is_message;
use super::mentions::MemberName;
use super::rooms::RoomsMsg;
use super::run::Limits;
use super::run::Next;
use super::run::Run;
use crate::runtime::Runtime;

/// Public messages of the timeline kept in memory.
const TAIL: usize = 200;
/// How often a waiting coordinator re-reads the member's session even
/// without a change signal (a safety net; signals do the work).
const RECHECK: Duration = Duration::from_secs(2);
/// Delay before retrying after a store or admission failure.
const RETRY: Duration = Duration::from_secs(1);

/// A run's stored state. The API writes `selected` and `unknown` with the
/// user message; the coordinator adds `progress` when it starts the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunState {
    /// The addressed members, in room order.
    pub selected: Vec<BotId>,
    /// Mentions that matched nobody.
    #[serde(default)]
    pub unknown: Vec<String>,
    /// Mentioned members that take no turns (removed from the fleet's
    /// config, or stopped subagents). With `selected` and `unknown`, what
    /// a duplicate of the message answers. Empty in runs stored before.
    #[serde(default)]
    pub removed: Vec<BotId>,
    /// Whether the message was posted to a shared room or by a user other
    /// than the room's owner: its discussion runs with the shared surface
    /// even if the room is no longer shared when it starts (the message's
    /// text, and the timeline it reads, come from other users; what the
    /// discussion publishes is read by them once their bot is back).
    /// `false` in runs stored before; the coordinator then goes by the
    /// message's author.
    #[serde(default)]
    pub shared: bool,
    /// Set once the coordinator started the run.
    #[serde(default)]
    pub progress: Option<Progress>,
}

/// The coordinator's checkpoint of a started run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Progress {
    /// The machine.
    pub run: Run,
    /// Per member: what of the timeline it was shown.
    pub cursors: BTreeMap<BotId, Cursor>,
    /// Per member: messages of its last turn the limits kept back.
    pub withheld: BTreeMap<BotId, u32>,
    /// The room's members when the run started, in speaking order: the
    /// machine's member indices point into this list, so a change of the
    /// room's members (which applies to later runs) cannot make them name
    /// other bots, also after a restart. `None` in checkpoints written
    /// before members could change: the room's list then.
    #[serde(default)]
    pub members: Option<Vec<BotId>>,
    /// Timeline ids of the replies of the awaited member turn already
    /// published while it ran (`super::live`), written with each of them:
    /// after a restart they are not published again, and the turn's end
    /// publishes only the rest. Empty between member turns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<EntryId>,
    /// The room's latest audience change (its notice's timeline seq, 0
    /// for none, `Store::room_audience_seq`) when the awaited member was
    /// given its input, written with the input: if the room was given to
    /// someone since, that turn's replies are not published (`super::era`).
    /// `None` between member turns (and in older checkpoints: read again
    /// as the input is given again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub era: Option<i64>,
    /// Members the message addressed that were taken out of the room
    /// before its run started: they take no turn in it, and its end says
    /// so (they were left out without a word, QA 2026-12-05).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<BotId>,
}

/// Start arguments of a room's coordinator.
pub struct GroupArgs {
    /// The room.
    pub room: RoomId,
    /// Shared runtime.
    pub rt: Arc<Runtime>,
    /// The rooms supervisor, for passivation.
    pub rooms: ActorRef<RoomsMsg>,
}

/// The coordinator of one room (configuration only; see [`GroupState`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct GroupActor;

/// Messages of a room's coordinator.
#[derive(Debug)]
pub enum GroupMsg {
    /// Look for work: a message was posted, or the host (re)started.
    Wake,
    /// A watched member session has entries up to `seq`.
    Changed {
        /// The session.
        session: SessionId,
        /// Its newest seq.
        seq: i64,
    },
    /// Re-read the awaited member's session (a slow timer, in case a
    /// change signal was missed), and look whether that member still takes
    /// turns ([`GroupState::leave_a_member_gone`]).
    Recheck,
    /// Retry after a failure.
    Retry,
    /// Check whether the room has been idle long enough to passivate.
    IdleCheck,
}

/// The run in progress.
pub(super) struct Current {
    /// Seq of its user message in the timeline.
    pub(super) trigger_seq: i64,
    /// Its state (the checkpoint).
    pub(super) state: RunState,
    /// The member turn being awaited.
    pub(super) wait: Option<MemberWait>,
}

/// State of an active room.
pub struct GroupState {
    pub(super) rt: Arc<Runtime>,
    pub(super) rooms: ActorRef<RoomsMsg>,
    pub(super) room: RoomRecord,
    pub(super) names: Vec<MemberName>,
    /// Per member (as `names`): whether it takes no turns (removed from
    /// the fleet's config, or a stopped subagent), so no input lists it
    /// among the members a member can address.
    pub(super) absent: Vec<bool>,
    pub(super) owners: Vec<UserId>,
    pub(super) limits: Limits,
    pub(super) timeline: SessionId,
    /// Public messages of the timeline, oldest first: the members'
    /// replies, and the user messages up to [`GroupState::through`].
    pub(super) tail: VecDeque<Entry>,
    /// Newest timeline seq known (read or written by this actor).
    pub(super) last_seq: i64,
    /// Every timeline entry up to this seq was read (the actor's own
    /// appends do not move it: a user message may land between them).
    pub(super) last_read: i64,
    /// The tail holds user messages up to this seq (the message of the
    /// run in progress): later ones belong to later runs and are read
    /// when their run starts, so a backlog of messages posted while a
    /// discussion runs cannot push out of the tail the message the next
    /// run answers (its members were shown an input without it).
    pub(super) through: i64,
    /// Every public message from this seq up to [`GroupState::through`]
    /// is in the tail (older ones were left out or dropped from it): a
    /// member shown nothing since before it has its unseen older
    /// messages counted in the store (`unseen_before_tail`).
    pub(super) floor: i64,
    /// Member cursors and withheld counts after the last finished run.
    pub(super) cursors: BTreeMap<BotId, Cursor>,
    pub(super) withheld: BTreeMap<BotId, u32>,
    pub(super) current: Option<Current>,
    /// Replies recorded but not yet committed: they are published in the
    /// same transaction as the next member's input, or the run's end.
    pub(super) pending: Vec<NewEntry>,
    /// Writes to members' own sessions committed with the pending replies
    /// (a context cut after a turn the room outlived: `super::era`).
    pub(super) cuts: Vec<botfleet_memory::Mutation>,
    pub(super) recheck_armed: bool,
    /// A recheck came: once the awaited member's session is read, look
    /// whether the member still takes turns.
    pub(super) check_awaited: bool,
    pub(super) retry_armed: bool,
    pub(super) wakes: u64,
    pub(super) idle_since: Option<Instant>,
    pub(super) idle_armed: bool,
}

impl Actor for GroupActor {
    type Msg = GroupMsg;
    type State = GroupState;
    type Arguments = GroupArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<GroupMsg>,
        args: GroupArgs,
    ) -> Result<GroupState, ActorProcessingErr> {
        let store = &args.rt.store;
        let room = store
            .get_room(&args.room)
            .await?
            .ok_or_else(|| format!("room {} is not registered", args.room))?;
        let (names, absent, owners) = member_info(&args.rt, &room, &room.members).await?;
        let timeline = room.timeline().id();
        let (cursors, withheld) = match store.last_done_room_run(&room.id).await? {
            Some(run) => match serde_json::from_value::<RunState>(run.state) {
                Ok(RunState {
                    progress: Some(p), ..
                }) => (p.cursors, p.withheld),
                Ok(_) | Err(_) => (BTreeMap::new(), BTreeMap::new()),
            },
            None => (BTreeMap::new(), BTreeMap::new()),
        };
        Ok(GroupState {
            rt: args.rt,
            rooms: args.rooms,
            room,
            names,
            absent,
            owners,
            limits: Limits::default(),
            timeline,
            // read when a run starts (`refresh_tail`), around its message
            tail: VecDeque::new(),
            last_seq: 0,
            last_read: 0,
            through: 0,
            floor: 0,
            cursors,
            withheld,
            current: None,
            pending: Vec::new(),
            cuts: Vec::new(),
            recheck_armed: false,
            check_awaited: false,
            retry_armed: false,
            wakes: 0,
            idle_since: None,
            idle_armed: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<GroupMsg>,
        msg: GroupMsg,
        state: &mut GroupState,
    ) -> Result<(), ActorProcessingErr> {
        let pump = match msg {
            GroupMsg::Wake => {
                state.wakes += 1;
                true
            }
            GroupMsg::Changed { session, seq } => state
                .current
                .as_ref()
                .and_then(|c| c.wait.as_ref())
                .is_some_and(|w| w.session == session && seq > w.scanned),
            GroupMsg::Recheck => {
                state.recheck_armed = false;
                let waits = state.current.as_ref().is_some_and(|c| c.wait.is_some());
                state.check_awaited = waits;
                waits
            }
            GroupMsg::Retry => {
                state.retry_armed = false;
                true
            }
            GroupMsg::IdleCheck => {
                state.on_idle_check(&myself);
                false
            }
        };
        if pump && let Err(e) = state.pump(&myself).await {
            tracing::warn!(room = %state.room.id, error = %e, "room run step failed; retrying from the stored state");
            state.reset();
            if !state.retry_armed {
                state.retry_armed = true;
                myself.send_after(RETRY, || GroupMsg::Retry);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<GroupMsg>,
        state: &mut GroupState,
    ) -> Result<(), ActorProcessingErr> {
        state.unwatch(&myself);
        Ok(())
    }
}

/// The display names, absences ([`super::absent::absent`]) and owners of
/// `members` of `room` (a member without a bot record: its id, present,
/// and the room's owner).
async fn member_info(
    rt: &Runtime,
    room: &RoomRecord,
    members: &[BotId],
) -> Result<(Vec<MemberName>, Vec<bool>, Vec<UserId>), GroupError> {
    let mut names = Vec::with_capacity(members.len());
    let mut absent = Vec::with_capacity(members.len());
    let mut owners = Vec::with_capacity(members.len());
    for id in members {
        let bot = rt.store.get_bot(id).await?;
        absent.push(match &bot {
            Some(b) => super::absent::absent(&rt.store, b).await?.is_some(),
            None => false,
        });
        names.push(MemberName {
            id: id.to_string(),
            name: bot
                .as_ref()
                .map(|b| b.name.clone())
                .unwrap_or_else(|| id.to_string()),
        });
        owners.push(bot.map(|b| b.owner).unwrap_or_else(|| room.owner.clone()));
    }
    Ok((names, absent, owners))
}

impl GroupState {
    /// Takes the room as stored now (its members may have changed since
    /// the last run), for a run that starts.
    pub(super) async fn reload_room(&mut self) -> Result<(), GroupError> {
        if let Some(room) = self.rt.store.get_room(&self.room.id).await? {
            let (names, absent, owners) = member_info(&self.rt, &room, &room.members).await?;
            self.rt.groups.note_shared(&room.id, room.shared);
            self.room = room;
            self.names = names;
            self.absent = absent;
            self.owners = owners;
        }
        Ok(())
    }

    /// Runs the discussion about to start (or resume) of a message
    /// posted by `author` (its run's stored `shared` is `shared`) with
    /// the shared surface if it was posted to a shared room or by another
    /// user than the room's owner, whatever the room is now
    /// ([`RunState::shared`]), or if its members make it so.
    pub(super) fn follow_input(&mut self, shared: bool, author: Option<&str>) {
        let by_other = author.is_some_and(|a| a != self.room.owner.as_str());
        self.room.shared = self.room.shared || shared || by_other;
        self.rt
            .groups
            .note_run_shared(&self.room.id, self.room.shared);
    }

    /// Runs with `members`, the list a resumed run started with, when the
    /// room's members have changed since. Its turns run with the shared
    /// surface if those members belong to more than one user.
    pub(super) async fn use_members(&mut self, members: Vec<BotId>) -> Result<(), GroupError> {
        if members == self.room.members {
            return Ok(());
        }
        let (names, absent, owners) = member_info(&self.rt, &self.room, &members).await?;
        let shared = self.room.shared || owners.iter().any(|o| *o != self.room.owner);
        self.rt.groups.note_shared(&self.room.id, shared);
        self.room.members = members;
        self.room.shared = shared;
        self.names = names;
        self.absent = absent;
        self.owners = owners;
        Ok(())
    }

    /// Does everything that can be done now: starts the next run, runs the
    /// machine, reads the awaited member's session. Returns when it must
    /// wait for a member's turn or has nothing left to do.
    async fn pump(&mut self, myself: &ActorRef<GroupMsg>) -> Result<(), GroupError> {
        self.idle_since = None;
        loop {
            let Some(cur) = self.current.as_mut() else {
                match self.rt.store.oldest_open_room_run(&self.room.id).await? {
                    Some(record) => {
                        self.start(record).await?;
                        continue;
                    }
                    None => {
                        self.become_idle(myself);
                        return Ok(());
                    }
                }
            };
            if let Some(wait) = cur.wait.as_mut() {
                // a few rows by index: cheaper here than a hop to the
                // blocking pool and back
                let entries = self
                    .rt
                    .store
                    .entries_after_now(wait.session, wait.scanned, 1000)?;
                let full = entries.len() == 1000;
                match wait.feed(&entries) {
                    Some(done) => {
                        self.complete_member(done).await?;
                        continue;
                    }
                    None => {
                        // the turn runs on: its replies so far go out now
                        self.publish_live().await?;
                        if full {
                            continue;
                        }
                        // what the session holds is read first: a turn
                        // that ended just before its bot was removed is
                        // taken as it ended, its replies with it
                        if std::mem::take(&mut self.check_awaited)
                            && self.leave_a_member_gone().await?
                        {
                            continue;
                        }
                        if !self.recheck_armed {
                            self.recheck_armed = true;
                            myself.send_after(RECHECK, || GroupMsg::Recheck);
                        }
                        return Ok(());
                    }
                }
            }
            let Some(progress) = cur.state.progress.as_mut() else {
                return Err(GroupError::Invalid("a run without progress".into()));
            };
            match progress.run.advance() {
                Next::Done(end) => self.finish(end).await?,
                Next::Run {
                    member,
                    round,
                    slot,
                } => {
                    self.begin_member(myself, member, round, slot).await?;
                }
            }
        }
    }

    /// Forgets in-memory progress after a failure; the next pump reloads
    /// it from the store.
    fn reset(&mut self) {
        self.current = None;
        self.pending.clear();
        self.tail.clear();
        self.last_seq = 0;
        self.last_read = 0;
        self.through = 0;
        self.floor = 0;
    }

    /// Reads the timeline entries the actor has not seen, for the run of
    /// the user message at `trigger`: the replies, and the user messages
    /// up to `trigger`. After a restart (or a failure) it reads from the
    /// window of entries before `trigger` on.
    pub(super) async fn refresh_tail(&mut self, trigger: i64) -> Result<(), GroupError> {
        if self.last_read == 0 && self.tail.is_empty() {
            self.last_read = (trigger - TAIL as i64 * 4).max(0);
            self.through = trigger;
            self.floor = self.last_read + 1;
        }
        let (from, read) = (self.through + 1, self.last_read.min(trigger));
        self.through = self.through.max(trigger);
        if from <= read {
            // user messages up to the trigger that an earlier read passed
            // over (posted while an earlier run was in progress), now that
            // their turn has come; those not read yet come with the rest
            for e in self
                .rt
                .store
                .entries_between(self.timeline, from, read)
                .await?
            {
                self.push_tail(e);
            }
        }
        loop {
            let entries = self
                .rt
                .store
                .entries_after(self.timeline, self.last_read, 1000)
                .await?;
            let n = entries.len();
            for e in entries {
                self.last_read = self.last_read.max(e.seq);
                self.push_tail(e);
            }
            if n < 1000 {
                break;
            }
        }
        Ok(())
    }

    /// Adds a timeline entry to the tail in seq order (once): a public
    /// message, but no user message after [`GroupState::through`].
    pub(super) fn push_tail(&mut self, e: Entry) {
        self.last_seq = self.last_seq.max(e.seq);
        if !is_message(&e)
            || (matches!(e.kind, EntryKind::UserMessage { .. }) && e.seq > self.through)
        {
            return;
        }
        let at = self.tail.partition_point(|t| t.seq < e.seq);
        if self.tail.get(at).is_some_and(|t| t.seq == e.seq) {
            return;
        }
        self.tail.insert(at, e);
        while self.tail.len() > TAIL {
            // the message of the run in progress stays, however many
            // replies of earlier runs came after it: its members answer it
            let at = usize::from(
                self.tail
                    .front()
                    .is_some_and(|t| t.seq == self.through && t.seq > 0),
            );
            if let Some(gone) = self.tail.remove(at) {
                self.floor = self.floor.max(gone.seq + 1);
            }
        }
    }

    /// How many public messages older than the tail `member` was not
    /// shown (its `cursor`): read from the store only when it was shown
    /// nothing since before [`GroupState::floor`]. A message pinned at
    /// the front of the tail (the one the run answers) is in the tail,
    /// so the count stops at the tail's first message.
    pub(super) async fn unseen_before_tail(
        &self,
        member: &BotId,
        cursor: Cursor,
    ) -> Result<usize, GroupError> {
        let Some(first) = self.tail.front().map(|e| e.seq) else {
            return Ok(0);
        };
        if cursor.user.min(cursor.delivery) + 1 >= self.floor.min(first) {
            return Ok(0);
        }
        let unseen = self
            .rt
            .store
            .count_unseen_messages(
                self.timeline,
                (cursor.user, cursor.delivery),
                first,
                member.as_str(),
            )
            .await?;
        Ok(usize::try_from(unseen).unwrap_or(0))
    }

    fn unwatch(&mut self, myself: &ActorRef<GroupMsg>) {
        let id = myself.get_id();
        self.rt.groups.watches().retain(|_, a| a.get_id() != id);
    }

    fn become_idle(&mut self, myself: &ActorRef<GroupMsg>) {
        if self.idle_since.is_none() {
            self.idle_since = Some(Instant::now());
        }
        if !self.idle_armed {
            self.idle_armed = true;
            myself.send_after(self.rt.settings.idle_timeout, || GroupMsg::IdleCheck);
        }
    }

    fn on_idle_check(&mut self, myself: &ActorRef<GroupMsg>) {
        self.idle_armed = false;
        let Some(since) = self.idle_since.filter(|_| self.current.is_none()) else {
            return;
        };
        let timeout = self.rt.settings.idle_timeout;
        let idle_for = since.elapsed();
        if idle_for >= timeout {
            let _ = self.rooms.cast(RoomsMsg::Idle {
                room: self.room.id.clone(),
                seen: self.wakes,
            });
        } else {
            self.idle_armed = true;
            myself.send_after(timeout - idle_for, || GroupMsg::IdleCheck);
        }
    }
}
