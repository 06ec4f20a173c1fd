//! Setting up a turn: the entries of its inputs and where they came
//! from (hops, reply target), the daily token budget check, and the
//! session tail it runs over (loaded, or compacted when it grows too
//! long). `impl Runner`, split from `runner.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;
pub(crate) use crate::engine::budget::BudgetPause;
pub(crate) use crate::engine::budget::budget_pause;
pub use crate::engine::budget::budget_paused_until;
use crate::engine::budget::pause_before_request;
pub use crate::engine::budget::stored_budget_pause;

/// Code of the notice telling people a bot is paused by its budget.
const BUDGET_CODE: &str = "budget_exhausted";

/// Code of the notice ending a turn whose work is another user's since an
/// owner changed (a former owner's DM, a conversation with a bot of
/// another owner).
const OWNER_CHANGED_CODE: &str = "owner_changed";

impl Runner {
    /// Whether the bot's daily token budget is spent; if so, sets
    /// `paused_until` (next UTC midnight) and, with `notice_after` (the
    /// seq of the turn's first input), tells the session's people — once:
    /// not again when a `budget_exhausted` notice already follows that
    /// input (written before a restart; the bot's own record of whom it
    /// told is in memory). Counts the bot's fact extractions in flight
    /// (`budget::pause_before_request`): the turn waits for their usage
    /// when it could spend what is left.
    pub(super) async fn budget_spent(
        &mut self,
        notice_after: Option<i64>,
    ) -> Result<Option<BudgetPause>, StoreError> {
        let Some(pause) = pause_before_request(&self.rt, &self.bot, 0, &self.hard).await? else {
            return Ok(None);
        };
        self.paused_until = Some(pause.until_ms);
        self.pause_told = notice_after.is_some();
        if let Some(notice) = self.budget_notice(&pause, notice_after)? {
            self.rt.store.write(vec![notice]).await?;
        }
        Ok(Some(pause))
    }

    /// The `budget_exhausted` notice telling the session's people that the
    /// bot is paused by `pause`, with `notice_after` the seq of the turn's
    /// first input; `None` without one, or when such a notice already
    /// follows that input (written before a restart, or by an earlier
    /// turn over the same input: people are told once).
    fn budget_notice(
        &self,
        pause: &BudgetPause,
        notice_after: Option<i64>,
    ) -> Result<Option<Mutation>, StoreError> {
        let Some(seq) = notice_after else {
            return Ok(None);
        };
        let told = self
            .rt
            .store
            .notices_after_now(self.session, seq.saturating_sub(1))?
            .iter()
            .any(|e| matches!(&e.kind, EntryKind::Notice { code, .. } if code == BUDGET_CODE));
        if told {
            return Ok(None);
        }
        let (used, budget) = (pause.used.to_string(), pause.budget.to_string());
        // people know a bot by its name, an operator finds it in
        // fleet.toml by its id: both (the notice named the id alone)
        let bot = if self.bot.name.is_empty() || self.bot.name == self.bot.id.as_str() {
            self.bot.id.to_string()
        } else {
            format!("{} ({})", self.bot.name, self.bot.id)
        };
        let mut values = vec![
            ("bot", bot.as_str()),
            ("used", used.as_str()),
            ("budget", budget.as_str()),
            ("until", pause.until.as_str()),
        ];
        // a subagent has no budget of its own: the notice named "its
        // daily token budget" and a setting it does not have (QA)
        let template = match &pause.payer {
            Some(payer) => {
                values.push(("payer", payer.as_str()));
                &prompts().budget_paused_shared
            }
            None => &prompts().budget_paused,
        };
        let text = template.render(&values).unwrap_or_default();
        Ok(Some(self.entry(
            EntryId::derive(self.turn, "budget", &pause.day),
            EntryKind::Notice {
                code: BUDGET_CODE.into(),
                text,
                retry_turn: None,
            },
        )))
    }

