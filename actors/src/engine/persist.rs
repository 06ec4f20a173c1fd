//! What a turn writes: each step, the calls' outcomes and the end of the
//! turn, committed through the store's single writer. `impl Runner`,
//! split from `runner.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;
use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::InputDigest;
use botfleet_memory::SubagentRecord;

use crate::engine::unanswered::Removal;
use crate::engine::unanswered::newest_questions;
use crate::engine::unanswered::owner_changed_notice;
use crate::engine::unanswered::removal_notice;
use crate::tools::ReplyTo;

/// What a committed batch wrote that the runner follows up on.
#[path = "written.rs"]
mod written;
use written::Shape;
use written::Written;

impl Runner {
    /// Commits a batch and feeds the entries it appended to the tail.
    pub(super) async fn commit(
        &mut self,
        mut batch: Vec<Mutation>,
    ) -> Result<Vec<MutationResult>, StoreError> {
        one_checkpoint(&mut batch, self.turn);
        if let Some(started_at) = self.start_pending {
            batch.insert(
                0,
                Mutation::StartTurn {
                    turn: self.turn,
                    bot: self.bot.id.clone(),
                    session: self.session,
                    inputs: self.inputs.iter().map(|i| i.gid).collect(),
                    checkpoint: self.checkpoint(),
                    started_at,
                },
            );
        }
        let ended = batch.iter().find_map(|m| match m {
            Mutation::EndTurn { status, .. } => Some(*status),
            _ => None,
        });
        if let Some(status) = ended
            && self.bot.origin.starts_with("subagent:")
        {
            // a subagent's turn ends with its status and report, in the
            // same transaction as the end of the turn (before its
            // turn_end entry)
            let extra = self.subagent_end(status).await?;
            let at = batch
                .iter()
                .position(|m| {
                    matches!(m, Mutation::Append(e) if matches!(e.kind, EntryKind::TurnEnd { .. }))
                })
                .unwrap_or(batch.len());
            batch.splice(at..at, extra);
        }
        // a completed turn's fact extraction is owed in the transaction
        // that ends it: a crash after the end cannot lose it (one more row
        // in this batch, no write of its own)
        let owed = if ended == Some(TurnStatus::Completed) {
            self.owed_extraction(&batch).await
        } else {
            None
        };
        if let Some(owed) = &owed {
            batch.push(Mutation::OweExtraction(Box::new(owed.clone())));
        }
        // what the runner follows up on once the batch commits, taken by
        // position: a `Limited` wrote only the branch the writer took
        let shapes = Shape::of(&batch);
        let stepped = batch.iter().any(
            |m| matches!(m, Mutation::Append(e) if matches!(e.kind, EntryKind::Assistant { .. })),
        );
        // inputs this turn hands to other bots are routed on the writer's
        // thread as the batch commits, in commit order, as an admission
        // through the API is (`Runtime::admit`): routed once the write had
        // returned here, two bots' messages to one session committed back
        // to back could reach it in the other order, and the later one had
        // its turn first (tester H1, round 22). Routed so, they are routed
        // even when this run is dropped while it waits (a crash before the
        // commit leaves nothing to route)
        let rt = Arc::clone(&self.rt);
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.rt.store.write_then(
            batch,
            Box::new(move |result| {
                let out = result.map(|results| {
                    let mut written = Written::of(shapes, &results);
                    let admitted = std::mem::take(&mut written.admitted);
                    if !admitted.is_empty() {
                        rt.route_committed(admitted);
                    }
                    (results, written)
                });
                let _ = tx.send(out);
            }),
        )?;
        let (results, written) = rx.await.map_err(|_| StoreError::WriterGone)??;
        self.start_pending = None;
        if owed.is_some() {
            // run by `run_turn` once the turn is over
            self.owed = owed;
        }
        if stepped && self.first_step.mark_stepped() {
            // a person's message waited for this step (its bot held the
            // interrupt until the run made progress): it interrupts now,
            // at the run's next safe point, as it would have on arrival
            self.soft.cancel();
        }
        if let Ok(router) = self.rt.router() {
            for bot in written.upserted {
                // an active bot re-reads its record; an inactive one reads it on activation
                let _ = router.cast(crate::router::RouterMsg::Reload(bot));
            }
        }
        self.name_reports(&written.appended).await?;
        for entry in &written.appended {
            self.tail.push(entry);
        }
        Ok(results)
    }

