//! What every actor of a fleet shares: the store, the models, the tools,
//! the settings, the owners' workspaces, and admission (so that any actor can hand
//! an input to another bot the same way the API does).

use std::collections::HashMap;
use std::sync::Arc;

use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmitRequest;
use botfleet_memory::AdmittedRecord;
use botfleet_memory::Entry;
use botfleet_memory::InboxItem;
use botfleet_memory::IndexerArgs;
use botfleet_memory::IndexerMsg;
use botfleet_memory::Limit;
use botfleet_memory::Limited;
use botfleet_memory::MemoryHub;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::TranscriptIndex;
use botfleet_memory::WriteLimit;
use parking_lot::RwLock;
use ractor::ActorRef;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::bot_queue::QueuedInput;
use crate::error::ActorError;
use crate::error::Result;
use crate::group::GroupRegistry;
use crate::model::Model;
use crate::router::RouterMsg;
use crate::settings::FleetSettings;
use crate::tools::ToolRegistry;
use crate::tools::Workspace;
use crate::tools::Workspaces;

/// The long-lived state block of a bot's prompt (its memory snapshot and
/// the like), with a hash that says when it changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateBlock {
    /// Rendered text (information, never instructions).
    pub text: String,
    /// Hash of the text.
    pub hash: [u8; 32],
    /// Ids of the facts shown (fact extraction may only remove those).
    pub shown: Vec<String>,
}

/// Supplies the long-lived state block of a bot's prompt.
#[async_trait::async_trait]
pub trait StateProvider: Send + Sync + 'static {
    /// The state block for `bot` answering `input` (empty when there is
    /// nothing to show), with what `reach` allows.
    async fn state_block(
        &self,
        bot: &botfleet_memory::BotRecord,
        input: &str,
        reach: MemoryReach,
    ) -> StateBlock;
}

/// Which of a bot's memory a turn's prompt may show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryReach {
    /// Every scope the bot reads: its own, its owner's, its projects'.
    All,
    /// Only what the bot remembered in this room (id), a room shared with
    /// other people's bots: not its owner's or its projects' memory, nor
    /// its own written elsewhere (what a person told it in private), as
    /// the room does not get the owner's files and transcripts
    /// (docs/security.md, docs/memory.md).
    SharedRoom(String),
}

/// Shared context of a running fleet. Read-only after start, except the
/// router handle, which the fleet supervisor replaces if the router restarts.
pub struct Runtime {
    /// The store.
    pub store: Store,
    /// Model providers by name (as in fleet.toml).
    pub models: HashMap<String, Arc<dyn Model>>,
    /// Every tool the host offers.
    pub tools: ToolRegistry,
    /// Settings.
    pub settings: FleetSettings,
    /// The workspaces of files and Shell, one per owner (a bot's is
    /// [`ToolContext::workspace`](crate::tools::ToolContext::workspace)).
    pub workspaces: Workspaces,
    /// Memory writes (one actor per active scope instance).
    pub memory: MemoryHub,
    /// Group rooms: the rooms supervisor and its watch table.
    pub groups: GroupRegistry,
    /// Fact extractions running in the background (a clean shutdown
    /// waits a little for them).
    pub extractions: crate::memory::Extractions,
    /// What the tool gate shares across bots: file locks, surface policy.
    pub safety: crate::tools::gate::Safety,
    /// The tokens running turns used and have not stored yet, for the
    /// daily budget of their family (`engine/budget.rs`).
    pub(crate) running_budget: crate::engine::RunningTurns,
    /// The current router (set by the fleet supervisor).
    router: RwLock<Option<ActorRef<RouterMsg>>>,
    /// Where the prompt's long-lived state block comes from (memory).
    state: RwLock<Option<Arc<dyn StateProvider>>>,
    /// Transcript recall: the index searches read and the indexer the
    /// fleet supervisor runs over it.
    recall: RwLock<Recall>,
    /// Secrets declared in the fleet file.
    vault: RwLock<Arc<crate::vault::Vault>>,
    /// Cancelled when the host begins to stop ([`Runtime::stop_turns`]):
    /// from then on no turn starts, and a running turn's task is dropped
    /// where it waits (`bot_turns.rs`).
    stopping: CancellationToken,
}

/// Transcript recall as the runtime holds it.
#[derive(Default)]
struct Recall {
    /// The index searches read (SearchTranscript, the API).
    index: Option<TranscriptIndex>,
    /// How the fleet supervisor (re)starts the indexer; `None`: no indexer.
    args: Option<IndexerArgs>,
    /// The running indexer (set by the fleet supervisor).
    indexer: Option<ActorRef<IndexerMsg>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("store", &self.store)
            .field("models", &self.models.keys().collect::<Vec<_>>())
            .field("tools", &self.tools)
            .finish()
    }
}

