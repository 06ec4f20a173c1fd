//! A bot whose turn the store refused to write (disk full, an I/O error, a
//! database locked by another process): the turn keeps its inputs and runs
//! again after a wait ([`STORE_RETRY_SCHEDULE`]), once the store accepts a
//! write of the bot's own (a probe, `Mutation::Probe`). Nothing else runs
//! meanwhile, so no newer input is answered before the turn's own; the
//! inputs show as `queued`. A cancel fails the waiting turn for good with a
//! notice that names the store's error.
//!
//! (Before, three runs failed within milliseconds and the bot gave the turn
//! up until it restarted: its inputs were answered by nobody, its record
//! said `running` with no task behind it, and the next activation failed
//! it as "crashed 3 times in a row". Then each wait ran the turn again,
//! and each run asked the model again with the whole request, a full-price
//! call a minute for as long as the disk stayed full, its usage lost with
//! the rest of the run's writes and so not counted by the daily budget:
//! the probe costs no model call.)

use std::time::Duration;

use botfleet_memory::Mutation;

#[allow(clippy::wildcard_imports)]
use super::*;

/// Waits between runs of a turn the store refused to write: the n-th
/// refusal in a row waits the n-th entry, the last one repeating (a
/// refused probe counts as a refusal). A full disk is usually freed by a
/// person, in minutes: a probe a minute at most costs one tiny write, and
/// the answers follow within a minute of the space. The waits are timed
/// on tokio's clock (`send_after`), which a test can pause.
pub const STORE_RETRY_SCHEDULE: [Duration; 7] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(16),
    Duration::from_secs(32),
    Duration::from_secs(60),
];

/// The wait after `failures` refusals in a row (1 or more).
pub fn store_retry_delay(failures: u32) -> Duration {
    let last = STORE_RETRY_SCHEDULE.len() - 1;
    let at = usize::try_from(failures.saturating_sub(1)).map_or(last, |n| n.min(last));
    STORE_RETRY_SCHEDULE[at]
}

/// A bot waiting for its store to accept writes.
#[derive(Debug)]
pub(super) struct StoreWait {
    /// Runs the store refused in a row.
    failures: u32,
    /// The store's last error.
    error: String,
    /// The wait is over: the waiting turn may run (again).
    due: bool,
}

impl BotState {
    /// Whether the bot waits for its store (nothing may start).
    pub(super) fn waits_for_store(&self) -> bool {
        self.store_wait.as_ref().is_some_and(|w| !w.due)
    }

    /// The store refused the writes of `run`, which ended with `error`:
    /// the run is put first to run again after the next wait.
    pub(super) fn wait_for_store(
        &mut self,
        myself: &ActorRef<BotMsg>,
        run: Running,
        error: String,
    ) {
        let turn = run.turn;
        let again = match run.plan {
            RunPlan::Compact => {
                // background work: due again after the next turn
                tracing::warn!(bot = %self.record.id, %error, "the store refused a background compaction");
                None
            }
            RunPlan::Fail(reason) => Some(Pending::Fail {
                turn,
                session: run.session,
                inputs: run.inputs,
                error: reason,
                after_store: true,
            }),
            // cancelled, and the cancel could not be written: the cancel
            // stands, as a failure that says why it took the store's wait
            RunPlan::Turn if run.hard.is_cancelled() => Some(Pending::Fail {
                turn,
                session: run.session,
                inputs: run.inputs,
                error: format!(
                    "cancelled, and the store refused to record it then (the store said: {error})"
                ),
                after_store: true,
            }),
            RunPlan::Turn => Some(Pending::Resume {
                turn,
                session: run.session,
                last_input: run
                    .inputs
                    .iter()
                    .map(|q| q.item.gid)
                    .max()
                    .unwrap_or(i64::MAX),
                inputs: run.inputs,
                replaces_start: true,
            }),
        };
        let Some(again) = again else {
            return;
        };
        self.pending.push_front(again);
        let wait = self.store_wait.get_or_insert(StoreWait {
            failures: 0,
            error: String::new(),
            due: false,
        });
        wait.failures = wait.failures.saturating_add(1);
        wait.error = error;
        wait.due = false;
        let delay = store_retry_delay(wait.failures);
        tracing::error!(
            bot = %self.record.id,
            %turn,
            error = %wait.error,
            failures = wait.failures,
            ?delay,
            "the store refused the turn's writes; its inputs wait and it runs again after the delay"
        );
        self.store_timers += 1;
        let generation = self.store_timers;
        myself.send_after(delay, move || BotMsg::StoreRetry { generation });
    }

