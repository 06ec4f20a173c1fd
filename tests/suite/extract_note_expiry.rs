//! A note that fact extraction writes lives its lifetime from the end of
//! the turn it was extracted from, not from when the extraction lands.
//! An extraction runs in the background and may land much later: a slow
//! model, or a restart that re-runs it (`extractions_owed`) hours after
//! the turn. The person said "for the next two hours" when the turn
//! ended.
//!
//! In-process fleet on a manual store clock (a note's expiry is a stored
//! time), the model an OpenAI-compatible server on loopback whose
//! extraction answer is held until the test, having moved the clock,
//! releases it.
//!
//! Before, the note's expiry counted from when the extraction landed
//! (an hour late: it lived an hour longer; three hours late: a two-hour
//! note was added, shown in the prompt for two more hours).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use botfleet::actors::FleetHandle;
use botfleet::actors::MemoryState;
use botfleet::actors::Runtime;
use botfleet::actors::user_message;
use botfleet::memory::AdmitOutcome;
use botfleet::memory::BotRecord;
use botfleet::memory::EntryKind;
use botfleet::memory::Layer;
use botfleet::memory::ManualClock;
use botfleet::memory::MemoryItem;
use botfleet::memory::MemoryScope;
use botfleet::memory::TurnId;
use botfleet::memory::TurnStatus;
use botfleet::memory::UserId;
use botfleet::model::Model;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use botfleet::tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use crate::support::clocked::ClockedParts;
use crate::support::clocked::bot_record;
use crate::support::clocked::clocked_parts;
use crate::support::memory_model::bot_step;
use crate::support::memory_model::is_extraction;
use crate::support::memory_model::send_message;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::process::poll;

const NOTE: &str = "Waiting for the ACME invoice";
const HOUR: i64 = 3_600_000;

/// The bot answers "noted"; the extractor adds [`NOTE`] as a two-hour
/// note of the bot's, once `gate` opens.
fn model(body: &Value, gate: &watch::Receiver<bool>) -> Reply {
    if is_extraction(body) {
        let add = json!({ "text": NOTE, "layer": "notes", "expires_in_hours": 2 });
        let answer = json!({ "add": [add], "replace": [], "remove": [] });
        return Reply::text(answer.to_string()).hold_until(gate.clone());
    }
    let messages: Vec<&Value> = body["messages"].as_array().unwrap().iter().collect();
    match bot_step(&messages) {
        Ok((id, _)) => send_message(&id, "noted"),
        Err(reply) => *reply,
    }
}

struct Clocked {
    _dir: tempfile::TempDir,
    clock: ManualClock,
    fleet: FleetHandle,
    bot: BotRecord,
}

impl Clocked {
    async fn start(server: &OpenAiServer) -> Self {
        let ClockedParts {
            dir,
            clock,
            store,
            ws,
            mut settings,
        } = clocked_parts("2026-03-02T09:00:00Z");
        settings.extract_memory = true;
        let model = OpenAiModel::new(OpenAiOptions {
            max_retries: 0,
            ..OpenAiOptions::new(server.base_url(), "test-model")
        })
        .unwrap();
        let models = HashMap::from([("main".to_owned(), Arc::new(model) as Arc<dyn Model>)]);
        let rt = Runtime::new(store, models, ToolRegistry::builtin(), settings, ws);
        rt.set_state_provider(Arc::new(MemoryState::new(rt.store.clone())));
        let bot = bot_record("a1", "main", &["SendMessage"]);
        let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
        Self {
            _dir: dir,
            clock,
            fleet,
            bot,
        }
    }

    /// Sends `text` from alice, waits until the turn answering it
    /// completed and its extraction was asked; the turn's id and end.
    async fn turn(&self, server: &OpenAiServer, text: &str) -> (TurnId, i64) {
        let store = self.fleet.store();
        let mut changes = store.subscribe();
        let alice = UserId::new("alice").unwrap();
        let sent = self
            .fleet
            .admit(user_message(&alice, &self.bot, text, None))
            .await
            .unwrap();
        let AdmitOutcome::Accepted(input) = sent else {
            panic!("not admitted: {sent:?}");
        };
        let turn = loop {
            let entries = store.entries_after(input.session, 0, 1000).await.unwrap();
            let end = entries.iter().find_map(|e| match &e.kind {
                EntryKind::TurnEnd { status, inputs, .. } if inputs.contains(&input.seq) => {
                    Some((e.turn.expect("a turn's end names it"), *status))
                }
                _ => None,
            });
            if let Some((turn, status)) = end {
                assert_eq!(status, TurnStatus::Completed, "{entries:#?}");
                break turn;
            }
            tokio::time::timeout(Duration::from_secs(30), changes.recv())
                .await
                .expect("the turn ended within 30 s")
                .ok();
        };
        let asked = async {
            while !server.requests().iter().any(|r| is_extraction(&r.body)) {
                server.wait_for_requests(server.request_count() + 1).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), asked)
            .await
            .expect("the extractor was asked within 30 s");
        let ended = store
            .get_turn(turn)
            .await
            .unwrap()
            .and_then(|t| t.ended_at)
            .expect("the turn has ended");
        (turn, ended)
    }

    /// Waits (30 s at most) until the extraction of `turn` is no longer
    /// owed: its outcome is applied.
    async fn extracted(&self, turn: TurnId) {
        let store = self.fleet.store();
        poll(30, async || {
            let owed = store.owed_extractions(100).await.unwrap();
            match owed.iter().any(|o| o.turn == turn) {
                true => Err(format!("the extraction of {turn} is still owed")),
                false => Ok(()),
            }
        })
        .await;
    }

    /// The bot's live notes now (the store's clock).
    async fn notes(&self) -> Vec<MemoryItem> {
        let store = self.fleet.store();
        let scope = MemoryScope::Agent(self.bot.id.clone());
        let now = store.clock().now_ms();
        store
            .memory_items(vec![scope], now)
            .await
            .unwrap()
            .into_iter()
            .filter(|i| i.layer == Layer::Notes)
            .collect()
    }
}

/// A turn that asks to remember a note for two hours, its extraction
/// held until the clock moved `after_ms` past the turn's end, then landed:
/// the fixture, the model server and the turn's end.
async fn extracted_after(after_ms: i64) -> (Clocked, OpenAiServer, i64) {
    let (release, gate) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |b| model(b, &gate))
        .start()
        .await;
    let fx = Clocked::start(&server).await;
    let (turn, ended) = fx
        .turn(
            &server,
            "I'm waiting for the ACME invoice, for the next two hours",
        )
        .await;
    fx.clock.advance_ms(after_ms);
    release.send(true).unwrap();
    fx.extracted(turn).await;
    (fx, server, ended)
}

#[tokio::test]
async fn an_extracted_notes_lifetime_counts_from_its_turns_end() {
    // the extraction lands an hour after the turn
    let (fx, server, ended) = extracted_after(HOUR).await;

    let notes = fx.notes().await;
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert_eq!(
        notes[0].expires_at,
        Some(ended + 2 * HOUR),
        "the note expires two hours after its turn ended, not after the extraction landed"
    );
    fx.fleet.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_note_whose_lifetime_ran_out_before_its_extraction_landed_is_not_added() {
    // the extraction lands three hours after the turn: the two hours the
    // note was for are over
    let (fx, server, _) = extracted_after(3 * HOUR).await;

    assert_eq!(fx.notes().await, [], "an expired note was added");
    fx.fleet.shutdown().await;
    server.shutdown().await;
}
