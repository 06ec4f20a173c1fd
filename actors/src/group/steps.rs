//! The steps of a room run, as the coordinator takes them: start a run,
//! hand a member its input, record its turn, end the run.
//!
//! Writes are few and atomic. A member's replies are published while its
//! turn runs, each with a checkpoint listing it (`super::live`); what the
//! end of its turn finds unpublished (a turn whose end was read with its
//! deliveries) goes out in the same transaction as the run's checkpoint
//! and the *next* member's input (or the run's end). The checkpoint in
//! that transaction is taken before the next member's cursor moves (and a
//! member's cursor moves only when its turn is recorded), so after a
//! restart the awaited member's input renders to the same text and its
//! admission (same nonce) answers `duplicate`.

use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::RoomRunRecord;
use botfleet_memory::RoomRunStatus;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::TurnStatus;
use ractor::ActorRef;

use super::absent::Absent;
use super::absent::absent;
use super::actor::Current;
use super::actor::GroupMsg;
use super::actor::GroupState;
use super::actor::Progress;
use super::actor::RunState;
use super::error::GroupError;
use super::held;
use super::held::count_held;
use super::live::reply_entry;
use super::member::Cursor;
use super::member::InputView;
use super::member::MemberDone;
use super::member::MemberWait;
use super::member::input_author;
use super::member::render_input;
use super::run::End;
use super::run::Run;
use super::run::Turn;
use super::unshared::withdrawn;
use crate::prompts::prompts;

