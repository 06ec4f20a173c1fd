//! A turn whose task panics, through the fleet's messages: how many
//! crashes it takes before the bot fails it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;
use pretty_assertions::assert_eq;
use serde_json::json;
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
use crate::tools::test_support::deliveries;
use crate::tools::test_support::done;
use crate::tools::test_support::ends;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_call;
use crate::tools::test_support::next_change;
use crate::tools::test_support::tool_step;
use crate::tools::test_support::turn_ended;

/// What the model does at one call of the turn.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// A step: deliver this text.
    Send(&'static str),
    /// The turn's task panics in the model call.
    Panic,
    /// The last step: a plain answer.
    Done,
}

/// A model that plays `answers` in order, one per call of a turn.
struct CrashingModel {
    answers: Vec<Answer>,
    next: Mutex<usize>,
}

#[async_trait]
impl Model for CrashingModel {
    fn describe(&self) -> String {
        "crashing".into()
    }

    fn answers(&self, purpose: Purpose) -> bool {
        matches!(purpose, Purpose::Turn)
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let n = next_call(&self.next);
        match self.answers.get(n).copied().unwrap_or(Answer::Done) {
            Answer::Send(text) => Ok(tool_step(
                &format!("call-{n}"),
                "SendMessage",
                json!({ "text": text }),
            )),
            Answer::Panic => panic!("model call {n} crashes its turn"),
            Answer::Done => Ok(done()),
        }
    }
}

/// Sends one message to a bot whose model plays `answers`, and returns
/// the entries of its DM once a turn ended there.
async fn run_turn_of(answers: Vec<Answer>) -> Vec<Entry> {
    let dir = tempfile::tempdir().unwrap();
    let model: Arc<dyn Model> = Arc::new(CrashingModel {
        answers,
        next: Mutex::new(0),
    });
    let rt = fleet_runtime(dir.path(), model, ToolRegistry::builtin());
    assert_eq!(rt.settings.max_turn_attempts, 3);
    let bot = alices_bot(&["SendMessage"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "work on it", None);
    let session: SessionId = req.entry.session;
    fleet.admit(req).await.unwrap();
    let entries = turn_ended(fleet.store(), session).await;
    fleet.shutdown().await;
    entries
}

/// Three crashes, each after a resumed run finished a step: none is "in a
/// row" with the one before it, so the turn goes on to its end (it was
/// failed at the third crash: the bot counted every crash of the turn).
#[tokio::test]
async fn a_turn_that_steps_between_its_crashes_is_not_failed_for_them() {
    let entries = run_turn_of(vec![
        Answer::Send("one"),
        Answer::Panic,
        Answer::Send("two"),
        Answer::Panic,
        Answer::Send("three"),
        Answer::Panic,
        Answer::Done,
    ])
    .await;
    assert_eq!(ends(&entries), vec![TurnStatus::Completed], "{entries:#?}");
    assert_eq!(deliveries(&entries), vec!["one", "two", "three"]);
}

/// Crashes with no step between them are in a row: the third fails the
/// turn, and the model is not called again.
#[tokio::test]
async fn a_turn_that_crashes_three_times_at_the_same_step_is_failed() {
    let entries = run_turn_of(vec![
        Answer::Panic,
        Answer::Panic,
        Answer::Panic,
        Answer::Send("never"),
    ])
    .await;
    assert_eq!(ends(&entries), vec![TurnStatus::Failed], "{entries:#?}");
    assert!(deliveries(&entries).is_empty(), "{entries:#?}");
}

/// The same after the turn's reply: the reply stands, and the turn ends
/// `completed` with a `failed_after_reply` notice and no retry, as any
/// failure after a reply (it failed, offering a retry that would answer
/// twice: QA found it for crashes of the host, recovery.rs).
#[tokio::test]
async fn a_turn_that_crashes_three_times_after_its_reply_keeps_it() {
    let entries = run_turn_of(vec![
        Answer::Send("one"),
        Answer::Panic,
        Answer::Panic,
        Answer::Panic,
        Answer::Send("never"),
    ])
    .await;
    assert_eq!(ends(&entries), vec![TurnStatus::Completed], "{entries:#?}");
    assert_eq!(deliveries(&entries), vec!["one"]);
    let notice = entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::Notice {
                code, retry_turn, ..
            } => Some((code.clone(), retry_turn.is_some())),
            _ => None,
        })
        .expect("a notice");
    assert_eq!(notice, ("failed_after_reply".to_owned(), false));
}

