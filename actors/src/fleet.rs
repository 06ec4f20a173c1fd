//! The Fleet: root supervisor of a running fleet, and [`FleetHandle`], the
//! surface the host (HTTP API, CLI) drives it through.

use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::Store;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::SupervisionEvent;

use crate::bot::BotStatus;
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
}

impl Actor for FleetActor {
    type Msg = FleetMsg;
    type State = FleetState;
    type Arguments = Arc<Runtime>;

    async fn pre_start(
        &self,
        myself: ActorRef<FleetMsg>,
        rt: Arc<Runtime>,
    ) -> Result<FleetState, ActorProcessingErr> {
        let (router, _) =
            Actor::spawn_linked(None, RouterActor, rt.clone(), myself.get_cell()).await?;
        rt.set_router(router);
        Ok(FleetState { rt })
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
                let router = state.rt.router()?;
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
                state.rt.set_router(router);
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
        let (fleet, _) = Actor::spawn(None, FleetActor, rt.clone())
            .await
            .map_err(|e| ActorError::Spawn {
                what: "fleet",
                detail: e.to_string(),
            })?;
        let _ = fleet.cast(FleetMsg::Recover);
        Ok(Self { rt, fleet })
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
        self.rt.router()
    }

    /// Admits an input (see [`Runtime::admit`]).
    pub async fn admit(&self, req: AdmitRequest) -> Result<AdmitOutcome> {
        self.rt.admit(req).await
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