    /// The budget check before each model request of a running turn (a
    /// step's, or a compaction's, whose chunks are checked each again):
    /// the usage stored today plus what this turn's calls used so far, not
    /// yet committed, and what the bot's fact extractions in flight may
    /// spend (`budget::pause_before_request`). The turn-start check
    /// alone let a turn of many steps run to its end far past the budget;
    /// now the overshoot is at most the one request after the last check.
    /// When the budget is spent the turn stops at its checkpoint: a turn
    /// that delivered ends completed (its reply is out); one that did not
    /// ends as a turn that finds the budget spent as it begins would: in a
    /// room it fails saying why (a discussion cannot wait), and so does a
    /// subagent's task, whether it delivered or not (its parent's budget
    /// is spent: its report tells the parent why, with its last progress,
    /// `persist.rs`); elsewhere it
    /// ends interrupted with its usage, its inputs go back to the queue
    /// for when the pause ends, and a person whose message it held is
    /// told with the same `budget_exhausted` notice, in the same commit.
    /// `None` while the turn may go on (always without a budget).
    pub(super) async fn budget_checkpoint(&mut self) -> Result<Option<TurnStatus>, StoreError> {
        let spent = self.usage.total();
        let Some(pause) = pause_before_request(&self.rt, &self.bot, spent, &self.hard).await?
        else {
            return Ok(None);
        };
        tracing::info!(bot = %self.bot.id, turn = %self.turn, used = pause.used, budget = pause.budget,
            payer = ?pause.payer, "daily token budget spent during the turn: it stops before its next model request");
        let task = self.scope.session.key.kind == SessionKind::Subagent;
        if self.state.delivered > 0 && !task {
            // the reply is out: the turn did its job (as at the step
            // limit), and a retry after the pause would answer twice; the
            // bot pauses as it ends (`budget_spent_at_end`), and people
            // are told when they write next
            return self.end(TurnStatus::Completed, None).await.map(Some);
        }
        self.paused_until = Some(pause.until_ms);
        if self.scope.session.key.kind == SessionKind::Group || task {
            self.pause_told = true;
            return self.fail(pause.reason()).await.map(Some);
        }
        let person = self.inputs.iter().any(|i| i.priority == Priority::UserDm);
        let first = self.state.input_seqs.iter().min().copied();
        self.pause_told = first.filter(|_| person).is_some();
        let notice = self.budget_notice(&pause, first.filter(|_| person))?;
        if self.start_pending.is_some() {
            // no step was written (only a compaction ran): the inputs are
            // still pending in the inbox, as for the turn-start check
            if let Some(notice) = notice {
                self.rt.store.write(vec![notice]).await?;
            }
            return Ok(Some(TurnStatus::Interrupted));
        }
        let mut batch: Vec<Mutation> = notice.into_iter().collect();
        batch.extend(self.end_batch(TurnStatus::Interrupted, None));
        self.commit(batch).await?;
        Ok(Some(TurnStatus::Interrupted))
    }

    /// Whether this turn's usage, committed with its end, spent the bot's
    /// daily token budget: until when it is paused if so. A failed read
    /// only logs (the next turn finds the budget spent as it begins).
    pub(super) async fn budget_spent_at_end(&self) -> Option<i64> {
        match budget_pause(&self.rt.store, &self.bot, 0).await {
            Ok(pause) => pause.map(|p| p.until_ms),
            Err(e) => {
                tracing::warn!(bot = %self.bot.id, error = %e, "reading the daily token usage after a turn failed");
                None
            }
        }
    }

