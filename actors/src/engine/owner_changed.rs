//! Work that is no longer its bot's to do since fleet.toml changed an
//! owner: a DM of a person who no longer owns the bot, a conversation with
//! a bot of another owner, inputs that came before the change into a
//! session its new owner reads only from the change on (a run of a
//! routine the former owner made through the API, a room's message), and
//! a subagent's task delegated from any of them.
//! Checked as a turn starts and as it resumes (`Runner::run`), before the
//! new owner's identity, memory, secrets or tools are read: such a turn
//! ends without a model call. `impl Runner`, split from `turn_setup.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;
use botfleet_memory::BotId;

/// Why a turn's work is no longer its bot's to do: fleet.toml changed an
/// owner since it was queued or cut off.
pub(in crate::engine::runner) enum OwnerChanged {
    /// The session is the DM of a person who no longer owns the bot.
    FormerOwnersDm,
    /// The session is the bot's conversation with this bot, which now
    /// belongs to another user than the bot does.
    OtherOwnersBot(BotId),
    /// The session is a subagent's task that this parent delegated from
    /// one of the above: the task is the former owner's (or their
    /// bot's) instruction, and its conversation holds it.
    FormerOwnersTask(BotId),
    /// The turn's inputs came before the change into a session that went
    /// to the new owner read from the change on (its floor): a run of a
    /// routine the former owner made through the API, whose prompt is
    /// theirs, or what a room said to the bot then. (Review: such a run,
    /// cut off by the restart, went on with the new owner's tools and read
    /// their files.)
    BeforeTheChange,
}

/// Whether ended turn `record` answered inputs that came before an owner
/// change, into its session that `owner` reads from that change on (its
/// floor): such a turn ends `owner_changed` (`BeforeTheChange`), and a
/// retry would end the same way (`FleetHandle::retry` refuses it, a
/// room's notice offers none). Its input seqs are its checkpoint's.
pub(crate) async fn came_before_owner_change(
    store: &botfleet_memory::Store,
    record: &botfleet_memory::TurnRecord,
    owner: &botfleet_memory::UserId,
) -> Result<bool, StoreError> {
    let Some((from_seq, _)) = store.session_floor(record.session, owner).await? else {
        return Ok(false);
    };
    Ok(TurnState::from_value(&record.checkpoint)
        .input_seqs
        .iter()
        .any(|seq| *seq < from_seq))
}

/// Whether subagent `sub`'s task is a former owner's to the owner of
/// `of` (its parent, or the subagent itself: a subagent moves with its
/// parent, so they have one owner), as the store has it now: given in the
/// DM of a person who no longer owns the parent, or in its conversation
/// with a bot that belongs to another user now, or read by its owner from
/// an owner change on (its task session's floor;
/// `Writer::floor_task_of_unread_origin`). Every turn of such a task
/// ends `owner_changed` (`Runner::owner_changed`), MessageSubagent
/// refuses it more work, and a retry of its turns is refused. One level:
/// a subagent delegates no further, so the session its task came from is
/// no task of its own.
pub(crate) async fn task_is_former_owners(
    store: &botfleet_memory::Store,
    sub: &botfleet_memory::SubagentRecord,
    of: &botfleet_memory::BotRecord,
) -> Result<bool, StoreError> {
    let from = store.get_session(sub.parent_session).await?;
    task_from_is_former_owners(store, sub, from.as_ref(), of).await
}

/// [`task_is_former_owners`], with the session the task came from
/// (`sub.parent_session`) as read already.
pub(crate) async fn task_from_is_former_owners(
    store: &botfleet_memory::Store,
    sub: &botfleet_memory::SubagentRecord,
    from: Option<&SessionRecord>,
    of: &botfleet_memory::BotRecord,
) -> Result<bool, StoreError> {
    if let Some(from) = from
        && (from.key.is_former_owners_dm(&of.owner)
            || crate::safety::approvals::other_owners_peer(store, from, of)
                .await?
                .is_some())
    {
        return Ok(true);
    }
    // review: a task a routine of the former owner made through the API
    // gave ran on with the new owner's tools (its session had gone to
    // them); the store judged it the former owner's as the owner changed,
    // by where in that session it was given
    let task = SessionKey {
        bot: sub.id.clone(),
        kind: SessionKind::Subagent,
        peer: sub.parent.to_string(),
    }
    .id();
    Ok(store.session_floor(task, &of.owner).await?.is_some())
}

