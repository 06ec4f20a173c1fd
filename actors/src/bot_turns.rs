//! A bot's turns: starting the next one ([`BotState::schedule`]) and what
//! its end means for the queue ([`BotState::on_turn_end`]): requeued inputs,
//! the daily budget's pause, a crashed turn resumed or failed, a turn the
//! store refused to write run again once it accepts writes
//! (`bot_store_wait.rs`).

#[allow(clippy::wildcard_imports)]
use super::*;
use botfleet_memory::InboxItem;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;

#[cfg(test)]
#[path = "bot_turns_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "bot_retry_race_tests.rs"]
mod retry_race_tests;

#[cfg(test)]
#[path = "bot_compaction_race_tests.rs"]
mod compaction_race_tests;

#[cfg(test)]
#[path = "bot_cancel_tests.rs"]
mod cancel_tests;

#[cfg(test)]
#[path = "bot_pause_tests.rs"]
mod pause_tests;

/// Longest wait of the daily budget's pause timer before it reads the
/// store's clock again. The pause ends at a time of the wall clock (the
/// next UTC midnight) and a timer runs on the monotonic clock, which a
/// suspended machine stops and a stepped wall clock leaves behind: one
/// timer for the whole wait kept the bot paused past the end (QA, with
/// the wall clock moved past midnight: `paused_until` in the past and
/// seven messages queued).
pub(super) const PAUSE_RECHECK: std::time::Duration = std::time::Duration::from_secs(60);

/// When the pause timer fires next: after `left_ms` of the pause, or at
/// the next look at the clock, whichever is sooner.
pub(super) fn pause_timer(left_ms: i64) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(left_ms.max(0)).unwrap_or(0)).min(PAUSE_RECHECK)
}

impl BotState {
    /// Starts the next turn if none runs and nothing holds it back.
    pub(super) fn schedule(&mut self, myself: &ActorRef<BotMsg>) {
        if self.running.is_some() {
            return;
        }
        if self.rt.is_stopping() {
            // the host stops: no turn starts, so no model request is made
            // for one; what is queued is pending in the store's inbox and
            // runs after the next start
            return;
        }
        if self.record.removed_at().is_some() {
            // no longer in the config: its inputs and open turns wait in
            // the store until a config lists it again
            return;
        }
        if self.waits_for_store() {
            // the store refused the last run's writes: the turn runs again
            // first when the wait is over, and nothing newer before it
            return;
        }
        if let Some(p) = self.pending.pop_front() {
            let (turn, session, inputs, kind) = match p {
                Pending::Resume {
                    turn,
                    session,
                    inputs,
                    last_input,
                    replaces_start,
                } => {
                    let plan_inputs = inputs
                        .iter()
                        .map(|q| (q.item.clone(), q.entry.clone()))
                        .collect();
                    self.start(
                        myself,
                        turn,
                        session,
                        inputs,
                        PlanKind::Resume {
                            inputs: plan_inputs,
                        },
                        replaces_start,
                    );
                    if self.queue.has_user_dm_after(last_input)
                        && let Some(run) = &self.running
                    {
                        tracing::debug!(bot = %self.record.id, %turn, "a person's message that came before the crash interrupts the resumed turn");
                        run.soft.cancel();
                    }
                    return;
                }
                Pending::Fail {
                    turn,
                    session,
                    inputs,
                    error,
                    after_store,
                } => {
                    let plan_inputs = inputs
                        .iter()
                        .map(|q| (q.item.clone(), q.entry.clone()))
                        .collect();
                    (
                        turn,
                        session,
                        inputs,
                        PlanKind::Fail {
                            error,
                            inputs: plan_inputs,
                            after_store,
                        },
                    )
                }
            };
            self.start(myself, turn, session, inputs, kind, false);
            return;
        }
        if self.window.is_some() && self.queue.has_user_dm() {
            return;
        }
        // the pause ends at the wall clock's time, which a late timer
        // (PAUSE_RECHECK) may not have seen yet: a message that comes
        // after it is answered, not told to wait for a pause that is over
        if self
            .paused_until
            .is_some_and(|until| self.rt.store.clock().now_ms() >= until)
        {
            self.paused_until = None;
            self.paused_told.clear();
        }
        let next = if self.paused_until.is_some() {
            // paused for the day: a room's input starts a turn, which fails
            // at once saying why (a discussion cannot wait for tomorrow),
            // and so does a person's first message in a session since the
            // pause, which is told when it will be answered; the rest waits
            let (tails, told) = (&self.tails, &self.paused_told);
            let next = self.queue.next_batch_where(|q| {
                is_room_input(q, tails)
                    || (q.item.priority == Priority::UserDm && !told.contains(&q.item.session))
            });
            match next {
                Some((session, batch)) => {
                    self.paused_told.insert(session);
                    Some((session, batch))
                }
                None => return,
            }
        } else {
            self.queue.next_batch()
        };
        match next {
            Some((session, batch)) => {
                let plan_inputs = batch
                    .iter()
                    .map(|q| (q.item.clone(), q.entry.clone()))
                    .collect();
                self.start(
                    myself,
                    TurnId::new_v7(),
                    session,
                    batch,
                    PlanKind::New {
                        inputs: plan_inputs,
                    },
                    false,
                );
            }
            None => match self.compact_due.pop() {
                // idle: compact in the background while the provider cache is warm
                Some(session) => {
                    self.start(
                        myself,
                        TurnId::new_v7(),
                        session,
                        Vec::new(),
                        PlanKind::Compact,
                        false,
                    );
                }
                None => self.become_idle(myself),
            },
        }
    }