    /// Starts the fact extraction owed in the write that ended the turn
    /// (`Runner::owed_extraction`): it runs now, or after a restart if
    /// this process dies first. Not once the bot's daily budget is spent
    /// (`spent_until`, or the pause this turn found): its model call
    /// counts toward the budget and would pass it further. Then its owed
    /// record is dropped too, or the next start would run it (a failed
    /// write only logs: a restart runs it then).
    pub(super) async fn extract_after(&mut self, spent_until: Option<i64>) {
        let Some(owed) = self.owed.take() else {
            return;
        };
        if self.paused_until.or(spent_until).is_none() {
            self.spawn_extraction(owed);
            return;
        }
        tracing::info!(bot = %self.bot.id, turn = %owed.turn, "daily token budget spent: no fact extraction after the turn");
        let clear = Mutation::ClearExtraction { turn: owed.turn };
        if let Err(e) = self.rt.store.write(vec![clear]).await {
            tracing::warn!(bot = %self.bot.id, turn = %owed.turn, error = %e, "could not drop the fact extraction of a turn past the budget");
        }
    }

    /// What a running turn's context may hold: the session up to its last
    /// input and its own entries (`None` for a turn without inputs).
    pub(super) fn own_bound(&self) -> Option<ContextBound> {
        ContextBound::of_inputs(self.state.input_seqs.iter().copied(), Some(self.turn))
    }

    /// `bound` without the session's inputs that wait in the bot's inbox,
    /// not the turn's own (`ContextBound::without_pending`): a context
    /// read from the store holds every entry up to the turn's last input,
    /// and one of them may be a message no turn claimed yet (routed after
    /// a later one, the bot just activated or its tail not in memory).
    pub(super) async fn unclaimed_left_out(
        &self,
        bound: Option<ContextBound>,
    ) -> Result<Option<ContextBound>, StoreError> {
        let Some(bound) = bound else {
            return Ok(None);
        };
        let seqs = self.unclaimed_seqs().await?;
        Ok(Some(bound.without_pending(seqs.into_iter())))
    }

    /// Seqs of the session's inputs waiting in the bot's inbox, claimed by
    /// no turn (read from the store: the bot may not have routed them).
    pub(super) async fn unclaimed_seqs(&self) -> Result<Vec<i64>, StoreError> {
        let waiting = self.rt.store.pending_inbox(&self.bot.id).await?;
        Ok(waiting
            .iter()
            .filter(|i| i.session == self.session)
            .map(|i| i.seq)
            .collect())
    }

    /// Builds the tail from `view`, what `Runner::run` read of the session,
    /// within `bound` (less the inputs waiting in the inbox).
    pub(super) async fn fill_tail(
        &mut self,
        view: botfleet_memory::SessionView,
        bound: Option<ContextBound>,
    ) -> Result<(), StoreError> {
        let bound = self.unclaimed_left_out(bound).await?;
        let encoding = self.ctx_settings.encoding;
        self.tail
            .fill_view(view, &self.identity, &self.block, encoding, bound);
        Ok(())
    }

    pub(super) async fn load_tail(
        &mut self,
        bound: Option<ContextBound>,
    ) -> Result<(), StoreError> {
        let window = self.rt.settings.context_entries;
        let bound = self.unclaimed_left_out(bound).await?;
        // read, then filled once the reports it shows are named
        // (`SessionTail::load` in one)
        let view = self
            .rt
            .store
            .session_view(self.session, window as i64, bound.as_ref().map(|b| b.from))
            .await?;
        self.name_reports(&view.entries).await?;
        self.tail.fill_view(
            view,
            &self.identity,
            &self.block,
            self.ctx_settings.encoding,
            bound,
        );
        Ok(())
    }

    /// How the turn's requests are shaped (`SessionTail::shape_requests`):
    /// its messages start at its first input, and its budget and the
    /// per-entry cap follow from the provider's `compact_at_tokens`.
    pub(super) fn shape_requests(&mut self) {
        let budget = crate::engine::tail::request::turn_budget(self.ctx_settings.compact_at_tokens);
        self.tail.shape_requests(
            self.state.input_seqs.iter().min().copied(),
            budget,
            self.model.alternating_roles(),
        );
    }

