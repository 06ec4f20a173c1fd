//! A StopSubagent call cut off after its stop was written and before its
//! answer was (the crash is a panic in the call, after the real tool ran:
//! the bot resumes the turn at once, as a restarted host does). The call
//! is idempotent, so the resumed turn runs it again; that run finds the
//! stop it recorded and answers what it did. Before, it answered
//! "… was already stopped …; nothing was done" of its own stop, and the
//! model told the person the subagent had been stopped before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::SubagentRecord;
use botfleet_memory::SubagentStatus;
use botfleet_memory::ToolCallStatus;
use botfleet_memory::UserId;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::fleet::FleetHandle;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::StreamSink;
use crate::model::ToolSpec;
use crate::tools::Effect;
use crate::tools::StopSubagent;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolOutput;
use crate::tools::ToolRegistry;
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::bot_record;
use crate::tools::test_support::done;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_call;
use crate::tools::test_support::tool_step;
use crate::tools::test_support::turn_ended;

/// The real StopSubagent, whose first run dies after the tool returned
/// (its stop written), before the engine records its answer.
struct DiesAfterStop {
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for DiesAfterStop {
    fn spec(&self) -> ToolSpec {
        StopSubagent.spec()
    }

    fn effect(&self) -> Effect {
        StopSubagent.effect()
    }

    fn idempotent(&self) -> bool {
        StopSubagent.idempotent()
    }

    fn mutates(&self) -> bool {
        StopSubagent.mutates()
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let out = StopSubagent.call(ctx, args).await;
        if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("the host dies after the stop, before its answer is recorded");
        }
        out
    }
}

/// The parent's model: it stops `b.sub-1`, then answers and ends.
struct StopModel {
    next: Mutex<usize>,
}

#[async_trait]
impl Model for StopModel {
    fn describe(&self) -> String {
        "stop".into()
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
            0 => tool_step("call-0", "StopSubagent", json!({ "id": "b.sub-1" })),
            1 => tool_step("call-1", "SendMessage", json!({ "text": "stopped it" })),
            _ => done(),
        })
    }
}

#[tokio::test]
async fn a_stop_cut_off_by_a_crash_answers_its_own_stop_when_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::builtin();
    tools.register(Arc::new(DiesAfterStop { runs: runs.clone() }));
    let model: Arc<dyn Model> = Arc::new(StopModel {
        next: Mutex::new(0),
    });
    let rt = fleet_runtime(dir.path(), model, tools);
    let bot = alices_bot(&["SendMessage", "StopSubagent"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "stop the audit", None);
    let session = req.entry.session;
    // b's running subagent, in the session the person writes in
    let sub = BotId::new("b.sub-1").unwrap();
    let mut child = bot_record("b.sub-1", "B · audit", &alice, &["SendMessage"]);
    child.origin = "subagent:b".into();
    fleet
        .store()
        .write(vec![
            Mutation::UpsertBot(child),
            Mutation::CreateSubagent(SubagentRecord {
                id: sub.clone(),
                parent: bot.id.clone(),
                parent_session: session,
                description: "audit the logs".into(),
                status: SubagentStatus::Running,
                result: None,
                created_at: 0,
                updated_at: 0,
            }),
        ])
        .await
        .unwrap();
    fleet.admit(req).await.unwrap();

    let entries = turn_ended(fleet.store(), session).await;
    let results: Vec<(Option<botfleet_memory::TurnId>, String)> = entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::ToolResult { name, content, .. } if name == "StopSubagent" => {
                Some((e.turn, content.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(runs.load(Ordering::SeqCst), 2, "run again after the crash");
    assert_eq!(
        results.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>(),
        vec!["stopped subagent b.sub-1"],
        "{entries:#?}"
    );
    let turn = results[0].0.unwrap();
    let row = fleet
        .store()
        .tool_calls(turn)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.name == "StopSubagent")
        .map(|c| (c.status, c.outcome))
        .unwrap();
    assert_eq!(
        row,
        (
            ToolCallStatus::Done,
            Some("stopped subagent b.sub-1".to_owned())
        )
    );
    let record = fleet.store().get_subagent(&sub).await.unwrap().unwrap();
    assert_eq!(record.status, SubagentStatus::Stopped);
    fleet.shutdown().await;
}
