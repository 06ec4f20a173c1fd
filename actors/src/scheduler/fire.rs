//! Firing due slots: one store batch per routine (the admission and the
//! move to the next slot, together), committed without blocking tokio's
//! paused clock, routed in commit order.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;

use botfleet_memory::AdmitOutcome;
use botfleet_memory::BotId;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::StoreError;
use botfleet_memory::UserId;

use super::actor::FireOutcome;
use super::actor::Firing;
use super::actor::Key;
use super::actor::SchedulerState;
use super::plan::SlotPlan;
use super::plan::newest_due;
use super::plan::next_after_skip;
use super::plan::plan_slot;
use super::plan::routine_admission;
use super::plan::routine_text;
use crate::runtime::Runtime;

/// A batch to commit and, for a fire, what to route once it is accepted.
struct Job {
    batch: Vec<Mutation>,
    route: Option<(Priority, NewEntry)>,
}

/// Commits each job as its own batch (the writer groups them) and routes
/// accepted admissions right after their commit, in commit order. The wait
/// runs on the blocking pool, so tokio's paused clock does not auto-advance
/// while the writer thread commits.
async fn commit_all(
    rt: &Arc<Runtime>,
    jobs: Vec<Job>,
) -> Vec<Result<Vec<MutationResult>, StoreError>> {
    let n = jobs.len();
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, job) in jobs.into_iter().enumerate() {
        let tx = tx.clone();
        let router = rt.clone();
        let route = job.route;
        // On a failed submit the callback is called with the error.
        let _ = rt.store.write_then(
            job.batch,
            Box::new(move |result| {
                if let (Ok(results), Some((priority, entry))) = (&result, route)
                    && let Some(MutationResult::Admitted(AdmitOutcome::Accepted(rec))) =
                        results.first()
                {
                    router.route_committed(vec![(rec.clone(), priority, entry)]);
                }
                let _ = tx.send((i, result));
            }),
        );
    }
    drop(tx);
    let collected = tokio::task::spawn_blocking(move || {
        let mut out: Vec<Option<Result<Vec<MutationResult>, StoreError>>> =
            (0..n).map(|_| None).collect();
        for (i, result) in rx {
            if let Some(slot) = out.get_mut(i) {
                *slot = Some(result);
            }
        }
        out
    })
    .await;
    match collected {
        Ok(out) => out
            .into_iter()
            .map(|r| r.unwrap_or(Err(StoreError::WriterGone)))
            .collect(),
        Err(e) => (0..n)
            .map(|_| Err(StoreError::Reader(format!("commit wait failed: {e}"))))
            .collect(),
    }
}

pub(super) async fn commit(
    rt: &Arc<Runtime>,
    batch: Vec<Mutation>,
) -> Result<Vec<MutationResult>, StoreError> {
    commit_all(rt, vec![Job { batch, route: None }])
        .await
        .pop()
        .unwrap_or(Err(StoreError::WriterGone))
}

/// One due slot, prepared.
struct Due {
    key: Key,
    slot_ms: i64,
    next_fire_ms: Option<i64>,
    fired: bool,
    late: bool,
    outcome: FireOutcome,
    job: Job,
}

/// Fires (or lets pass) every due slot by the clock. A missed slot that
/// `catch_up = "skip"` lets pass moves its routine to the newest slot that
/// is not late yet, if there is one: that slot is due as well, and fires
/// in the same catch-up (a second pass over just those routines). The due
/// slots of a bot paused by its daily token budget wait (see
/// [`FireOutcome::Paused`]).
pub(super) async fn fire_due(state: &mut SchedulerState) -> Vec<Firing> {
    let now = state.args.clock.now_ms();
    state.retry = false;
    state.held.clear();
    // at the first tick (a start) and after the clock went back
    let set_back = state.last_tick_ms.is_none_or(|last| now < last);
    state.last_tick_ms = Some(now);
    if set_back {
        rewind(state, now).await;
    }
    let mut report = fire_pass(state, now, None).await;
    let skipped: BTreeSet<Key> = report
        .iter()
        .filter(|f| f.outcome == FireOutcome::Skipped)
        .map(|f| (f.bot.clone(), f.name.clone()))
        .collect();
    if !skipped.is_empty() {
        report.extend(fire_pass(state, now, Some(&skipped)).await);
    }
    report
}