    /// Whether the next model call must compact first: what it would send
    /// (`SessionTail::sent_tokens`: older results of the running turn as
    /// stubs, messages over the per-entry cap clipped; the requests are
    /// shaped here first) would pass the provider's `compact_at_tokens`,
    /// (unless a compaction that failed or found nothing holds it off,
    /// `SessionTail::compaction_held`),
    /// or the window left out entries no summary covers (loaded or trimmed
    /// at the start of the turn, when the background compaction did not
    /// run in time: the turn began right after the last, or the last wrote
    /// more than the window). The model must never see a context missing
    /// entries that no summary holds; within a turn the window only grows,
    /// so this compacts for the window at most once a turn. The context's
    /// whole count asked a long turn for a compaction at each step once
    /// its results passed the mark, though its requests sent them as
    /// stubs (and a compaction keeps the running turn).
    pub(super) fn compaction_needed(&mut self) -> bool {
        self.shape_requests();
        (self.tail.sent_tokens() > self.ctx_settings.compact_at_tokens
            && !self.tail.compaction_held())
            || (self.tail.drops_unsummarised() && self.model.answers(Purpose::Compact))
    }

    /// Compacts the session now (before a model call that would exceed the
    /// threshold or miss unsummarised entries, or in the background). A
    /// failure only logs: the session stays long and the turn goes on.
    /// Each chunk's request is checked against the daily budget: a spent
    /// budget ends the compaction as a failed chunk does (the summaries
    /// stored stay; none stored holds compaction off, as a failure does),
    /// and the turn's own check after it stops the turn. A background
    /// compaction (a run without inputs: every turn has one) stores each
    /// chunk's usage with its summary, as no turn's end stores it.
    pub(super) async fn compact_now(&mut self, keep_from: Option<i64>) {
        if !self.model.answers(Purpose::Compact) {
            return;
        }
        let background = self.state.input_seqs.is_empty();
        let account = compaction::ChunkBudget {
            // a background compaction has an id of its own but no turn
            // record: its summaries name no turn
            turn: if background || self.start_pending.is_some() {
                None
            } else {
                Some(self.turn)
            },
            pending: if background { 0 } else { self.usage.total() },
            stores_usage: background,
            stop: &self.hard,
            interrupt: &self.soft,
        };
        let result = compaction::compact(
            &self.rt,
            &self.bot,
            self.model.as_ref(),
            &self.tail,
            &self.ctx_settings,
            keep_from,
            &account,
        )
        .await;
        match result {
            Ok(Some(done)) => {
                if !background {
                    self.usage.add(&done.usage);
                }
                self.memory_update = None;
                self.tail.invalidate();
                // a background compaction's reload leaves out what no
                // turn claimed, as its first load did
                let bound = self
                    .own_bound()
                    .or_else(|| Some(ContextBound::claimed_only()));
                if let Err(e) = self.load_tail(bound).await {
                    tracing::warn!(bot = %self.bot.id, error = %e, "reloading after compaction failed");
                }
                self.prefix_len = self.tail.len().min(2);
                self.tail.release_compaction();
            }
            // nothing but the newest turn's own entries: held for the turn
            Ok(None) => self
                .tail
                .hold_compaction_for_turn(self.rt.settings.context_entries),
            // not a failure: nothing holds the next compaction off
            Err(compaction::CompactionError::Interrupted) => {}
            Err(compaction::CompactionError::BudgetSpent(why)) => {
                tracing::info!(bot = %self.bot.id, session = %self.session, %why, "no compaction: the daily token budget is spent");
                self.tail.hold_compaction(self.rt.settings.context_entries);
            }
            Err(e) => {
                tracing::warn!(bot = %self.bot.id, session = %self.session, error = %e, "compaction failed");
                self.tail.hold_compaction(self.rt.settings.context_entries);
            }
        }
    }

    /// The entries of the inputs (read from the store when the bot did not
    /// have them at hand).
    pub(super) async fn input_entries(
        &self,
        inputs: &[(InboxItem, Option<Entry>)],
    ) -> Result<Vec<Entry>, StoreError> {
        let mut out = Vec::with_capacity(inputs.len());
        for (item, entry) in inputs {
            match entry {
                Some(e) => out.push(e.clone()),
                None => out.extend(
                    self.rt
                        .store
                        .entries_between(item.session, item.seq, item.seq)
                        .await?,
                ),
            }
        }
        Ok(out)
    }

