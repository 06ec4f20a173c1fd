//! Deterministic schedules: futures are polled by hand with counting wakers,
//! so every interleaving is chosen by the test and no clock is involved.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::task::Wake;

use pretty_assertions::assert_eq;

use super::LockMode::Read;
use super::LockMode::Write;
use super::*;

/// A request as the tests describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Req {
    Paths(Vec<(&'static str, LockMode)>),
    All,
}

impl Req {
    pub(super) fn conflicts(&self, other: &Req) -> bool {
        match (self, other) {
            (Req::All, Req::All) | (Req::All, Req::Paths(_)) | (Req::Paths(_), Req::All) => true,
            (Req::Paths(a), Req::Paths(b)) => a.iter().any(|(pa, ma)| {
                b.iter()
                    .any(|(pb, mb)| pa == pb && (*ma == Write || *mb == Write))
            }),
        }
    }
}

#[derive(Debug)]
pub(super) enum Guard {
    Path(PathGuard),
    All(ExclusiveGuard),
}

#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub(super) async fn acquire(manager: LockManager, req: Req, holder: String) -> Guard {
    match req {
        Req::All => Guard::All(manager.lock_all(&holder).await),
        Req::Paths(paths) => {
            let paths: Vec<(&Path, LockMode)> =
                paths.iter().map(|(p, m)| (Path::new(*p), *m)).collect();
            Guard::Path(manager.lock_paths(&paths, &holder).await)
        }
    }
}

/// An acquisition future polled by hand.
pub(super) struct Probe {
    future: Pin<Box<dyn Future<Output = Guard> + Send>>,
    wakes: Arc<Wakes>,
    waker: Waker,
}

impl Probe {
    fn new(manager: &LockManager, req: &Req, holder: &str) -> Self {
        let future = Box::pin(acquire(manager.clone(), req.clone(), holder.to_owned()));
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(Arc::clone(&wakes));
        Self {
            future,
            wakes,
            waker,
        }
    }

    pub(super) fn poll(&mut self) -> Option<Guard> {
        let mut cx = Context::from_waker(&self.waker);
        match self.future.as_mut().poll(&mut cx) {
            Poll::Ready(guard) => Some(guard),
            Poll::Pending => None,
        }
    }

    pub(super) fn wakes(&self) -> usize {
        self.wakes.0.load(Ordering::SeqCst)
    }
}

/// Requests and polls once: the guard if granted at once, else the probe.
pub(super) fn request(manager: &LockManager, req: &Req, holder: &str) -> Result<Guard, Probe> {
    let mut probe = Probe::new(manager, req, holder);
    probe.poll().ok_or(probe)
}

fn granted(manager: &LockManager, req: &Req, holder: &str) -> Guard {
    match request(manager, req, holder) {
        Ok(guard) => guard,
        Err(_) => panic!(
            "{holder} should be granted at once: {:#?}",
            manager.snapshot()
        ),
    }
}

fn waiting(manager: &LockManager, req: &Req, holder: &str) -> Probe {
    match request(manager, req, holder) {
        Ok(_) => panic!("{holder} should wait: {:#?}", manager.snapshot()),
        Err(probe) => probe,
    }
}

fn path(p: &'static str, mode: LockMode) -> Req {
    Req::Paths(vec![(p, mode)])
}

/// Polls a probe that must have been woken and granted.
fn completes(probe: &mut Probe) -> Guard {
    assert!(probe.wakes() > 0, "granted without a wake");
    probe
        .poll()
        .unwrap_or_else(|| panic!("woken but not granted"))
}

fn held_by(manager: &LockManager) -> Vec<String> {
    manager
        .snapshot()
        .into_iter()
        .filter(|i| i.state == LockState::Held)
        .map(|i| i.holder)
        .collect()
}

#[test]
fn readers_share_and_writers_exclude() {
    let m = LockManager::new();
    let r1 = granted(&m, &path("/w/a", Read), "r1");
    let r2 = granted(&m, &path("/w/a", Read), "r2");
    let mut w = waiting(&m, &path("/w/a", Write), "w");
    drop(r1);
    assert!(w.poll().is_none());
    assert_eq!(w.wakes(), 0);
    drop(r2);
    let w = completes(&mut w);
    let mut r3 = waiting(&m, &path("/w/a", Read), "r3");
    drop(w);
    completes(&mut r3);
}

#[test]
fn different_paths_do_not_interact() {
    let m = LockManager::new();
    let _a = granted(&m, &path("/w/a", Write), "a");
    let _b = granted(&m, &path("/w/b", Write), "b");
    assert_eq!(held_by(&m), vec!["a", "b"]);
}

#[test]
fn exclusive_waiter_blocks_later_requests_until_served() {
    let m = LockManager::new();
    let reader = granted(&m, &path("/w/a", Read), "reader");
    let mut all = waiting(&m, &Req::All, "shell");
    // Compatible with every holder, but the exclusive request came first.
    let mut other = waiting(&m, &path("/w/b", Write), "other");
    drop(reader);
    let all_guard = completes(&mut all);
    assert!(other.poll().is_none());
    drop(all_guard);
    completes(&mut other);
}

#[test]
fn waiting_writer_blocks_later_readers() {
    let m = LockManager::new();
    let r1 = granted(&m, &path("/w/a", Read), "r1");
    let mut w = waiting(&m, &path("/w/a", Write), "w");
    let mut r2 = waiting(&m, &path("/w/a", Read), "r2");
    drop(r1);
    let w_guard = completes(&mut w);
    assert_eq!(r2.wakes(), 0);
    drop(w_guard);
    completes(&mut r2);
}

