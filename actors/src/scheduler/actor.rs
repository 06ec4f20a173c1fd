//! The Scheduler actor: it holds every routine with its next slot, sleeps
//! until the earliest one, and fires what is due.
//!
//! Sequence of a tick (a timer wake-up, a poke, or a change of routines):
//! 1. read the injected [`Clock`]: every routine whose `next_fire_ms` is at
//!    or before now is due (decisions never depend on tokio's clock); at
//!    the first tick, and when the clock reads earlier than at the last
//!    one (set back), a routine whose next slot was planned while the
//!    clock ran ahead is planned again from now (`fire::rewind`);
//! 2. a due routine of a bot paused by its daily token budget waits,
//!    untouched, until the pause ends (then it is a catch-up like after
//!    downtime); per other due routine, [`plan_slot`](super::plan_slot)
//!    decides: fire (on time: the newest slot due; or once late for
//!    `catch_up = "once"`), skip (`catch_up = "skip"`: the late slot
//!    passes, and the routine moves to the newest slot not late yet, which
//!    fires in the same tick), or unknown (a slot from before a restore);
//! 3. one store batch per routine: the admission of the event (nonce
//!    derived from bot, routine and slot) *and* `AdvanceRoutine` to the
//!    next slot after now, so a slot fires at most once even across
//!    crashes; accepted events are routed right after their commit;
//! 4. arm one tokio timer for the earliest next slot (at most
//!    [`MAX_SLEEP`] away, so a jump of the wall clock is noticed).

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::AdmittedRecord;
use botfleet_memory::BotId;
use botfleet_memory::Clock;
use botfleet_memory::RoutineRecord;
use botfleet_memory::StoreError;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::RpcReplyPort;

use super::changes::delete;
use super::changes::put;
use super::changes::sync_config;
use super::fire::fire_due;
use super::spec::RoutineError;
use super::spec::RoutineSpec;
use super::spec::Schedule;
use crate::error::ActorError;
use crate::runtime::Runtime;

/// Longest single sleep: the scheduler re-reads the clock at least this
/// often, so a wall clock that jumps (NTP, suspend) delays a fire by at
/// most this much.
pub const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Wait before retrying a fire whose commit failed.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The Scheduler actor (configuration only; state is built in `pre_start`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SchedulerActor;

/// What the scheduler starts with.
#[derive(Clone)]
pub struct SchedulerArgs {
    /// The fleet's runtime (store and admission).
    pub rt: Arc<Runtime>,
    /// The wall clock fire decisions are made by.
    pub clock: Arc<dyn Clock>,
    /// The routines of fleet.toml, (re)registered at every start.
    pub config: Arc<Vec<(BotId, RoutineSpec)>>,
    /// What the registration of `config` replaced that an owner made: the
    /// API routines of the file's routines' names, as notes for the
    /// host's banner (`SchedulerHandle::start_notes`).
    pub replaced: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl std::fmt::Debug for SchedulerArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerArgs")
            .field("config", &self.config.len())
            .finish()
    }
}

/// Messages of the scheduler.
#[derive(Debug)]
pub enum SchedulerMsg {
    /// Fire what is due by the clock, re-plan the timer, and answer what
    /// happened (a poke: tests move a manual clock and tick).
    Tick(Option<RpcReplyPort<Vec<Firing>>>),
    /// The timer armed when the clock read `armed_at_ms` went off.
    Timer {
        /// The clock's reading when the timer was armed.
        armed_at_ms: i64,
    },
    /// Create or replace an API routine of a bot.
    Put {
        /// The bot.
        bot: BotId,
        /// The definition.
        spec: RoutineSpec,
        /// The stored routine and whether this put created it, or why not.
        reply: RpcReplyPort<Result<PutRoutine, SchedulerError>>,
    },
    /// Delete an API routine of a bot; answers whether it existed.
    Delete {
        /// The bot.
        bot: BotId,
        /// The routine's name.
        name: String,
        /// Whether it existed, or why it cannot be deleted.
        reply: RpcReplyPort<Result<bool, SchedulerError>>,
    },
}

