//! Memory in the prompt on a manual store clock: a note leaves the
//! system message at its expiry (a fleet wired as the host wires it, the
//! model an OpenAI-compatible server on loopback). Split from
//! `memory_prompt.rs`, whose model it uses (a child module of it).

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
use botfleet::memory::ManualClock;
use botfleet::memory::TurnStatus;
use botfleet::memory::UserId;
use botfleet::model::Model;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use botfleet::tools::ToolRegistry;
use serde_json::Value;

use super::model;
use super::no_extraction;
use super::system;
use super::update_in;
use crate::support::clocked::ClockedParts;
use crate::support::clocked::bot_record;
use crate::support::clocked::clocked_parts;
use crate::support::openai_server::OpenAiServer;

/// A fleet of `a1` and `a2` (alice's, on the loopback server) as the host
/// wires it, memory in the prompt included, but on a manual store clock:
/// a note's expiry is a stored time, which the host reads from the wall.
struct Clocked {
    _dir: tempfile::TempDir,
    clock: ManualClock,
    fleet: FleetHandle,
    bots: Vec<BotRecord>,
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
        settings.extract_memory = false;
        let model = OpenAiModel::new(OpenAiOptions {
            max_retries: 0,
            ..OpenAiOptions::new(server.base_url(), "test-model")
        })
        .unwrap();
        let models = HashMap::from([("main".to_owned(), Arc::new(model) as Arc<dyn Model>)]);
        let rt = Runtime::new(store, models, ToolRegistry::builtin(), settings, ws);
        rt.set_state_provider(Arc::new(MemoryState::new(rt.store.clone())));
        let bots: Vec<BotRecord> = ["a1", "a2"]
            .into_iter()
            .map(|id| BotRecord {
                name: format!("{id}-name"),
                role: format!("Test bot {id}."),
                ..bot_record(id, "main", &["SendMessage", "Remember"])
            })
            .collect();
        let fleet = FleetHandle::start(rt, bots.clone()).await.unwrap();
        Self {
            _dir: dir,
            clock,
            fleet,
            bots,
        }
    }

    /// Sends `text` from alice to bot `n` (0: a1, 1: a2), waits (on the
    /// store's change signals, 30 s at most) until the turn answering it
    /// completed, and answers that turn's requests to the model.
    async fn turn(&self, server: &OpenAiServer, n: usize, text: &str) -> Vec<Value> {
        let store = self.fleet.store();
        let mut changes = store.subscribe();
        let before = server.request_count();
        let alice = UserId::new("alice").unwrap();
        let sent = self
            .fleet
            .admit(user_message(&alice, &self.bots[n], text, None))
            .await
            .unwrap();
        let AdmitOutcome::Accepted(input) = sent else {
            panic!("not admitted: {sent:?}");
        };
        loop {
            let entries = store.entries_after(input.session, 0, 1000).await.unwrap();
            let end = entries.iter().find_map(|e| match &e.kind {
                EntryKind::TurnEnd { status, inputs, .. } if inputs.contains(&input.seq) => {
                    Some(*status)
                }
                _ => None,
            });
            if let Some(status) = end {
                assert_eq!(status, TurnStatus::Completed, "{entries:#?}");
                break;
            }
            tokio::time::timeout(Duration::from_secs(30), changes.recv())
                .await
                .expect("the turn ended within 30 s")
                .ok();
        }
        server.requests()[before..]
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }
}

#[tokio::test]
async fn an_expired_note_leaves_the_system_message_at_its_expiry() {
    let server = OpenAiServer::builder()
        .responder(|b| model(b, &no_extraction))
        .start()
        .await;
    let fx = Clocked::start(&server).await;
    const TEA: &str = "Prefers tea over coffee";
    const NOTE: &str = "Waiting for the ACME invoice";
    const BERLIN: &str = "Lives in Berlin";
    fx.turn(&server, 0, &format!("remember: {TEA}")).await;
    fx.turn(&server, 0, &format!("note: {NOTE}")).await;

    // a2's first context has both in its system message
    let r = fx.turn(&server, 1, "hello").await;
    assert!(system(&r[0]).contains(TEA), "{}", system(&r[0]));
    assert!(system(&r[0]).contains(NOTE), "{}", system(&r[0]));
    let a2_system = system(&r[0]).to_owned();

    // half an hour on, a fact is added: the note is still live, the prefix
    // stays, the fact comes as an update
    fx.clock.advance_ms(30 * 60 * 1000);
    fx.turn(&server, 0, &format!("remember: {BERLIN}")).await;
    let r = fx.turn(&server, 1, "anything new?").await;
    assert_eq!(system(&r[0]), a2_system, "the prefix stays byte-identical");
    let last = r[0]["messages"].as_array().unwrap().last().unwrap();
    assert!(
        update_in(last).is_some_and(|u| u.contains(BERLIN)),
        "{last}"
    );

    // past the note's expiry (one hour): a2's system message is rebuilt
    // without it, and it is nowhere in the request
    fx.clock.advance_ms(30 * 60 * 1000 + 1);
    let r = fx.turn(&server, 1, "and now?").await;
    for body in &r {
        assert_ne!(system(body), a2_system, "the system message was refreshed");
        assert!(system(body).contains(TEA), "{}", system(body));
        assert!(system(body).contains(BERLIN), "{}", system(body));
        assert!(
            !body.to_string().contains(NOTE),
            "an expired note is nowhere in a2's request: {body}"
        );
    }
    fx.fleet.shutdown().await;
    server.shutdown().await;
}