/// Plans again from `now` each routine whose next slot was planned while
/// the clock read later than it does now: a clock that ran ahead and was
/// set back (by NTP, by hand, a VM restored) left it waiting for a slot in
/// that future, as long as the clock had been ahead (a year ahead, a year
/// without a run). A slot is planned from the time it is planned at, so
/// while the clock only goes forward a slot still to come is always the
/// first after now; one later than that is such a slot. A slot that
/// already ran and comes again is not run twice: its fire's nonce is in
/// the ledger ([`FireOutcome::AlreadyFired`]).
async fn rewind(state: &mut SchedulerState, now: i64) {
    let mut jobs = Vec::new();
    let mut moved = Vec::new();
    for (key, loaded) in &state.routines {
        let (Some(schedule), Some(slot_ms)) = (&loaded.schedule, loaded.record.next_fire_ms) else {
            continue;
        };
        if slot_ms <= now {
            continue;
        }
        let Some(next) = schedule.next_after(now).filter(|n| *n < slot_ms) else {
            continue;
        };
        tracing::warn!(bot = %key.0, routine = %key.1, slot_ms, next, now,
            "the routine's next slot was planned while the clock read later than now (it was set back); planning it again from now");
        jobs.push(Job {
            batch: vec![Mutation::AdvanceRoutine {
                bot: key.0.clone(),
                name: key.1.clone(),
                slot_ms,
                fired: false,
                next_fire_ms: Some(next),
            }],
            route: None,
        });
        moved.push((key.clone(), next));
    }
    if jobs.is_empty() {
        return;
    }
    let results = commit_all(&state.args.rt, jobs).await;
    for ((key, next), result) in moved.into_iter().zip(results) {
        match result {
            Ok(_) => {
                if let Some(l) = state.routines.get_mut(&key) {
                    l.record.next_fire_ms = Some(next);
                }
            }
            Err(e) => {
                // tried again at the next tick, which comes within a second
                state.retry = true;
                state.last_tick_ms = None;
                tracing::warn!(bot = %key.0, routine = %key.1, error = %e,
                    "a routine could not be planned again after the clock was set back; retrying");
            }
        }
    }
}

/// What a pass found of a due routine's bot.
#[derive(Clone)]
enum BotNow {
    /// Deleted, or no longer listed by the config: it runs no turns.
    Gone,
    /// Its daily token budget is spent until this time (ms).
    Paused(i64),
    /// It takes inputs; its owner.
    Ready(UserId),
}

/// Reads `bot` and whether its daily token budget is spent now.
async fn bot_now(rt: &Runtime, bot: &BotId) -> Result<BotNow, StoreError> {
    // a bot the config no longer lists runs no turns: its slots pass
    // without a run, like those of a deleted bot
    let Some(record) = rt
        .store
        .get_bot(bot)
        .await?
        .filter(|b| b.removed_at().is_none())
    else {
        return Ok(BotNow::Gone);
    };
    Ok(
        match crate::engine::stored_budget_pause(&rt.store, &record).await? {
            Some(until_ms) => BotNow::Paused(until_ms),
            None => BotNow::Ready(record.owner),
        },
    )
}