/// What a put of an API routine did.
#[derive(Debug, Clone)]
pub struct PutRoutine {
    /// The routine as stored.
    pub record: RoutineRecord,
    /// Whether this put created it (`false`: it replaced one). Decided by
    /// the scheduler, which handles one put at a time, so of parallel puts
    /// of a new routine exactly one created it.
    pub created: bool,
}

/// Why a routine cannot be changed.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// The definition is not valid.
    #[error(transparent)]
    Invalid(#[from] RoutineError),
    /// The routine comes from fleet.toml.
    #[error(
        "routine {name:?} is defined in fleet.toml; change or remove it there (it is registered \
         again at every start)"
    )]
    ConfigOwned {
        /// The routine's name.
        name: String,
    },
    /// A new routine's name differs from one of the bot's only in case:
    /// two names people read as one, each with its own schedule and
    /// session (QA: `Every-Minute` beside `every-minute`).
    #[error("the bot has a routine {existing:?}, which {name:?} differs from only in case; {fix}")]
    NameClash {
        /// The name given.
        name: String,
        /// The bot's routine it clashes with.
        existing: String,
        /// What to do: replace that one (an API routine), or change it in
        /// fleet.toml (one of the file's, which the API cannot replace:
        /// the advice to put it under that name was then refused, QA).
        fix: String,
    },
    /// No such bot.
    #[error("no bot \"{0}\"; list bots with GET /v1/bots or `botfleet bots`")]
    UnknownBot(BotId),
    /// The runtime failed.
    #[error(transparent)]
    Actor(#[from] ActorError),
}

impl From<StoreError> for SchedulerError {
    fn from(e: StoreError) -> Self {
        SchedulerError::Actor(ActorError::Store(e))
    }
}

/// What happened to one due slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firing {
    /// The bot.
    pub bot: BotId,
    /// The routine.
    pub name: String,
    /// The slot (ms since epoch, UTC).
    pub slot_ms: i64,
    /// What happened.
    pub outcome: FireOutcome,
}

/// The outcome of a due slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FireOutcome {
    /// Admitted into the routine's session and routed to the bot.
    Fired {
        /// Where the event landed.
        record: AdmittedRecord,
        /// Whether it was a late catch-up of a missed slot.
        late: bool,
    },
    /// The ledger already held this slot's nonce: it ran before.
    AlreadyFired,
    /// Missed while down, and the routine skips missed slots.
    Skipped,
    /// From before a restore of the store: not run again.
    Unknown,
    /// The bot no longer exists; the slot passed.
    NoBot,
    /// The bot's daily token budget is spent: the slot waits, untouched,
    /// and is not queued. When the pause ends, the routine's waiting slots
    /// are handled like slots missed while the host was down (the
    /// routine's `catch_up`).
    Paused {
        /// When the pause ends (ms since epoch, UTC): the next UTC midnight.
        until_ms: i64,
    },
    /// The commit failed; the slot stays due and is retried.
    Failed {
        /// Why.
        error: String,
    },
}

/// A routine and its parsed schedule.
pub(super) struct Loaded {
    pub(super) record: RoutineRecord,
    /// `None` when the stored definition no longer parses (logged; never fires).
    pub(super) schedule: Option<Schedule>,
}

pub(super) type Key = (BotId, String);

/// State of the scheduler.
pub struct SchedulerState {
    pub(super) args: SchedulerArgs,
    pub(super) routines: BTreeMap<Key, Loaded>,
    timer: Option<tokio::task::JoinHandle<()>>,
    /// A fire failed: wake again after [`RETRY_AFTER`].
    pub(super) retry: bool,
    /// When the store was found restored from a snapshot, if ever.
    pub(super) restored_at_ms: Option<i64>,
    /// Bots paused by their daily token budget at the last tick, and
    /// until when: their due routines wait for then, not for a retry.
    pub(super) held: HashMap<BotId, i64>,
    /// The clock's reading at the last tick (`None` before the first):
    /// one that reads earlier was set back (see `fire::rewind`).
    pub(super) last_tick_ms: Option<i64>,
}

