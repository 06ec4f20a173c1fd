//! File locks shared by the bots and subagents working in one workspace.
//!
//! Read, Write, Edit and script tools take a lock on the paths they touch; a
//! Shell command, which may touch anything, takes the global exclusive lock.
//! The rules:
//!
//! - **Per-path shared/exclusive.** [`LockMode::Read`] locks on the same path
//!   are shared, a [`LockMode::Write`] lock excludes every other lock on that
//!   path. Paths are compared after lexical normalisation (`.` and `..`
//!   removed); the caller resolves them (absolute, inside the workspace,
//!   symlinks its business). There is no hierarchy: a lock on a directory
//!   does not cover the files below it, so directory-wide operations take the
//!   exclusive lock.
//! - **Global exclusive.** [`LockManager::lock_all`] excludes every path lock
//!   and every other exclusive lock.
//! - **FIFO fairness.** Requests queue in arrival order. A request is granted
//!   when it is compatible with the current holders *and* with every request
//!   still waiting ahead of it. So a waiting exclusive request blocks every
//!   later request, and a waiting writer blocks later readers of its path:
//!   neither can starve. Unrelated requests (other paths) pass a blocked one.
//! - **Atomic multi-path.** [`LockManager::lock_paths`] grants all its paths
//!   at once or none (the set is sorted and deduplicated; `Write` wins over
//!   `Read` for a path named twice). A waiting request holds nothing.
//! - **RAII.** Guards release on drop, waking whoever can now proceed.
//! - **Cancellation.** Dropping an acquisition future (a cancelled turn)
//!   removes its request from the queue; if the lock had already been granted
//!   but not yet observed, it is released. Either way the requests behind it
//!   are re-examined.
//!
//! # Deadlock
//!
//! A request never waits while holding part of what it asked for, so tasks
//! that hold at most one guard at a time cannot deadlock, whatever they ask
//! for. Holding a guard while awaiting another request can: besides the
//! classic A-then-B / B-then-A cycle, a held path lock plus a queued
//! exclusive request blocks *every* later request of the holder. Take all the
//! paths an operation needs in one [`LockManager::lock_paths`] call, and drop
//! guards before asking again.
//!
//! The manager is runtime-agnostic (it only uses [`Waker`]s); its state sits
//! behind one short `parking_lot` mutex, and wakers are called after it is
//! released.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::path::Component;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::task::Context;
use std::task::Poll;
use std::task::Waker;

use parking_lot::Mutex;

/// How a path is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockMode {
    /// Shared with other readers of the path.
    Read,
    /// Exclusive on the path.
    Write,
}

/// What a lock covers, as reported by [`LockManager::snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockTarget {
    /// One normalised path.
    Path {
        /// The path.
        path: PathBuf,
        /// The mode it is (to be) held in.
        mode: LockMode,
    },
    /// The global exclusive lock.
    All,
}

/// Whether a lock is held or waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    /// Granted and not yet released.
    Held,
    /// Queued; `position` 0 is the oldest waiting request.
    Waiting {
        /// Place in the queue.
        position: usize,
    },
}

/// One entry of [`LockManager::snapshot`]: a request for several paths
/// yields one entry per path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The label given when the lock was requested (bot, turn, tool).
    pub holder: String,
    /// What is locked.
    pub target: LockTarget,
    /// Held or waiting.
    pub state: LockState,
}

/// The lock manager of one workspace; clones share the same locks.
#[derive(Clone, Default)]
pub struct LockManager {
    state: Arc<Mutex<State>>,
}

impl LockManager {
    /// A manager with no locks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits for a lock on `path` in `mode`; `holder` labels it in snapshots.
    pub async fn lock_path(&self, path: &Path, mode: LockMode, holder: &str) -> PathGuard {
        self.lock_paths(&[(path, mode)], holder).await
    }

    /// Waits until every `(path, mode)` can be granted, then takes them all
    /// at once.
    pub async fn lock_paths(&self, paths: &[(&Path, LockMode)], holder: &str) -> PathGuard {
        let request = Request::paths(paths);
        PathGuard {
            held: self.acquire(request, holder).await,
        }
    }

    /// Waits for the global exclusive lock; `holder` labels it in snapshots.
    pub async fn lock_all(&self, holder: &str) -> ExclusiveGuard {
        ExclusiveGuard {
            held: self.acquire(Request::All, holder).await,
        }
    }

