//! A cancel is answered once the cancelled run has stopped and its end is
//! committed. (Before, `true` came as soon as the run was told to stop: a
//! host killed before the end's commit resumed the turn at its next start,
//! and the work the person was told was cancelled ran on — round 25, a
//! Shell turn cancelled and SIGKILLed at once ran its next command after
//! the restart about every other time.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::fleet::FleetHandle;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::StreamSink;
use crate::tools::ToolRegistry;
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::done;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_call;

/// Call 0 says it began (`entered`) and waits until it is cancelled;
/// later calls end their turn.
struct UntilCancelled {
    calls: Mutex<usize>,
    entered: Notify,
}

#[async_trait]
impl Model for UntilCancelled {
    fn describe(&self) -> String {
        "until-cancelled".into()
    }

    fn answers(&self, purpose: Purpose) -> bool {
        matches!(purpose, Purpose::Turn)
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        if next_call(&self.calls) == 0 {
            self.entered.notify_one();
            cancel.cancelled().await;
            return Err(ModelError::Cancelled);
        }
        Ok(done())
    }
}

/// Holds the store's writer in a continuation until the returned sender
/// is used (or dropped): batches submitted meanwhile wait uncommitted.
async fn hold_writer(fleet: &FleetHandle) -> std::sync::mpsc::Sender<()> {
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    fleet
        .store()
        .write_then(
            Vec::new(),
            Box::new(move |_| {
                let _ = held_tx.send(());
                let _ = release_rx.recv();
            }),
        )
        .unwrap();
    held_rx.await.unwrap();
    release_tx
}

/// The run is cancelled while the store's writer is held, so its end
/// cannot be committed: the cancel must not be answered before the end
/// is in the store. Once the writer goes on, the answer is `true` and the
/// turn reads `cancelled`, never `running`.
#[tokio::test]
async fn a_cancel_is_answered_once_the_cancelled_turns_end_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(UntilCancelled {
        calls: Mutex::new(0),
        entered: Notify::new(),
    });
    let rt = fleet_runtime(dir.path(), model.clone(), ToolRegistry::builtin());
    let bot = alices_bot(&["SendMessage"]);
    let fleet = Arc::new(FleetHandle::start(rt, vec![bot.clone()]).await.unwrap());
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "work on it", None);
    fleet.admit(req).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), model.entered.notified())
        .await
        .expect("the turn's model call never began");
    let turn = fleet
        .status(&bot.id)
        .await
        .unwrap()
        .and_then(|s| s.turn)
        .expect("the bot runs the turn")
        .turn;

    let release = hold_writer(&fleet).await;
    let mut cancel = tokio::spawn({
        let (fleet, bot) = (fleet.clone(), bot.id.clone());
        async move { fleet.cancel(&bot).await.unwrap() }
    });
    // the old answer came at once; this bound only ends the wait for it
    if let Ok(answered) = tokio::time::timeout(Duration::from_millis(500), &mut cancel).await {
        let stored = fleet
            .store()
            .get_turn(turn)
            .await
            .unwrap()
            .map(|r| r.status);
        panic!(
            "the cancel was answered ({answered:?}) while the turn's end could not be \
             committed (the store has the turn as {stored:?}): a host killed now resumes it"
        );
    }
    drop(release);
    let answered = tokio::time::timeout(Duration::from_secs(30), cancel)
        .await
        .expect("the cancel was never answered")
        .unwrap();
    assert!(answered, "the request that cancelled the turn is told so");
    let record = fleet.store().get_turn(turn).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Cancelled, "{record:?}");
    // a second cancel finds nothing running
    assert!(!fleet.cancel(&bot.id).await.unwrap());
    fleet.shutdown().await;
}
