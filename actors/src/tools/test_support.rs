//! A runtime for tool unit tests: a store and a workspace in a temp dir,
//! one bot, and a DM scope. Also the parts shared by unit tests that go
//! through the fleet's messages with a scripted model: the fleet's
//! runtime, its bot, the model's steps, and waiting on store changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Change;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::TurnId;
use botfleet_memory::UserId;
use serde_json::Value;
use serde_json::json;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::Runner;
use super::ToolContext;
use super::ToolRegistry;
use super::TurnScope;
use super::Workspace;
use crate::model::FinishReason;
use crate::model::Model;
use crate::model::ModelResponse;
use crate::model::ToolCall;
use crate::runtime::Runtime;
use crate::settings::FleetSettings;

/// Everything a tool call needs, owned.
pub(crate) struct ToolFixture {
    pub _dir: tempfile::TempDir,
    pub rt: Runtime,
    pub bot: BotRecord,
    pub scope: TurnScope,
    pub turn: TurnId,
    pub cancel: CancellationToken,
    pub secrets: crate::vault::BotSecrets,
}

impl ToolFixture {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(&dir.path().join("ws")).unwrap();
        let store = Store::open(StoreOptions::new(dir.path().join("db.sqlite"))).unwrap();
        let settings = FleetSettings::new(ws.root().to_path_buf());
        let rt = Runtime::new(store, HashMap::new(), ToolRegistry::builtin(), settings, ws);
        let bot = BotRecord {
            id: BotId::new("b").unwrap(),
            name: "B".into(),
            owner: UserId::new("u").unwrap(),
            role: String::new(),
            provider: "p".into(),
            tools: vec![],
            settings: json!({}),
            origin: "test".into(),
            created_at: 0,
            updated_at: 0,
        };
        let key = SessionKey {
            bot: bot.id.clone(),
            kind: SessionKind::Dm,
            peer: "u".into(),
        };
        let scope = TurnScope {
            session: SessionRecord {
                id: key.id(),
                key,
                owner: bot.owner.clone(),
                epoch: 0,
                last_seq: 0,
                created_at: 0,
            },
            runner: Runner::Main,
            hop: 0,
            reply_to: Vec::new(),
            chain: None,
        };
        Self {
            _dir: dir,
            rt,
            bot,
            scope,
            turn: TurnId::new_v7(),
            cancel: CancellationToken::new(),
            secrets: crate::vault::BotSecrets::default(),
        }
    }

    /// A context for call `call_id`.
    pub(crate) fn ctx<'a>(&'a self, call_id: &'a str) -> ToolContext<'a> {
        ToolContext {
            rt: &self.rt,
            bot: &self.bot,
            scope: &self.scope,
            turn: self.turn,
            call_id,
            cancel: &self.cancel,
            interrupt: &self.cancel,
            secrets: &self.secrets,
            step_effects: &[],
            delivered_before: 0,
            turn_tokens: 0,
            inputs: &[],
            result_cap_tokens: u64::MAX,
            memory_shown: crate::tools::ShownMemory::default(),
        }
    }

    /// The bot's workspace (its owner's).
    pub(crate) fn ws(&self) -> &Workspace {
        self.rt.workspaces.for_owner(&self.bot.owner)
    }
}

/// The runtime of a fleet over a store and a workspace in `dir` (a second
/// call over the same `dir` is the host restarted): provider `p` is
/// `model`, the tools are `tools`, a message starts its turn at once and
/// no memory is extracted after it.
pub(crate) fn fleet_runtime(dir: &Path, model: Arc<dyn Model>, tools: ToolRegistry) -> Runtime {
    fleet_runtime_on(
        dir,
        model,
        tools,
        StoreOptions::new(dir.join("db.sqlite")).clock,
    )
}

/// [`fleet_runtime`] on a store whose clock is `clock` (a test's
/// `ManualClock`).
pub(crate) fn fleet_runtime_on(
    dir: &Path,
    model: Arc<dyn Model>,
    tools: ToolRegistry,
    clock: Arc<dyn botfleet_memory::Clock>,
) -> Runtime {
    let ws = Workspace::open(&dir.join("ws")).unwrap();
    let store = Store::open(StoreOptions {
        clock,
        ..StoreOptions::new(dir.join("db.sqlite"))
    })
    .unwrap();
    let mut settings = FleetSettings::new(ws.root().to_path_buf());
    settings.debounce = Duration::ZERO;
    settings.extract_memory = false;
    let models = HashMap::from([("p".to_owned(), model)]);
    Runtime::new(store, models, tools, settings, ws)
}