    /// Every held and waiting lock: held ones in grant order, then waiting
    /// ones in queue order.
    pub fn snapshot(&self) -> Vec<LockInfo> {
        let state = self.state.lock();
        let held = state
            .grants
            .values()
            .flat_map(|grant| grant.request.infos(&grant.holder, LockState::Held));
        let waiting =
            state.queue.iter().enumerate().flat_map(|(position, w)| {
                w.request.infos(&w.holder, LockState::Waiting { position })
            });
        held.chain(waiting).collect()
    }

    async fn acquire(&self, request: Request, holder: &str) -> Held {
        let mut pending = Pending::enqueue(&self.state, request, holder);
        poll_fn(|cx| pending.poll(cx)).await
    }
}

impl fmt::Debug for LockManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockManager")
            .field("locks", &self.snapshot())
            .finish()
    }
}

/// Holds path locks; releases them on drop.
#[derive(Debug)]
#[must_use = "the locks are released when the guard is dropped"]
pub struct PathGuard {
    held: Held,
}

/// Holds the global exclusive lock; releases it on drop.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct ExclusiveGuard {
    held: Held,
}

impl PathGuard {
    /// The label this lock was requested with.
    pub fn holder(&self) -> &str {
        &self.held.holder
    }
}

impl ExclusiveGuard {
    /// The label this lock was requested with.
    pub fn holder(&self) -> &str {
        &self.held.holder
    }
}