    /// Re-reads the inputs pending in the store (after a retry, a
    /// wake-up, an input routed out of order) and queues those no turn
    /// holds.
    pub(super) async fn on_refresh(
        &mut self,
        myself: &ActorRef<BotMsg>,
    ) -> Result<(), botfleet_memory::StoreError> {
        let pending = self.rt.store.pending_inbox(&self.record.id).await?;
        // inputs a turn holds (running, or waiting to run again) are
        // pending in the store until the turn's record is written: they
        // are not queued a second time
        let running: Vec<i64> = self
            .running
            .iter()
            .flat_map(|r| r.inputs.iter())
            .chain(self.pending.iter().flat_map(Pending::inputs))
            .map(|i| i.item.gid)
            .collect();
        // an input of the running turn pending in the store may be one the
        // turn let go already: its end is written, and a person's retry
        // requeued it before the turn's task told this bot it ended; the
        // store is read again then ([`BotState::on_turn_end`])
        self.recheck_after_run |= self.running.as_ref().is_some_and(|r| {
            r.inputs
                .iter()
                .any(|q| pending.iter().any(|p| p.gid == q.item.gid))
        });
        let found = pending
            .into_iter()
            .map(|item| QueuedInput { item, entry: None })
            .collect();
        let added = self.queue.refresh(found, &running);
        if added.count > 0 {
            self.idle_since = None;
            // a person's message routed after a later input is still a
            // person's message: it interrupts, and starts or waits for the
            // debounce window, as if routed in order
            if added.user_dm && self.on_user_dm(myself) == Start::Later {
                return Ok(());
            }
            self.schedule(myself);
        }
        Ok(())
    }

