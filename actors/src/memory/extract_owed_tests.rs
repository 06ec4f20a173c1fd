//! Owed extractions: a completed turn owes its extraction in the very
//! transaction that ends it; at start they run again once and are
//! cleared; given up (and cleared, without asking the model) when their
//! bot is gone, they were cut off too often or the bot's model cannot
//! extract; a second run of a turn adds nothing twice.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryKind;
use botfleet_memory::Layer;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::OwedExtraction;
use botfleet_memory::Store;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;
use botfleet_memory::bot_scopes;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::MAX_RERUNS;
use super::resume_owed_extractions;
use super::spawn_extract_after_turn;
use crate::fleet::FleetHandle;
use crate::model::ChatMessage;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::Script;
use crate::model::ScriptedModel;
use crate::model::StreamSink;
use crate::model::ToolSpec;
use crate::tools::Effect;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolOutput;
use crate::tools::ToolRegistry;
use crate::tools::test_support::ToolFixture;
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::done;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_call;
use crate::tools::test_support::tool_step;
use crate::tools::test_support::turn_ended;

const FACT: &str = "Alice owns a red bicycle";
const SAID: &str = "I bought a red bicycle";

fn script() -> String {
    format!(
        r#"
[[rule]]
purpose = "extract"
match = "(?s)red bicycle"
steps = [{{ text = '{{"add": [{{"text": "{FACT}"}}]}}' }}]
"#
    )
}

/// The purposes the tests' own models answer: a bot's turns and its
/// fact extractions.
fn turns_and_extractions(purpose: Purpose) -> bool {
    matches!(purpose, Purpose::Turn | Purpose::Extract)
}

/// An extraction's answer that adds [`FACT`].
fn adds_fact() -> ModelResponse {
    ModelResponse {
        text: json!({ "add": [{ "text": FACT }] }).to_string(),
        ..done()
    }
}

fn owed(turn: TurnId, bot: &BotId, f: &ToolFixture) -> OwedExtraction {
    OwedExtraction {
        turn,
        bot: bot.clone(),
        session: f.scope.session.id,
        owner: f.bot.owner.clone(),
        shown: Vec::new(),
        user_texts: vec![SAID.into()],
        final_reply: "Nice bike!".into(),
        attempts: 0,
        created_at: 0,
    }
}