    /// Hops and reply target from the turn's input entries. A person's
    /// message among them starts a new origin: the hop budget is per
    /// message of a person, so the turn counts from 0 even when a bot's
    /// message deep into an older chain was batched with it.
    pub(super) fn set_origin(&mut self, inputs: &[Entry]) {
        let (hop, chain) = origin_of(inputs);
        self.scope.chain = chain;
        self.scope.hop = self.scope.hop.max(hop);
        for e in inputs {
            match &e.kind {
                EntryKind::AgentMessage {
                    from,
                    reply_session,
                    answers,
                    ..
                } => {
                    let session = reply_session.unwrap_or_else(|| {
                        SessionKey {
                            bot: from.clone(),
                            kind: SessionKind::Agent,
                            peer: self.bot.id.to_string(),
                        }
                        .id()
                    });
                    self.note_reply_to(from, session, e.created_at, !answers);
                }
                // an approval's decision, in a conversation with another
                // bot, carries that bot's question the asking turn worked
                // on: still owed, and answered where it was asked
                EntryKind::Event {
                    asked: Some(asked), ..
                } => self.note_reply_to(&asked.bot, asked.session, asked.at, true),
                _ => {}
            }
        }
    }

    /// Notes that `from` asked, at `asked_at`, for replies to go to its
    /// `session`; `question`: what it wrote is owed a reply.
    fn note_reply_to(
        &mut self,
        from: &botfleet_memory::BotId,
        session: SessionId,
        asked_at: i64,
        question: bool,
    ) {
        // a question lands in the bot's own conversation with its
        // sender (an answer goes where the bot asked from), where
        // SendMessage goes back to the sender
        let key = &self.scope.session.key;
        let owed = question
            && *from != self.bot.id
            && key.kind == SessionKind::Agent
            && key.peer == from.as_str();
        match self
            .scope
            .reply_to
            .iter_mut()
            .find(|r| r.bot == *from && r.session == session)
        {
            Some(known) => {
                known.asked_at = known.asked_at.min(asked_at);
                known.owed |= owed;
            }
            None => self.scope.reply_to.push(ReplyTo {
                bot: from.clone(),
                session,
                asked_at,
                owed,
            }),
        }
    }

    /// Sets up a new turn over `inputs`; its start is written with the first step.
    pub(super) fn begin(&mut self, inputs: Vec<(InboxItem, Option<Entry>)>) {
        self.state.owes_delivery = inputs.iter().any(|(i, _)| i.priority == Priority::UserDm);
        self.state.input_seqs = inputs.iter().map(|(i, _)| i.seq).collect();
        for (item, entry) in inputs {
            if let Some(e) = entry {
                self.tail.push(&e);
            }
            self.inputs.push(item);
        }
        self.start_pending = Some(self.started_at);
    }
}

/// Work that is no longer its bot's to do since an owner changed.
#[path = "owner_changed.rs"]
mod owner_changed;

pub(crate) use owner_changed::came_before_owner_change;
pub(crate) use owner_changed::task_from_is_former_owners;
pub(crate) use owner_changed::task_is_former_owners;

impl Runner {
    /// Whether every person's message among this turn's inputs was an
    /// input of an earlier turn that delivered a reply (a retried input:
    /// the failed turn answered, then failed). One such turn is not
    /// enough: a turn interrupted by a newer message, after it replied to
    /// the one before, answered that one only, and the turn over both
    /// still owes the newer one its reply (QA: it skipped the reminder and
    /// ended `completed` with nothing said to it).
    pub(super) fn answered_before(&self) -> Result<bool, StoreError> {
        let owed: Vec<i64> = self
            .inputs
            .iter()
            .filter(|i| i.priority == Priority::UserDm)
            .map(|i| i.seq)
            .collect();
        let Some(&first) = owed.iter().min() else {
            return Ok(false);
        };
        let ends = self
            .rt
            .store
            .turn_ends_after_now(self.session, first.saturating_sub(1))?;
        let answered: Vec<i64> = ends
            .iter()
            .filter_map(|e| match &e.kind {
                EntryKind::TurnEnd {
                    inputs, deliveries, ..
                } if *deliveries > 0 => Some(inputs),
                _ => None,
            })
            .flatten()
            .copied()
            .collect();
        Ok(owed.iter().all(|s| answered.contains(s)))
    }
}