impl GroupState {
    /// Takes up a stored run: a new one gets its progress (the machine and
    /// the members' cursors after the previous run); an unfinished one
    /// resumes from its checkpoint.
    pub(super) async fn start(&mut self, record: RoomRunRecord) -> Result<(), GroupError> {
        let trigger_seq = record.trigger_seq;
        self.refresh_tail(trigger_seq).await?;
        let mut state: RunState = match serde_json::from_value(record.state) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(room = %self.room.id, trigger_seq, error = %e, "unreadable run state; ending the run");
                RunState {
                    selected: Vec::new(),
                    unknown: Vec::new(),
                    removed: Vec::new(),
                    shared: true,
                    progress: None,
                }
            }
        };
        match &state.progress {
            None => {
                // a run that starts has the room's members as they are now
                self.reload_room().await?;
                let indices = state
                    .selected
                    .iter()
                    .filter_map(|id| self.room.members.iter().position(|m| m == id))
                    .collect();
                let left = state
                    .selected
                    .iter()
                    .filter(|id| !self.room.members.contains(id))
                    .cloned()
                    .collect();
                state.progress = Some(Progress {
                    run: Run::new(indices, self.limits),
                    cursors: self.cursors.clone(),
                    withheld: self.withheld.clone(),
                    members: Some(self.room.members.clone()),
                    live: Vec::new(),
                    era: None,
                    left,
                });
            }
            Some(progress) => {
                tracing::info!(room = %self.room.id, trigger_seq, "resuming an unfinished room run");
                // it finishes with the members it started with
                if let Some(members) = progress.members.clone() {
                    self.use_members(members).await?;
                }
            }
        }
        // the surface follows the message, not the room as it is now
        let author = self
            .tail
            .iter()
            .find(|e| e.seq == trigger_seq)
            .map(|e| e.author.clone());
        self.follow_input(state.shared, author.as_deref());
        self.pending.clear();
        self.current = Some(Current {
            trigger_seq,
            state,
            wait: None,
        });
        Ok(())
    }

    /// Records a member's finished turn in the machine; its allowed
    /// deliveries not yet published while it ran (`super::live`), and a
    /// notice if the turn failed, become pending entries (committed with
    /// the next step).
    pub(super) async fn complete_member(&mut self, done: MemberDone) -> Result<(), GroupError> {
        let failure = match done.status {
            TurnStatus::Failed | TurnStatus::Cancelled => Some(self.failure_reason(&done).await?),
            TurnStatus::Completed
            | TurnStatus::Undelivered
            | TurnStatus::Interrupted
            | TurnStatus::Running => None,
        };
        // the room was given to more people since the member got its
        // input: what the turn had not published by then is held
        // (`super::era`)
        let outlived = self.input_outlived().await?;
        // nothing published and no failure: did review refuse what it said?
        // (only a shared room's messages are reviewed: no read otherwise)
        let refused = match self.current.as_ref().and_then(|c| c.wait.as_ref()) {
            Some(wait) if self.room.shared && failure.is_none() && done.deliveries.is_empty() => {
                self.review_refused(&wait.bot, wait.session, done.turn)
                    .await?
            }
            _ => false,
        };
        // nor that: did it ask its owner to approve an action?
        let asked = match self.current.as_ref().and_then(|c| c.wait.as_ref()) {
            Some(wait) if failure.is_none() && done.deliveries.is_empty() && !refused => {
                self.asked_approval(&wait.bot, wait.session, done.turn)
                    .await?
            }
            _ => false,
        };
        let Some(cur) = self.current.as_mut() else {
            return Ok(());
        };
        let trigger = cur.trigger_seq;
        let Some(wait) = cur.wait.take() else {
            return Ok(());
        };
        self.rt.groups.watches().remove(&wait.session);
        let Some(progress) = cur.state.progress.as_mut() else {
            return Ok(());
        };
        progress.era = None;
        // published while the turn ran: not again
        let live = std::mem::take(&mut progress.live);
        let held = if outlived {
            done.deliveries
                .iter()
                .filter_map(|d| reply_entry(d, self.timeline, &wait.bot))
                .filter(|r| !live.contains(&r.id))
                .count()
        } else {
            0
        };
        let delivered = (done.deliveries.len() - held) as u32;
        let held = held + done.refused;
        let recorded = progress.run.record(match (&failure, delivered) {
            (Some(_), n) => Turn::Failed(n),
            (None, 0) if refused => Turn::Held,
            (None, 0) if asked => Turn::Asked,
            (None, 0) => Turn::Skipped,
            (None, n) => Turn::Spoke(n),
        });
        // its cursor moves now that its turn is recorded; what it sends
        // from now on, until its next input, is held
        progress.cursors.insert(
            wait.bot.clone(),
            Cursor {
                answered: wait.scanned,
                ..wait.shown
            },
        );
        progress.withheld.remove(&wait.bot);
        if recorded.withheld > 0 {
            progress
                .withheld
                .insert(wait.bot.clone(), recorded.withheld);
        }
        for d in done.deliveries.iter().take(recorded.published as usize) {
            if let Some(reply) = reply_entry(d, self.timeline, &wait.bot)
                && !live.contains(&reply.id)
                && !outlived
            {
                self.pending.push(reply);
            }
        }
        if outlived {
            // what the turn did after the room was given to more people
            // (its private tools' results, its drafts) is below a new
            // context cut, as what it did before is below the change's
            // (QA: it stood in the new epoch, and the member's next turn,
            // in the shared room, was sent it)
            let cut = self.cut_after_private_turn(wait.session).await?;
            self.cuts.extend(cut);
        }
        if held > 0 {
            tracing::info!(room = %self.room.id, member = %wait.bot, held, "the room was given to more people during the member's turn; its replies are held");
            let notice = self.outlived_notice(&wait.bot, trigger, held);
            self.pending.push(notice);
        }
        if let Some(reason) = failure {
            tracing::info!(room = %self.room.id, member = %wait.bot, status = done.status.as_str(), "member turn did not complete; what it delivered counts");
            let notice = self.failure_notice(&wait.bot, done.turn, reason).await?;
            self.pending.push(notice);
        }
        Ok(())
    }

    /// Commits the pending replies, `entries` and the run's checkpoint
    /// (serialized now) with `status`, plus `extra` mutations after them.
    /// Returns the results of `extra`.
    pub(super) async fn commit(
        &mut self,
        entries: Vec<NewEntry>,
        status: RoomRunStatus,
        extra: Vec<Mutation>,
    ) -> Result<Vec<MutationResult>, GroupError> {
        let Some(cur) = self.current.as_ref() else {
            return Ok(Vec::new());
        };
        let state = serde_json::to_value(&cur.state)
            .map_err(|e| GroupError::Invalid(format!("run state: {e}")))?;
        let mut appended = std::mem::take(&mut self.pending);
        appended.extend(entries);
        let mut batch: Vec<Mutation> = appended
            .iter()
            .map(|e| Mutation::Append(Box::new(e.clone())))
            .collect();
        batch.push(Mutation::SaveRoomRun {
            room: self.room.id.clone(),
            trigger_seq: cur.trigger_seq,
            status,
            state,
        });
        let cuts = std::mem::take(&mut self.cuts);
        let cut_count = cuts.len();
        batch.extend(cuts);
        batch.extend(extra);
        let mut results = self.rt.store.write(batch).await?.into_iter();
        for e in appended {
            if let Some(MutationResult::Appended {
                seq,
                gid,
                created_at,
                ..
            }) = results.next()
            {
                self.push_tail(Entry {
                    id: e.id,
                    session: e.session,
                    seq,
                    gid,
                    author: e.author,
                    turn: e.turn,
                    created_at,
                    kind: e.kind,
                });
            }
        }
        // the checkpoint's result, and the cuts'
        results.next();
        for _ in 0..cut_count {
            results.next();
        }
        Ok(results.collect())
    }

    /// Closes `bot`'s unanswered input in its session of this room with a
    /// notice ([`held::SKIPPED_CODE`]), when it has one: the discussion no
    /// longer awaits it.
    async fn close_input(&self, bot: &BotId) -> Result<(), GroupError> {
        let session = SessionKey {
            bot: bot.clone(),
            kind: SessionKind::Group,
            peer: self.room.id.to_string(),
        }
        .id();
        if held::floor(&self.rt.store, session, self.room.id.as_str())? == held::Floor::NotYours {
            return Ok(());
        }
        let text = prompts()
            .group_member_skipped
            .render(&[("room", &self.room.name)])
            .unwrap_or_default();
        self.rt
            .store
            .write(vec![Mutation::Append(Box::new(NewEntry {
                id: EntryId::new_v7(),
                session,
                author: "system".into(),
                turn: None,
                kind: EntryKind::Notice {
                    code: held::SKIPPED_CODE.into(),
                    text,
                    retry_turn: None,
                },
            }))])
            .await?;
        Ok(())
    }

    /// Whether `bot` runs no more turns (see [`absent`], [`withdrawn`]).
    async fn takes_no_turns(&self, bot: &BotId) -> Result<bool, GroupError> {
        Ok(match self.rt.store.get_bot(bot).await? {
            Some(b) => {
                absent(&self.rt.store, &b).await?.is_some()
                    || withdrawn(&self.rt.store, &self.room, &b).await?
            }
            None => false,
        })
    }

    /// The discussion goes on without member `bot`: its input closed, its
    /// part recorded (what it published while a turn of it ran stays
    /// published, and counts), no wait for it.
    async fn go_on_without(&mut self, bot: &BotId) -> Result<(), GroupError> {
        self.close_input(bot).await?;
        let Some(cur) = self.current.as_mut() else {
            return Ok(());
        };
        cur.wait = None;
        if let Some(progress) = cur.state.progress.as_mut() {
            let live = std::mem::take(&mut progress.live);
            progress.era = None;
            progress.run.record(match live.len() {
                0 => Turn::Absent,
                n => Turn::Spoke(u32::try_from(n).unwrap_or(u32::MAX)),
            });
        }
        Ok(())
    }

    /// Looked at while the run waits for a member's turn (at each
    /// [`GroupMsg::Recheck`], once the member's session is read): a member
    /// removed by its owner or a subagent stopped while its input still
    /// waited in its queue starts no turn, so no turn of it ends, and the
    /// run (and every later message to the room) waited for good, until a
    /// restart (audit, 2026-12-07). Its running turn, if any, is cancelled
    /// and ends as usual. Whether the run goes on without it.
    pub(super) async fn leave_a_member_gone(&mut self) -> Result<bool, GroupError> {
        let Some(bot) = self
            .current
            .as_ref()
            .and_then(|c| c.wait.as_ref())
            .map(|w| w.bot.clone())
        else {
            return Ok(false);
        };
        if !self.takes_no_turns(&bot).await? {
            return Ok(false);
        }
        tracing::info!(room = %self.room.id, member = %bot, "the awaited member runs no more turns: the discussion goes on without it");
        self.go_on_without(&bot).await?;
        Ok(true)
    }

    /// Hands `member` its input — the new public messages, including the
    /// pending replies — in the same transaction as those replies and the
    /// checkpoint, and starts waiting for its turn.
    pub(super) async fn begin_member(
        &mut self,
        myself: &ActorRef<GroupMsg>,
        member: usize,
        round: u32,
        slot: usize,
    ) -> Result<(), GroupError> {
        let Some(bot) = self.room.members.get(member).cloned() else {
            return Err(GroupError::Invalid(format!("no member {member}")));
        };
        if self.takes_no_turns(&bot).await? {
            // no longer in the fleet's config, or a subagent that was
            // stopped, or its owner no longer shares it and the start took
            // it out of the room (since the message was posted): it runs
            // no turns, so the discussion goes on without it. A run
            // resumed after a restart comes here again for the member that
            // had the floor (a resumed run starts with no wait), so this
            // covers that too: its input is closed, so a turn of it resumed
            // later (listed again) has what it sends held, not told it was
            // delivered
            self.go_on_without(&bot).await?;
            return Ok(());
        }
        // pending replies, shown with provisional seqs above every stored one
        let base = self.last_seq + 1;
        let pending: Vec<Entry> = self
            .pending
            .iter()
            .enumerate()
            .map(|(i, e)| Entry {
                id: e.id,
                session: e.session,
                seq: base + i as i64,
                gid: 0,
                author: e.author.clone(),
                turn: e.turn,
                created_at: 0,
                kind: e.kind.clone(),
            })
            .collect();
        let Some(cur) = self.current.as_ref() else {
            return Ok(());
        };
        let Some(progress) = cur.state.progress.as_ref() else {
            return Ok(());
        };
        let key = SessionKey {
            bot: bot.clone(),
            kind: SessionKind::Group,
            peer: self.room.id.to_string(),
        };
        let cursor = progress.cursors.get(&bot).copied().unwrap_or_default();
        // the audience the input is given under: what it shows starts
        // there, and it is written with the input (below)
        let mark = self.audience_mark().await?;
        let cursor = self.within_audience(member, cursor, mark).await?;
        let held = count_held(
            &self.rt.store,
            key.id(),
            self.room.id.as_str(),
            cursor.answered,
        )
        .await?;
        let earlier = self.unseen_before_tail(&bot, cursor).await?;
        let view = InputView {
            room: &self.room.name,
            names: &self.names,
            absent: &self.absent,
            member,
            messages: self.tail.make_contiguous(),
            earlier,
            pending: &pending,
            cursor,
            trigger: cur.trigger_seq,
            withheld: progress.withheld.get(&bot).copied().unwrap_or(0),
            held,
            limits: self.limits,
        };
        let (text, mut covered) = render_input(&view);
        let session = key.id();
        let owner = self
            .owners
            .get(member)
            .cloned()
            .unwrap_or_else(|| self.room.owner.clone());
        let entry = NewEntry {
            id: EntryId::new_v7(),
            session,
            author: input_author(self.room.id.as_str()),
            turn: None,
            kind: EntryKind::Event {
                // quoted: the name is its creator's words, and the
                // header this goes into is the prompt's own
                origin: format!("room {}", crate::prompts::quoted_name(&self.room.name)),
                text: text.clone(),
                trusted: false,
                hop: None,
                chain: None,
                asked: None,
            },
        };
        let req = AdmitRequest {
            source: format!("room:{}", self.room.id),
            nonce: format!("{}:{round}:{slot}", cur.trigger_seq),
            nonce_time_ms: None,
            digest: InputDigest::of_parts([
                b"room_turn".as_slice(),
                self.room.id.as_str().as_bytes(),
                bot.as_str().as_bytes(),
                text.as_bytes(),
            ]),
            session: key,
            owner,
            entry: entry.clone(),
            priority: Priority::Background,
        };
        // the audience the input was given under (`mark`, above), written
        // with it (kept if this input was given before a restart): if the
        // room is given to more people before the turn ends, the turn
        // publishes nothing more (`super::era`)
        if let Some(progress) = self
            .current
            .as_mut()
            .and_then(|c| c.state.progress.as_mut())
        {
            progress.era.get_or_insert(mark);
        }
        // watch before admitting: a signal that lands meanwhile waits in
        // the mailbox, and the first read after this sees what came before
        self.rt.groups.watches().insert(session, myself.clone());
        let last_before = self.last_seq;
        let results = self
            .commit(
                Vec::new(),
                RoomRunStatus::Running,
                vec![Mutation::Admit(Box::new(req))],
            )
            .await?;
        let record = match results.into_iter().next() {
            Some(MutationResult::Admitted(AdmitOutcome::Accepted(r))) => {
                self.rt
                    .route_committed(vec![(r.clone(), Priority::Background, entry)]);
                r
            }
            Some(MutationResult::Admitted(AdmitOutcome::Duplicate(r))) => r,
            Some(MutationResult::Admitted(AdmitOutcome::Conflict(r))) => {
                tracing::warn!(room = %self.room.id, member = %bot, "member input differs from the one admitted before a restart; waiting for the admitted one");
                r
            }
            Some(MutationResult::Admitted(AdmitOutcome::Unknown { reason })) => {
                return Err(GroupError::Invalid(format!(
                    "the ledger cannot tell whether member {bot} got its input: {reason}"
                )));
            }
            other => {
                return Err(GroupError::Invalid(format!(
                    "unexpected admission result {other:?}"
                )));
            }
        };
        // a provisional seq in the cursor becomes the real one
        if covered.delivery > last_before {
            covered.delivery = self.last_seq;
        }
        let Some(cur) = self.current.as_mut() else {
            return Ok(());
        };
        // its cursor and withheld count change when its turn is recorded
        // (`complete_member`): a checkpoint taken while the turn runs
        // renders this same input after a restart
        let mut wait = MemberWait::new(bot, session, record.seq);
        wait.shown = covered;
        cur.wait = Some(wait);
        Ok(())
    }

    /// Ends the run: its last replies, a notice saying why it stopped, and
    /// a `turn_end` listing the user message, with the run marked done.
    pub(super) async fn finish(&mut self, end: End) -> Result<(), GroupError> {
        let Some(cur) = self.current.as_ref() else {
            return Ok(());
        };
        let Some(progress) = cur.state.progress.as_ref() else {
            return Ok(());
        };
        let replies = progress.run.replies();
        let trigger = cur.trigger_seq;
        // the timeline says why members did not answer (the notices of it
        // are in their own sessions, which the room's readers may not
        // read): those that could take no turn, and those whose messages
        // auto-review refused
        let p = prompts();
        // each absent member with why: a notice that offered every reason
        // at once left the reader to guess (QA: a member taken out of the
        // room was "removed …, stopped, or taken out of the room")
        let absent_ids: Vec<BotId> = progress
            .run
            .absent()
            .into_iter()
            .filter_map(|m| self.room.members.get(m).cloned())
            .collect();
        let left = progress.left.clone();
        let held: Vec<String> = progress
            .run
            .held()
            .into_iter()
            .filter_map(|m| self.room.members.get(m).map(|b| format!("@{b}")))
            .collect();
        let asked: Vec<String> = progress
            .run
            .awaiting_approval()
            .into_iter()
            .filter_map(|m| self.room.members.get(m).map(|b| format!("@{b}")))
            .collect();
        let mut gone = Vec::with_capacity(absent_ids.len() + left.len());
        for bot in &absent_ids {
            let record = self.rt.store.get_bot(bot).await?;
            let why = match &record {
                Some(b) => absent(&self.rt.store, b).await?,
                None => None,
            };
            let (template, parent) = match why {
                Some(Absent::Removed) => (&p.group_absent_removed, String::new()),
                Some(Absent::RemovedByOwner) => (&p.group_absent_removed_by_owner, String::new()),
                Some(Absent::OwnerAway) => (&p.group_absent_owner_away, String::new()),
                Some(Absent::ParentGone { parent }) => {
                    (&p.group_absent_parent_gone, parent.to_string())
                }
                Some(Absent::Stopped { parent }) => (&p.group_absent_stopped, parent.to_string()),
                // not removed nor stopped: its owner no longer shares it
                None => (&p.group_absent_unshared, String::new()),
            };
            let member = format!("@{bot}");
            gone.push(
                template
                    .render(&[("member", &member), ("parent", &parent)])
                    .unwrap_or_default(),
            );
        }
        // those taken out of the room before the run began
        for bot in &left {
            let member = format!("@{bot}");
            gone.push(
                p.group_absent_left
                    .render(&[("member", &member)])
                    .unwrap_or_default(),
            );
        }
        let mut why = if end == End::NoMembers && !gone.is_empty() {
            // members were addressed, and none of them could take a turn:
            // "nobody was addressed" beside "@c … took no turn" said two
            // things at once (QA)
            p.group_no_turn.render(&[]).unwrap_or_default()
        } else {
            progress.run.describe_end(end)
        };
        if !gone.is_empty() {
            why.push_str(
                &p.group_absent
                    .render(&[("members", &gone.join(", "))])
                    .unwrap_or_default(),
            );
        }
        if !held.is_empty() {
            why.push_str(
                &p.group_review_refused
                    .render(&[("members", &held.join(", "))])
                    .unwrap_or_default(),
            );
        }
        if !asked.is_empty() {
            why.push_str(
                &p.group_awaiting_approval
                    .render(&[("members", &asked.join(", "))])
                    .unwrap_or_default(),
            );
        }
        if end == End::NoMembers {
            // the members it may mention now: a message posted while they
            // were others (one it named left the room) said only "nobody";
            // one removed since takes no turns and is not listed (QA,
            // 2026-12-05: a removed made bot was)
            let mut taking = Vec::with_capacity(self.names.len());
            for (bot, name) in self.room.members.iter().zip(&self.names) {
                let gone = match self.rt.store.get_bot(bot).await? {
                    Some(record) => absent(&self.rt.store, &record).await?.is_some(),
                    None => true,
                };
                if !gone {
                    taking.push(name.clone());
                }
            }
            why.push_str(&format!(
                "; the room's members now: {}",
                super::mentions::members_list(&taking)
            ));
        }
        let notice = NewEntry {
            id: EntryId::new_v7(),
            session: self.timeline,
            author: "system".into(),
            turn: None,
            kind: EntryKind::Notice {
                code: format!("room_run_{}", end.code()),
                text: format!(
                    "Discussion of message #{trigger} ended: {why} ({replies} public {}).",
                    if replies == 1 { "reply" } else { "replies" }
                ),
                retry_turn: None,
            },
        };
        let end_entry = NewEntry {
            id: EntryId::new_v7(),
            session: self.timeline,
            author: "system".into(),
            turn: None,
            kind: EntryKind::TurnEnd {
                status: TurnStatus::Completed,
                inputs: vec![trigger],
                deliveries: replies,
                usage: None,
            },
        };
        let (cursors, withheld) = (progress.cursors.clone(), progress.withheld.clone());
        self.commit(vec![notice, end_entry], RoomRunStatus::Done, Vec::new())
            .await?;
        self.cursors = cursors;
        self.withheld = withheld;
        self.current = None;
        Ok(())
    }
}