#[tokio::test]
async fn owed_extractions_run_again_once_or_are_given_up() {
    let mut f = ToolFixture::new();
    let model = ScriptedModel::new(Script::parse(&script(), "test").unwrap());
    f.rt.models.insert("p".into(), Arc::new(model));
    f.rt.settings.extract_memory = true;
    let (ok, gone, tired) = (TurnId::new_v7(), TurnId::new_v7(), TurnId::new_v7());
    let nobody = BotId::new("nobody").unwrap();
    let mut batch = vec![
        Mutation::UpsertBot(f.bot.clone()),
        Mutation::OweExtraction(Box::new(owed(ok, &f.bot.id, &f))),
        Mutation::OweExtraction(Box::new(owed(gone, &nobody, &f))),
        Mutation::OweExtraction(Box::new(owed(tired, &f.bot.id, &f))),
    ];
    for _ in 0..MAX_RERUNS {
        batch.push(Mutation::BumpExtraction { turn: tired });
    }
    let results = f.rt.store.write(batch).await.unwrap();
    assert_eq!(results.last(), Some(&MutationResult::Attempts(MAX_RERUNS)));
    let ToolFixture {
        _dir,
        rt,
        bot,
        scope,
        ..
    } = f;
    let rt = Arc::new(rt);

    let ran = resume_owed_extractions(Arc::clone(&rt)).await.unwrap();
    assert_eq!(ran, 1, "only the turn whose bot is there and not tired");
    let now = rt.store.clock().now_ms();
    let profile = |items: Vec<botfleet_memory::MemoryItem>| -> Vec<String> {
        items
            .into_iter()
            .filter(|i| i.layer == Layer::Profile)
            .map(|i| i.text)
            .collect()
    };
    let items = rt.store.memory_items(bot_scopes(&bot), now).await.unwrap();
    assert_eq!(profile(items), [FACT]);
    assert_eq!(rt.store.owed_extractions(10).await.unwrap(), []);
    assert_eq!(resume_owed_extractions(Arc::clone(&rt)).await.unwrap(), 0);

    // the same turn extracted once more (a re-run that raced its first
    // run's end) finds its fact and adds nothing
    let report = spawn_extract_after_turn(
        Arc::clone(&rt),
        bot.clone(),
        scope.session.id,
        ok,
        Vec::new(),
        vec![SAID.into()],
        "Nice bike!".into(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(report.added.is_empty(), "{report:?}");
    assert_eq!(report.unchanged.len(), 1, "{report:?}");
    let items = rt.store.memory_items(bot_scopes(&bot), now).await.unwrap();
    assert_eq!(profile(items), [FACT]);
    assert_eq!(rt.store.owed_extractions(10).await.unwrap(), []);
}

/// An extraction owed by a bot whose model has no extract rule (owed from
/// before its script lost it) is dropped without asking the model, which
/// would answer nothing and log a failure.
#[tokio::test]
async fn an_owed_extraction_of_a_model_that_cannot_extract_is_dropped() {
    let mut f = ToolFixture::new();
    let chat_only = "[[rule]]\nsteps = [{ text = \"hi\" }]\n";
    let model = ScriptedModel::new(Script::parse(chat_only, "test").unwrap());
    f.rt.models.insert("p".into(), Arc::new(model));
    f.rt.settings.extract_memory = true;
    let turn = TurnId::new_v7();
    let batch = vec![
        Mutation::UpsertBot(f.bot.clone()),
        Mutation::OweExtraction(Box::new(owed(turn, &f.bot.id, &f))),
    ];
    f.rt.store.write(batch).await.unwrap();
    let rt = Arc::new(f.rt);

    let ran = resume_owed_extractions(Arc::clone(&rt)).await.unwrap();
    assert_eq!(ran, 0, "the model was not asked");
    assert_eq!(rt.store.owed_extractions(10).await.unwrap(), []);
}

/// An extraction owed for a turn of the bot's owner (user `u`), whose
/// bot is bob's by the next start (fleet.toml changed its owner), is
/// dropped without asking the model: what `u` said must not reach bob's
/// memory, as a turn run after the change reads no message of `u`.
#[tokio::test]
async fn an_owed_extraction_of_a_bot_that_changed_hands_is_dropped() {
    let mut f = ToolFixture::new();
    let model = ScriptedModel::new(Script::parse(&script(), "test").unwrap());
    f.rt.models.insert("p".into(), Arc::new(model));
    f.rt.settings.extract_memory = true;
    let turn = TurnId::new_v7();
    let before = owed(turn, &f.bot.id, &f);
    assert_eq!(before.owner.as_str(), "u");
    let bobs_bot = BotRecord {
        owner: UserId::new("bob").unwrap(),
        ..f.bot.clone()
    };
    let batch = vec![
        Mutation::UpsertBot(f.bot.clone()),
        Mutation::OweExtraction(Box::new(before)),
        Mutation::UpsertBot(bobs_bot.clone()),
    ];
    f.rt.store.write(batch).await.unwrap();
    let rt = Arc::new(f.rt);

    let ran = resume_owed_extractions(Arc::clone(&rt)).await.unwrap();
    assert_eq!(ran, 0, "the model was not asked");
    assert_eq!(rt.store.owed_extractions(10).await.unwrap(), []);
    let now = rt.store.clock().now_ms();
    let items = rt
        .store
        .memory_items(bot_scopes(&bobs_bot), now)
        .await
        .unwrap();
    assert_eq!(items, [], "bob's bot's memory");
}

const REPLY: &str = "Nice bike!";

/// What the model of [`EndHeld`] is given to hold the store's writer
/// right after the commit that ends the turn.
struct Hold {
    /// Told once the writer is held.
    held: tokio::sync::oneshot::Sender<()>,
    /// Lets the writer go on (or its sender dropped).
    release: std::sync::mpsc::Receiver<()>,
}

/// A bot's model: its turn answers with SendMessage, then stops, and its
/// last step holds the store's writer right after the turn's end is
/// committed ([`EndHeld::hold_after_the_end`]); its extraction adds
/// [`FACT`].
#[derive(Default)]
struct EndHeld {
    calls: Mutex<usize>,
    /// Told when the extraction is asked.
    asked: tokio::sync::Notify,
    store: OnceLock<Store>,
    hold: Mutex<Option<Hold>>,
}

impl EndHeld {
    /// Holds the writer once it committed the batch the turn is about to
    /// send (the step's and the end's writes), before anything written
    /// after it, so that the test reads what that one transaction wrote:
    /// - a first write's continuation, on the writer's thread, blocks it
    ///   before the end's batch;
    /// - a task queues a second write and lets the first go: it runs when
    ///   the turn's task waits for its end's commit (the test's runtime
    ///   has one thread), so the end's batch is queued before it, and the
    ///   writer commits both in one group, then runs the second's
    ///   continuation, which holds it until the test releases it.
    ///
    /// Whatever the turn writes after its end (the old separate write of
    /// the owed extraction) waits behind the held writer.
    fn hold_after_the_end(&self) {
        let Some(Hold { held, release }) = self.hold.lock().unwrap().take() else {
            return;
        };
        let store = self.store.get().expect("the test sets the store").clone();
        let (open, gate) = std::sync::mpsc::channel::<()>();
        store
            .write_then(
                Vec::new(),
                Box::new(move |_| {
                    let _ = gate.recv();
                }),
            )
            .unwrap();
        tokio::spawn(async move {
            store
                .write_then(
                    Vec::new(),
                    Box::new(move |_| {
                        let _ = held.send(());
                        let _ = release.recv();
                    }),
                )
                .unwrap();
            let _ = open.send(());
        });
    }
}

#[async_trait]
impl Model for EndHeld {
    fn describe(&self) -> String {
        "end-held".into()
    }

    fn answers(&self, purpose: Purpose) -> bool {
        turns_and_extractions(purpose)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        if matches!(request.purpose, Purpose::Extract) {
            self.asked.notify_one();
            return Ok(adds_fact());
        }
        Ok(match next_call(&self.calls) {
            0 => tool_step("call-0", "SendMessage", json!({ "text": REPLY })),
            _ => {
                self.hold_after_the_end();
                done()
            }
        })
    }
}

/// The tester's gap: the owed record was a write of its own after the
/// turn's end, so a `kill -9` between the two lost the extraction for
/// good (the turn ended, nothing owed). Now it is one more row of the
/// end's batch: the store, held right after the commit that ends the
/// turn, shows the extraction owed, with what it reads; once the writer
/// goes on, the extraction runs and clears it.
#[tokio::test]
async fn a_completed_turn_owes_its_extraction_in_the_commit_that_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(EndHeld::default());
    let mut rt = fleet_runtime(dir.path(), model.clone(), ToolRegistry::builtin());
    rt.settings.extract_memory = true;
    model.store.set(rt.store.clone()).ok().unwrap();
    let (held_tx, held) = tokio::sync::oneshot::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    *model.hold.lock().unwrap() = Some(Hold {
        held: held_tx,
        release: release_rx,
    });
    let bot = alices_bot(&["SendMessage"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let store = fleet.store().clone();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, SAID, None);
    let session = req.entry.session;
    fleet.admit(req).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), held)
        .await
        .expect("the writer was not held after the turn's end")
        .unwrap();

    // the writer commits nothing more: this is the end's transaction
    let entries = store.entries_after(session, 0, 1000).await.unwrap();
    let (turn, status) = entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::TurnEnd { status, .. } => Some((e.turn.unwrap(), *status)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the turn's end is not committed: {entries:#?}"));
    assert_eq!(status, TurnStatus::Completed);
    let owed = store.owed_extractions(10).await.unwrap();
    let owed: Vec<(TurnId, UserId, Vec<String>, String)> = owed
        .into_iter()
        .map(|o| (o.turn, o.owner, o.user_texts, o.final_reply))
        .collect();
    assert_eq!(
        owed,
        [(turn, alice, vec![SAID.to_owned()], REPLY.to_owned())],
        "the extraction is owed in the commit that ends the turn"
    );

    release.send(()).unwrap();
    // the extraction runs (it writes no owed row of its own) and clears it
    extracted(&fleet, &model.asked, &bot).await;
    fleet.shutdown().await;
}

/// Waits until the extraction its model was asked for (`asked`) has
/// ended, then checks that it added [`FACT`] to `bot`'s profile and is no
/// longer owed. No poll: the model tells when it was asked, which is
/// after the extraction counted itself running, and the running count
/// falls only once its outcome is written.
async fn extracted(fleet: &FleetHandle, asked: &tokio::sync::Notify, bot: &BotRecord) {
    let ended = async {
        asked.notified().await;
        fleet.runtime().extractions.idle().await;
    };
    tokio::time::timeout(Duration::from_secs(30), ended)
        .await
        .expect("the extraction did not end");
    let store = fleet.store();
    let now = store.clock().now_ms();
    let facts: Vec<String> = store
        .memory_items(bot_scopes(bot), now)
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.layer == Layer::Profile)
        .map(|i| i.text)
        .collect();
    let owed = store.owed_extractions(10).await.unwrap();
    assert!(
        facts == [FACT] && owed.is_empty(),
        "the extraction did not end: facts {facts:?}, owed {owed:?}"
    );
}