/// Whether a paused bot should tell this session (only for inputs people
/// wait on).
pub(super) fn plan_notice_needed(inputs: &[(InboxItem, Option<Entry>)]) -> bool {
    inputs.iter().any(|(i, _)| i.priority == Priority::UserDm)
}

/// The hop and the chain of a turn over `inputs`: a person's message
/// among them starts a new origin at hop 0 (the hop budget is per message
/// of a person, so the turn counts from 0 even when a bot's message deep
/// into an older chain was batched with it); else the highest hop of a
/// bot's message or a parent's task among them ([`chain_of`] for the
/// chain). Also what an approval's decision continues: the hop and chain
/// of the turn that asked (`safety/approvals.rs`).
pub(crate) fn origin_of(inputs: &[Entry]) -> (u32, Option<botfleet_memory::ChainOrigin>) {
    let from_person = inputs
        .iter()
        .any(|e| matches!(e.kind, EntryKind::UserMessage { .. }));
    let hop = if from_person {
        0
    } else {
        inputs
            .iter()
            .filter_map(|e| match &e.kind {
                // a bot's message, or a parent's task or message to its
                // subagent
                EntryKind::AgentMessage { hop, .. } | EntryKind::Event { hop: Some(hop), .. } => {
                    Some(*hop)
                }
                _ => None,
            })
            .max()
            .unwrap_or(0)
    };
    (hop, chain_of(inputs, from_person))
}

/// The chain of bots a turn over `inputs` belongs to: a person's message
/// among them starts one (the newest such message, as the hop count starts
/// over); else the chain the newest message from a bot carries (none when
/// it carries none: written before chains were carried); else an event
/// that is no bot's (a routine's run, a webhook's delivery, a room's
/// input; an approval's decision carries the chain of the turn that asked,
/// `safety/approvals.rs`) starts one.
fn chain_of(inputs: &[Entry], from_person: bool) -> Option<botfleet_memory::ChainOrigin> {
    let own = |e: &Entry| botfleet_memory::ChainOrigin {
        session: e.session,
        entry: e.id,
    };
    if from_person {
        return inputs
            .iter()
            .rev()
            .find(|e| matches!(e.kind, EntryKind::UserMessage { .. }))
            .map(own);
    }
    let from_bot = inputs.iter().rev().find(|e| {
        matches!(
            e.kind,
            EntryKind::AgentMessage { .. } | EntryKind::Event { hop: Some(_), .. }
        )
    });
    match from_bot {
        Some(e) => e.kind.chain(),
        None => inputs
            .iter()
            .rev()
            .find(|e| matches!(e.kind, EntryKind::Event { hop: None, .. }))
            .map(own),
    }
}

/// The model a run of `plan` calls: its bot's provider's. A turn that
/// fails makes no model call, so when that provider is no longer
/// configured (a config dropped it since the bot was made, e.g. by
/// CreateAgent with its creator's) any configured one lets it write its
/// failure, `turn_failed` notice and retry (and a subagent's report)
/// rather than stay `running`, unable to begin even to fail.
pub(super) fn model_for(rt: &Runtime, plan: &TurnPlan) -> Option<Arc<dyn Model>> {
    let configured = rt.models.get(&plan.bot.provider);
    let failing = matches!(plan.kind, PlanKind::Fail { .. });
    configured
        .or_else(|| failing.then(|| rt.models.values().next()).flatten())
        .cloned()
}
