//! A person's retry that reaches the bot before the end of the turn it
//! retries: the bot read the requeued inputs while the turn's task still
//! held them and skipped them as the running turn's own, and they stayed
//! unqueued until the bot's next activation (found by F2, round 21: a
//! retry sent at once after a `turn_failed` notice was never answered).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;
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
use crate::tools::ToolRegistry;
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::done;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_call;
use crate::tools::test_support::next_change;
use crate::tools::test_support::tool_step;

/// Call 0 sends "first"; call 1 says it began (`entered`), waits for
/// `release` and fails (HTTP 400: the turn, which delivered, ends
/// `completed` with a `failed_after_reply` notice); call 2 sends "again";
/// later calls end their turn.
struct HeldModel {
    calls: Mutex<usize>,
    entered: Notify,
    release: Notify,
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
        _request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        match next_call(&self.calls) {
            0 => Ok(tool_step(
                "call-0",
                "SendMessage",
                json!({ "text": "first" }),
            )),
            1 => {
                self.entered.notify_one();
                self.release.notified().await;
                Err(ModelError::Http {
                    status: 400,
                    attempts: 1,
                    body: "bad request".into(),
                })
            }
            2 => Ok(tool_step(
                "call-2",
                "SendMessage",
                json!({ "text": "again" }),
            )),
            _ => Ok(done()),
        }
    }
}

/// The turn's end and the retry are written while its task is held in a
/// model call (as when the retry's wake-up beats the task's `TurnEnded`
/// to the bot): the bot's refresh sees the requeued input held by the
/// running turn. Once the task ends, the input runs again, in a new turn.
/// (Before, nothing ran it: the model got no third call.)
#[tokio::test]
async fn an_input_retried_before_its_turn_told_its_bot_it_ended_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(HeldModel {
        calls: Mutex::new(0),
        entered: Notify::new(),
        release: Notify::new(),
    });
    let rt = fleet_runtime(dir.path(), model.clone(), ToolRegistry::builtin());
    let bot = alices_bot(&["SendMessage"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, "work on it", None);
    let session = req.entry.session;
    fleet.admit(req).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), model.entered.notified())
        .await
        .expect("the turn's second model call never began");
    let turn = fleet
        .status(&bot.id)
        .await
        .unwrap()
        .and_then(|s| s.turn)
        .expect("the bot runs the turn")
        .turn;

    // its end is written, and a person retries it, before its task ends
    fleet
        .store()
        .write(vec![Mutation::EndTurn {
            turn,
            status: TurnStatus::Failed,
            error: Some("failed before its task told its bot".into()),
        }])
        .await
        .unwrap();
    let mut published = fleet.status_changes();
    published.mark_unchanged();
    assert_eq!(fleet.retry(turn).await.unwrap(), 1);
    // the bot handled the retry's refresh (nothing else reaches it while
    // the model call is held) and skipped the input the turn holds
    tokio::time::timeout(Duration::from_secs(30), published.changed())
        .await
        .expect("the bot never handled the retry's wake-up")
        .unwrap();
    let status = fleet.status(&bot.id).await.unwrap().unwrap();
    assert_eq!(status.queued, 0, "{status:?}");
    assert_eq!(status.turn.map(|t| t.turn), Some(turn));

    // the task ends: the retried input runs in a new turn
    model.release.notify_one();
    let mut changes = fleet.store().subscribe();
    let entries = loop {
        let entries = fleet.store().entries_after(session, 0, 1000).await.unwrap();
        // the held turn ends `completed` too (its call failed after it
        // delivered: failed_after_reply): wait for the retry's own turn
        if entries.iter().any(|e| {
            e.turn != Some(turn)
                && matches!(
                    e.kind,
                    EntryKind::TurnEnd {
                        status: TurnStatus::Completed,
                        ..
                    }
                )
        }) {
            break entries;
        }
        next_change(
            &mut changes,
            "the retried input never ran: no turn completed within 30 s of the held turn's end",
        )
        .await;
    };
    let said: Vec<&str> = entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Delivery { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(said, vec!["first", "again"], "{entries:#?}");
    fleet.shutdown().await;
}