    /// The wait of timer `generation` is over: the store is probed with a
    /// write of the bot's own ([`BotMsg::StoreProbed`] says how it went).
    /// The bot waits for this write, not for anyone else's: the turn runs
    /// again once its own probe commits.
    pub(super) fn on_store_retry(&mut self, myself: &ActorRef<BotMsg>, generation: u64) {
        if generation != self.store_timers || self.store_wait.is_none() {
            return;
        }
        let store = self.rt.store.clone();
        let me = myself.clone();
        tokio::spawn(async move {
            let at = store.clock().now_ms();
            let refused = store
                .write(vec![Mutation::Probe { at }])
                .await
                .err()
                .map(|e| e.to_string());
            // the bot may be gone (stopped); its turn waits in the store
            let _ = me.cast(BotMsg::StoreProbed {
                generation,
                refused,
            });
        });
    }

    /// The probe of timer `generation` ended: committed, the waiting turn
    /// runs; `refused`, the bot waits the next delay, with no model call.
    pub(super) fn on_store_probed(
        &mut self,
        myself: &ActorRef<BotMsg>,
        generation: u64,
        refused: Option<String>,
    ) {
        if generation != self.store_timers {
            // a cancel ran the waiting turn meanwhile
            return;
        }
        let Some(wait) = &mut self.store_wait else {
            return;
        };
        let Some(error) = refused else {
            wait.due = true;
            self.schedule(myself);
            return;
        };
        wait.failures = wait.failures.saturating_add(1);
        wait.error = error;
        let delay = store_retry_delay(wait.failures);
        tracing::error!(
            bot = %self.record.id,
            error = %wait.error,
            failures = wait.failures,
            ?delay,
            "the store still refuses writes; the waiting turn runs again once it takes one (no model call meanwhile)"
        );
        self.store_timers += 1;
        let generation = self.store_timers;
        myself.send_after(delay, move || BotMsg::StoreRetry { generation });
    }

    /// A cancel while the bot waits for its store: the waiting turn fails
    /// for good now (it runs at once to record that, and again after each
    /// wait until the store takes it). The run that records it answers
    /// `reply` ([`BotState::answer_cancel`]): `Cancelled` once the failure
    /// is committed, `NotRecorded` when the store still refuses it (audit:
    /// it was answered `true` at once, the failure was never written, and
    /// the next start resumed the cancelled turn). `Nothing` when no turn
    /// waits, or its failure runs already.
    pub(super) fn cancel_waiting(
        &mut self,
        myself: &ActorRef<BotMsg>,
        reply: RpcReplyPort<CancelAnswer>,
    ) {
        let Some(wait) = &mut self.store_wait else {
            let _ = reply.send(CancelAnswer::Nothing);
            return;
        };
        match self.pending.pop_front() {
            Some(Pending::Resume {
                turn,
                session,
                inputs,
                ..
            }) => {
                self.pending.push_front(Pending::Fail {
                    turn,
                    session,
                    inputs,
                    error: cancelled_error(&wait.error),
                    after_store: true,
                });
                self.cancel_answer = Some((turn, reply));
            }
            // already being failed: the cancel changes nothing
            Some(fail @ Pending::Fail { .. }) => {
                self.pending.push_front(fail);
                let _ = reply.send(CancelAnswer::Nothing);
                return;
            }
            None => {
                let _ = reply.send(CancelAnswer::Nothing);
                return;
            }
        }
        wait.due = true;
        // a probe under way is over: the failure is written now
        self.store_timers += 1;
        self.schedule(myself);
        // no run started (the host stops, the bot was removed): none will
        // record the failure while this host runs (review: the answer
        // waited out the caller's 10 s)
        if self.running.is_none()
            && let Some((_, reply)) = self.cancel_answer.take()
        {
            let _ = reply.send(CancelAnswer::NotRecorded(
                "the host is stopping, or the bot was removed, before the turn's failure could be written".into(),
            ));
        }
    }
}

/// Why a turn cancelled while its store refused writes failed.
fn cancelled_error(store_error: &str) -> String {
    format!(
        "cancelled while the turn waited for the store to accept its writes (the store said: {store_error})"
    )
}