#[test]
fn unrelated_requests_pass_a_blocked_one() {
    let m = LockManager::new();
    let _w1 = granted(&m, &path("/w/a", Write), "w1");
    let _w2 = waiting(&m, &path("/w/a", Write), "w2");
    let _b = granted(&m, &path("/w/b", Write), "b");
}

#[test]
fn exclusive_excludes_everything() {
    let m = LockManager::new();
    let all = granted(&m, &Req::All, "shell");
    let mut second = waiting(&m, &Req::All, "shell2");
    let mut reader = waiting(&m, &path("/w/a", Read), "reader");
    drop(all);
    let second_guard = completes(&mut second);
    assert_eq!(reader.wakes(), 0);
    drop(second_guard);
    completes(&mut reader);
}

#[test]
fn cancelled_waiter_leaves_the_queue_and_unblocks_it() {
    let m = LockManager::new();
    let _reader = granted(&m, &path("/w/a", Read), "reader");
    let all = waiting(&m, &Req::All, "shell");
    let mut other = waiting(&m, &path("/w/b", Write), "other");
    drop(all);
    let _other = completes(&mut other);
    assert_eq!(held_by(&m), vec!["reader", "other"]);
    assert!(m.snapshot().iter().all(|i| i.holder != "shell"));
}

#[test]
fn grant_never_observed_is_released_on_cancel() {
    let m = LockManager::new();
    let first = granted(&m, &path("/w/a", Write), "first");
    let second = waiting(&m, &path("/w/a", Write), "second");
    drop(first);
    assert_eq!(held_by(&m), vec!["second"]);
    assert_eq!(second.wakes(), 1);
    drop(second);
    assert_eq!(m.snapshot(), vec![]);
    let _third = granted(&m, &path("/w/a", Write), "third");
}

#[test]
fn multi_path_request_holds_nothing_while_waiting() {
    let m = LockManager::new();
    let b = granted(&m, &path("/w/b", Write), "x");
    let mut both = waiting(&m, &Req::Paths(vec![("/w/b", Write), ("/w/a", Write)]), "y");
    assert_eq!(
        m.snapshot(),
        vec![
            info("x", "/w/b", Write, LockState::Held),
            info("y", "/w/a", Write, LockState::Waiting { position: 0 }),
            info("y", "/w/b", Write, LockState::Waiting { position: 0 }),
        ]
    );
    drop(b);
    let both_guard = completes(&mut both);
    assert_eq!(held_by(&m), vec!["y", "y"]);
    drop(both_guard);
    assert_eq!(m.snapshot(), vec![]);
}

fn info(holder: &str, p: &str, mode: LockMode, state: LockState) -> LockInfo {
    LockInfo {
        holder: holder.to_owned(),
        target: LockTarget::Path {
            path: PathBuf::from(p),
            mode,
        },
        state,
    }
}

#[test]
fn snapshot_lists_holders_then_waiters() {
    let m = LockManager::new();
    let _r = granted(&m, &path("/w/a", Read), "bot1/turn3/Read");
    let _all = waiting(&m, &Req::All, "bot2/turn1/Shell");
    let _w = waiting(&m, &path("/w/c", Write), "bot3/turn9/Edit");
    assert_eq!(
        m.snapshot(),
        vec![
            info("bot1/turn3/Read", "/w/a", Read, LockState::Held),
            LockInfo {
                holder: "bot2/turn1/Shell".to_owned(),
                target: LockTarget::All,
                state: LockState::Waiting { position: 0 },
            },
            info(
                "bot3/turn9/Edit",
                "/w/c",
                Write,
                LockState::Waiting { position: 1 }
            ),
        ]
    );
}

#[test]
fn duplicate_paths_merge_to_the_strongest_mode() {
    let m = LockManager::new();
    let _g = granted(
        &m,
        &Req::Paths(vec![
            ("/w/a", Read),
            ("/w/./a", Write),
            ("/w/b", Read),
            ("/w/b", Read),
        ]),
        "h",
    );
    assert_eq!(
        m.snapshot(),
        vec![
            info("h", "/w/a", Write, LockState::Held),
            info("h", "/w/b", Read, LockState::Held),
        ]
    );
}

#[test]
fn paths_are_normalised_lexically() {
    let cases = [
        ("/w/src/./a.rs", "/w/src/a.rs"),
        ("/w/src/lib/../a.rs", "/w/src/a.rs"),
        ("/w/../../a", "/a"),
        ("a/../../b", "../b"),
        ("./a//b/", "a/b"),
    ];
    for (input, expected) in cases {
        assert_eq!(
            normalise(Path::new(input)),
            PathBuf::from(expected),
            "{input}"
        );
    }
    let m = LockManager::new();
    let _g = granted(&m, &path("/w/src/lib/../a.rs", Write), "one");
    let _w = waiting(&m, &path("/w/src/./a.rs", Read), "two");
}

#[test]
fn guards_know_their_holder() {
    let m = LockManager::new();
    match granted(&m, &path("/w/a", Read), "bot1") {
        Guard::Path(g) => assert_eq!(g.holder(), "bot1"),
        Guard::All(_) => panic!("path request"),
    }
    match granted(&m, &Req::All, "bot2") {
        Guard::All(g) => assert_eq!(g.holder(), "bot2"),
        Guard::Path(_) => panic!("exclusive request"),
    }
}
