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
/// in the same catch-up (a second pass over just those routines).
pub(super) async fn fire_due(state: &mut SchedulerState) -> Vec<Firing> {
    let now = state.args.clock.now_ms();
    state.retry = false;
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

/// One pass over the due routines (all, or those of `only`) at `now`.
async fn fire_pass(
    state: &mut SchedulerState,
    now: i64,
    only: Option<&BTreeSet<Key>>,
) -> Vec<Firing> {
    let rt = state.args.rt.clone();
    let mut owners: HashMap<BotId, Option<UserId>> = HashMap::new();
    let mut due = Vec::new();
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
        let plan = plan_slot(slot_ms, now, r.catch_up, state.restored_at_ms);
        // Never once per missed slot: after a fire the next slot is the
        // first after now; a skip drops only the late slots (the newest
        // slot still on time fires next, in this catch-up).
        let next_fire_ms = match plan {
            SlotPlan::Skip => next_after_skip(schedule, now),
            SlotPlan::Fire { .. } | SlotPlan::Unknown => schedule.next_after(now.max(slot_ms)),
        };
        let advance = |fired: bool| Mutation::AdvanceRoutine {
            bot: r.bot.clone(),
            name: r.name.clone(),
            slot_ms,
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
                batch: vec![advance(false)],
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
        let owner = match owners.get(&r.bot) {
            Some(o) => o.clone(),
            None => {
                let o = match rt.store.get_bot(&r.bot).await {
                    // a bot the config no longer lists runs no turns: its
                    // slots pass without a run, like those of a deleted bot
                    Ok(b) => b.filter(|b| b.removed_at().is_none()).map(|b| b.owner),
                    Err(e) => {
                        state.retry = true;
                        tracing::warn!(bot = %r.bot, error = %e, "cannot read a routine's bot");
                        continue;
                    }
                };
                owners.insert(r.bot.clone(), o.clone());
                o
            }
        };
        let Some(owner) = owner else {
            due.push(skip(FireOutcome::NoBot));
            continue;
        };
        let text = match routine_text(r, schedule.timezone(), slot_ms, late) {
            Ok(t) => t,
            Err(e) => {
                state.retry = true;
                tracing::error!(error = %e, "routine prompt template failed");
                continue;
            }
        };
        let req = routine_admission(r, &owner, slot_ms, text);
        let route = (req.priority, req.entry.clone());
        due.push(Due {
            key: key.clone(),
            slot_ms,
            next_fire_ms,
            fired: true,
            late,
            outcome: FireOutcome::AlreadyFired,
            job: Job {
                batch: vec![Mutation::Admit(Box::new(req)), advance(true)],
                route: Some(route),
            },
        });
    }
    if due.is_empty() {
        return Vec::new();
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
    let mut report = Vec::with_capacity(due.len());
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
            FireOutcome::AlreadyFired | FireOutcome::Failed { .. } => {}
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