/// A model whose first call waits for `release` (signalling `entered`) and
/// then crashes its turn; later calls send one reply, then end the turn.
/// Without `release`, the first call waits for the turn's cancel, as a
/// panic on the way out of a cancelled step would come.
struct HeldModel {
    calls: Mutex<usize>,
    entered: Arc<tokio::sync::Notify>,
    release: Option<Arc<tokio::sync::Notify>>,
}

#[async_trait]
impl Model for HeldModel {
    fn describe(&self) -> String {
        "held".into()
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
        let n = next_call(&self.calls);
        if n == 0 {
            self.entered.notify_one();
            match &self.release {
                Some(release) => release.notified().await,
                None => cancel.cancelled().await,
            }
            panic!("the held call crashes its turn");
        }
        let replied = request.messages.iter().any(|m| {
            matches!(m, crate::model::ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty())
        });
        Ok(if replied {
            done()
        } else {
            tool_step(
                &format!("call-{n}"),
                "SendMessage",
                json!({ "text": "answered" }),
            )
        })
    }
}

/// A person's message that came while a turn ran interrupts it; when the
/// turn crashes before it notices, its resumed run is interrupted all the
/// same, and the next turn answers both messages. (Before, the resumed run
/// went on as if nothing had come.)
#[tokio::test]
async fn a_message_that_came_before_a_crash_interrupts_the_resumed_turn() {
    let dir = tempfile::tempdir().unwrap();
    let entered = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let model: Arc<dyn Model> = Arc::new(HeldModel {
        calls: Mutex::new(0),
        entered: entered.clone(),
        release: Some(release.clone()),
    });
    let rt = fleet_runtime(dir.path(), model, ToolRegistry::builtin());
    let bot = alices_bot(&["SendMessage"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let mut changes = fleet.store().subscribe();
    let first = crate::protocol::user_message(&alice, &bot, "first", None);
    let session: SessionId = first.entry.session;
    fleet.admit(first).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the first turn called its model");
    let second = crate::protocol::user_message(&alice, &bot, "second", None);
    fleet.admit(second).await.unwrap();
    // the bot has it queued (it interrupted the running turn) before the
    // turn crashes
    let mut queued = 0;
    for _ in 0..10_000 {
        queued = fleet.status(&bot.id).await.unwrap().unwrap().queued;
        if queued == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(queued, 1, "the bot never queued the second message");
    release.notify_one();
    let entries = loop {
        let entries = fleet.store().entries_after(session, 0, 1000).await.unwrap();
        if ends(&entries).contains(&TurnStatus::Completed) {
            break entries;
        }
        next_change(&mut changes, "no turn completed within 30 s").await;
    };
    let turns = fleet.store().turns_of_bot(&bot.id, 10).await.unwrap();
    fleet.shutdown().await;
    // the resumed turn was interrupted before its first step (so it left
    // no record) and the next one took both messages
    let taken: Vec<(TurnStatus, Vec<i64>)> =
        turns.iter().map(|t| (t.status, t.inputs.clone())).collect();
    assert_eq!(
        taken,
        vec![(TurnStatus::Completed, vec![1, 2])],
        "{turns:#?}"
    );
    assert_eq!(ends(&entries), vec![TurnStatus::Completed], "{entries:#?}");
    assert_eq!(deliveries(&entries), vec!["answered"], "{entries:#?}");
}

/// A model that sends one message, then holds its next call for good
/// (deaf to cancels, as a host killed in the middle of it), signalling
/// `entered`.
struct StallModel {
    calls: Mutex<usize>,
    entered: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl Model for StallModel {
    fn describe(&self) -> String {
        "stall".into()
    }

    fn answers(&self, purpose: Purpose) -> bool {
        matches!(purpose, Purpose::Turn)
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        if next_call(&self.calls) > 0 {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(tool_step("call-0", "SendMessage", json!({ "text": "one" })))
    }
}

/// A model that answers only by being cancelled.
struct UntilCancelled;

#[async_trait]
impl Model for UntilCancelled {
    fn describe(&self) -> String {
        "until cancelled".into()
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
        cancel.cancelled().await;
        Err(ModelError::Cancelled)
    }
}

/// A cancel sent as the host restarts, before the fleet's recovery has
/// woken the bot to resume its unfinished turn, stops that turn: the bot
/// is woken by the cancel. (Before, the router found no active bot,
/// answered that nothing ran, and the turn resumed after it.)
#[tokio::test]
async fn a_cancel_sent_as_the_host_restarts_stops_the_unfinished_turn() {
    let dir = tempfile::tempdir().unwrap();
    let entered = Arc::new(tokio::sync::Notify::new());
    let first: Arc<dyn Model> = Arc::new(StallModel {
        calls: Mutex::new(0),
        entered: entered.clone(),
    });
    let bot = alices_bot(&["SendMessage"]);
    let rt = fleet_runtime(dir.path(), first, ToolRegistry::builtin());
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "work on it", None);
    fleet.admit(req).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the turn did not reach its second step");
    // the host goes down in the middle of the turn's second model call
    fleet.shutdown().await;

    let rt = fleet_runtime(
        dir.path(),
        Arc::new(UntilCancelled),
        ToolRegistry::builtin(),
    );
    let open = rt.store.open_turns(&bot.id).await.unwrap();
    assert_eq!(open.len(), 1, "the turn is unfinished: {open:#?}");
    let turn = open[0].id;
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let mut changes = fleet.store().subscribe();
    assert!(
        fleet.cancel(&bot.id).await.unwrap(),
        "the cancel found no turn to stop"
    );
    let status = loop {
        let status = fleet.store().get_turn(turn).await.unwrap().unwrap().status;
        if status != TurnStatus::Running {
            break status;
        }
        next_change(&mut changes, "the turn did not end within 30 s").await;
    };
    fleet.shutdown().await;
    assert_eq!(status, TurnStatus::Cancelled);
}

/// The wait after a run the store refused doubles from 1 s and stays at a
/// minute, however long the store refuses.
#[test]
fn the_wait_for_the_store_doubles_up_to_a_minute() {
    use super::super::store_wait::store_retry_delay;
    let waits: Vec<u64> = (1..=9).map(|n| store_retry_delay(n).as_secs()).collect();
    assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
    assert_eq!(store_retry_delay(u32::MAX).as_secs(), 60);
    // a count of 0 (never passed) is the first wait
    assert_eq!(store_retry_delay(0).as_secs(), 1);
}

/// A turn the person cancelled, whose run then crashed, stays stopped:
/// the person was told it was cancelled, and the crash queued it to
/// resume with fresh tokens, so it called the model and its tools again
/// (audit, 2026-12-07). It ends failed, saying it was cancelled, as a
/// cancel the store made wait does.
#[tokio::test]
async fn a_cancelled_turn_that_crashes_is_not_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let entered = Arc::new(tokio::sync::Notify::new());
    let model: Arc<dyn Model> = Arc::new(HeldModel {
        calls: Mutex::new(0),
        entered: entered.clone(),
        release: None,
    });
    let rt = fleet_runtime(dir.path(), model, ToolRegistry::builtin());
    let bot = alices_bot(&["SendMessage"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "work on it", None);
    let session: SessionId = req.entry.session;
    fleet.admit(req).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the turn called its model");
    assert!(
        fleet.cancel(&bot.id).await.unwrap(),
        "the cancel is answered"
    );
    let entries = turn_ended(fleet.store(), session).await;
    fleet.shutdown().await;
    assert_eq!(ends(&entries), vec![TurnStatus::Failed], "{entries:#?}");
    assert!(deliveries(&entries).is_empty(), "{entries:#?}");
    let failure = entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::Notice { code, text, .. } if code == "turn_failed" => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no turn_failed notice: {entries:#?}"));
    assert!(
        failure.contains("cancelled (and as it stopped"),
        "{failure}"
    );
}