    /// Spawns a run of `turn`. `replaces_start`: the turn's last run ended
    /// because the store refused its writes; this run takes its place.
    fn start(
        &mut self,
        myself: &ActorRef<BotMsg>,
        turn: TurnId,
        session: SessionId,
        inputs: Vec<QueuedInput>,
        kind: PlanKind,
        replaces_start: bool,
    ) {
        let hard = CancellationToken::new();
        let soft = hard.child_token();
        let tail = self
            .tails
            .take(&session)
            .unwrap_or_else(|| SessionTail::new(session));
        let started_at = self.rt.store.clock().now_ms();
        // set before the run when its last run could not write: a crash
        // of this run is not in a row with any before the store's refusal
        let first_step = Arc::new(FirstStep::new(replaces_start));
        let run_plan = match &kind {
            PlanKind::New { .. } | PlanKind::Resume { .. } => RunPlan::Turn,
            PlanKind::Fail { error, .. } => RunPlan::Fail(error.clone()),
            PlanKind::Compact => RunPlan::Compact,
        };
        let plan = TurnPlan {
            turn,
            session,
            bot: self.record.clone(),
            kind,
            tail,
            soft: soft.clone(),
            hard: hard.clone(),
            started_at,
            first_step: first_step.clone(),
            replaces_start,
            floor: self.queue.floor_of(session),
        };
        self.running = Some(Running {
            turn,
            session,
            soft,
            hard,
            inputs,
            started_at,
            first_step,
            plan: run_plan,
            cancelled_by: None,
        });
        let rt = self.rt.clone();
        let me = myself.clone();
        let stopping = self.rt.stopping();
        let bot = self.record.id.clone();
        tokio::spawn(async move {
            let run = AssertUnwindSafe(run_counted(rt, plan)).catch_unwind();
            // the host's stop drops the run where it waits, at once: what
            // it committed stays and it resumes from there at the next
            // start (`Runtime::stop_turns`); its bot is told nothing, as
            // it starts no more turns
            let ended = tokio::select! {
                biased;
                () = stopping.cancelled() => None,
                ended = run => Some(ended),
            };
            let Some(ended) = ended else {
                tracing::info!(%bot, %turn, "turn cut off by the host's stop; the next start resumes it from its last step (one cut before its first step was not stored: its inputs start a new turn)");
                return;
            };
            let end = match ended {
                Ok(report) => TurnEndKind::Ended(Box::new(report)),
                Err(panic) => TurnEndKind::Panicked {
                    turn,
                    message: panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "panic".into()),
                },
            };
            // the bot may be gone (passivated or stopped); its state is in the store
            let _ = me.cast(BotMsg::TurnEnded(TurnEnd(end)));
        });
    }

    pub(super) fn on_turn_end(&mut self, myself: &ActorRef<BotMsg>, end: TurnEnd) {
        let turn = match &end.0 {
            TurnEndKind::Ended(r) => r.turn,
            TurnEndKind::Panicked { turn, .. } => *turn,
        };
        let Some(mut run) = self.running.take_if(|r| r.turn == turn) else {
            return;
        };
        // the cancel that stopped this run, or one whose answer waited for
        // this run of its turn (the one that records its failure): answered
        // by whether the run's end was committed, so that `cancelled` is
        // said only of a turn a restart does not resume (audit: answered
        // `true` as the run stopped, a cancel the store refused to record
        // let the next start resume the turn and do the cancelled work)
        let mut cancel = run.cancelled_by.take().or_else(|| {
            self.cancel_answer
                .take_if(|(waiting, _)| *waiting == turn)
                .map(|(_, reply)| reply)
        });
        if std::mem::take(&mut self.recheck_after_run) {
            // a retry's wake-up came before this end: the inputs it
            // requeued were skipped as the run's own (a run that keeps
            // them, below, holds them again and the refresh skips them)
            let _ = myself.cast(BotMsg::Refresh);
        }
        if run.plan == RunPlan::Turn {
            // a run that ended interrupted before its first model step adds
            // to the string the next run holds interrupts after; any other
            // end of a turn's run (a step) ends the string
            let interrupted = matches!(&end.0, TurnEndKind::Ended(r)
                if r.status == Some(TurnStatus::Interrupted));
            let stepped = run.first_step.stepped();
            self.unstepped_interrupts = if interrupted && !stepped {
                self.unstepped_interrupts.saturating_add(1)
            } else {
                0
            };
            // and the string of interrupted runs, stepped or not
            self.interrupted_runs = if interrupted {
                self.interrupted_runs.saturating_add(1)
            } else {
                0
            };
        }
        let crash = match end.0 {
            TurnEndKind::Ended(report) => {
                let report = *report;
                // no status and no tail: the run began, and the store
                // refused its writes (a run that never began gives its
                // tail back)
                let refused = report.status.is_none() && report.tail.is_none();
                if let Some(tail) = report.tail {
                    self.tails.put(run.session, tail);
                }
                if report.compaction_due && !self.compact_due.contains(&run.session) {
                    self.compact_due.push(run.session);
                }
                // the turn that found the budget spent as it began told its
                // session if a person's message was among its inputs (one
                // woken by a subagent's report told nobody, and the
                // person's next message there was never told either, QA);
                // the turn that spent it pauses the bot as it ends
                // (so the bot list and the answer to the next message show
                // the pause) and its session is told by its next message
                let pause = match (report.paused_until, report.spent_until) {
                    (Some(until), _) => Some((until, report.paused_told)),
                    (None, Some(until)) => Some((until, false)),
                    (None, None) => None,
                };
                if let Some((until, told)) = pause
                    && self.paused_until.is_none()
                {
                    self.paused_until = Some(until);
                    if told {
                        self.paused_told.insert(run.session);
                    }
                    let left = until - self.rt.store.clock().now_ms();
                    tracing::info!(bot = %self.record.id, left_ms = left, "daily token budget spent; paused");
                    myself.send_after(pause_timer(left), || BotMsg::Unpause);
                }
                if let Some(status) = report.status {
                    // the store took the run's writes
                    self.store_wait = None;
                    // the run that stopped for the cancel (or recorded its
                    // failure) ended so; any other end (a reply before the
                    // cancel took, an interrupt whose inputs run again) is
                    // not the cancel's doing (review: `true` for those too)
                    let answer = if matches!(status, TurnStatus::Cancelled | TurnStatus::Failed) {
                        CancelAnswer::Cancelled
                    } else {
                        CancelAnswer::Nothing
                    };
                    answer_cancel(cancel.take(), answer);
                }
                match report.status {
                    Some(TurnStatus::Interrupted) => {
                        let mut inputs = run.inputs;
                        for item in report.requeue {
                            if !inputs.iter().any(|q| q.item.gid == item.gid) {
                                inputs.push(QueuedInput { item, entry: None });
                            }
                        }
                        self.queue.requeue(inputs);
                        self.crashes.remove(&turn);
                        None
                    }
                    Some(_) => {
                        // inputs the run did not take (the crash limit
                        // failed only some of a new turn's: `count_start`)
                        let held_back: Vec<QueuedInput> = report
                            .requeue
                            .into_iter()
                            .map(|item| QueuedInput { item, entry: None })
                            .collect();
                        self.queue.requeue(held_back);
                        self.crashes.remove(&turn);
                        None
                    }
                    None if refused => {
                        // its writes were refused (disk full, I/O error):
                        // not the turn's fault, and not a crash; it runs
                        // again once the store accepts writes
                        let error = report
                            .error
                            .unwrap_or_else(|| "the store refused the turn's writes".into());
                        answer_cancel(cancel.take(), CancelAnswer::NotRecorded(error.clone()));
                        self.wait_for_store(myself, run, error);
                        self.schedule(myself);
                        return;
                    }
                    // the run never began (`Runner::new` gave the tail
                    // back: its provider is not configured)
                    None => Some((
                        run.inputs,
                        report
                            .error
                            .unwrap_or_else(|| "the turn could not start".into()),
                    )),
                }
            }
            TurnEndKind::Panicked { message, .. } => {
                tracing::error!(bot = %self.record.id, turn = %turn, %message, "turn task panicked");
                self.tails.drop_session(&run.session);
                Some((run.inputs, format!("the turn crashed: {message}")))
            }
        };
        if let Some((inputs, error)) = crash {
            if run.first_step.stepped() {
                // the run finished a step before it crashed: the crashes
                // before it were not in a row with this one (as the
                // store's count, reset by a step)
                self.crashes.remove(&turn);
            }
            let count = self.crashes.entry(turn).or_insert(0);
            *count += 1;
            let max = self.rt.settings.max_turn_attempts;
            if cancel.is_some() && !run.hard.is_cancelled() && *count > max {
                // the run that was to record a cancelled turn's failure
                // crashed at the limit: given up below, not recorded
                answer_cancel(cancel.take(), CancelAnswer::NotRecorded(error.clone()));
            }
            if run.hard.is_cancelled() || cancel.is_some() {
                // the person was told it was cancelled (above): it does
                // not resume, with fresh tokens, to call its model and
                // tools again (audit, 2026-12-07); as a cancel the store
                // made wait, it ends failed saying so; a crash of that
                // failure's own run gives up (the count at its limit),
                // rather than resume the turn
                *count = max;
                self.pending.push_front(Pending::Fail {
                    turn,
                    session: run.session,
                    inputs,
                    error: format!("cancelled (and as it stopped: {error})"),
                    after_store: false,
                });
                // the failure's run answers the cancel
                if let Some(reply) = cancel.take() {
                    self.cancel_answer = Some((turn, reply));
                }
            } else if *count < max {
                let last_input = inputs.iter().map(|q| q.item.gid).max().unwrap_or(i64::MAX);
                self.pending.push_front(Pending::Resume {
                    turn,
                    session: run.session,
                    inputs,
                    last_input,
                    replaces_start: false,
                });
            } else if *count == max {
                self.pending.push_front(Pending::Fail {
                    turn,
                    session: run.session,
                    inputs,
                    error,
                    after_store: false,
                });
            } else {
                // even recording the failure failed, and not for the
                // store (a refused write waits for it, above): the run
                // cannot begin at all; leave the turn to the next activation
                tracing::error!(bot = %self.record.id, turn = %turn, %error, "giving up on turn until the bot restarts");
            }
        }
        // any other end (an interrupted run: the cancel came as it ended)
        answer_cancel(cancel, CancelAnswer::Cancelled);
        self.schedule(myself);
    }
}