/// A tool whose first run dies (the turn's task panics, and its bot
/// resumes the turn at once, as a restarted host does).
struct DiesOnce {
    runs: AtomicUsize,
}

#[async_trait]
impl Tool for DiesOnce {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Look".into(),
            description: "Look it up.".into(),
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
        false
    }

    async fn call(&self, _ctx: &ToolContext<'_>, _args: Value) -> Result<ToolOutput, ToolError> {
        if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("the turn dies in the middle of the call");
        }
        Ok(ToolOutput::text("a kayak"))
    }
}

/// A bot's model: its turn calls Look, then answers with SendMessage and
/// stops; its extraction keeps what it was asked and adds [`FACT`].
#[derive(Default)]
struct LooksFirst {
    calls: Mutex<usize>,
    asked: Mutex<Vec<String>>,
    /// Told when the extraction is asked.
    extracting: tokio::sync::Notify,
}

#[async_trait]
impl Model for LooksFirst {
    fn describe(&self) -> String {
        "looks-first".into()
    }

    fn answers(&self, purpose: Purpose) -> bool {
        turns_and_extractions(purpose)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        if matches!(request.purpose, Purpose::Extract) {
            let asked = serde_json::to_string(&request.messages).unwrap();
            self.asked.lock().unwrap().push(asked);
            self.extracting.notify_one();
            return Ok(adds_fact());
        }
        let answered = request
            .messages
            .iter()
            .any(|m| matches!(m, ChatMessage::Tool { content, .. } if content == "a kayak"));
        let sent = request.messages.iter().any(|m| {
            matches!(m, ChatMessage::Assistant { tool_calls, .. }
                if tool_calls.iter().any(|c| c.name == "SendMessage"))
        });
        let n = next_call(&self.calls);
        Ok(match (answered, sent) {
            (false, _) => tool_step(&format!("look-{n}"), "Look", json!({})),
            (true, false) => tool_step(
                &format!("send-{n}"),
                "SendMessage",
                json!({ "text": REPLY }),
            ),
            (true, true) => done(),
        })
    }
}