    pub(super) fn entry(&self, id: EntryId, kind: EntryKind) -> Mutation {
        Mutation::Append(Box::new(NewEntry {
            id,
            session: self.session,
            author: self.bot.id.to_string(),
            turn: Some(self.turn),
            kind,
        }))
    }

    /// The writes of one model step: its assistant entry, its tool calls
    /// as pending, the checkpoint.
    pub(super) fn step_batch(&mut self, response: &ModelResponse) -> Vec<Mutation> {
        let step = self.state.step;
        self.state.step += 1;
        if let Some(t) = &mut self.texts {
            t.assistant(&response.text);
        }
        let mut batch = vec![
            self.entry(
                EntryId::derive(self.turn, &format!("step-{step}"), "assistant"),
                EntryKind::Assistant {
                    text: response.text.clone(),
                    tool_calls: response
                        .tool_calls
                        .iter()
                        .map(|c| ToolCallBody {
                            id: c.id.clone(),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                    // only calls need it back (see EntryKind::Assistant)
                    reasoning: if response.tool_calls.is_empty() {
                        None
                    } else {
                        response.reasoning.clone()
                    },
                },
            ),
        ];
        if self.attempts > 1 {
            // a resumed start got past the step it was cut off in: the
            // crashes before it are not "in a row" any more
            batch.push(Mutation::ResetAttempts { turn: self.turn });
            self.attempts = 1;
        }
        // the usage with the step it paid for (a turn not stored yet gets
        // it with its start, `commit`): before, it was stored only with
        // the turn's end, and a crash lost what the steps before it used
        if self.start_pending.is_none() {
            batch.push(Mutation::Checkpoint {
                turn: self.turn,
                checkpoint: self.checkpoint(),
            });
        }
        batch
    }

    /// The checkpoint as stored: the state, with the usage of the turn's
    /// calls so far.
    pub(super) fn checkpoint(&self) -> serde_json::Value {
        let mut state = self.state.clone();
        state.usage = self.usage;
        state.to_value()
    }

    pub(super) async fn fail(&mut self, error: String) -> Result<TurnStatus, StoreError> {
        tracing::warn!(bot = %self.bot.id, turn = %self.turn, %error, "turn failed");
        self.error = Some(error.clone());
        let turn = self.turn.to_string();
        let key = &self.scope.session.key;
        // a routine's or a webhook's run names it, a subagent's task its
        // parent: nobody sent "a message" there (the session's peer is the
        // routine's or the hook's name, or the parent's id)
        // the bots whose messages (or reports) the turn answered, when no
        // person waits for it: the failure is theirs to name, in a DM too,
        // where a subagent's report wakes its parent (review: "your
        // message" to a person already answered)
        let from_bots = (!self.state.owes_delivery && !self.scope.reply_to.is_empty())
            .then(|| bots_named(&self.scope.reply_to));
        let p = prompts();
        let text = match key.kind {
            SessionKind::Routine => p.routine_failed.render(&[
                ("routine", &key.peer),
                ("error", &error),
                ("turn", &turn),
            ]),
            SessionKind::Hook => {
                p.hook_failed
                    .render(&[("hook", &key.peer), ("error", &error), ("turn", &turn)])
            }
            // a subagent's own task: its parent gave it a task
            SessionKind::Subagent
                if self.bot.origin.strip_prefix("subagent:") == Some(&key.peer) =>
            {
                p.task_failed
                    .render(&[("parent", &key.peer), ("error", &error), ("turn", &turn)])
            }
            // another bot's message (or its subagent's report): the owner
            // who reads it sent no message (soak: "your message")
            SessionKind::Agent | SessionKind::Subagent => p.agent_failed.render(&[
                ("bot", from_bots.as_deref().unwrap_or(&key.peer)),
                ("error", &error),
                ("turn", &turn),
            ]),
            SessionKind::Dm | SessionKind::Group | SessionKind::Room => match &from_bots {
                Some(bots) => {
                    p.agent_failed
                        .render(&[("bot", bots), ("error", &error), ("turn", &turn)])
                }
                None => p.turn_failed.render(&[("error", &error), ("turn", &turn)]),
            },
        }
        .unwrap_or_default();
        let notice = self.entry(
            EntryId::derive(self.turn, "end", "failure"),
            EntryKind::Notice {
                code: "turn_failed".into(),
                text,
                retry_turn: Some(self.turn),
            },
        );
        // the bot that asked, still owed a reply, hears of it where it
        // asked from (its person may be waiting)
        let told = self.failed_turn_notices(&error).await;
        self.end_with(TurnStatus::Failed, Some((error, notice)), told)
            .await
    }

    pub(super) async fn end(
        &mut self,
        status: TurnStatus,
        failure: Option<(String, Mutation)>,
    ) -> Result<TurnStatus, StoreError> {
        self.end_with(status, failure, Vec::new()).await
    }

    /// [`Self::end`], with `more` writes in the end's commit.
    pub(super) async fn end_with(
        &mut self,
        status: TurnStatus,
        failure: Option<(String, Mutation)>,
        more: Vec<Mutation>,
    ) -> Result<TurnStatus, StoreError> {
        if self.start_pending.is_some() && status == TurnStatus::Interrupted {
            // nothing was persisted: the inputs are still pending in the
            // inbox, for the turn that takes them up with the newer message.
            // What its first call streamed before the interrupt was made
            // all the same, and counts (QA: a call cut off by a newer
            // message while it streamed counted nothing, in the bot's usage
            // and against its daily budget, when it was the turn's first)
            if self.usage.calls > 0 {
                let day = self.rt.store.clock().now().format("%Y-%m-%d").to_string();
                // not `commit`, which would write the turn's start
                self.rt
                    .store
                    .write(vec![Mutation::AddUsage {
                        bot: self.bot.id.clone(),
                        day,
                        turns: 0,
                        usage: self.usage,
                    }])
                    .await?;
            }
            return Ok(status);
        }
        let mut batch = self.end_batch(status, failure);
        if status == TurnStatus::Cancelled {
            self.removed_by_owner(&mut batch).await;
        }
        batch.extend(more);
        self.commit(batch).await?;
        Ok(status)
    }

    /// A turn cancelled because its owner removed its bot (made by
    /// CreateAgent, `DELETE /v1/bots/{bot}`) is not offered a retry: the
    /// bot runs no more turns, and a retry or a new message to it answers
    /// 409. Its `turn_cancelled` notice in `batch` says so instead, and
    /// each bot whose message among its inputs it did not answer is told
    /// no answer will come (`unanswered.rs`).
    async fn removed_by_owner(&self, batch: &mut Vec<Mutation>) {
        let record = match self.rt.store.get_bot(&self.bot.id).await {
            Ok(Some(record)) if record.removed_at().is_some() && record.made_by_agent() => record,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(bot = %self.bot.id, turn = %self.turn, error = %e, "could not read the bot's record as its turn was cancelled");
                return;
            }
        };
        match self.unanswered_notices(&record).await {
            Ok(notices) => batch.extend(notices),
            Err(e) => {
                // the removal reads the queue it left behind, not this
                // turn's inputs: these askers are not told
                tracing::warn!(bot = %self.bot.id, turn = %self.turn, error = %e, "could not tell the bots this removed bot did not answer");
            }
        }
        for m in batch.iter_mut() {
            if let Mutation::Append(entry) = m
                && let EntryKind::Notice {
                    code,
                    text,
                    retry_turn,
                } = &mut entry.kind
                && code == "turn_cancelled"
            {
                *text = prompts()
                    .turn_cancelled_removed
                    .render(&[("bot", self.bot.id.as_str())])
                    .unwrap_or_default();
                *retry_turn = None;
            }
        }
    }

    /// The events telling each bot that wrote among this turn's inputs, and
    /// was not answered with SendToAgent in it, that `removed` (this bot)
    /// will not answer: one for each bot and the conversation it wrote
    /// from, quoting its newest message there.
    async fn unanswered_notices(&self, removed: &BotRecord) -> Result<Vec<Mutation>, StoreError> {
        let mut out = Vec::new();
        for question in self.unanswered_questions().await? {
            if let Some(req) =
                removal_notice(&self.rt.store, removed, &question, Removal::ByOwner).await?
            {
                out.push(Mutation::Admit(Box::new(req)));
            }
        }
        Ok(out)
    }

    /// The same events for a turn that ends unanswered since fleet.toml
    /// gave this bot to another user than the bots that wrote to it
    /// (`owner_changed.rs`): each asker is told this bot will not answer.
    pub(super) async fn owner_changed_notices(&self) -> Result<Vec<Mutation>, StoreError> {
        let mut out = Vec::new();
        for question in self.unanswered_questions().await? {
            if let Some(req) =
                owner_changed_notice(&self.rt.store, &self.bot, &question, self.turn).await?
            {
                out.push(Mutation::Admit(Box::new(req)));
            }
        }
        Ok(out)
    }

    /// The newest message of each bot (and conversation it wrote from)
    /// among this turn's inputs that the turn did not answer with
    /// SendToAgent.
    pub(super) async fn unanswered_questions(&self) -> Result<Vec<Entry>, StoreError> {
        let (Some(first), Some(last)) = (
            self.state.input_seqs.iter().min(),
            self.state.input_seqs.iter().max(),
        ) else {
            return Ok(Vec::new());
        };
        let inputs = self
            .rt
            .store
            .entries_between(self.session, *first, *last)
            .await?;
        Ok(newest_questions(&inputs, |question, from| {
            // answered with SendToAgent in this turn: nothing to tell
            self.state.input_seqs.contains(&question.seq)
                && !self.state.asked.iter().any(|a| a == from.as_str())
        })
        .into_iter()
        .cloned()
        .collect())
    }

    /// The writes that end a turn: its status, notices, the turn_end entry
    /// (and, for an interrupted turn, its inputs back in the inbox).
    pub(super) fn end_batch(
        &mut self,
        status: TurnStatus,
        failure: Option<(String, Mutation)>,
    ) -> Vec<Mutation> {
        let (error, failure_notice) = match failure {
            Some((e, n)) => (Some(e), Some(n)),
            None => (None, None),
        };
        let mut batch = vec![Mutation::EndTurn {
            turn: self.turn,
            status,
            error,
        }];
        batch.extend(failure_notice);
        if status == TurnStatus::Cancelled
            && self.state.owes_delivery
            && self.state.delivered == 0
            && !self.bot.origin.starts_with("subagent:")
        {
            // stopped before it answered a person: say so, with a retry (a
            // subagent's is written with its end, `subagent_end`, which
            // knows whether its parent stopped it)
            batch.push(self.cancelled_notice(false));
        }
        if status == TurnStatus::Completed
            && self.state.owes_delivery
            && self.state.delivered == 0
            && self.awaits_answers()
        {
            // the person's message is answered once the replies come
            let asked = self.asked_text();
            let text = prompts()
                .awaiting_replies
                .render(&[("bot", self.bot.id.as_str()), ("asked", &asked)])
                .unwrap_or_default();
            batch.push(self.entry(
                EntryId::derive(self.turn, "end", "awaiting"),
                EntryKind::Notice {
                    code: "awaiting_replies".into(),
                    text,
                    retry_turn: None,
                },
            ));
        }
        if status == TurnStatus::Undelivered {
            let text = prompts().undelivered.render(&[]).unwrap_or_default();
            batch.push(self.entry(
                EntryId::derive(self.turn, "end", "undelivered"),
                EntryKind::Notice {
                    code: "undelivered".into(),
                    text,
                    retry_turn: Some(self.turn),
                },
            ));
        }
        batch.push(self.entry(
            EntryId::derive(self.turn, "end", "turn_end"),
            EntryKind::TurnEnd {
                status,
                inputs: self.state.input_seqs.clone(),
                deliveries: self.state.delivered,
                usage: (self.usage.calls > 0).then_some(self.usage),
            },
        ));
        if status == TurnStatus::Interrupted {
            batch.push(Mutation::RequeueInputs { turn: self.turn });
        }
        if self.usage.calls > 0 {
            let day = self.rt.store.clock().now().format("%Y-%m-%d").to_string();
            batch.push(Mutation::AddUsage {
                bot: self.bot.id.clone(),
                day,
                turns: 1,
                usage: self.usage,
            });
        }
        batch
    }

    /// What ends a subagent's turn besides the turn itself: for a turn of
    /// its task (its subagent session), its status and its report to the
    /// parent, the one message that wakes the parent (what the subagent
    /// sent before is progress, read with CheckSubagent); for a turn of a
    /// stopped subagent, a notice that it takes no more work.
    ///
    /// A subagent its parent stopped (StopSubagent) stays stopped and
    /// reports nothing, however its turn ended: the stop is written before
    /// the turn is cancelled, and the status and report are written with
    /// `EndSubagentTask`, which the store skips for a subagent stopped
    /// since this read. A person's cancel of its task turn fails the task
    /// instead: its parent hears of it, and the person may retry. Nor does
    /// a turn report that ends with more work for the task waiting in its
    /// session (a parent's MessageSubagent committed after the turn's last
    /// model answer came in, too late to interrupt it): the store keeps
    /// the subagent running, and the turn over that work reports, once.
    ///
    /// The report is admitted with a nonce derived from the turn: it is
    /// written in the same transaction as the end of the turn, and a turn
    /// resumed after a crash that lost that transaction writes it again
    /// with the same nonce, so the parent gets it exactly once.
    async fn subagent_end(&mut self, status: TurnStatus) -> Result<Vec<Mutation>, StoreError> {
        let Some(sub) = self.rt.store.get_subagent(&self.bot.id).await? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let stopped = sub.status == SubagentStatus::Stopped;
        let task = self.scope.session.key.kind == SessionKind::Subagent;
        if status == TurnStatus::Cancelled && stopped {
            // in its task, the parent's stop; in a person's conversation
            // with it, why their message goes unanswered (QA: the task
            // was told to "ask boss instead", addressed to nobody)
            let notice = if task {
                &prompts().subagent_task_stopped
            } else {
                &prompts().subagent_stopped
            };
            out.push(
                self.entry(
                    EntryId::derive(self.turn, "end", "subagent_stopped"),
                    EntryKind::Notice {
                        code: "subagent_stopped".into(),
                        text: notice
                            .render(&[("parent", sub.parent.as_str())])
                            .unwrap_or_default(),
                        // a retry would be cancelled again
                        retry_turn: None,
                    },
                ),
            );
        }
        // removed with its parent, read once for the notice and the report
        let removed = status == TurnStatus::Cancelled && self.removed_with_parent().await;
        let parent_made = removed && self.made_by_agent(&sub.parent).await;
        if removed && task && !stopped {
            // its task session says so too (it showed only the turn's end,
            // QA; the report says it to the parent's conversation)
            out.push(self.removed_notice(&sub.parent, parent_made));
        }
        if status == TurnStatus::Cancelled
            && !stopped
            && (task || (self.state.owes_delivery && self.state.delivered == 0))
            && !removed
        {
            // a person's cancel, of its task turn (which fails the task)
            // or of its answer to their message: a retry runs it again,
            // and its session says so, with the retry, as any bot's
            // (QA, 2026-12-05: the transcript showed only the turn's end)
            out.push(self.cancelled_notice(task));
        }
        if !task || stopped {
            // a person's message to the subagent bot is not its task; a
            // stopped subagent's parent knows, and nobody waits for it
            return Ok(out);
        }
        let sub_status = match status {
            TurnStatus::Completed => SubagentStatus::Done,
            // a person's cancel fails the task (its parent's stop is read
            // as `stopped` above)
            TurnStatus::Failed | TurnStatus::Undelivered | TurnStatus::Cancelled => {
                SubagentStatus::Failed
            }
            TurnStatus::Running | TurnStatus::Interrupted => return Ok(out),
        };
        if self.last_delivery.is_none() && self.state.delivered > 0 {
            // a resumed turn: its messages before the crash are in the store
            self.last_delivery = self.delivered_before().await?;
        }
        let report = match status {
            TurnStatus::Completed => self
                .last_delivery
                .clone()
                .unwrap_or_else(|| prompts().undelivered.render(&[]).unwrap_or_default()),
            TurnStatus::Failed | TurnStatus::Undelivered => self.unfinished_report(
                self.error
                    .clone()
                    .unwrap_or_else(|| prompts().undelivered.render(&[]).unwrap_or_default()),
            ),
            // cancelled by the removal of its parent (the subagent goes
            // with it): nobody cancelled it, and a retry is refused (QA,
            // 2026-12-05: "a person cancelled my turn", with a retry)
            TurnStatus::Cancelled if removed => {
                let p = prompts();
                let why = if parent_made {
                    p.subagent_removed
                        .render(&[("parent", sub.parent.as_str())])
                } else {
                    p.subagent_removed_config.render(&[
                        ("parent", sub.parent.as_str()),
                        ("turn", &self.turn.to_string()),
                    ])
                };
                self.unfinished_report(why.unwrap_or_default())
            }
            TurnStatus::Cancelled => self.unfinished_report(
                prompts()
                    .subagent_cancelled
                    .render(&[("turn", &self.turn.to_string())])
                    .unwrap_or_default(),
            ),
            TurnStatus::Running | TurnStatus::Interrupted => return Ok(out),
        };
        // the result CheckSubagent shows is what the parent was told: a
        // failed task's says why (it showed the task's last progress, or
        // "(none yet)" for one that never delivered: QA, 2026-12-05)
        out.push(Mutation::EndSubagentTask {
            id: self.bot.id.clone(),
            status: sub_status,
            result: Some(report.clone()),
            report: self.report_to_parent(&sub, report).await?.map(Box::new),
        });
        Ok(out)
    }

    /// Whether `bot` was made by CreateAgent (a failed read: taken as
    /// fleet.toml's).
    async fn made_by_agent(&self, bot: &BotId) -> bool {
        self.rt
            .store
            .get_bot(bot)
            .await
            .ok()
            .flatten()
            .is_some_and(|b| b.made_by_agent())
    }

    /// The `turn_cancelled` notice of a subagent's task turn cancelled
    /// because it was removed with its parent `parent` (`made` by
    /// CreateAgent or not): a retry only once fleet.toml lists a config
    /// parent again, none for a made one.
    fn removed_notice(&self, parent: &BotId, made: bool) -> Mutation {
        let bot = &self.bot.id;
        let (text, retry_turn) = if made {
            (
                format!(
                    "{bot} stopped: its parent {parent} was removed by its owner, and it went \
                     with it; the task cannot be retried"
                ),
                None,
            )
        } else {
            (
                format!(
                    "{bot} stopped: its parent {parent} was taken out of the fleet's config, and \
                     it went with it; once fleet.toml lists {parent} again, the task can be \
                     retried (`botfleet retry {}`)",
                    self.turn
                ),
                Some(self.turn),
            )
        };
        self.entry(
            EntryId::derive(self.turn, "end", "cancelled"),
            EntryKind::Notice {
                code: "turn_cancelled".into(),
                text,
                retry_turn,
            },
        )
    }

    /// The `turn_cancelled` notice of a turn cancelled before it answered,
    /// with its retry: of a subagent's `task` turn, or of an answer to a
    /// person.
    fn cancelled_notice(&self, task: bool) -> Mutation {
        let turn = self.turn.to_string();
        let p = prompts();
        let template = if task {
            &p.subagent_task_cancelled
        } else {
            &p.turn_cancelled
        };
        let text = template.render(&[("turn", &turn)]).unwrap_or_default();
        self.entry(
            EntryId::derive(self.turn, "end", "cancelled"),
            EntryKind::Notice {
                code: "turn_cancelled".into(),
                text,
                retry_turn: Some(self.turn),
            },
        )
    }

    /// Whether this subagent was removed (with its parent: a subagent is
    /// in no config of its own), as its turn was cancelled.
    async fn removed_with_parent(&self) -> bool {
        match self.rt.store.get_bot(&self.bot.id).await {
            Ok(Some(record)) => record.removed_at().is_some(),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(bot = %self.bot.id, turn = %self.turn, error = %e, "could not read the subagent's record as its turn was cancelled");
                false
            }
        }
    }

