//! A turn cut off in the middle of a call with an external effect, resumed
//! while something already stops it (a person's new message, a cancel) or
//! keeps the gate from running the call again (a pending approval),
//! through the fleet's messages. The crash is a panic inside the tool
//! after its effect (the bot resumes the turn at once, as a restarted host
//! does), and the resumed run is held in its set-up, before it settles
//! the call, until the stop has reached the bot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use botfleet_memory::ApprovalId;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewApproval;
use botfleet_memory::SessionId;
use botfleet_memory::ToolCallStatus;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;
use serde_json::Value;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::fleet::FleetHandle;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::StreamSink;
use crate::model::ToolSpec;
use crate::runtime::MemoryReach;
use crate::runtime::StateBlock;
use crate::runtime::StateProvider;
use crate::tools::Effect;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolOutput;
use crate::tools::ToolRegistry;
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::done;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_call;
use crate::tools::test_support::tool_step;
use crate::tools::test_support::turn_ended;

/// A tool with an external effect (it counts its runs) whose first run
/// dies after the effect, before its outcome is recorded.
struct Launch {
    idempotent: bool,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for Launch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Launch".into(),
            description: "Launch it.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn effect(&self) -> Effect {
        Effect::External
    }

    fn idempotent(&self) -> bool {
        self.idempotent
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, _ctx: &ToolContext<'_>, _args: Value) -> Result<ToolOutput, ToolError> {
        if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("the host dies in the middle of the call");
        }
        Ok(ToolOutput::text("launched"))
    }
}

/// The model: the first step calls Launch; later turns answer once and
/// stop.
struct LaunchModel {
    next: Mutex<usize>,
}

#[async_trait]
impl Model for LaunchModel {
    fn describe(&self) -> String {
        "launch".into()
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
        Ok(match n {
            0 => tool_step(&format!("call-{n}"), "Launch", json!({})),
            n if n % 2 == 1 => tool_step(
                &format!("call-{n}"),
                "SendMessage",
                json!({ "text": "answered" }),
            ),
            _ => done(),
        })
    }
}

/// An empty state block, except that the second turn run to ask for it
/// (the resumed one) says so and waits until it is released.
#[derive(Default)]
struct HoldResume {
    asked: AtomicUsize,
    entered: Notify,
    release: Notify,
}

#[async_trait]
impl StateProvider for HoldResume {
    async fn state_block(&self, _bot: &BotRecord, _input: &str, _r: MemoryReach) -> StateBlock {
        if self.asked.fetch_add(1, Ordering::SeqCst) == 1 {
            self.entered.notify_one();
            self.release.notified().await;
        }
        StateBlock::default()
    }
}

/// What happens while the resumed turn is held.
#[derive(Debug, Clone, Copy)]
enum StopBy {
    /// A person's new message (the turn is interrupted).
    Message,
    /// A cancel of the bot's running turn.
    Cancel,
    /// Nothing stops the turn, but an approval of another action of the
    /// bot is pending: the gate refuses any side effect until a person
    /// decides, so an idempotent call is not run again.
    ApprovalPending,
}

/// What a resumed run settled: the Launch call's result entry, its
/// `tool_calls` row, the turn's end and how often the tool ran.
struct Settled {
    result: String,
    row: (ToolCallStatus, Option<String>),
    status: TurnStatus,
    runs: usize,
}

/// A person asks for the launch; its tool dies mid-call; the resumed run
/// is stopped by `stop` before it settles the call.
async fn launch_cut_off_then(stop: StopBy, idempotent: bool) -> Settled {
    let dir = tempfile::tempdir().unwrap();
    let model: Arc<dyn Model> = Arc::new(LaunchModel {
        next: Mutex::new(0),
    });
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::builtin();
    tools.register(Arc::new(Launch {
        idempotent,
        runs: runs.clone(),
    }));
    let rt = fleet_runtime(dir.path(), model, tools);
    let hold = Arc::new(HoldResume::default());
    rt.set_state_provider(hold.clone());
    let bot = alices_bot(&["SendMessage", "Launch"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "launch it", None);
    let session: SessionId = req.entry.session;
    fleet.admit(req).await.unwrap();
    // the tool ran and died; the bot resumes the turn, held in its set-up
    tokio::time::timeout(Duration::from_secs(30), hold.entered.notified())
        .await
        .expect("the turn was not resumed");
    match stop {
        StopBy::Message => {
            let req = crate::protocol::user_message(&alice, &bot, "are you there?", Some("2"));
            fleet.admit(req).await.unwrap();
            // routed before the admission answered: the bot has it once
            // it publishes it queued (the status is what the bot last
            // published, no longer an answer that waits for the bot)
            let mut published = fleet.status_changes();
            while fleet
                .status(&bot.id)
                .await
                .unwrap()
                .is_none_or(|s| s.queued == 0)
            {
                tokio::time::timeout(Duration::from_secs(30), published.changed())
                    .await
                    .expect("the bot never queued the message")
                    .unwrap();
            }
        }
        StopBy::Cancel => {
            // a cancel is answered once the run it stops has ended, so the
            // run is let go once the cancel reached the bot: a second
            // cancel, sent after it, is answered at once then (it finds
            // the run already being cancelled)
            let (cancelled, ()) = tokio::join!(fleet.cancel(&bot.id), async {
                assert!(!fleet.cancel(&bot.id).await.unwrap());
                hold.release.notify_one();
            });
            assert!(cancelled.unwrap());
        }
        StopBy::ApprovalPending => {
            let new = NewApproval {
                id: ApprovalId::new_v7(),
                bot: bot.id.clone(),
                session,
                turn: None,
                call_id: "other".into(),
                tool: "Launch".into(),
                fingerprint: "another action".into(),
                summary: "launch something else".into(),
                reason: "a person must see it".into(),
                action: json!({}),
                ttl_ms: 600_000,
                max_pending: 4,
            };
            fleet
                .store()
                .write(vec![Mutation::RequestApproval(Box::new(new))])
                .await
                .unwrap();
        }
    }
    hold.release.notify_one();
    let entries = turn_ended(fleet.store(), session).await;
    let (turn, result) = entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::ToolResult { name, content, .. } if name == "Launch" => {
                Some((e.turn.unwrap(), content.clone()))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no Launch result: {entries:#?}"));
    let status = entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::TurnEnd { status, .. } if e.turn == Some(turn) => Some(*status),
            _ => None,
        })
        .unwrap();
    let row = fleet
        .store()
        .tool_calls(turn)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.name == "Launch")
        .map(|c| (c.status, c.outcome))
        .unwrap();
    fleet.shutdown().await;
    Settled {
        result,
        row,
        status,
        runs: runs.load(Ordering::SeqCst),
    }
}

