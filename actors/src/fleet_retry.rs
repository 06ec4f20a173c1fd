//! A person's retry of an ended turn (`POST /v1/turns/{turn}/retry`,
//! `botfleet retry`, the web page's Retry): its inputs go back in its
//! bot's queue, unless nothing would ever answer them there.

use botfleet_memory::BotId;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::StoreError;
use botfleet_memory::SubagentStatus;
use botfleet_memory::TurnId;
use botfleet_memory::TurnRecord;
use botfleet_memory::TurnStatus;

use super::FleetHandle;
use crate::error::ActorError;
use crate::error::Result;
use crate::router::RouterMsg;

/// The prefix of the origin of a bot made by CreateAgent.
const MADE_BY: &str = "agent:";

/// The prefix of the origin of a subagent.
const SUBAGENT_OF: &str = "subagent:";

impl FleetHandle {
    /// Puts the inputs of an ended turn back in its bot's queue (a person's
    /// retry after a failure, an undelivered reply or a cancel). Returns
    /// how many inputs were requeued. Refused with
    /// [`ActorError::Conflict`] for a completed turn, and for
    /// one whose inputs were queued again or taken by a later turn since
    /// (a second click on Retry), so a retry never runs inputs twice.
    /// Refused too for a turn of a bot that will never run one again
    /// ([`FleetHandle::removed_for_good`]). Refused with
    /// [`ActorError::Busy`], which may pass later, while the turn or a
    /// later one of its conversation runs, and for a subagent's task turn
    /// while its parent has `runtime.max_subagents` other subagents
    /// running.
    pub async fn retry(&self, turn: TurnId) -> Result<usize> {
        let record = self
            .rt
            .store
            .get_turn(turn)
            .await?
            .ok_or_else(|| ActorError::Invalid(format!("no turn {turn}")))?;
        match record.status {
            TurnStatus::Running => {
                return Err(ActorError::Busy(format!(
                    "turn {turn} is still running; wait for it to end, or cancel it first"
                )));
            }
            TurnStatus::Completed => {
                return Err(ActorError::Conflict(format!(
                    "turn {turn} completed: it answered its inputs; send a new message to ask again"
                )));
            }
            TurnStatus::Undelivered
            | TurnStatus::Interrupted
            | TurnStatus::Failed
            | TurnStatus::Cancelled => {}
        }
        if let Some(why) = self.removed_for_good(&record.bot).await? {
            // its inputs, requeued, would wait unanswered for good
            return Err(ActorError::Conflict(format!(
                "turn {turn} cannot be retried: {why}"
            )));
        }
        // a run of a routine the bot no longer has: its prompt is no
        // instruction of the bot's owner any more (deleted by them, or, made
        // through the API by a former owner, at an owner change), so a retry
        // would run it for nobody who asked (QA: the new owner re-ran the
        // former owner's prompt with their own tools)
        // read once: the routine check and the budget check below use it
        let session = self.rt.store.get_session(record.session).await?;
        if let Some(session) = &session
            && session.key.kind == SessionKind::Routine
        {
            let routine = self
                .rt
                .store
                .get_routine(&record.bot, &session.key.peer)
                .await?;
            // made again under its name since this run's fire, the routine
            // the bot has is another: the run's prompt is the one before's
            // (QA, 2026-12-05: putting a routine of the name made the
            // former owner's run retriable, with its prompt)
            let earlier = match &routine {
                Some(r) => self.fired_before(&record, r.created_at).await?,
                None => false,
            };
            if routine.is_none() || earlier {
                return Err(ActorError::Conflict(format!(
                    "turn {turn} is a run of routine {:?}, which {} no longer has (removed, made \
                     by a former owner of the bot, or replaced by another of its name since): \
                     its runs are not retried; to run it again, put a routine with `botfleet \
                     routines put {} …`",
                    session.key.peer, record.bot, record.bot
                )));
            }
        }
        // what a room said to the bot before fleet.toml gave it to its
        // owner: that turn ended `owner_changed`, and would again (review:
        // the retry was taken, and ended the same way)
        if let Some(session) = &session
            && session.key.kind == SessionKind::Group
            && let Some(bot) = self.rt.store.get_bot(&record.bot).await?
            && crate::engine::came_before_owner_change(&self.rt.store, &record, &bot.owner).await?
        {
            return Err(ActorError::Conflict(format!(
                "turn {turn} cannot be retried: what it answered came before fleet.toml gave {} \
                 to its present owner, while it was its former owner's work; mention @{} in the \
                 room to ask it now",
                record.bot, record.bot
            )));
        }
        let sub = self.rt.store.get_subagent(&record.bot).await?;
        if let Some(sub) = &sub
            && sub.status == SubagentStatus::Stopped
        {
            // its turns are cancelled as they start: a retry would be too
            return Err(ActorError::Conflict(format!(
                "turn {turn} is of subagent {}, which was stopped and takes no more work; ask {} to start a new task",
                sub.id, sub.parent
            )));
        }
        // a retried task runs the subagent again: it counts against its
        // parent's limit and is `running` again, checked and written by
        // the store together (a person's message to the subagent bot, in
        // another session, is not its task and changes neither)
        let task = sub.as_ref().is_some_and(|s| {
            let key = SessionKey {
                bot: s.id.clone(),
                kind: SessionKind::Subagent,
                peer: s.parent.to_string(),
            };
            key.id() == record.session
        });
        // a task that is a former owner's ends `owner_changed` as it
        // starts, every time (review: a retry was taken, ran the task into
        // that end again, and its parent was told a second time)
        if task
            && let Some(sub) = &sub
            && let Some(parent) = self.rt.store.get_bot(&sub.parent).await?
            && crate::engine::task_is_former_owners(&self.rt.store, sub, &parent).await?
        {
            return Err(ActorError::Conflict(format!(
                "turn {turn} cannot be retried: subagent {}'s task was given while {} had another \
                 owner, and it is theirs; ask {} to start a new task",
                sub.id, sub.parent, sub.parent
            )));
        }
        // a task, or a member's turn in a room, fails as it starts while
        // the bot's budget is spent (`budget_checkpoint`): requeued now, a
        // task waited while the bot knew the pause, and a restart ran it
        // into that failure, with a second failed report to the parent; a
        // room's failed at once, unseen (QA, 2026-12-06)
        let room = !task
            && session
                .as_ref()
                .is_some_and(|s| s.key.kind == SessionKind::Group);
        if (task || room)
            && let Some(bot) = self.rt.store.get_bot(&record.bot).await?
            && let Some(pause) = crate::engine::budget_pause(&self.rt.store, &bot, 0).await?
        {
            let what = if task {
                format!("a task of subagent {}", record.bot)
            } else {
                format!("{}'s turn in a room", record.bot)
            };
            return Err(ActorError::Busy(format!(
                "turn {turn} was not retried: it is {what}, which fails as it starts while {}; \
                 retry it then",
                pause.reason()
            )));
        }
        // a member's turn of a discussion that ran with the shared surface
        // (another user's message, or the room shared then) would run
        // again with the owner's private tools once the room is not
        // shared (the surface follows the discussion the room runs now):
        // refused, as is one whose discussion cannot be told any more.
        // (A room shared now passes: its member turns get the shared
        // surface. One made private between this look and the requeue
        // would pass too; the window is that of this request.)
        if room
            && let Some(s) = &session
            && let Ok(room_id) = botfleet_memory::RoomId::new(&s.key.peer)
            && let Some(room) = self.rt.store.get_room(&room_id).await?
            && !room.shared
        {
            for gid in &record.inputs {
                let shared = match self.rt.store.room_input_trigger(&room_id, *gid).await? {
                    Some(trigger) => {
                        crate::group::discussion_was_shared(&self.rt.store, &room, trigger)
                            .await
                            .map_err(|e| match e {
                                crate::group::GroupError::Store(e) => ActorError::Store(e),
                                crate::group::GroupError::Actor(e) => e,
                                other => ActorError::Invalid(other.to_string()),
                            })?
                    }
                    None => None,
                };
                if shared != Some(false) {
                    return Err(ActorError::Conflict(format!(
                        "turn {turn} was not retried: it is {}'s turn in a discussion of room {} \
                         that ran with a shared room's tools (another user's message, or the room \
                         shared then){}; the room is not shared now, so a retry would give that \
                         discussion this room's private tools: post a new message to the room instead",
                        record.bot,
                        room.id,
                        if shared.is_none() {
                            ", or one this host can no longer tell"
                        } else {
                            ""
                        }
                    )));
                }
            }
        }
        // a later turn of the conversation running before its first step
        // is stored (the store checks the stored ones with the requeue):
        // its context holds these inputs, so the retried turn would
        // answer them again without what it answers
        if let Some(first) = record.inputs.iter().min()
            && let Some(running) = self.status(&record.bot).await?.and_then(|s| s.turn)
            && running.session == record.session
            && running.turn != turn
            && running.inputs.iter().any(|g| g > first)
        {
            return Err(ActorError::Busy(format!(
                "turn {turn} was not retried: a later turn of this conversation ({}) is running with these messages in its context: wait for it to end; if it answers them, send a new message instead (a retry would answer them a second time, without what came after)",
                running.turn
            )));
        }
        let requeue = if task {
            Mutation::RequeueSubagentTask {
                turn,
                max_running: self.rt.settings.max_subagents,
            }
        } else {
            Mutation::RequeueInputs { turn }
        };
        let written = match self.rt.store.write(vec![requeue]).await {
            Ok(written) => written,
            // a state that changed since it was read above (a stop, an end
            // or a start of the turn): the store's message says which
            Err(StoreError::Rejected(m)) => {
                return Err(ActorError::Conflict(format!(
                    "turn {turn} was not retried: {m}"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let n = match written.into_iter().next_back() {
            Some(MutationResult::Count(n)) => n,
            Some(MutationResult::SubagentLimit { parent, running }) => {
                return Err(ActorError::Busy(format!(
                    "turn {turn} is a task of subagent {}, which would run again, and its parent {parent} already has {} (the limit is {}, runtime.max_subagents); wait for one of them to finish, or stop one ({parent}'s StopSubagent, or cancel its turn with POST /v1/bots/<subagent>/cancel), then retry",
                    record.bot,
                    crate::tools::running_subagents(running),
                    self.rt.settings.max_subagents
                )));
            }
            // not answers to a requeue
            Some(
                MutationResult::Done
                | MutationResult::Admitted(_)
                | MutationResult::Appended { .. }
                | MutationResult::Attempts(_)
                | MutationResult::StartCounts(_)
                | MutationResult::Limited { .. }
                | MutationResult::SecretLimit { .. }
                | MutationResult::Memory(_)
                | MutationResult::ApprovalRequested(_)
                | MutationResult::ApprovalChanged(_),
            )
            | None => 0,
        };
        if n == 0 {
            return Err(ActorError::Conflict(format!(
                "the inputs of turn {turn} were already retried or taken by a later turn; nothing to retry (see the transcript)"
            )));
        }
        self.router()?.cast(RouterMsg::Wake(record.bot))?;
        Ok(n)
    }

    /// Whether turn `record`'s first input (a routine's fire) was written
    /// before `since` (ms): the routine's fires since its row was made are
    /// its own, as `Store::routines` lists its last run.
    async fn fired_before(&self, record: &TurnRecord, since: i64) -> Result<bool> {
        let Some(first) = record.inputs.iter().min() else {
            return Ok(false);
        };
        let entry = self.rt.store.entries_after_gid(first - 1, 1).await?;
        Ok(entry
            .first()
            .is_some_and(|e| e.gid == *first && e.created_at < since))
    }

    /// Why `bot` will never run a turn again, if it will not: a bot made
    /// by CreateAgent that its owner removed (no config lists it, so
    /// nothing brings it back: docs/operations.md, "Removing a bot"), or a
    /// subagent removed with such a bot. A bot the fleet's config no
    /// longer lists is not one: its requeued inputs run when a config
    /// lists it (or its parent) again.
    async fn removed_for_good(&self, bot: &BotId) -> Result<Option<String>> {
        let store = &self.rt.store;
        let Some(record) = store.get_bot(bot).await? else {
            return Ok(None);
        };
        if record.removed_at().is_none() {
            return Ok(None);
        }
        if record.origin.starts_with(MADE_BY) {
            return Ok(Some(format!(
                "bot {bot} was removed by its owner and runs no more turns (its conversations \
                 are kept and readable); send the message to another of your bots, or have \
                 one make a new bot with CreateAgent"
            )));
        }
        let Some(parent) = record.origin.strip_prefix(SUBAGENT_OF) else {
            return Ok(None);
        };
        let Ok(parent_id) = BotId::new(parent) else {
            return Ok(None);
        };
        let parent_gone = store
            .get_bot(&parent_id)
            .await?
            .is_some_and(|p| p.origin.starts_with(MADE_BY) && p.removed_at().is_some());
        Ok(parent_gone.then(|| {
            format!(
                "subagent {bot} was removed with its parent {parent}, which its owner removed, \
                 and runs no more turns (its conversations are kept and readable); give the \
                 task to another of your bots"
            )
        }))
    }
}