impl Runner {
    /// Whether the turn in `session` would work for someone who is not
    /// the bot's owner (any more: an owner changed in fleet.toml). A DM
    /// with a person who no longer owns the bot stays that person's: a
    /// turn there would run with the owner's private surface (their user
    /// memory, transcripts, workspace and secrets) and answer someone
    /// else. A conversation with a bot of another owner holds what that
    /// bot (its owner's instructions) asked before the change: carried
    /// out now, it would run with the new owner's tools, workspace and
    /// secrets. So does a subagent's task delegated from either of them
    /// (`SubagentRecord::parent_session`), whatever runs in its session:
    /// the task itself (a turn the restart cut off, or still queued), its
    /// parent's steering, an approval's decision. A conversation with a
    /// bot reads the store (the other bot's record, cached), a subagent's
    /// task its record and the session it was delegated from.
    pub(in crate::engine::runner) async fn owner_changed(
        &self,
        session: &SessionRecord,
    ) -> Result<Option<OwnerChanged>, StoreError> {
        if session.key.kind == SessionKind::Subagent {
            return self.task_owner_changed().await;
        }
        if let Some(why) = self.work_owner_changed(session).await? {
            return Ok(Some(why));
        }
        self.before_the_change(session).await
    }

    /// Whether this turn's inputs came into `session`, its own, before
    /// the change that gave it to the bot's owner read from then on (its
    /// floor, `TurnPlan::floor`: the bot read it as it woke, so a turn in
    /// a room or a routine reads nothing more). Only a Routine or a Group
    /// session goes to a new owner with a floor (`Writer::move_own_work`).
    /// Not asked of the session a subagent's task came from: the turn's
    /// inputs are in the task session, and their seqs say nothing of that
    /// one's (the store floors the task session instead).
    async fn before_the_change(
        &self,
        session: &SessionRecord,
    ) -> Result<Option<OwnerChanged>, StoreError> {
        if !matches!(session.key.kind, SessionKind::Routine | SessionKind::Group) {
            return Ok(None);
        }
        let Some(from_seq) = self.floor else {
            return Ok(None);
        };
        let before = self.input_seqs().await?.iter().any(|seq| *seq < from_seq);
        Ok(before.then_some(OwnerChanged::BeforeTheChange))
    }

    /// [`Self::owner_changed`] of a session that is no subagent's task.
    async fn work_owner_changed(
        &self,
        session: &SessionRecord,
    ) -> Result<Option<OwnerChanged>, StoreError> {
        if session.key.is_former_owners_dm(&self.bot.owner) {
            return Ok(Some(OwnerChanged::FormerOwnersDm));
        }
        // a peer that names no bot (or no bot any more) has no owner to
        // differ: its inputs run as before; an approval asked there is
        // judged by the same rule (`approvals::standing`)
        Ok(
            crate::safety::approvals::other_owners_peer(&self.rt.store, session, &self.bot)
                .await?
                .map(OwnerChanged::OtherOwnersBot),
        )
    }

    /// Whether this subagent's task is a former owner's
    /// ([`task_is_former_owners`]).
    async fn task_owner_changed(&self) -> Result<Option<OwnerChanged>, StoreError> {
        // a subagent's bot is made with its record, in one write: a bot
        // without one is no subagent of Task's, and has no task to check
        let Some(sub) = self.rt.store.get_subagent(&self.bot.id).await? else {
            return Ok(None);
        };
        let theirs = task_is_former_owners(&self.rt.store, &sub, &self.bot).await?;
        Ok(theirs.then_some(OwnerChanged::FormerOwnersTask(sub.parent)))
    }

    /// The seqs of this turn's inputs: the plan's, or those its stored
    /// checkpoint names (a turn the restart cut off is planned without
    /// them). Empty for a compaction, and for a checkpoint that predates
    /// them.
    async fn input_seqs(&self) -> Result<Vec<i64>, StoreError> {
        let planned: Vec<i64> = match &self.kind {
            Some(
                PlanKind::New { inputs }
                | PlanKind::Resume { inputs }
                | PlanKind::Fail { inputs, .. },
            ) => inputs.iter().map(|(item, _)| item.seq).collect(),
            Some(PlanKind::Compact) | None => return Ok(Vec::new()),
        };
        if matches!(self.kind, Some(PlanKind::New { .. })) || !planned.is_empty() {
            return Ok(planned);
        }
        Ok(match self.rt.store.get_turn(self.turn).await? {
            Some(record) => TurnState::from_value(&record.checkpoint).input_seqs,
            None => Vec::new(),
        })
    }