/// A granted request; releases it on drop.
struct Held {
    state: Arc<Mutex<State>>,
    id: u64,
    holder: Arc<str>,
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("id", &self.id)
            .field("holder", &self.holder)
            .finish()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let wakers = {
            let mut state = self.state.lock();
            state.release(self.id);
            state.grant_ready()
        };
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// A queued request owned by an acquisition future; dropping it before it
/// has produced a [`Held`] withdraws the request (or releases a grant that
/// was never observed).
struct Pending {
    state: Arc<Mutex<State>>,
    id: u64,
    holder: Arc<str>,
    done: bool,
}

impl Pending {
    fn enqueue(state: &Arc<Mutex<State>>, request: Request, holder: &str) -> Self {
        let holder: Arc<str> = Arc::from(holder);
        let (id, wakers) = {
            let mut guard = state.lock();
            let id = guard.next_id;
            guard.next_id += 1;
            guard.queue.push_back(Waiter {
                id,
                holder: Arc::clone(&holder),
                request,
                waker: None,
            });
            (id, guard.grant_ready())
        };
        wakers.into_iter().for_each(Waker::wake);
        Self {
            state: Arc::clone(state),
            id,
            holder,
            done: false,
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Held> {
        let mut state = self.state.lock();
        if state.grants.contains_key(&self.id) {
            self.done = true;
            return Poll::Ready(Held {
                state: Arc::clone(&self.state),
                id: self.id,
                holder: Arc::clone(&self.holder),
            });
        }
        if let Some(waiter) = state.queue.iter_mut().find(|w| w.id == self.id) {
            match &waiter.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                Some(_) | None => waiter.waker = Some(cx.waker().clone()),
            }
        }
        Poll::Pending
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let wakers = {
            let mut state = self.state.lock();
            if let Some(at) = state.queue.iter().position(|w| w.id == self.id) {
                state.queue.remove(at);
            } else {
                state.release(self.id);
            }
            state.grant_ready()
        };
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// What one call asked for.
#[derive(Debug, Clone)]
enum Request {
    /// Sorted, deduplicated normalised paths.
    Paths(Vec<(PathBuf, LockMode)>),
    /// The global exclusive lock.
    All,
}

impl Request {
    fn paths(paths: &[(&Path, LockMode)]) -> Self {
        let mut list: Vec<(PathBuf, LockMode)> = paths
            .iter()
            .map(|&(path, mode)| (normalise(path), mode))
            .collect();
        // Write sorts after Read, so the last entry of each path is the strongest.
        list.sort();
        list.reverse();
        list.dedup_by(|later, kept| later.0 == kept.0);
        list.reverse();
        Self::Paths(list)
    }

    fn conflicts(&self, other: &Request) -> bool {
        match (self, other) {
            (Request::All, Request::All)
            | (Request::All, Request::Paths(_))
            | (Request::Paths(_), Request::All) => true,
            (Request::Paths(a), Request::Paths(b)) => {
                let (mut i, mut j) = (0, 0);
                while i < a.len() && j < b.len() {
                    match a[i].0.cmp(&b[j].0) {
                        std::cmp::Ordering::Less => i += 1,
                        std::cmp::Ordering::Greater => j += 1,
                        std::cmp::Ordering::Equal => {
                            if a[i].1 == LockMode::Write || b[j].1 == LockMode::Write {
                                return true;
                            }
                            i += 1;
                            j += 1;
                        }
                    }
                }
                false
            }
        }
    }

    fn infos(&self, holder: &str, state: LockState) -> Vec<LockInfo> {
        match self {
            Request::All => vec![LockInfo {
                holder: holder.to_owned(),
                target: LockTarget::All,
                state,
            }],
            Request::Paths(paths) => paths
                .iter()
                .map(|(path, mode)| LockInfo {
                    holder: holder.to_owned(),
                    target: LockTarget::Path {
                        path: path.clone(),
                        mode: *mode,
                    },
                    state,
                })
                .collect(),
        }
    }
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    holder: Arc<str>,
    request: Request,
    waker: Option<Waker>,
}

#[derive(Debug)]
struct Grant {
    holder: Arc<str>,
    request: Request,
}

/// Current holders of one path.
#[derive(Debug, Default)]
struct PathHold {
    readers: usize,
    writer: bool,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    queue: VecDeque<Waiter>,
    grants: BTreeMap<u64, Grant>,
    paths: HashMap<PathBuf, PathHold>,
    all_held: bool,
}

impl State {
    /// Whether `request` is compatible with every current holder.
    fn compatible(&self, request: &Request) -> bool {
        if self.all_held {
            return false;
        }
        match request {
            Request::All => self.grants.is_empty(),
            Request::Paths(paths) => paths.iter().all(|(path, mode)| {
                self.paths.get(path).is_none_or(|hold| match mode {
                    LockMode::Read => !hold.writer,
                    LockMode::Write => !hold.writer && hold.readers == 0,
                })
            }),
        }
    }

    /// Grants every queued request that is compatible with the holders and
    /// with the requests still waiting ahead of it; returns their wakers.
    fn grant_ready(&mut self) -> Vec<Waker> {
        let mut wakers = Vec::new();
        let mut waiting: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < self.queue.len() {
            let request = &self.queue[i].request;
            let blocked = waiting
                .iter()
                .any(|&k| self.queue[k].request.conflicts(request));
            if !blocked && self.compatible(request) {
                if let Some(waiter) = self.queue.remove(i) {
                    self.take(waiter.id, waiter.holder, waiter.request);
                    wakers.extend(waiter.waker);
                }
                continue;
            }
            match request {
                // Everything behind a waiting exclusive request conflicts with it.
                Request::All => break,
                Request::Paths(_) => waiting.push(i),
            }
            i += 1;
        }
        wakers
    }

    fn take(&mut self, id: u64, holder: Arc<str>, request: Request) {
        match &request {
            Request::All => self.all_held = true,
            Request::Paths(paths) => {
                for (path, mode) in paths {
                    let hold = self.paths.entry(path.clone()).or_default();
                    match mode {
                        LockMode::Read => hold.readers += 1,
                        LockMode::Write => hold.writer = true,
                    }
                }
            }
        }
        self.grants.insert(id, Grant { holder, request });
    }

    fn release(&mut self, id: u64) {
        let Some(grant) = self.grants.remove(&id) else {
            return;
        };
        match grant.request {
            Request::All => self.all_held = false,
            Request::Paths(paths) => {
                for (path, mode) in paths {
                    let Some(hold) = self.paths.get_mut(&path) else {
                        continue;
                    };
                    match mode {
                        LockMode::Read => hold.readers = hold.readers.saturating_sub(1),
                        LockMode::Write => hold.writer = false,
                    }
                    if hold.readers == 0 && !hold.writer {
                        self.paths.remove(&path);
                    }
                }
            }
        }
    }
}

/// Removes `.` and resolves `..` lexically; `..` never climbs above a root.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir) | Some(Component::Prefix(_)) => {}
                Some(Component::ParentDir) | Some(Component::CurDir) | None => out.push(".."),
            },
            Component::Normal(_) | Component::RootDir | Component::Prefix(_) => {
                out.push(component.as_os_str());
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "file_locks_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "file_locks_schedule_tests.rs"]
mod schedule_tests;