impl ToolFixture {
    /// Subagent `sub` of the fixture's bot with `status`, its task
    /// admitted in its task session and a turn over it started: its id and
    /// that turn.
    pub(crate) async fn subagent_task_started(
        &self,
        sub: &str,
        status: botfleet_memory::SubagentStatus,
    ) -> (BotId, TurnId) {
        use botfleet_memory::AdmitRequest;
        use botfleet_memory::EntryId;
        use botfleet_memory::InputDigest;
        use botfleet_memory::Mutation;
        use botfleet_memory::NewEntry;
        use botfleet_memory::Priority;
        use botfleet_memory::SubagentRecord;

        let id = BotId::new(sub).unwrap();
        let mut record = bot_record(sub, sub, &self.bot.owner, &["SendMessage"]);
        record.origin = format!("subagent:{}", self.bot.id);
        let key = super::subagents::subagent_session(&id, &self.bot.id);
        self.rt
            .store
            .write(vec![
                Mutation::UpsertBot(record),
                Mutation::CreateSubagent(SubagentRecord {
                    id: id.clone(),
                    parent: self.bot.id.clone(),
                    parent_session: self.scope.session.id,
                    description: "a task".into(),
                    status,
                    result: None,
                    created_at: 0,
                    updated_at: 0,
                }),
                Mutation::Admit(Box::new(AdmitRequest {
                    source: format!("bot:{}", self.bot.id),
                    nonce: format!("task-{sub}"),
                    nonce_time_ms: None,
                    digest: InputDigest::of_parts([sub.as_bytes()]),
                    session: key.clone(),
                    owner: self.bot.owner.clone(),
                    entry: NewEntry {
                        id: EntryId::new_v7(),
                        session: key.id(),
                        author: self.bot.id.to_string(),
                        turn: None,
                        kind: EntryKind::UserMessage {
                            text: "the task".into(),
                        },
                    },
                    priority: Priority::UserDm,
                })),
            ])
            .await
            .unwrap();
        let inputs = self.rt.store.pending_inbox(&id).await.unwrap();
        let turn = TurnId::new_v7();
        self.rt
            .store
            .write(vec![Mutation::StartTurn {
                turn,
                bot: id.clone(),
                session: key.id(),
                inputs: inputs.iter().map(|i| i.gid).collect(),
                checkpoint: json!({}),
                started_at: 0,
            }])
            .await
            .unwrap();
        (id, turn)
    }
}

/// Bot `b` ("B") of alice on provider `p`, with `tools`.
pub(crate) fn alices_bot(tools: &[&str]) -> BotRecord {
    bot_record("b", "B", &UserId::new("alice").unwrap(), tools)
}

/// Bot `id` named `name` of `owner` on provider `p`, with `tools`.
pub(crate) fn bot_record(id: &str, name: &str, owner: &UserId, tools: &[&str]) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: name.into(),
        owner: owner.clone(),
        role: String::new(),
        provider: "p".into(),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        settings: json!({}),
        origin: "test".into(),
        created_at: 0,
        updated_at: 0,
    }
}

/// Which call of a scripted model this is, counting from 0 (`calls` holds
/// how many came before): such models answer by their place in the turn.
pub(crate) fn next_call(calls: &Mutex<usize>) -> usize {
    let mut calls = calls.lock().unwrap();
    *calls += 1;
    *calls - 1
}

/// A model's step that calls tool `name` with `arguments`, as call `id`.
pub(crate) fn tool_step(id: &str, name: &str, arguments: Value) -> ModelResponse {
    ModelResponse {
        reasoning: None,
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.to_string(),
        }],
        finish: FinishReason::ToolCalls,
        usage: None,
    }
}

/// A model's last step: the plain answer "done".
pub(crate) fn done() -> ModelResponse {
    ModelResponse {
        reasoning: None,
        text: "done".into(),
        tool_calls: Vec::new(),
        finish: FinishReason::Stop,
        usage: None,
    }
}

/// Waits for the store's next change: every new entry or turn signals
/// one, so a test looks again at what it waits for after each. Panics
/// with `what` after 30 s without one (a hung test fails instead of
/// hanging), and if the store closed.
pub(crate) async fn next_change(changes: &mut broadcast::Receiver<Change>, what: &str) {
    let change = tokio::time::timeout(Duration::from_secs(30), changes.recv())
        .await
        .expect(what);
    if let Err(broadcast::error::RecvError::Closed) = change {
        panic!("the store closed");
    }
}

/// The entries of `session` once a turn has ended there.
pub(crate) async fn turn_ended(store: &Store, session: SessionId) -> Vec<Entry> {
    turns_ended(store, session, 1).await
}

/// The entries of `session` once `n` turns have ended there.
pub(crate) async fn turns_ended(store: &Store, session: SessionId, n: usize) -> Vec<Entry> {
    let mut changes = store.subscribe();
    loop {
        let entries = store.entries_after(session, 0, 1000).await.unwrap();
        if ends(&entries).len() >= n {
            return entries;
        }
        next_change(&mut changes, "no turn ended within 30 s").await;
    }
}

/// How the turns of `entries` ended, in order.
pub(crate) fn ends(entries: &[Entry]) -> Vec<botfleet_memory::TurnStatus> {
    entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::TurnEnd { status, .. } => Some(*status),
            _ => None,
        })
        .collect()
}

/// The texts delivered in `entries`, in order.
pub(crate) fn deliveries(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Delivery { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

thread_local! {
    /// What [`between_check_and_open`] runs once, on this test's thread.
    static BETWEEN: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { std::cell::RefCell::new(None) };
}

/// Called by the file tools and auto-review's script reader after a path
/// is checked by name, before it is opened: runs the hook a test set with
/// [`swap_between_check_and_open`], if any (a directory swapped for a
/// symlink there is the race `workspace_beneath.rs` closes).
pub(crate) fn between_check_and_open() {
    if let Some(hook) = BETWEEN.with_borrow_mut(Option::take) {
        hook();
    }
}

/// Runs `hook` at the next [`between_check_and_open`] on this thread.
pub(crate) fn swap_between_check_and_open(hook: impl FnOnce() + 'static) {
    BETWEEN.with_borrow_mut(|h| *h = Some(Box::new(hook)));
}

/// Whether a hook set with [`swap_between_check_and_open`] has not run.
pub(crate) fn swap_pending() -> bool {
    BETWEEN.with_borrow(Option::is_some)
}