/// One pass over the due routines (all, or those of `only`) at `now`.
async fn fire_pass(
    state: &mut SchedulerState,
    now: i64,
    only: Option<&BTreeSet<Key>>,
) -> Vec<Firing> {
    let rt = state.args.rt.clone();
    let mut bots: HashMap<BotId, BotNow> = HashMap::new();
    let mut due = Vec::new();
    let mut held = Vec::new();
    for (key, loaded) in &state.routines {
        if only.is_some_and(|o| !o.contains(key)) {
            continue;
        }
        let (Some(schedule), Some(slot_ms)) = (&loaded.schedule, loaded.record.next_fire_ms) else {
            continue;
        };
        if slot_ms > now {
            continue;
        }
        let r = &loaded.record;
        let bot = match bots.get(&r.bot) {
            Some(b) => b.clone(),
            None => match bot_now(&rt, &r.bot).await {
                Ok(b) => {
                    bots.insert(r.bot.clone(), b.clone());
                    b
                }
                Err(e) => {
                    state.retry = true;
                    tracing::warn!(bot = %r.bot, error = %e, "cannot read a routine's bot");
                    continue;
                }
            },
        };
        // A paused bot would only queue its slots, to be run by one turn
        // after the pause: its slots wait untouched instead, and the pause's
        // end finds them as a host back from downtime does (`catch_up`).
        if let BotNow::Paused(until_ms) = bot {
            held.push((key.clone(), slot_ms, until_ms));
            continue;
        }
        let plan = plan_slot(slot_ms, now, r.catch_up, state.restored_at_ms);
        // Never once per missed slot: after a fire the next slot is the
        // first after now; a skip drops only the late slots (the newest
        // slot still on time fires next, in this catch-up).
        let next_fire_ms = match plan {
            SlotPlan::Skip => next_after_skip(schedule, now),
            SlotPlan::Fire { .. } | SlotPlan::Unknown => schedule.next_after(now.max(slot_ms)),
        };
        let advance =
            |from_ms: i64, fired: bool, next_fire_ms: Option<i64>| Mutation::AdvanceRoutine {
                bot: r.bot.clone(),
                name: r.name.clone(),
                slot_ms: from_ms,
                fired,
                next_fire_ms,
            };
        let skip = |outcome: FireOutcome| Due {
            key: key.clone(),
            slot_ms,
            next_fire_ms,
            fired: false,
            late: false,
            outcome,
            job: Job {
                batch: vec![advance(slot_ms, false, next_fire_ms)],
                route: None,
            },
        };
        let late = match plan {
            SlotPlan::Fire { late } => late,
            SlotPlan::Skip => {
                due.push(skip(FireOutcome::Skipped));
                continue;
            }
            SlotPlan::Unknown => {
                due.push(skip(FireOutcome::Unknown));
                continue;
            }
        };
        let owner = match bot {
            BotNow::Ready(owner) => owner,
            BotNow::Gone => {
                due.push(skip(FireOutcome::NoBot));
                continue;
            }
            // held above
            BotNow::Paused(_) => continue,
        };
        // On time, the newest slot due runs (the older ones not missed
        // either are covered by it); a late run names the first missed.
        let run_ms = if late {
            slot_ms
        } else {
            newest_due(schedule, slot_ms, now)
        };
        let text = match routine_text(r, schedule.timezone(), run_ms, late) {
            Ok(t) => t,
            Err(e) => {
                state.retry = true;
                tracing::error!(error = %e, "routine prompt template failed");
                continue;
            }
        };
        let req = routine_admission(r, &owner, run_ms, text);
        let route = (req.priority, req.entry.clone());
        let mut batch = vec![Mutation::Admit(Box::new(req))];
        if run_ms != slot_ms {
            // the older slots pass (one transaction with the run)
            batch.push(advance(slot_ms, false, Some(run_ms)));
        }
        batch.push(advance(run_ms, true, next_fire_ms));
        due.push(Due {
            key: key.clone(),
            slot_ms: run_ms,
            next_fire_ms,
            fired: true,
            late,
            outcome: FireOutcome::AlreadyFired,
            job: Job {
                batch,
                route: Some(route),
            },
        });
    }
    let mut report = Vec::with_capacity(due.len() + held.len());
    for ((bot, name), slot_ms, until_ms) in held {
        tracing::debug!(%bot, routine = %name, slot_ms, until_ms, "routine slot waits for the bot's budget pause to end");
        state.held.insert(bot.clone(), until_ms);
        report.push(Firing {
            bot,
            name,
            slot_ms,
            outcome: FireOutcome::Paused { until_ms },
        });
    }
    if due.is_empty() {
        return report;
    }
    let (jobs, due): (Vec<Job>, Vec<_>) = due
        .into_iter()
        .map(|d| {
            (
                d.job,
                (d.key, d.slot_ms, d.next_fire_ms, d.fired, d.late, d.outcome),
            )
        })
        .unzip();
    let results = commit_all(&rt, jobs).await;
    for ((key, slot_ms, next_fire_ms, fired, late, outcome), result) in due.into_iter().zip(results)
    {
        let outcome = match result {
            Ok(results) => {
                if let Some(l) = state.routines.get_mut(&key) {
                    l.record.next_fire_ms = next_fire_ms;
                    if fired {
                        l.record.last_fire_ms = Some(slot_ms);
                    }
                }
                // only a fire's batch starts with an admission
                if let Some(MutationResult::Admitted(admitted)) = results.first() {
                    match admitted {
                        AdmitOutcome::Accepted(rec) => FireOutcome::Fired {
                            record: rec.clone(),
                            late,
                        },
                        AdmitOutcome::Duplicate(_)
                        | AdmitOutcome::Conflict(_)
                        | AdmitOutcome::Unknown { .. } => FireOutcome::AlreadyFired,
                    }
                } else {
                    outcome
                }
            }
            Err(e) => {
                state.retry = true;
                tracing::warn!(bot = %key.0, routine = %key.1, error = %e, "routine fire failed; retrying");
                FireOutcome::Failed {
                    error: e.to_string(),
                }
            }
        };
        match &outcome {
            FireOutcome::Fired { late, .. } => {
                tracing::info!(bot = %key.0, routine = %key.1, slot_ms, late, "routine fired");
            }
            FireOutcome::Skipped | FireOutcome::Unknown | FireOutcome::NoBot => {
                tracing::info!(bot = %key.0, routine = %key.1, slot_ms, ?outcome, "routine slot passed without a run");
            }
            FireOutcome::AlreadyFired | FireOutcome::Failed { .. } | FireOutcome::Paused { .. } => {
            }
        }
        report.push(Firing {
            bot: key.0,
            name: key.1,
            slot_ms,
            outcome,
        });
    }
    report
}