fn assert_outcome_unknown(s: &Settled, stopped: TurnStatus) {
    assert!(s.result.starts_with("outcome unknown"), "{}", s.result);
    assert_eq!(s.row.0, ToolCallStatus::Done, "the row got its outcome");
    assert_eq!(s.row.1.as_deref(), Some(s.result.as_str()));
    assert_eq!(s.status, stopped);
    assert_eq!(s.runs, 1, "not run again");
}

/// The tester's case: a person's message reaches the bot as it resumes.
/// The call had started, so it may have taken effect: "outcome unknown",
/// and its row is closed. (It was reported "not run: … The call had no
/// effect", and its row stayed `started`.)
#[tokio::test]
async fn a_started_call_of_a_resumed_turn_a_message_interrupts_is_outcome_unknown() {
    let s = launch_cut_off_then(StopBy::Message, false).await;
    assert_outcome_unknown(&s, TurnStatus::Interrupted);
}

/// The same with the turn cancelled as it resumes.
#[tokio::test]
async fn a_started_call_of_a_resumed_turn_that_is_cancelled_is_outcome_unknown() {
    let s = launch_cut_off_then(StopBy::Cancel, false).await;
    assert_outcome_unknown(&s, TurnStatus::Cancelled);
}

/// An idempotent call is run again when its turn resumes, but not by a
/// turn that is being stopped: it is not run again, and since it started
/// before the crash, its outcome is unknown too.
#[tokio::test]
async fn a_started_idempotent_call_of_a_resumed_turn_that_stops_is_outcome_unknown() {
    let s = launch_cut_off_then(StopBy::Message, true).await;
    assert_outcome_unknown(&s, TurnStatus::Interrupted);
}

/// An idempotent call cut off by a crash is run again when its turn
/// resumes; when the gate refuses that run (here: an approval is pending,
/// so no side effect starts), the call may still have taken effect before
/// the crash: it is outcome unknown, saying why it did not run again, and
/// its row is closed with that. (It was told only the refusal, and its
/// row stayed `started` for good.)
#[tokio::test]
async fn a_started_idempotent_call_the_gate_refuses_on_resume_is_closed_as_outcome_unknown() {
    let s = launch_cut_off_then(StopBy::ApprovalPending, true).await;
    assert!(s.result.starts_with("outcome unknown"), "{}", s.result);
    assert!(
        s.result.contains("waiting for a decision"),
        "the refusal is told too: {}",
        s.result
    );
    assert_eq!(s.row.0, ToolCallStatus::Done, "the row got its outcome");
    assert_eq!(s.row.1.as_deref(), Some(s.result.as_str()));
    assert_eq!(s.status, TurnStatus::Completed);
    assert_eq!(s.runs, 1, "not run again");
}

/// An idempotent tool with an external effect whose every run dies.
struct AlwaysDies;

#[async_trait]
impl Tool for AlwaysDies {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Launch".into(),
            description: "Launch it.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn effect(&self) -> Effect {
        Effect::External
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, _ctx: &ToolContext<'_>, _args: Value) -> Result<ToolOutput, ToolError> {
        panic!("the host dies in the middle of the call, every time");
    }
}

/// Regression (round 18, F8 finding 3): a turn that failed as "crashed 3
/// times in a row" left its started call's row `started` forever (the
/// turn's API showed a failed turn with a call still running). The call
/// is closed as outcome unknown before the turn fails.
#[tokio::test]
async fn a_turn_that_crashed_too_often_closes_its_started_call_before_it_fails() {
    let dir = tempfile::tempdir().unwrap();
    let model: Arc<dyn Model> = Arc::new(LaunchModel {
        next: Mutex::new(0),
    });
    let mut tools = ToolRegistry::builtin();
    tools.register(Arc::new(AlwaysDies));
    let rt = fleet_runtime(dir.path(), model, tools);
    let bot = alices_bot(&["SendMessage", "Launch"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "launch it", None);
    let session: SessionId = req.entry.session;
    fleet.admit(req).await.unwrap();
    let entries = turn_ended(fleet.store(), session).await;
    let (turn, status) = entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::TurnEnd { status, .. } => Some((e.turn.unwrap(), *status)),
            _ => None,
        })
        .unwrap();
    assert_eq!(status, TurnStatus::Failed, "{entries:#?}");
    let row = fleet
        .store()
        .tool_calls(turn)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.name == "Launch")
        .unwrap();
    assert_eq!(row.status, ToolCallStatus::Done, "the row got its outcome");
    assert!(
        row.outcome
            .as_deref()
            .is_some_and(|o| o.starts_with("outcome unknown")),
        "{:?}",
        row.outcome
    );
    fleet.shutdown().await;
}
