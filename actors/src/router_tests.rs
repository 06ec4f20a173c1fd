//! The router under a busy fleet, through the fleet's messages: a bot
//! whose actor is held up (waiting for a store reader, as under load)
//! holds up neither status questions nor another bot's routing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;
use tokio_util::sync::CancellationToken;

use crate::bot::BotStatus;
use crate::fleet::FleetHandle;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::StreamSink;
use crate::router::RouterMsg;
use crate::tools::ToolRegistry;
use crate::tools::test_support::bot_record;
use crate::tools::test_support::done;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_change;
use crate::tools::test_support::turn_ended;

/// A model whose calls for bot `a` wait for `release` (after signalling
/// `entered`); other bots' calls answer at once.
struct HeldForA {
    entered: Arc<tokio::sync::Notify>,
    release: CancellationToken,
}

#[async_trait]
impl Model for HeldForA {
    fn describe(&self) -> String {
        "held for a".into()
    }

    fn answers(&self, purpose: Purpose) -> bool {
        matches!(purpose, Purpose::Turn)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        if request.bot == "a" {
            self.entered.notify_one();
            tokio::select! {
                () = self.release.cancelled() => {}
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
            }
        }
        Ok(done())
    }
}

/// Every reader connection of the store, taken by threads until
/// [`HeldReaders::release`]: what long reads of a loaded fleet do to
/// everyone else's reads.
struct HeldReaders {
    release: Vec<std::sync::mpsc::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl HeldReaders {
    async fn take(store: &botfleet_memory::Store, readers: usize) -> Self {
        let (held_tx, mut held_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut release = Vec::new();
        let mut threads = Vec::new();
        for _ in 0..readers {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            release.push(tx);
            let store = store.clone();
            let held = held_tx.clone();
            threads.push(std::thread::spawn(move || {
                store
                    .read_blocking(|_| {
                        held.send(()).unwrap();
                        // until the sender is dropped
                        let _ = rx.recv();
                        Ok(())
                    })
                    .unwrap();
            }));
        }
        for _ in 0..readers {
            tokio::time::timeout(Duration::from_secs(30), held_rx.recv())
                .await
                .expect("the store's readers were not all taken within 30 s");
        }
        Self { release, threads }
    }

    fn release(self) {
        drop(self.release);
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

fn find<'a>(all: &'a [BotStatus], bot: &str) -> Option<&'a BotStatus> {
    all.iter().find(|s| s.id.as_str() == bot)
}

/// Bot `a` runs a turn and its actor is held up reading the store (a
/// wake-up's inbox read waits for a reader: all are taken). The status of
/// every bot answers at once and lists `a` as running its turn, and a
/// message to bot `b` reaches `b` at once. The router used to ask each bot
/// in turn, waiting up to 2 s for each: the list took that long, left `a`
/// out (read as idle by `GET /v1/bots`), and `b`'s message waited behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_up_bot_holds_up_neither_the_status_nor_another_bots_routing() {
    let dir = tempfile::tempdir().unwrap();
    let entered = Arc::new(tokio::sync::Notify::new());
    let release = CancellationToken::new();
    let model: Arc<dyn Model> = Arc::new(HeldForA {
        entered: entered.clone(),
        release: release.clone(),
    });
    // the readers the fleet's store opens at most (`fleet_runtime` opens
    // it with the defaults)
    let readers = StoreOptions::new(dir.path().join("db.sqlite")).readers;
    let rt = fleet_runtime(dir.path(), model, ToolRegistry::builtin());
    let alice = UserId::new("alice").unwrap();
    let a = bot_record("a", "A", &alice, &[]);
    let b = bot_record("b", "B", &alice, &[]);
    let fleet = FleetHandle::start(rt, vec![a.clone(), b.clone()])
        .await
        .unwrap();

    // b answers a first message and stays active, idle
    let req = crate::protocol::user_message(&alice, &b, "hello", None);
    let b_dm = req.entry.session;
    fleet.admit(req).await.unwrap();
    turn_ended(fleet.store(), b_dm).await;
    // a starts a turn, held in its model call
    let entered_a = entered.notified();
    fleet
        .admit(crate::protocol::user_message(&alice, &a, "work", None))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), entered_a)
        .await
        .expect("a's turn never called the model");

    let held = HeldReaders::take(fleet.store(), readers).await;
    // a's actor now waits for a reader to read its inbox
    fleet.wake(BotId::new("a").unwrap()).unwrap();

    // the old router asked each bot in turn and left out one that did not
    // answer within 2 s: a would be missing (no timing is asserted here,
    // only a bound against a hang)
    let all = tokio::time::timeout(Duration::from_secs(30), fleet.active())
        .await
        .expect("the status of the bots did not answer while a's actor was busy")
        .unwrap();
    let a_now = find(&all, "a").unwrap_or_else(|| panic!("a is not listed: {all:#?}"));
    assert!(a_now.turn.is_some(), "a runs a turn: {all:#?}");
    assert!(!a_now.starting, "{all:#?}");
    let b_now = find(&all, "b").unwrap_or_else(|| panic!("b is not listed: {all:#?}"));
    assert_eq!((b_now.turn.as_ref(), b_now.queued), (None, 0), "{all:#?}");

    // a message to b reaches b, which starts its turn while a's is still
    // held in its model call (the readers are given back first: b's turn
    // reads its session, and a test that kept them would stall b too)
    held.release();
    fleet
        .admit(crate::protocol::user_message(&alice, &b, "again", None))
        .await
        .unwrap();
    // b's second turn ends (a turn of an instant model can start and end
    // between two looks at b's status: its end is what is awaited)
    let mut changes = fleet.store().subscribe();
    loop {
        let entries = fleet.store().entries_after(b_dm, 0, 1000).await.unwrap();
        let ends = entries
            .iter()
            .filter(|e| matches!(e.kind, botfleet_memory::EntryKind::TurnEnd { .. }))
            .count();
        if ends >= 2 {
            break;
        }
        next_change(
            &mut changes,
            "b's second turn did not end while a's was held",
        )
        .await;
    }
    let a_still = fleet.status(&a.id).await.unwrap().expect("a is active");
    assert!(a_still.turn.is_some(), "{a_still:#?}");

    release.cancel();
    fleet.shutdown().await;
}

