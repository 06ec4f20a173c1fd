//! What every actor of a fleet shares: the store, the models, the tools,
//! the settings, the workspace, and admission (so that any actor can hand
//! an input to another bot the same way the API does).

use std::collections::HashMap;
use std::sync::Arc;

use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmitRequest;
use botfleet_memory::AdmittedRecord;
use botfleet_memory::Entry;
use botfleet_memory::InboxItem;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use parking_lot::RwLock;
use ractor::ActorRef;
use tokio::sync::oneshot;

use crate::bot_queue::QueuedInput;
use crate::error::ActorError;
use crate::error::Result;
use crate::model::Model;
use crate::router::RouterMsg;
use crate::settings::FleetSettings;
use crate::tools::ToolRegistry;
use crate::tools::Workspace;

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
    /// The workspace of files and Shell.
    pub workspace: Workspace,
    /// The current router (set by the fleet supervisor).
    router: RwLock<Option<ActorRef<RouterMsg>>>,
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
    /// A runtime; the fleet sets its router when it starts.
    pub fn new(
        store: Store,
        models: HashMap<String, Arc<dyn Model>>,
        tools: ToolRegistry,
        settings: FleetSettings,
        workspace: Workspace,
    ) -> Self {
        Self {
            store,
            models,
            tools,
            settings,
            workspace,
            router: RwLock::new(None),
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