    /// The report of a task the subagent could not finish, and why.
    fn unfinished_report(&self, why: String) -> String {
        let p = prompts();
        let text = match &self.last_delivery {
            Some(progress) => p
                .subagent_unfinished_progress
                .render(&[("why", &why), ("progress", progress)]),
            None => p.subagent_unfinished.render(&[("why", &why)]),
        };
        text.unwrap_or(why)
    }

    /// The text of the last message this turn delivered before it was
    /// resumed.
    async fn delivered_before(&self) -> Result<Option<String>, StoreError> {
        Ok(self
            .own_entries()
            .await?
            .into_iter()
            .rev()
            .find_map(|e| match e.kind {
                EntryKind::Delivery { text, .. } => Some(text),
                _ => None,
            }))
    }

    /// The subagent's report, as a message to its parent in the session it
    /// delegated from (`None` when the parent no longer exists, or belongs
    /// to another user than the subagent).
    ///
    /// The report is one hop more than the turn (whose hop comes from the
    /// parent's task and messages, `tools/subagents.rs`). It is always
    /// sent, even past `runtime.max_hops`: Task and MessageSubagent are
    /// accepted only with room for their report (a task needs two hops),
    /// so a report past the budget is one of work accepted under a larger
    /// budget, lowered (with a restart) while the subagent worked; dropping
    /// it would lose that work from the person's view. The chain still ends
    /// there: the parent's turn that reads the report is past the budget,
    /// so every message it would send to another bot is refused (with the
    /// `hop_budget` notice to the person, `tools/agent_hops.rs`).
    async fn report_to_parent(
        &self,
        sub: &SubagentRecord,
        text: String,
    ) -> Result<Option<AdmitRequest>, StoreError> {
        let hop = self.scope.hop.saturating_add(1);
        if hop > self.rt.settings.max_hops {
            tracing::info!(
                bot = %self.bot.id,
                to = %sub.parent,
                hop,
                max_hops = self.rt.settings.max_hops,
                "the subagent's report is sent past runtime.max_hops: its task was accepted under a larger budget"
            );
        }
        let Some(parent) = self.rt.store.get_bot(&sub.parent).await? else {
            return Ok(None);
        };
        if parent.owner != self.bot.owner {
            // a subagent moves with its parent, in the transaction that
            // changes the parent's owner (`follow_owner`): a parent of
            // another user is a record out of step, and the report (work
            // done with this owner's workspace and secrets) is not theirs
            tracing::warn!(
                bot = %self.bot.id,
                to = %sub.parent,
                "the parent belongs to another user: the subagent's report is not sent"
            );
            return Ok(None);
        }
        // the session the task came from, unless the task is a former
        // owner's (`task_is_former_owners`): the DM of someone who no
        // longer owns the parent, where the report (written with the new
        // owner's workspace) would land with the former owner; or where
        // the parent's turn over it would take up the former owner's work
        // (review: the report of a task alice's API routine gave woke the
        // parent in that routine's session, under bob)
        let from = self.rt.store.get_session(sub.parent_session).await?;
        let theirs =
            super::task_from_is_former_owners(&self.rt.store, sub, from.as_ref(), &parent).await?;
        let key = match from {
            Some(rec) if rec.key.bot == parent.id && !theirs => rec.key,
            _ => SessionKey {
                bot: parent.id.clone(),
                kind: SessionKind::Agent,
                peer: self.bot.id.to_string(),
            },
        };
        Ok(Some(AdmitRequest {
            source: format!("bot:{}", self.bot.id),
            nonce: format!("{}:end:report", self.turn),
            nonce_time_ms: None,
            digest: InputDigest::of_parts([
                b"agent_message".as_slice(),
                parent.id.as_str().as_bytes(),
                text.as_bytes(),
            ]),
            entry: NewEntry {
                id: EntryId::derive(self.turn, "end", "report"),
                session: key.id(),
                author: self.bot.id.to_string(),
                turn: None,
                kind: EntryKind::AgentMessage {
                    from: self.bot.id.clone(),
                    text,
                    hop,
                    reply_session: Some(self.session),
                    chain: self.scope.chain,
                    // a report answers its parent's task: no reply owed
                    answers: true,
                },
            },
            session: key,
            owner: parent.owner,
            priority: Priority::Background,
        }))
    }
}