impl Actor for SchedulerActor {
    type Msg = SchedulerMsg;
    type State = SchedulerState;
    type Arguments = SchedulerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<SchedulerMsg>,
        args: SchedulerArgs,
    ) -> Result<SchedulerState, ActorProcessingErr> {
        let store = &args.rt.store;
        let restored_at_ms = store
            .meta("restored_at_ms")
            .await?
            .and_then(|v| v.parse::<i64>().ok());
        let mut routines = BTreeMap::new();
        for record in store.routines(None).await? {
            let schedule = match Schedule::parse(&record.cron, &record.timezone) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::error!(bot = %record.bot, routine = %record.name, error = %e,
                        "stored routine no longer parses; it will not fire until it is replaced");
                    None
                }
            };
            routines.insert(
                (record.bot.clone(), record.name.clone()),
                Loaded { record, schedule },
            );
        }
        let mut state = SchedulerState {
            args,
            routines,
            timer: None,
            retry: false,
            restored_at_ms,
            held: HashMap::new(),
            last_tick_ms: None,
        };
        sync_config(&mut state).await?;
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<SchedulerMsg>,
        _state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        // missed slots are caught up (or skipped) right away
        myself.cast(SchedulerMsg::Tick(None))?;
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<SchedulerMsg>,
        state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SchedulerMsg>,
        msg: SchedulerMsg,
        state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SchedulerMsg::Tick(reply) => {
                let fired = fire_due(state).await;
                replan(&myself, state);
                if let Some(reply) = reply {
                    let _ = reply.send(fired);
                }
            }
            SchedulerMsg::Timer { armed_at_ms } => {
                let fired = fire_due(state).await;
                // A clock that did not move while tokio slept is a manual
                // clock that only its owner moves (tests): wait for a poke
                // instead of spinning on tokio's auto-advancing paused clock.
                // Slots that wait for a budget pause are no progress.
                let progress = fired
                    .iter()
                    .any(|f| !matches!(f.outcome, FireOutcome::Paused { .. }));
                if !progress && state.args.clock.now_ms() == armed_at_ms {
                    return Ok(());
                }
                replan(&myself, state);
            }
            SchedulerMsg::Put { bot, spec, reply } => {
                let result = put(state, bot, spec).await;
                replan(&myself, state);
                let _ = reply.send(result);
            }
            SchedulerMsg::Delete { bot, name, reply } => {
                let result = delete(state, bot, name).await;
                replan(&myself, state);
                let _ = reply.send(result);
            }
        }
        Ok(())
    }
}

/// Arms the timer for the earliest next slot (or a retry).
fn replan(myself: &ActorRef<SchedulerMsg>, state: &mut SchedulerState) {
    if let Some(t) = state.timer.take() {
        t.abort();
    }
    let now = state.args.clock.now_ms();
    let retry_ms = RETRY_AFTER.as_millis() as i64;
    // A routine still due after a tick could not be handled (its bot could
    // not be read): it is retried later, not in a loop.
    // A due routine of a paused bot waits for the pause's end (the sleep
    // is capped by MAX_SLEEP, so a budget raised meanwhile is seen).
    let earliest = state
        .routines
        .values()
        .filter(|l| l.schedule.is_some())
        .filter_map(|l| {
            let next = l.record.next_fire_ms?;
            let held = state.held.get(&l.record.bot).copied().unwrap_or(next);
            Some(next.max(held))
        })
        .min()
        .map(|t| if t <= now { now + retry_ms } else { t });
    let retry = state.retry.then_some(now + retry_ms);
    let Some(at) = earliest.into_iter().chain(retry).min() else {
        return;
    };
    let delay = Duration::from_millis(u64::try_from(at - now).unwrap_or(0)).min(MAX_SLEEP);
    let me = myself.clone();
    state.timer = Some(tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let _ = me.cast(SchedulerMsg::Timer { armed_at_ms: now });
    }));
}
