//! A turn whose task panics, through the fleet's messages: how many
//! crashes it takes before the bot fails it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::fleet::FleetHandle;
use crate::model::FinishReason;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::StreamSink;
use crate::model::ToolCall;
use crate::runtime::Runtime;
use crate::settings::FleetSettings;
use crate::tools::ToolRegistry;
use crate::tools::Workspace;

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
        let (n, answer) = {
            let mut next = self.next.lock().unwrap();
            let n = *next;
            *next += 1;
            (n, self.answers.get(n).copied().unwrap_or(Answer::Done))
        };
        match answer {
            Answer::Send(text) => Ok(ModelResponse {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: format!("call-{n}"),
                    name: "SendMessage".into(),
                    arguments: json!({ "text": text }).to_string(),
                }],
                finish: FinishReason::ToolCalls,
                usage: None,
            }),
            Answer::Panic => panic!("model call {n} crashes its turn"),
            Answer::Done => Ok(ModelResponse {
                text: "done".into(),
                tool_calls: Vec::new(),
                finish: FinishReason::Stop,
                usage: None,
            }),
        }
    }
}

/// Sends one message to a bot whose model plays `answers`, and returns
/// the entries of its DM once a turn ended there.
async fn run_turn_of(answers: Vec<Answer>) -> Vec<Entry> {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(&dir.path().join("ws")).unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("db.sqlite"))).unwrap();
    let mut settings = FleetSettings::new(ws.root().to_path_buf());
    settings.debounce = Duration::ZERO;
    settings.extract_memory = false;
    assert_eq!(settings.max_turn_attempts, 3);
    let model: Arc<dyn Model> = Arc::new(CrashingModel {
        answers,
        next: Mutex::new(0),
    });
    let models = HashMap::from([("p".to_owned(), model)]);
    let rt = Runtime::new(store, models, ToolRegistry::builtin(), settings, ws);
    let bot = BotRecord {
        id: BotId::new("b").unwrap(),
        name: "B".into(),
        owner: UserId::new("alice").unwrap(),
        role: String::new(),
        provider: "p".into(),
        tools: vec!["SendMessage".into()],
        settings: json!({}),
        origin: "test".into(),
        created_at: 0,
        updated_at: 0,
    };
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let mut changes = fleet.store().subscribe();
    let req = crate::protocol::user_message(&alice, &bot, "work on it", None);
    let session: SessionId = req.entry.session;
    fleet.admit(req).await.unwrap();
    // every new entry signals a change: look again on each one
    let entries = loop {
        let entries = fleet.store().entries_after(session, 0, 1000).await.unwrap();
        if entries
            .iter()
            .any(|e| matches!(e.kind, EntryKind::TurnEnd { .. }))
        {
            break entries;
        }
        let change = tokio::time::timeout(Duration::from_secs(30), changes.recv())
            .await
            .expect("no turn ended within 30 s");
        if let Err(tokio::sync::broadcast::error::RecvError::Closed) = change {
            panic!("the store closed");
        }
    };
    fleet.shutdown().await;
    entries
}

fn ends(entries: &[Entry]) -> Vec<TurnStatus> {
    entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::TurnEnd { status, .. } => Some(*status),
            _ => None,
        })
        .collect()
}

fn deliveries(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Delivery { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
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
        Answer::Send("one"),
        Answer::Panic,
        Answer::Panic,
        Answer::Panic,
        Answer::Send("never"),
    ])
    .await;
    assert_eq!(ends(&entries), vec![TurnStatus::Failed], "{entries:#?}");
    assert_eq!(deliveries(&entries), vec!["one"]);
}

/// A model whose first call waits for `release` (signalling `entered`) and
/// then crashes its turn; later calls send one reply, then end the turn.
struct HeldModel {
    calls: Mutex<usize>,
    entered: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Notify>,
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
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let n = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls - 1
        };
        if n == 0 {
            self.entered.notify_one();
            self.release.notified().await;
            panic!("the turn crashes while the person's second message waits");
        }
        let replied = request.messages.iter().any(|m| {
            matches!(m, crate::model::ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty())
        });
        Ok(if replied {
            ModelResponse {
                text: "done".into(),
                tool_calls: Vec::new(),
                finish: FinishReason::Stop,
                usage: None,
            }
        } else {
            ModelResponse {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: format!("call-{n}"),
                    name: "SendMessage".into(),
                    arguments: json!({ "text": "answered" }).to_string(),
                }],
                finish: FinishReason::ToolCalls,
                usage: None,
            }
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
    let ws = Workspace::open(&dir.path().join("ws")).unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("db.sqlite"))).unwrap();
    let mut settings = FleetSettings::new(ws.root().to_path_buf());
    settings.debounce = Duration::ZERO;
    settings.extract_memory = false;
    let entered = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let model: Arc<dyn Model> = Arc::new(HeldModel {
        calls: Mutex::new(0),
        entered: entered.clone(),
        release: release.clone(),
    });
    let models = HashMap::from([("p".to_owned(), model)]);
    let rt = Runtime::new(store, models, ToolRegistry::builtin(), settings, ws);
    let bot = BotRecord {
        id: BotId::new("b").unwrap(),
        name: "B".into(),
        owner: UserId::new("alice").unwrap(),
        role: String::new(),
        provider: "p".into(),
        tools: vec!["SendMessage".into()],
        settings: json!({}),
        origin: "test".into(),
        created_at: 0,
        updated_at: 0,
    };
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
        let change = tokio::time::timeout(Duration::from_secs(30), changes.recv())
            .await
            .expect("no turn completed within 30 s");
        if let Err(tokio::sync::broadcast::error::RecvError::Closed) = change {
            panic!("the store closed");
        }
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
        let n = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls - 1
        };
        if n > 0 {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(ModelResponse {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "call-0".into(),
                name: "SendMessage".into(),
                arguments: json!({ "text": "one" }).to_string(),
            }],
            finish: FinishReason::ToolCalls,
            usage: None,
        })
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

/// The runtime of a fleet over the store in `dir` with `model`.
fn runtime_in(dir: &std::path::Path, model: Arc<dyn Model>) -> Runtime {
    let ws = Workspace::open(&dir.join("ws")).unwrap();
    let store = Store::open(StoreOptions::new(dir.join("db.sqlite"))).unwrap();
    let mut settings = FleetSettings::new(ws.root().to_path_buf());
    settings.debounce = Duration::ZERO;
    settings.extract_memory = false;
    let models = HashMap::from([("p".to_owned(), model)]);
    Runtime::new(store, models, ToolRegistry::builtin(), settings, ws)
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
    let bot = BotRecord {
        id: BotId::new("b").unwrap(),
        name: "B".into(),
        owner: UserId::new("alice").unwrap(),
        role: String::new(),
        provider: "p".into(),
        tools: vec!["SendMessage".into()],
        settings: json!({}),
        origin: "test".into(),
        created_at: 0,
        updated_at: 0,
    };
    let fleet = FleetHandle::start(runtime_in(dir.path(), first), vec![bot.clone()])
        .await
        .unwrap();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "work on it", None);
    fleet.admit(req).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the turn did not reach its second step");
    // the host goes down in the middle of the turn's second model call
    fleet.shutdown().await;

    let rt = runtime_in(dir.path(), Arc::new(UntilCancelled));
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
        let change = tokio::time::timeout(Duration::from_secs(30), changes.recv())
            .await
            .expect("the turn did not end within 30 s");
        if let Err(tokio::sync::broadcast::error::RecvError::Closed) = change {
            panic!("the store closed");
        }
    };
    fleet.shutdown().await;
    assert_eq!(status, TurnStatus::Cancelled);
}
