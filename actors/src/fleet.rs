//! The Fleet: root supervisor of a running fleet, and [`FleetHandle`], the
//! surface the host (HTTP API, CLI) drives it through.

use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::InboxItem;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use parking_lot::RwLock;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::SupervisionEvent;
use tokio::sync::oneshot;

use crate::bot::BotStatus;
use crate::bot_queue::QueuedInput;
use crate::error::ActorError;
use crate::error::Result;
use crate::router::RouterActor;
use crate::router::RouterMsg;
use crate::runtime::Runtime;

/// The root supervisor: it owns the router and restarts it if it fails.
#[derive(Debug, Clone, Copy, Default)]
pub struct FleetActor;

/// Messages of the fleet supervisor.
#[derive(Debug)]
pub enum FleetMsg {
    /// Wake every bot that has pending inputs or unfinished turns.
    Recover,
}

/// State of the fleet supervisor.
pub struct FleetState {
    rt: Arc<Runtime>,
    router: Arc<RwLock<ActorRef<RouterMsg>>>,
}

/// Start arguments of the fleet supervisor.
pub struct FleetArgs {
    rt: Arc<Runtime>,
    router: Arc<RwLock<Option<ActorRef<RouterMsg>>>>,
}

impl Actor for FleetActor {
    type Msg = FleetMsg;
    type State = FleetState;
    type Arguments = FleetArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<FleetMsg>,
        args: FleetArgs,
    ) -> Result<FleetState, ActorProcessingErr> {
        let (router, _) =
            Actor::spawn_linked(None, RouterActor, args.rt.clone(), myself.get_cell()).await?;
        *args.router.write() = Some(router.clone());
        Ok(FleetState {
            rt: args.rt,
            router: Arc::new(RwLock::new(router)),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<FleetMsg>,
        msg: FleetMsg,
        state: &mut FleetState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            FleetMsg::Recover => {
                let bots = state.rt.store.bots_with_work().await?;
                if !bots.is_empty() {
                    tracing::info!(count = bots.len(), "waking bots with unfinished work");
                }
                let router = state.router.read().clone();
                for bot in bots {
                    let _ = router.cast(RouterMsg::Wake(bot));
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<FleetMsg>,
        event: SupervisionEvent,
        state: &mut FleetState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, error) => {
                tracing::error!(actor = %cell.get_id(), %error, "router failed; restarting it");
                let (router, _) =
                    Actor::spawn_linked(None, RouterActor, state.rt.clone(), myself.get_cell())
                        .await?;
                *state.router.write() = router;
                let _ = myself.cast(FleetMsg::Recover);
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                tracing::debug!(actor = %cell.get_id(), ?reason, "child of the fleet stopped");
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }
}

/// Handle to a running fleet; cheap to clone.
#[derive(Clone)]
pub struct FleetHandle {
    rt: Arc<Runtime>,
    fleet: ActorRef<FleetMsg>,
    router: Arc<RwLock<Option<ActorRef<RouterMsg>>>>,
}

impl std::fmt::Debug for FleetHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetHandle").field("rt", &self.rt).finish()
    }
}

impl FleetHandle {
    /// Registers the configured bots, starts the supervisor tree and wakes
    /// every bot with unfinished work (crash recovery).
    pub async fn start(rt: Runtime, bots: Vec<BotRecord>) -> Result<Self> {
        let rt = Arc::new(rt);
        if !bots.is_empty() {
            rt.store
                .write(bots.into_iter().map(Mutation::UpsertBot).collect())
                .await?;
        }
        let router = Arc::new(RwLock::new(None));
        let args = FleetArgs {
            rt: rt.clone(),
            router: router.clone(),
        };
        let (fleet, _) =
            Actor::spawn(None, FleetActor, args)
                .await
                .map_err(|e| ActorError::Spawn {
                    what: "fleet",
                    detail: e.to_string(),
                })?;
        let _ = fleet.cast(FleetMsg::Recover);
        Ok(Self { rt, fleet, router })
    }

    /// The shared runtime.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.rt.store
    }

    fn router(&self) -> Result<ActorRef<RouterMsg>> {
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
        self.rt.store.write_then(
            vec![Mutation::Admit(Box::new(req))],
            Box::new(move |result| {
                let outcome = result.and_then(|mut v| match v.pop() {
                    Some(MutationResult::Admitted(o)) => Ok(o),
                    other => Err(StoreError::Rejected(format!(
                        "unexpected admission result {other:?}"
                    ))),
                });
                if let Ok(AdmitOutcome::Accepted(rec)) = &outcome {
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
                let _ = tx.send(outcome);
            }),
        )?;
        Ok(rx
            .await
            .map_err(|_| ActorError::ActorGone("store writer"))??)
    }

    /// Cancels a bot's running turn; `true` if one was running.
    pub async fn cancel(&self, bot: &BotId) -> Result<bool> {
        let router = self.router()?;
        ractor::call_t!(
            router,
            |reply| RouterMsg::Cancel {
                bot: bot.clone(),
                reply
            },
            10_000
        )
        .map_err(|_| ActorError::ActorGone("router"))
    }

    /// Puts the inputs of an ended turn back in its bot's queue (a person's
    /// retry after a failure). Returns how many inputs were requeued.
    pub async fn retry(&self, turn: TurnId) -> Result<usize> {
        let record = self
            .rt
            .store
            .get_turn(turn)
            .await?
            .ok_or_else(|| ActorError::Invalid(format!("no turn {turn}")))?;
        if record.status == TurnStatus::Running {
            return Err(ActorError::Invalid(format!(
                "turn {turn} is still running; wait for it to end, or cancel it first"
            )));
        }
        let n = match self
            .rt
            .store
            .write(vec![Mutation::RequeueInputs { turn }])
            .await?
            .pop()
        {
            Some(MutationResult::Count(n)) => n,
            _ => 0,
        };
        self.router()?.cast(RouterMsg::Wake(record.bot))?;
        Ok(n)
    }

    /// Wakes a bot so it reads its inbox (e.g. after its record changed).
    pub fn wake(&self, bot: BotId) -> Result<()> {
        Ok(self.router()?.cast(RouterMsg::Wake(bot))?)
    }

    /// Tells an active bot its record changed.
    pub fn reload(&self, bot: BotId) -> Result<()> {
        Ok(self.router()?.cast(RouterMsg::Reload(bot))?)
    }

    /// What every active bot is doing.
    pub async fn active(&self) -> Result<Vec<BotStatus>> {
        let router = self.router()?;
        ractor::call_t!(router, RouterMsg::Active, 10_000)
            .map_err(|_| ActorError::Timeout("router"))
    }

    /// Stops every actor (running turns are cancelled and resume on the
    /// next start) and closes the store.
    pub async fn shutdown(&self) {
        let _ = self
            .fleet
            .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
            .await;
        self.rt.store.close().await;
    }
}