/// A turn resumed after its task died has no texts gathered as it ran:
/// its end reads them back from the store (the owner's message, the
/// delivery made after the resume) and owes the extraction with them.
#[tokio::test]
async fn a_resumed_turn_owes_its_extraction_with_the_texts_it_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(LooksFirst::default());
    let mut tools = ToolRegistry::builtin();
    tools.register(Arc::new(DiesOnce {
        runs: AtomicUsize::new(0),
    }));
    let mut rt = fleet_runtime(dir.path(), model.clone(), tools);
    rt.settings.extract_memory = true;
    let bot = alices_bot(&["SendMessage", "Look"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let store = fleet.store().clone();
    let alice = UserId::new("alice").unwrap();
    let req = crate::protocol::user_message(&alice, &bot, SAID, None);
    let session = req.entry.session;
    fleet.admit(req).await.unwrap();

    let entries = turn_ended(&store, session).await;
    let ended = entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::TurnEnd { status, .. } => Some(*status),
            _ => None,
        })
        .unwrap();
    assert_eq!(ended, TurnStatus::Completed, "{entries:#?}");
    extracted(&fleet, &model.extracting, &bot).await;
    let asked = model.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "asked once: {asked:#?}");
    assert!(asked[0].contains(SAID), "{}", asked[0]);
    assert!(asked[0].contains(REPLY), "{}", asked[0]);
    fleet.shutdown().await;
}