    /// Ends this turn, whose work is another user's since an owner
    /// changed (`why`), without a model call: its inputs (a person's or
    /// the other bot's messages, a subagent's report, an approval's
    /// decision, a parent's task or steering) stay recorded and are
    /// closed, and a notice in the session (read by its own owner only)
    /// says they were not answered. A resumed turn ends where it stopped
    /// (its calls that never got a result stay without one). A compaction
    /// of the session does not run.
    ///
    /// A subagent's task ends `failed`, saying why: its status and result
    /// (CheckSubagent) and the report its parent gets, in the same commit
    /// (`persist.rs`); the report goes to the parent's own session with
    /// the subagent, never to the former owner's DM.
    pub(in crate::engine::runner) async fn end_for_former_owner(
        &mut self,
        session: SessionRecord,
        why: OwnerChanged,
    ) -> Result<TurnStatus, StoreError> {
        self.scope.session = session;
        match self.kind.take() {
            Some(PlanKind::New { inputs }) => {
                self.name_reports(inputs.iter().filter_map(|(_, e)| e.as_ref()))
                    .await?;
                self.begin(inputs);
            }
            Some(PlanKind::Resume { inputs } | PlanKind::Fail { inputs, .. }) => {
                if self.load_record().await? {
                    // whom it answered, read back from its own entries (the
                    // checkpoint may predate its last outcomes): a bot it
                    // answered is not told below that it will not be
                    // (review)
                    let mine = self.own_entries().await?;
                    self.asked_from(&mine);
                } else {
                    self.name_reports(inputs.iter().filter_map(|(_, e)| e.as_ref()))
                        .await?;
                    self.begin(inputs);
                }
            }
            Some(PlanKind::Compact) | None => return Ok(TurnStatus::Completed),
        }
        // the notice below says why; no `turn_cancelled` notice offering
        // a retry, which would end the same way
        self.state.owes_delivery = false;
        let (text, error, status) = match &why {
            OwnerChanged::FormerOwnersDm => {
                tracing::info!(bot = %self.bot.id, turn = %self.turn, session = %self.session, "the DM's person no longer owns the bot: the turn ends unanswered");
                (
                    prompts().owner_changed.render(&[]),
                    "the bot now belongs to another user".to_owned(),
                    TurnStatus::Cancelled,
                )
            }
            OwnerChanged::OtherOwnersBot(peer) => {
                tracing::info!(bot = %self.bot.id, turn = %self.turn, session = %self.session, %peer, "the other bot of the conversation belongs to another user now: the turn ends unanswered");
                (
                    prompts()
                        .owner_changed_bot
                        .render(&[("peer", peer.as_str())]),
                    format!("{peer} and this bot no longer belong to the same user"),
                    TurnStatus::Cancelled,
                )
            }
            OwnerChanged::BeforeTheChange => {
                tracing::info!(bot = %self.bot.id, turn = %self.turn, session = %self.session, "the turn's inputs came before the owner change, into a session the new owner reads from the change on: the turn ends unanswered");
                (
                    prompts().owner_changed_run.render(&[]),
                    "its inputs came before the bot was given to its owner".to_owned(),
                    TurnStatus::Cancelled,
                )
            }
            OwnerChanged::FormerOwnersTask(parent) => {
                tracing::info!(bot = %self.bot.id, turn = %self.turn, session = %self.session, %parent, "the subagent's task came from work of its parent's former owner: the turn ends without running");
                let p = prompts();
                // why the task failed, for its parent (`subagent_end`)
                self.error = p.owner_changed_task_report.render(&[]).ok();
                (
                    p.owner_changed_task.render(&[("parent", parent.as_str())]),
                    format!(
                        "the task came from a conversation of {parent}'s former owner, and {parent} now belongs to another user"
                    ),
                    TurnStatus::Failed,
                )
            }
        };
        let notice = self.entry(
            EntryId::derive(self.turn, "end", OWNER_CHANGED_CODE),
            EntryKind::Notice {
                code: OWNER_CHANGED_CODE.into(),
                text: text.unwrap_or_default(),
                retry_turn: None,
            },
        );
        // the bot that wrote, its owner's still, is told no answer comes,
        // in the conversation it asked from (audit: it had told its person
        // it would report back, and never woke again)
        let told = match why {
            OwnerChanged::OtherOwnersBot(_) => match self.owner_changed_notices().await {
                Ok(notices) => notices,
                Err(e) => {
                    tracing::warn!(bot = %self.bot.id, turn = %self.turn, error = %e, "could not tell the bots that wrote to this bot that it will not answer");
                    Vec::new()
                }
            },
            OwnerChanged::FormerOwnersDm
            | OwnerChanged::FormerOwnersTask(_)
            | OwnerChanged::BeforeTheChange => Vec::new(),
        };
        self.end_with(status, Some((error, notice)), told).await
    }
}