impl Runtime {
    /// A runtime; the fleet sets its router when it starts. `workspace` is
    /// the fleet's root: each owner's bots work in `<root>/<owner id>/`.
    pub fn new(
        store: Store,
        models: HashMap<String, Arc<dyn Model>>,
        tools: ToolRegistry,
        settings: FleetSettings,
        workspace: Workspace,
    ) -> Self {
        // the schemas the model sees state the limits the calls apply
        let mut tools = tools;
        tools.apply_limits(&settings.tool_limits);
        Self {
            memory: MemoryHub::new(store.clone()),
            store,
            models,
            tools,
            settings,
            workspaces: Workspaces::new(workspace),
            groups: GroupRegistry::default(),
            extractions: crate::memory::Extractions::default(),
            safety: crate::tools::gate::Safety::default(),
            running_budget: crate::engine::RunningTurns::default(),
            router: RwLock::new(None),
            state: RwLock::new(None),
            recall: RwLock::new(Recall::default()),
            vault: RwLock::new(Arc::new(crate::vault::Vault::default())),
            stopping: CancellationToken::new(),
        }
    }

    /// The host begins to stop: from now on no turn starts, so no model
    /// request is made for one, and each running turn's task is dropped
    /// where it waits (a model call, a tool, a write), at once rather than
    /// when the store closes (before, turns kept calling their models and
    /// their bots kept starting new ones for as long as the rest of the
    /// stop took: 20–30 s under load). What a turn committed stays; it is
    /// still `running` in the store and resumes from its last step at the
    /// next start, as after a crash (the store's clean close takes its
    /// start back, so the stop does not count against
    /// `runtime.max_turn_attempts`). Inputs no turn has committed stay
    /// pending in the inbox for the next start. Cannot be undone.
    pub fn stop_turns(&self) {
        self.stopping.cancel();
    }

