//! A parent's MessageSubagent that lands as its subagent's last turn of
//! the task ends: the parent gets one report of the task, never two.
//!
//! The subagent's last model call answers as the steering message is
//! committed (the model here finishes its answer whatever the interrupt
//! says, as a provider's answer that had arrived whole does): the turn
//! ends `completed` with the message pending in its session. Before, that
//! end reported to the parent, and the message ran a second turn that
//! reported again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionKind;
use botfleet_memory::SubagentStatus;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::fleet::FleetHandle;
use crate::model::ChatMessage;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::StreamSink;
use crate::tools::ToolRegistry;
use crate::tools::subagents::subagent_session;
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::done;
use crate::tools::test_support::ends;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_change;
use crate::tools::test_support::tool_step;

/// Parent `b`: "delegate" starts a task, "steer" steers it. Its subagent
/// reports "REPORT one" on the task; its last call of that turn says it
/// began (`at_end`) and answers once the parent's steering is committed
/// (`steered`: the parent's next call after MessageSubagent); on the
/// steering message it reports "REPORT two".
struct RaceModel {
    sub: Mutex<Option<String>>,
    at_end: Notify,
    steered: Notify,
}

/// The model's steps since the newest user-side message.
fn step_of(request: &ModelRequest) -> usize {
    request
        .messages
        .iter()
        .rev()
        .take_while(|m| !matches!(m, ChatMessage::User { .. }))
        .filter(|m| matches!(m, ChatMessage::Assistant { .. }))
        .count()
}

fn send(n: usize, text: &str) -> ModelResponse {
    tool_step(&format!("call-{n}"), "SendMessage", json!({ "text": text }))
}

#[async_trait]
impl Model for RaceModel {
    fn describe(&self) -> String {
        "race".into()
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
        let input = request.last_user_text().unwrap_or_default().to_owned();
        let step = step_of(request);
        if request.bot.starts_with("b.sub-") {
            *self.sub.lock().unwrap() = Some(request.bot.clone());
            return Ok(match (input.contains("STEER-TWO"), step) {
                (false, 0) => send(step, "REPORT one"),
                (false, _) => {
                    self.at_end.notify_one();
                    self.steered.notified().await;
                    done()
                }
                (true, 0) => send(step, "REPORT two"),
                (true, _) => done(),
            });
        }
        if input.contains("REPORT") {
            return Ok(done());
        }
        if input.contains("delegate") {
            return Ok(match step {
                0 => tool_step(
                    "task",
                    "Task",
                    json!({ "description": "job", "prompt": "TASK-ONE" }),
                ),
                1 => send(step, "delegated"),
                _ => done(),
            });
        }
        let sub = self.sub.lock().unwrap().clone().unwrap();
        Ok(match step {
            0 => tool_step(
                "steer",
                "MessageSubagent",
                json!({ "id": sub, "text": "STEER-TWO" }),
            ),
            1 => {
                // the step with MessageSubagent is committed
                self.steered.notify_one();
                send(step, "steered")
            }
            _ => done(),
        })
    }
}

fn reports(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::AgentMessage { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_steering_message_landing_as_the_task_ends_gives_the_parent_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(RaceModel {
        sub: Mutex::new(None),
        at_end: Notify::new(),
        steered: Notify::new(),
    });
    let rt = fleet_runtime(dir.path(), model.clone(), ToolRegistry::builtin());
    let bot = alices_bot(&["SendMessage", "Task", "MessageSubagent"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "delegate", None);
    let dm = req.entry.session;
    fleet.admit(req).await.unwrap();
    // the subagent's last call of its task turn has begun
    model.at_end.notified().await;
    let sub = BotId::new(model.sub.lock().unwrap().clone().unwrap()).unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "steer", None);
    fleet.admit(req).await.unwrap();
    // both of the subagent's turns end: the task's and the steering's
    let task = subagent_session(&sub, &bot.id);
    assert_eq!(task.kind, SessionKind::Subagent);
    let store = fleet.store();
    let mut changes = store.subscribe();
    let entries = loop {
        let es = store.entries_after(task.id(), 0, 1000).await.unwrap();
        if ends(&es).len() >= 2 {
            break es;
        }
        next_change(&mut changes, "the subagent's two turns did not end").await;
    };
    assert_eq!(
        ends(&entries),
        vec![TurnStatus::Completed, TurnStatus::Completed]
    );
    let record = store.get_subagent(&sub).await.unwrap().unwrap();
    assert_eq!(record.status, SubagentStatus::Done);
    assert_eq!(record.result.as_deref(), Some("REPORT two"));
    // each end that reports writes its report with it: one report, the
    // last message of the task with the steering taken in
    let parent = store.entries_after(dm, 0, 1000).await.unwrap();
    assert_eq!(reports(&parent), vec!["REPORT two".to_owned()]);
    fleet.shutdown().await;
}
