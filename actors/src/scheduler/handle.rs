//! [`SchedulerHandle`]: starts the scheduler under its own small
//! supervisor and is how the host (API, tests) talks to it.
//!
//! *Design change:* DESIGN.md draws the Scheduler under the Fleet. It only
//! needs the runtime's store and admission, so the host starts it after
//! the fleet with a dedicated supervisor that restarts it when it fails
//! (at most [`MAX_RESTARTS`] a minute); the fleet supervisor stays the
//! router's alone.

use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::BotId;
use botfleet_memory::Clock;
use botfleet_memory::RoutineRecord;
use botfleet_memory::Store;
use parking_lot::RwLock;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::SupervisionEvent;

use super::actor::Firing;
use super::actor::PutRoutine;
use super::actor::SchedulerActor;
use super::actor::SchedulerArgs;
use super::actor::SchedulerError;
use super::actor::SchedulerMsg;
use super::spec::RoutineSpec;
use crate::error::ActorError;
use crate::error::Result;
use crate::runtime::Runtime;

/// Most restarts of a failed scheduler within a minute before the
/// supervisor gives up (and logs it).
pub const MAX_RESTARTS: usize = 5;

/// How long a request to the scheduler may take.
const CALL_TIMEOUT_MS: u64 = 30_000;

/// The current scheduler actor; replaced by the supervisor on a restart.
type Slot = Arc<RwLock<Option<ActorRef<SchedulerMsg>>>>;

/// Handle to the running scheduler; cheap to clone.
#[derive(Clone)]
pub struct SchedulerHandle {
    supervisor: ActorRef<()>,
    slot: Slot,
    store: Store,
    /// What the start said of the API routines the file's replaced.
    start_notes: Arc<Vec<String>>,
}

impl std::fmt::Debug for SchedulerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerHandle").finish_non_exhaustive()
    }
}

impl SchedulerHandle {
    /// Starts the scheduler: loads the stored routines, registers the
    /// config routines of `config` (replacing config routines no longer
    /// there), then catches up missed slots and sleeps until the next one.
    /// `clock` decides when slots are due.
    pub async fn start(
        rt: Arc<Runtime>,
        clock: Arc<dyn Clock>,
        config: Vec<(BotId, RoutineSpec)>,
    ) -> Result<Self> {
        let store = rt.store.clone();
        let slot: Slot = Arc::new(RwLock::new(None));
        let replaced = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let args = SchedulerArgs {
            rt,
            clock,
            config: Arc::new(config),
            replaced: replaced.clone(),
        };
        let (supervisor, _) = Actor::spawn(
            None,
            SchedulerSupervisor,
            SupervisorArgs {
                args,
                slot: slot.clone(),
            },
        )
        .await
        .map_err(|e| ActorError::Spawn {
            what: "scheduler",
            detail: e.to_string(),
        })?;
        // the actor registered the config routines before its spawn returned
        let start_notes = Arc::new(std::mem::take(&mut *replaced.lock()));
        Ok(Self {
            supervisor,
            slot,
            store,
            start_notes,
        })
    }

    /// What the start replaced that an owner made: each API routine that
    /// a fleet-file routine of its name replaced, as a line for the host's
    /// banner (also logged as a warning).
    pub fn start_notes(&self) -> &[String] {
        &self.start_notes
    }

    fn actor(&self) -> Result<ActorRef<SchedulerMsg>> {
        self.slot
            .read()
            .clone()
            .ok_or(ActorError::ActorGone("scheduler"))
    }

    /// Fires what is due by the clock now and answers what happened (the
    /// scheduler also does this on its own timer).
    pub async fn tick(&self) -> Result<Vec<Firing>> {
        let actor = self.actor()?;
        ractor::call_t!(
            actor,
            |reply| SchedulerMsg::Tick(Some(reply)),
            CALL_TIMEOUT_MS
        )
        .map_err(|_| ActorError::ActorGone("scheduler"))
    }

    /// Creates or replaces an API routine of `bot`; says whether this put
    /// created it.
    pub async fn put(&self, bot: &BotId, spec: RoutineSpec) -> Result<PutRoutine, SchedulerError> {
        let actor = self.actor()?;
        ractor::call_t!(
            actor,
            |reply| SchedulerMsg::Put {
                bot: bot.clone(),
                spec,
                reply
            },
            CALL_TIMEOUT_MS
        )
        .map_err(|_| ActorError::ActorGone("scheduler"))?
    }

    /// Deletes an API routine of `bot`; `false` if there was none.
    pub async fn delete(&self, bot: &BotId, name: &str) -> Result<bool, SchedulerError> {
        let actor = self.actor()?;
        ractor::call_t!(
            actor,
            |reply| SchedulerMsg::Delete {
                bot: bot.clone(),
                name: name.to_owned(),
                reply
            },
            CALL_TIMEOUT_MS
        )
        .map_err(|_| ActorError::ActorGone("scheduler"))?
    }

    /// The routines of `bot` as stored, by name.
    pub async fn list(&self, bot: &BotId) -> Result<Vec<RoutineRecord>> {
        Ok(self.store.routines(Some(bot)).await?)
    }

    /// Stops the scheduler (its timer with it). Routines keep their state
    /// in the store; the next start resumes from it.
    pub async fn stop(&self) {
        let current = self.slot.write().take();
        if let Some(actor) = current {
            let _ = actor
                .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
                .await;
        }
        let _ = self
            .supervisor
            .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
            .await;
    }
}

/// Restarts the scheduler when it fails.
#[derive(Debug, Clone, Copy, Default)]
struct SchedulerSupervisor;

struct SupervisorArgs {
    args: SchedulerArgs,
    slot: Slot,
}

struct SupervisorState {
    args: SchedulerArgs,
    slot: Slot,
    restarts: Vec<tokio::time::Instant>,
}

impl Actor for SchedulerSupervisor {
    type Msg = ();
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<()>,
        a: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let (actor, _) =
            Actor::spawn_linked(None, SchedulerActor, a.args.clone(), myself.get_cell()).await?;
        *a.slot.write() = Some(actor);
        Ok(SupervisorState {
            args: a.args,
            slot: a.slot,
            restarts: Vec::new(),
        })
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<()>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, error) => {
                let now = tokio::time::Instant::now();
                state
                    .restarts
                    .retain(|t| now.duration_since(*t) < Duration::from_secs(60));
                *state.slot.write() = None;
                if state.restarts.len() >= MAX_RESTARTS {
                    tracing::error!(actor = %cell.get_id(), %error,
                        "scheduler failed {MAX_RESTARTS} times in a minute; routines stop until the host restarts");
                    return Ok(());
                }
                state.restarts.push(now);
                tracing::error!(actor = %cell.get_id(), %error, "scheduler failed; restarting it");
                match Actor::spawn_linked(
                    None,
                    SchedulerActor,
                    state.args.clone(),
                    myself.get_cell(),
                )
                .await
                {
                    Ok((actor, _)) => *state.slot.write() = Some(actor),
                    Err(e) => tracing::error!(error = %e, "scheduler could not be restarted"),
                }
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                tracing::debug!(actor = %cell.get_id(), ?reason, "scheduler stopped");
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }
}