/// A wake-up handled between a bot's idle report and the router's reading
/// of it keeps the bot: the report is stale, as after an input, and the
/// bot reads the input the wake-up is for. (Before, the router stopped the
/// bot on the stale report with the wake-up unread in its mailbox, and an
/// input a retry had requeued waited for the next message or a restart.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_makes_an_earlier_idle_report_stale() {
    let dir = tempfile::tempdir().unwrap();
    let model: Arc<dyn Model> = Arc::new(HeldForA {
        entered: Arc::new(tokio::sync::Notify::new()),
        release: CancellationToken::new(),
    });
    let rt = fleet_runtime(dir.path(), model, ToolRegistry::builtin());
    let alice = UserId::new("alice").unwrap();
    let b = bot_record("b", "B", &alice, &[]);
    let fleet = FleetHandle::start(rt, vec![b.clone()]).await.unwrap();
    // b is active and idle, one input routed to it
    let first = crate::protocol::user_message(&alice, &b, "hello", None);
    let dm = first.entry.session;
    fleet.admit(first).await.unwrap();
    turn_ended(fleet.store(), dm).await;
    // an input stored but not routed (as a retry requeues one), then the
    // wake-up for it, and an idle report b made before it
    let second = crate::protocol::user_message(&alice, &b, "again", None);
    fleet
        .store()
        .write(vec![botfleet_memory::Mutation::Admit(Box::new(second))])
        .await
        .unwrap();
    let router = fleet.runtime().router().unwrap();
    router.cast(RouterMsg::Wake(b.id.clone())).unwrap();
    router
        .cast(RouterMsg::Idle {
            bot: b.id.clone(),
            seen: 1,
        })
        .unwrap();
    crate::tools::test_support::turns_ended(fleet.store(), dm, 2).await;
    fleet.shutdown().await;
}