/// Answers the cancel `reply`, if there is one, with `answer`.
fn answer_cancel(reply: Option<RpcReplyPort<CancelAnswer>>, answer: CancelAnswer) {
    if let Some(reply) = reply {
        let _ = reply.send(answer);
    }
}

/// Runs `plan` once its start is counted ([`count_start`]); the inputs it
/// held back go back to the bot's queue with the report.
async fn run_counted(rt: Arc<Runtime>, plan: TurnPlan) -> TurnReport {
    let (plan, held_back) = count_start(&rt, plan).await;
    let mut report = run_turn(rt, plan).await;
    report.requeue.extend(held_back);
    report
}

/// Counts the start of a turn over inputs read back from the inbox
/// (`Mutation::CountStart`), and makes it fail at once, with its
/// retryable notice, past `runtime.max_turn_attempts` such starts.
///
/// A turn is stored with its first step: a host killed during a turn's
/// first model call left no turn counting its starts, and its inputs,
/// still pending, came back as a new turn at each restart, forever (a
/// message whose answer crashes the host crashed it at every start, and
/// nobody was told). An input is read back (it comes without its entry)
/// after a restart, a retry, a late arrival or the bot's activation, so
/// each restart of such a crash loop counts one more start; a turn over
/// inputs routed to its running bot, the throughput path, writes nothing
/// more. (The start a crash cut off before any restart is not counted:
/// counting it would cost a write at the start of every turn.) A count
/// the store does not take leaves the turn as planned: its own writes
/// meet the same refusal.
///
/// Only the inputs past the limit fail: of a new turn, the others are
/// held back (returned), to run in a turn of their own after it. (QA: a
/// delivery that came during a crash loop, started once, failed with the
/// one that had crashed the host three times, never shown to the model.)
async fn count_start(rt: &Runtime, mut plan: TurnPlan) -> (TurnPlan, Vec<InboxItem>) {
    let inputs = match &plan.kind {
        PlanKind::New { inputs } | PlanKind::Resume { inputs } => inputs,
        PlanKind::Fail { .. } | PlanKind::Compact => return (plan, Vec::new()),
    };
    if !inputs.iter().any(|(_, entry)| entry.is_none()) {
        return (plan, Vec::new());
    }
    // a bot paused by its daily token budget holds the turn without a
    // model call: a start cut off then is no crash of the turn (QA: four
    // restarts of a host while a bot was paused failed its waiting message
    // as "crashed at least 3 times in a row")
    if matches!(
        crate::engine::stored_budget_pause(&rt.store, &plan.bot).await,
        Ok(Some(_))
    ) {
        return (plan, Vec::new());
    }
    let count = Mutation::CountStart {
        bot: plan.bot.id.clone(),
        inputs: inputs.iter().map(|(item, _)| item.gid).collect(),
    };
    let counts = match rt.store.write(vec![count]).await {
        Ok(mut results) => match results.pop() {
            Some(MutationResult::StartCounts(counts)) => counts,
            _ => Vec::new(),
        },
        Err(e) => {
            tracing::warn!(bot = %plan.bot.id, turn = %plan.turn, error = %e, "could not count a turn's start");
            return (plan, Vec::new());
        }
    };
    let limit = rt.settings.max_turn_attempts;
    let past: HashSet<i64> = counts
        .iter()
        .filter(|&&(_, n)| n > limit)
        .map(|&(gid, _)| gid)
        .collect();
    let Some(starts) = counts.iter().map(|&(_, n)| n).filter(|&n| n > limit).max() else {
        return (plan, Vec::new());
    };
    tracing::warn!(bot = %plan.bot.id, turn = %plan.turn, starts, failing = past.len(),
        "a turn over these inputs was cut off before its first step at each of its last starts: failing it");
    let error = format!(
        "the turn crashed at least {} times in a row before its first step",
        starts - 1
    );
    let kind = std::mem::replace(&mut plan.kind, PlanKind::Compact);
    let mut held_back = Vec::new();
    plan.kind = match kind {
        PlanKind::New { inputs } => {
            let (failing, rest): (Vec<_>, Vec<_>) = inputs
                .into_iter()
                .partition(|(item, _)| past.contains(&item.gid));
            held_back = rest.into_iter().map(|(item, _)| item).collect();
            PlanKind::Fail {
                error,
                inputs: failing,
                after_store: false,
            }
        }
        // a stored turn's inputs are its own: they fail together
        PlanKind::Resume { inputs } => PlanKind::Fail {
            error,
            inputs,
            after_store: false,
        },
        other @ (PlanKind::Fail { .. } | PlanKind::Compact) => other,
    };
    (plan, held_back)
}

/// Whether `input` is a room coordinator's input to this bot: by its entry
/// when it came with one, else by its session's kind when a context of it
/// was loaded.
fn is_room_input(input: &QueuedInput, tails: &Tails) -> bool {
    match &input.entry {
        Some(e) => crate::group::is_input_author(&e.author),
        None => tails.is_room(&input.item.session),
    }
}
