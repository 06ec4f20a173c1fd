//! Random schedules checked against the lock manager's invariants, and a
//! multi-threaded run with cancellations. No clock: interleavings come from
//! hand polling or from `yield_now`.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::LockManager;
use super::LockMode::Read;
use super::LockMode::Write;
use super::LockState;
use super::tests::Guard;
use super::tests::Probe;
use super::tests::Req;
use super::tests::acquire;
use super::tests::request;

/// One step of a random schedule.
#[derive(Debug, Clone)]
enum Op {
    Request(Req),
    /// Poll the n-th pending probe if it was woken (an executor polls only then).
    PollWoken(usize),
    /// Drop the n-th pending probe: the turn was cancelled.
    Cancel(usize),
    /// Drop the n-th held guard.
    Release(usize),
}

fn req_strategy() -> impl Strategy<Value = Req> {
    let one = (
        prop::sample::select(vec!["/w/a", "/w/b", "/w/c"]),
        prop::bool::ANY,
    )
        .prop_map(|(p, write)| (p, if write { Write } else { Read }));
    prop_oneof![
        1 => Just(Req::All),
        6 => prop::collection::vec(one, 1..3).prop_map(Req::Paths),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => req_strategy().prop_map(Op::Request),
        3 => (0usize..8).prop_map(Op::PollWoken),
        1 => (0usize..8).prop_map(Op::Cancel),
        2 => (0usize..8).prop_map(Op::Release),
    ]
}

/// The model the schedule is checked against.
#[derive(Default)]
struct Schedule {
    next: usize,
    reqs: BTreeMap<usize, Req>,
    pending: Vec<(usize, Probe)>,
    held: Vec<(usize, Guard)>,
    cancelled: HashSet<usize>,
}

impl Schedule {
    fn apply(&mut self, m: &LockManager, op: Op) {
        match op {
            Op::Request(req) => {
                let n = self.next;
                self.next += 1;
                self.reqs.insert(n, req.clone());
                match request(m, &req, &n.to_string()) {
                    Ok(guard) => self.held.push((n, guard)),
                    Err(probe) => self.pending.push((n, probe)),
                }
            }
            Op::PollWoken(i) if !self.pending.is_empty() => {
                let i = i % self.pending.len();
                if self.pending[i].1.wakes() > 0 {
                    let (n, mut probe) = self.pending.remove(i);
                    match probe.poll() {
                        Some(guard) => self.held.push((n, guard)),
                        None => self.pending.insert(i, (n, probe)),
                    }
                }
            }
            Op::Cancel(i) if !self.pending.is_empty() => {
                let (n, probe) = self.pending.remove(i % self.pending.len());
                drop(probe);
                self.cancelled.insert(n);
            }
            Op::Release(i) if !self.held.is_empty() => {
                let (n, guard) = self.held.remove(i % self.held.len());
                drop(guard);
                self.cancelled.insert(n);
            }
            Op::PollWoken(_) | Op::Cancel(_) | Op::Release(_) => {}
        }
    }

    /// Safety, fairness, progress and wake-up invariants of the snapshot.
    fn check(&self, m: &LockManager) -> Result<(), TestCaseError> {
        let mut held: Vec<usize> = Vec::new();
        let mut waiting: Vec<usize> = Vec::new();
        for i in m.snapshot() {
            let n: usize = i.holder.parse().map_err(|_| TestCaseError::fail("label"))?;
            let list = match i.state {
                LockState::Held => &mut held,
                LockState::Waiting { .. } => &mut waiting,
            };
            if list.last() != Some(&n) {
                list.push(n);
            }
        }
        for n in held.iter().chain(&waiting) {
            prop_assert!(
                !self.cancelled.contains(n),
                "{} was dropped but is listed",
                n
            );
        }
        for (k, a) in held.iter().enumerate() {
            for b in &held[k + 1..] {
                prop_assert!(
                    !self.reqs[a].conflicts(&self.reqs[b]),
                    "{} and {} held together",
                    a,
                    b
                );
            }
        }
        for (k, w) in waiting.iter().enumerate() {
            let blocked = held
                .iter()
                .chain(&waiting[..k])
                .any(|o| self.reqs[o].conflicts(&self.reqs[w]));
            prop_assert!(blocked, "{} waits for nothing", w);
            for h in held.iter().filter(|h| *h > w) {
                prop_assert!(
                    !self.reqs[h].conflicts(&self.reqs[w]),
                    "{} overtook {}",
                    h,
                    w
                );
            }
        }
        for (n, probe) in &self.pending {
            if held.contains(n) {
                prop_assert!(probe.wakes() > 0, "{} granted but never woken", n);
            }
        }
        Ok(())
    }

    /// Releases everything and serves every waiter, polling only woken probes.
    fn drain(&mut self, m: &LockManager) -> Result<(), TestCaseError> {
        self.held.clear();
        while !self.pending.is_empty() {
            let before = self.pending.len();
            let mut still = Vec::new();
            for (n, mut probe) in std::mem::take(&mut self.pending) {
                if probe.wakes() == 0 {
                    still.push((n, probe));
                    continue;
                }
                match probe.poll() {
                    Some(guard) => drop(guard),
                    None => still.push((n, probe)),
                }
            }
            self.pending = still;
            prop_assert!(self.pending.len() < before, "stalled: {:?}", m.snapshot());
        }
        prop_assert_eq!(m.snapshot(), vec![]);
        Ok(())
    }
}

