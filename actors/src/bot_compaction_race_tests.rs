//! A message that no turn claimed yet and a background compaction that
//! runs before its bot hears of it, through the fleet's messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;

use async_trait::async_trait;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::SessionId;
use botfleet_memory::Store;
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
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::done;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_change;
use crate::tools::test_support::tool_step;

/// Answers each input with SendMessage; the first turn's last step waits
/// for `release` (after saying so on `entered`); summaries are canned.
/// Keeps the messages of every turn request.
#[derive(Default)]
struct GatedModel {
    entered: Notify,
    release: Notify,
    gated: Mutex<bool>,
    turns: Mutex<Vec<Vec<ChatMessage>>>,
}

#[async_trait]
impl Model for GatedModel {
    fn describe(&self) -> String {
        "gated".into()
    }

    fn answers(&self, purpose: Purpose) -> bool {
        matches!(purpose, Purpose::Turn | Purpose::Compact)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        if request.purpose == Purpose::Compact {
            return Ok(ModelResponse {
                text: "SUMMARY: the person wrote; the bot answered.".into(),
                ..done()
            });
        }
        self.turns.lock().unwrap().push(request.messages.clone());
        if matches!(request.messages.last(), Some(ChatMessage::Tool { .. })) {
            let first = !std::mem::replace(&mut *self.gated.lock().unwrap(), true);
            if first {
                self.entered.notify_one();
                self.release.notified().await;
            }
            return Ok(done());
        }
        let text = request.last_user_text().unwrap_or_default();
        Ok(tool_step(
            "call-1",
            "SendMessage",
            json!({ "text": format!("reply to: {text}") }),
        ))
    }
}

/// The entries of `session` once `pick` finds what it waits for.
async fn wait_for(store: &Store, session: SessionId, pick: impl Fn(&[Entry]) -> bool) {
    let mut changes = store.subscribe();
    loop {
        let entries = store.entries_after(session, 0, 1000).await.unwrap();
        if pick(&entries) {
            return;
        }
        next_change(&mut changes, "not within 30 s").await;
    }
}

fn turn_ends(entries: &[Entry]) -> usize {
    entries
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::TurnEnd { .. }))
        .count()
}

/// Soak (round 32): a message admitted while a turn worked, and routed to
/// its bot only once that turn had ended and the bot had begun a
/// background compaction, was loaded by the compaction at its place among
/// the ended turn's entries, or, with a small window, summarised away: the
/// turn that claimed it read it from the store after the summary, so its
/// model never saw the message as said and answered the summary instead
/// (the delivery reminder got the reply out). A background compaction
/// neither loads nor summarises a message no turn claimed: the turn that
/// claims it sees it last, after the earlier turn's last step.
#[tokio::test]
async fn a_background_compaction_leaves_an_unclaimed_message_to_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(GatedModel::default());
    let mut rt = fleet_runtime(dir.path(), model.clone(), ToolRegistry::builtin());
    // a small window: the first turn leaves a compaction due
    rt.settings.context_entries = 6;
    let bot = alices_bot(&["SendMessage"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();
    let first = crate::protocol::user_message(&alice, &bot, "first", None);
    let session = first.entry.session;
    fleet.admit(first).await.unwrap();
    model.entered.notified().await;
    // admitted while the turn works, and not routed to the bot (as when
    // its sender routes it only after the turn has ended)
    let second = crate::protocol::user_message(&alice, &bot, "second", None);
    fleet
        .store()
        .write(vec![Mutation::Admit(Box::new(second))])
        .await
        .unwrap();
    model.release.notify_one();
    // the turn ends, and the idle bot compacts in the background
    wait_for(fleet.store(), session, |es| {
        es.iter()
            .any(|e| matches!(e.kind, EntryKind::Summary { .. }))
    })
    .await;
    // the bot hears of the second message now
    fleet.wake(bot.id.clone()).unwrap();
    wait_for(fleet.store(), session, |es| turn_ends(es) == 2).await;
    let turns = model.turns.lock().unwrap().clone();
    let asked = turns
        .iter()
        .find(|m| {
            matches!(m.last(), Some(ChatMessage::User { content }) if content.contains("second"))
        })
        .unwrap_or_else(|| panic!("no turn request ends with the second message: {turns:#?}"));
    // after the first turn's last step, not before it
    let done_at = asked
        .iter()
        .position(|m| matches!(m, ChatMessage::Assistant { content, .. } if content == "done"));
    let second_at = asked.len() - 1;
    assert!(done_at.is_none_or(|d| d < second_at), "{asked:#?}");
    fleet.shutdown().await;
}