/// Keeps one checkpoint of `turn` in a batch, the last pushed (each is the
/// whole state, the later one newer), and none in a batch that ends the
/// turn: an ended turn is never resumed, so its end needs no checkpoint
/// (a step's batch carries one, and the last step commits with the end:
/// one write less per turn).
fn one_checkpoint(batch: &mut Vec<Mutation>, turn: TurnId) {
    let is_checkpoint =
        |m: &Mutation| matches!(m, Mutation::Checkpoint { turn: t, .. } if *t == turn);
    let ends = batch
        .iter()
        .any(|m| matches!(m, Mutation::EndTurn { turn: t, .. } if *t == turn));
    let keep = if ends {
        None
    } else {
        batch.iter().rposition(is_checkpoint)
    };
    let mut at = 0;
    batch.retain(|m| {
        let kept = !is_checkpoint(m) || Some(at) == keep;
        at += 1;
        kept
    });
}

/// The bots a turn answered, each once, in the order they first wrote
/// (a bot that wrote from two of its sessions has two [`ReplyTo`]s, not
/// always side by side).
fn bots_named(reply_to: &[ReplyTo]) -> String {
    let mut ids: Vec<&str> = Vec::with_capacity(reply_to.len());
    for r in reply_to {
        if !ids.contains(&r.bot.as_str()) {
            ids.push(r.bot.as_str());
        }
    }
    ids.join(", ")
}

#[cfg(test)]
#[path = "persist_tests.rs"]
mod tests;