proptest! {
    #[test]
    fn random_schedules_keep_every_invariant(ops in prop::collection::vec(op_strategy(), 1..80)) {
        let m = LockManager::new();
        let mut schedule = Schedule::default();
        for op in ops {
            schedule.apply(&m, op);
            schedule.check(&m)?;
        }
        schedule.drain(&m)?;
    }
}

/// Live holders per path, checked on entry: the lock manager's promises seen
/// from the outside.
#[derive(Default)]
struct Occupancy {
    readers: [AtomicUsize; 3],
    writers: [AtomicUsize; 3],
    all: AtomicUsize,
}

/// Leaves the occupancy on drop, so aborted tasks leave too.
struct Inside<'a> {
    occupancy: &'a Occupancy,
    req: Req,
}

impl<'a> Inside<'a> {
    fn enter(occupancy: &'a Occupancy, req: Req) -> Self {
        match &req {
            Req::All => assert_eq!(occupancy.all.fetch_add(1, Ordering::SeqCst), 0),
            Req::Paths(paths) => {
                for (p, mode) in paths {
                    let i = slot(p);
                    match mode {
                        Read => occupancy.readers[i].fetch_add(1, Ordering::SeqCst),
                        Write => occupancy.writers[i].fetch_add(1, Ordering::SeqCst),
                    };
                }
            }
        }
        let inside = Self { occupancy, req };
        inside.check();
        inside
    }

    fn check(&self) {
        let o = self.occupancy;
        let all = o.all.load(Ordering::SeqCst);
        for i in 0..3 {
            let r = o.readers[i].load(Ordering::SeqCst);
            let w = o.writers[i].load(Ordering::SeqCst);
            assert!(
                w <= 1 && (w == 0 || r == 0),
                "path {i}: {r} readers, {w} writers"
            );
            assert!(
                all == 0 || r + w == 0,
                "exclusive lock shared with path {i}"
            );
        }
        assert!(all <= 1);
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        match &self.req {
            Req::All => {
                self.occupancy.all.fetch_sub(1, Ordering::SeqCst);
            }
            Req::Paths(paths) => {
                for (p, mode) in paths {
                    let i = slot(p);
                    match mode {
                        Read => self.occupancy.readers[i].fetch_sub(1, Ordering::SeqCst),
                        Write => self.occupancy.writers[i].fetch_sub(1, Ordering::SeqCst),
                    };
                }
            }
        }
    }
}

fn slot(p: &str) -> usize {
    match p {
        "/w/a" => 0,
        "/w/b" => 1,
        _ => 2,
    }
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn random_req(state: &mut u64) -> Req {
    let paths = ["/w/a", "/w/b", "/w/c"];
    match xorshift(state) % 8 {
        0 => Req::All,
        k => {
            let mode = |bit: u64| if bit & 1 == 1 { Write } else { Read };
            let first = paths[(k % 3) as usize];
            let second = paths[(xorshift(state) % 3) as usize];
            // Distinct paths only, in either order: lock_paths sorts them.
            let mut list = vec![(first, mode(xorshift(state)))];
            if first != second && k % 2 == 0 {
                list.push((second, mode(xorshift(state))));
            }
            Req::Paths(list)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_with_cancellation_keep_exclusion() {
    let manager = LockManager::new();
    let occupancy = Arc::new(Occupancy::default());
    let mut tasks = Vec::new();
    for task in 0..48u64 {
        let (m, occupancy) = (manager.clone(), Arc::clone(&occupancy));
        tasks.push(tokio::spawn(async move {
            let mut state = 0x2545_f491_4f6c_dd1d ^ (task + 1).wrapping_mul(0x9e37_79b9);
            for _ in 0..40 {
                let req = random_req(&mut state);
                let acquire = acquire(m.clone(), req.clone(), format!("task{task}"));
                let patience = xorshift(&mut state) % 6;
                // Cancel after `patience` executor rounds unless granted first.
                let give_up = async {
                    for _ in 0..patience {
                        tokio::task::yield_now().await;
                    }
                };
                let guard = tokio::select! {
                    biased;
                    guard = acquire => Some(guard),
                    () = give_up, if patience > 0 => None,
                };
                if let Some(guard) = guard {
                    let inside = Inside::enter(&occupancy, req);
                    for _ in 0..(xorshift(&mut state) % 3) {
                        tokio::task::yield_now().await;
                        inside.check();
                    }
                    drop(inside);
                    drop(guard);
                }
            }
        }));
    }
    // Abort a few tasks mid-flight: their guards and queued requests go too.
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    for task in tasks.iter().step_by(7) {
        task.abort();
    }
    let all = futures::future::join_all(tasks);
    let results = tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("deadlock: tasks did not finish");
    for result in results {
        if let Err(e) = result {
            assert!(e.is_cancelled(), "task failed: {e}");
        }
    }
    assert_eq!(manager.snapshot(), vec![]);
}
