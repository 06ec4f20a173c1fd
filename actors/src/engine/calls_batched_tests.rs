//! A call on a review surface whose exact action review's rules allow
//! (SendToAgent of a plain message) takes the batched path: the step that
//! asked for it and its outcome commit together, as for a call on no
//! review surface. A call the rules ask a person about still has its step
//! committed first, then waits for the decision.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;

use async_trait::async_trait;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::UserId;
use serde_json::json;
use tokio::sync::broadcast::error::TryRecvError;
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
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::bot_record;
use crate::tools::test_support::done;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_call;
use crate::tools::test_support::tool_step;
use crate::tools::test_support::turn_ended;

/// Bot b tells y the text of its person's message, then its person that
/// it did; y only ends its turns.
struct Relay {
    calls: Mutex<usize>,
}

#[async_trait]
impl Model for Relay {
    fn describe(&self) -> String {
        "relay".into()
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
        if request.bot != "b" {
            return Ok(done());
        }
        let id = format!("call-{}", next_call(&self.calls));
        let tools_called = request
            .messages
            .iter()
            .filter(|m| matches!(m, ChatMessage::Tool { .. }))
            .count();
        Ok(match request.messages.last() {
            Some(ChatMessage::Tool { content, .. }) if tools_called == 1 => tool_step(
                &id,
                "SendMessage",
                json!({ "text": format!("told: {content}") }),
            ),
            Some(ChatMessage::Tool { .. }) => done(),
            Some(ChatMessage::User { content, .. }) => {
                let text = content.rsplit('\n').next().unwrap_or_default().to_owned();
                tool_step(&id, "SendToAgent", json!({ "agent": "y", "text": text }))
            }
            _ => done(),
        })
    }
}

/// Alice's message `text` to b, run to the end of b's turn: b's entries,
/// and the newest seq of each commit that changed b's session.
async fn relayed(text: &str) -> (Vec<Entry>, Vec<i64>) {
    let dir = tempfile::tempdir().unwrap();
    let model: Arc<dyn Model> = Arc::new(Relay {
        calls: Mutex::new(0),
    });
    let rt = fleet_runtime(dir.path(), model, ToolRegistry::builtin());
    let alice = UserId::new("alice").unwrap();
    let bot = alices_bot(&["SendMessage", "SendToAgent"]);
    let y = bot_record("y", "Y", &alice, &["SendMessage"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone(), y]).await.unwrap();
    let store = fleet.store().clone();
    let mut changes = store.subscribe();
    let req = crate::protocol::user_message(&alice, &bot, text, None);
    let session = req.entry.session;
    fleet.admit(req).await.unwrap();
    let entries = turn_ended(&store, session).await;
    let mut commits = Vec::new();
    loop {
        match changes.try_recv() {
            Ok(c) if c.session == session => commits.push(c.seq),
            Ok(_) => {}
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            Err(TryRecvError::Lagged(n)) => panic!("{n} changes missed"),
        }
    }
    fleet.shutdown().await;
    (entries, commits)
}

/// The seq of the step that called SendToAgent, and its result's text.
fn the_call(entries: &[Entry]) -> (i64, String) {
    let step = entries
        .iter()
        .find(|e| {
            matches!(&e.kind, EntryKind::Assistant { tool_calls, .. }
                if tool_calls.iter().any(|c| c.name == "SendToAgent"))
        })
        .expect("a step calling SendToAgent");
    let result = entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::ToolResult { name, content, .. } if name == "SendToAgent" => {
                Some(content.clone())
            }
            _ => None,
        })
        .expect("its result");
    (step.seq, result)
}

#[tokio::test]
async fn a_send_the_rules_allow_commits_with_the_step_that_asked_for_it() {
    let (entries, commits) = relayed("the build is green").await;
    let (step, result) = the_call(&entries);
    assert!(result.starts_with("delivered to y"), "{result}");
    assert!(
        !commits.contains(&step),
        "the step was committed alone, before its call ran: commits {commits:?}, step {step}"
    );
}

#[tokio::test]
async fn a_send_the_rules_ask_about_has_its_step_committed_first() {
    let (entries, commits) = relayed("the deploy key is AKIAABCDEFGHIJKLMNOP").await;
    let (step, result) = the_call(&entries);
    assert!(result.contains("approv"), "{result}");
    assert!(
        commits.contains(&step),
        "the step was not committed before review asked: commits {commits:?}, step {step}"
    );
}