    /// Whether the host is stopping ([`Runtime::stop_turns`]).
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Cancelled when the host begins to stop (a turn's task waits on it).
    pub(crate) fn stopping(&self) -> CancellationToken {
        self.stopping.clone()
    }

    /// Sets the fleet file's secrets.
    pub fn set_vault(&self, vault: crate::vault::Vault) {
        *self.vault.write() = Arc::new(vault);
    }

    /// The fleet's secrets as they stand (for [`crate::vault::Vault::host_redactor`]).
    pub fn vault(&self) -> Arc<crate::vault::Vault> {
        self.vault.read().clone()
    }

    /// The secrets `bot` may use now.
    pub async fn secrets_for(
        &self,
        bot: &botfleet_memory::BotRecord,
    ) -> std::result::Result<crate::vault::BotSecrets, StoreError> {
        let vault = self.vault.read().clone();
        vault.for_bot(&self.store, bot).await
    }

    /// Makes `index` searchable by tools (SearchTranscript, ReadTranscript)
    /// and the API, without running an indexer (tests, read-only hosts).
    pub fn set_transcript_index(&self, index: TranscriptIndex) {
        self.recall.write().index = Some(index);
    }

    /// Makes `args.index` searchable and has the fleet supervisor run an
    /// [`IndexerActor`](botfleet_memory::IndexerActor) over it, restarted
    /// if it fails. Call it before [`FleetHandle::start`](crate::FleetHandle::start).
    pub fn set_indexer(&self, args: IndexerArgs) {
        let mut recall = self.recall.write();
        recall.index = Some(args.index.clone());
        recall.args = Some(args);
    }

    /// The transcript index, if recall is set up.
    pub fn transcript_index(&self) -> Option<TranscriptIndex> {
        self.recall.read().index.clone()
    }

    /// The running indexer, if any (e.g. to
    /// [`flush`](botfleet_memory::IndexerActor::flush) it).
    pub fn indexer(&self) -> Option<ActorRef<IndexerMsg>> {
        self.recall.read().indexer.clone()
    }

    /// What the fleet supervisor starts the indexer with.
    pub(crate) fn indexer_args(&self) -> Option<IndexerArgs> {
        self.recall.read().args.clone()
    }

    /// Records the running indexer (the fleet supervisor).
    pub(crate) fn set_indexer_ref(&self, indexer: Option<ActorRef<IndexerMsg>>) {
        self.recall.write().indexer = indexer;
    }

    /// Sets the source of the long-lived state block (memory).
    pub fn set_state_provider(&self, provider: Arc<dyn StateProvider>) {
        *self.state.write() = Some(provider);
    }

    /// The long-lived state block of `bot` for `input`.
    pub async fn state_block(
        &self,
        bot: &botfleet_memory::BotRecord,
        input: &str,
        reach: MemoryReach,
    ) -> StateBlock {
        let provider = self.state.read().clone();
        match provider {
            Some(p) => p.state_block(bot, input, reach).await,
            None => StateBlock::default(),
        }
    }

    pub(crate) fn set_router(&self, router: ActorRef<RouterMsg>) {
        *self.router.write() = Some(router);
    }

    /// The current router.
    pub fn router(&self) -> Result<ActorRef<RouterMsg>> {
        self.router
            .read()
            .clone()
            .ok_or(ActorError::ActorGone("router"))
    }

    /// Admits an input: the ledger decides, the entry and the inbox row are
    /// written in the same transaction, and an accepted input is routed to
    /// its bot in commit order. Answers after the commit.
    pub async fn admit(&self, req: AdmitRequest) -> Result<AdmitOutcome> {
        let router = self.router()?;
        let priority = req.priority;
        let entry = req.entry.clone();
        let (tx, rx) = oneshot::channel();
        self.store.write_then(
            vec![Mutation::Admit(Box::new(req))],
            Box::new(move |result| {
                let outcome = result.and_then(|mut v| match v.pop() {
                    Some(MutationResult::Admitted(o)) => Ok(o),
                    other => Err(StoreError::Rejected(format!(
                        "unexpected admission result {other:?}"
                    ))),
                });
                if let Ok(AdmitOutcome::Accepted(rec)) = &outcome {
                    route(&router, rec, priority, entry);
                }
                let _ = tx.send(outcome);
            }),
        )?;
        Ok(rx
            .await
            .map_err(|_| ActorError::ActorGone("store writer"))??)
    }

    /// Like [`Runtime::admit`], with other writes committed in the same
    /// transaction before the admission: if any of them fails, nothing is
    /// written and nothing is routed (e.g. an approval decision and the
    /// event that tells the bot). Returns their results and the outcome.
    pub async fn admit_after(
        &self,
        before: Vec<Mutation>,
        req: AdmitRequest,
    ) -> Result<(Vec<MutationResult>, AdmitOutcome)> {
        self.admit_after_within(before, req, None)
            .await?
            .ok_or_else(|| {
                StoreError::Rejected("an admission with no limit was refused".into()).into()
            })
    }

    /// [`Runtime::admit_after`], all of it written only while `bound` (if
    /// any) has room, checked by the writer in the transaction that would
    /// write it (two decisions at once cannot both pass a limit a read let
    /// through each: QA, 2026-12-05): `None`, and nothing written, when
    /// it has none.
    pub async fn admit_after_within(
        &self,
        mut before: Vec<Mutation>,
        req: AdmitRequest,
        bound: Option<WriteLimit>,
    ) -> Result<Option<(Vec<MutationResult>, AdmitOutcome)>> {
        let router = self.router()?;
        let priority = req.priority;
        let entry = req.entry.clone();
        before.push(Mutation::Admit(Box::new(req)));
        let bounded = bound.is_some();
        let batch = match bound {
            Some(bound) => vec![Mutation::Limited(Box::new(Limited {
                limits: vec![Limit {
                    bound,
                    refused: Vec::new(),
                }],
                within: before,
            }))],
            None => before,
        };
        let (tx, rx) = oneshot::channel();
        self.store.write_then(
            batch,
            Box::new(move |result| {
                let outcome = result.and_then(|mut v| {
                    // a bounded batch answers one `Limited` holding the rest
                    if bounded {
                        match v.pop() {
                            Some(MutationResult::Limited {
                                refused: Some(_), ..
                            }) => return Ok(None),
                            Some(MutationResult::Limited { results, .. }) => v = results,
                            other => {
                                return Err(StoreError::Rejected(format!(
                                    "unexpected bounded admission result {other:?}"
                                )));
                            }
                        }
                    }
                    match v.pop() {
                        Some(MutationResult::Admitted(o)) => Ok(Some((v, o))),
                        other => Err(StoreError::Rejected(format!(
                            "unexpected admission result {other:?}"
                        ))),
                    }
                });
                if let Ok(Some((_, AdmitOutcome::Accepted(rec)))) = &outcome {
                    route(&router, rec, priority, entry);
                }
                let _ = tx.send(outcome);
            }),
        )?;
        Ok(rx
            .await
            .map_err(|_| ActorError::ActorGone("store writer"))??)
    }

    /// Routes inputs that a turn admitted inside its own batch (e.g.
    /// SendToAgent), after that batch committed. `batch_entries` are the
    /// `(priority, entry)` of each `Admit` of the batch, in order.
    pub(crate) fn route_committed(&self, admitted: Vec<(AdmittedRecord, Priority, NewEntry)>) {
        let Ok(router) = self.router() else {
            // the inputs are in the inbox; recovery routes them
            return;
        };
        for (rec, priority, entry) in admitted {
            route(&router, &rec, priority, entry);
        }
    }
}

fn route(router: &ActorRef<RouterMsg>, rec: &AdmittedRecord, priority: Priority, entry: NewEntry) {
    let input = QueuedInput {
        item: InboxItem {
            bot: rec.bot.clone(),
            gid: rec.gid,
            session: rec.session,
            seq: rec.seq,
            priority,
        },
        entry: Some(Entry {
            id: entry.id,
            session: entry.session,
            seq: rec.seq,
            gid: rec.gid,
            author: entry.author,
            turn: entry.turn,
            created_at: rec.admitted_at,
            kind: entry.kind,
        }),
    };
    if router.cast(RouterMsg::Route(Box::new(input))).is_err() {
        // the input is in the inbox; recovery will route it
        tracing::warn!("router gone while routing an admitted input");
    }
}
