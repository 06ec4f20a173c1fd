//! The Bot actor: one per *active* bot. It owns the bot's queue, runs one
//! turn at a time as a supervised task, interrupts it for a user's direct
//! message, batches rapid user messages (debounce), and asks the router to
//! passivate it when idle. Everything it holds can be rebuilt from the store.

use std::collections::HashMap;
use std::collections::HashSet;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Priority;
use botfleet_memory::SessionId;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use futures::FutureExt;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::RpcReplyPort;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bot_queue::BotQueue;
use crate::bot_queue::Pushed;
use crate::bot_queue::QueuedInput;
use crate::engine::FirstStep;
use crate::engine::PlanKind;
use crate::engine::SessionTail;
use crate::engine::TurnPlan;
use crate::engine::TurnReport;
use crate::engine::run_turn;
use crate::router::RouterMsg;
use crate::router::live::LiveCell;
use crate::runtime::Runtime;

/// The Bot actor (configuration only; state lives in [`BotState`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct BotActor;

/// Start arguments of a bot actor.
pub struct BotArgs {
    /// Which bot.
    pub id: BotId,
    /// Shared runtime.
    pub rt: Arc<Runtime>,
    /// The router, for passivation.
    pub router: ActorRef<RouterMsg>,
    /// Where the bot publishes its status (the router's live board), so
    /// that nobody has to ask the actor, which may be busy.
    pub(crate) live: Arc<LiveCell>,
}

/// How a turn task ended (opaque outside the crate).
#[derive(Debug)]
pub struct TurnEnd(TurnEndKind);

#[derive(Debug)]
enum TurnEndKind {
    Ended(Box<TurnReport>),
    Panicked { turn: TurnId, message: String },
}

/// What a bot is doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BotStatus {
    /// The bot.
    pub id: BotId,
    /// The running turn, if any, as the bot knows it (its record is
    /// stored with the turn's first step, so a slow first model call would
    /// leave it unknown to the store for as long).
    pub turn: Option<RunningTurn>,
    /// Inputs waiting.
    pub queued: usize,
    /// Until when the bot is paused because its daily token budget is
    /// spent (ms since the epoch; `None` when it is not).
    pub paused_until: Option<i64>,
    /// The bot's actor is starting: it has not read its queue and its
    /// unfinished turns from the store yet, so `turn` and `queued` say
    /// nothing (they are `None` and 0 without the bot being idle).
    pub starting: bool,
    /// Sessions whose context the bot keeps in memory between turns (at
    /// most 16, the least recently used left out: `bot_tails.rs`).
    pub contexts: usize,
}

impl BotStatus {
    /// The status of a bot whose actor is still starting.
    pub(crate) fn starting(id: BotId) -> Self {
        Self {
            id,
            turn: None,
            queued: 0,
            paused_until: None,
            starting: true,
            contexts: 0,
        }
    }
}

/// A running turn as its bot knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningTurn {
    /// The turn.
    pub turn: TurnId,
    /// Its session.
    pub session: SessionId,
    /// Inbox gids of its inputs.
    pub inputs: Vec<i64>,
    /// When the bot started it (ms).
    pub started_at: i64,
}

/// Messages of a bot actor.
pub enum BotMsg {
    /// An admitted input, routed once its commit returned (not always in
    /// gid order: see `BotQueue::push`).
    Input(Box<QueuedInput>),
    /// Re-read pending inputs from the store (after a retry or a wake-up).
    Refresh,
    /// [`BotMsg::Refresh`] sent by the router (a wake-up: a retry requeued
    /// inputs, the start's recovery): counted with the inputs the router
    /// routed, so an idle report made before it is stale (`Router`'s
    /// `Idle`), as one made before an input is.
    Woken,
    /// The debounce window `generation` may have closed.
    DebounceDue {
        /// Window generation; older ones are stale.
        generation: u64,
    },
    /// A turn task ended.
    TurnEnded(TurnEnd),
    /// Check whether the bot has been idle long enough to passivate.
    IdleCheck,
    /// Cancel the running turn for good; answers what the cancel did.
    Cancel(RpcReplyPort<CancelAnswer>),
    /// Report what the bot is doing (the same status it publishes on the
    /// router's live board after each message).
    Status(RpcReplyPort<BotStatus>),
    /// Re-read the bot's record (role, tools) from the store.
    Reload,
    /// The token-budget pause may be over.
    Unpause,
    /// The wait after a run the store refused to write may be over
    /// (`bot_store_wait.rs`).
    StoreRetry {
        /// Timer generation; older ones are stale.
        generation: u64,
    },
    /// The bot's probe of its store after such a wait ended.
    StoreProbed {
        /// Timer generation of the wait; older ones are stale.
        generation: u64,
        /// The store's error when it refused the probe.
        refused: Option<String>,
    },
}

struct Running {
    turn: TurnId,
    session: SessionId,
    soft: CancellationToken,
    hard: CancellationToken,
    inputs: Vec<QueuedInput>,
    started_at: i64,
    /// Whether the run committed a step (`TurnPlan::first_step`).
    first_step: Arc<FirstStep>,
    /// What the run was started for: what runs again when the store
    /// refuses its writes.
    plan: RunPlan,
    /// The cancel that stopped the run, answered once the run has ended
    /// (`BotMsg::Cancel`, `BotState::answer_cancel`).
    cancelled_by: Option<RpcReplyPort<CancelAnswer>>,
}

/// What a cancel did (`BotMsg::Cancel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelAnswer {
    /// This request stopped the turn, and its end is recorded: a restart
    /// does not resume it.
    Cancelled,
    /// Nothing was running, or it was being cancelled already.
    Nothing,
    /// The turn stopped, but the store refused to record its end (the
    /// store's error): it does not run on while the host runs, and is
    /// recorded as failed once the store takes writes again; a restart
    /// before that resumes it.
    NotRecorded(String),
}

/// What a run was started for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RunPlan {
    /// A turn (new or resumed) over its inputs.
    Turn,
    /// Recording that the turn failed for good, with this error.
    Fail(String),
    /// A background compaction (no inputs).
    Compact,
}

enum Pending {
    Resume {
        turn: TurnId,
        session: SessionId,
        inputs: Vec<QueuedInput>,
        /// The newest inbox item the turn consumed: a person's message
        /// admitted after it, still queued, came while the turn ran before
        /// its crash and interrupts the resumed run as it would have then.
        last_input: i64,
        /// The turn's last run ended because the store refused its writes,
        /// not in a crash: this start takes that one's place and is not
        /// counted again in the turn's `attempts`.
        replaces_start: bool,
    },
    Fail {
        turn: TurnId,
        session: SessionId,
        inputs: Vec<QueuedInput>,
        error: String,
        /// The failure follows a run whose writes the store refused (not a
        /// crash): a call it left without a result is told so
        /// (`TurnPlan::replaces_start`), not as a restart.
        after_store: bool,
    },
}

impl Pending {
    /// The inputs the turn holds.
    fn inputs(&self) -> &[QueuedInput] {
        match self {
            Pending::Resume { inputs, .. } | Pending::Fail { inputs, .. } => inputs,
        }
    }
}

struct Window {
    first: Instant,
    generation: u64,
}

/// State of an active bot.
pub struct BotState {
    rt: Arc<Runtime>,
    router: ActorRef<RouterMsg>,
    /// Where the status is published after each message.
    live: Arc<LiveCell>,
    record: Arc<BotRecord>,
    queue: BotQueue,
    running: Option<Running>,
    pending: VecDeque<Pending>,
    tails: Tails,
    crashes: HashMap<TurnId, i64>,
    /// Set while the bot waits for the store to accept writes again
    /// (`bot_store_wait.rs`): nothing runs until the wait is over.
    store_wait: Option<store_wait::StoreWait>,
    /// Generation of the last store-wait timer.
    store_timers: u64,
    /// A cancel of this turn whose answer waits for the run that records
    /// its end (the cancel stopped a run that could not record it: a
    /// waiting turn's, or one that crashed as it stopped).
    cancel_answer: Option<(TurnId, RpcReplyPort<CancelAnswer>)>,
    /// A refresh skipped inputs the running turn held: the store's pending
    /// inputs are read again when it ends (`BotState::on_turn_end`).
    recheck_after_run: bool,
    /// Sessions whose context passed the background compaction mark.
    compact_due: Vec<SessionId>,
    /// Paused by the daily token budget until this time (ms since epoch).
    paused_until: Option<i64>,
    /// Sessions told about the pause (the budget notice) since it began.
    paused_told: HashSet<SessionId>,
    window: Option<Window>,
    /// When a person's direct message last reached the bot (routed, found
    /// in the store, or waiting when it woke): the debounce window's
    /// quiet is counted from it ([`BotState::quiet`]).
    last_user_dm: Option<Instant>,
    generation: u64,
    inputs_seen: u64,
    idle_since: Option<Instant>,
    idle_armed: bool,
    /// Turn runs in a row that a person's message interrupted before their
    /// first model step (`HOLD_AFTER_UNSTEPPED`, `bot_inputs.rs`).
    unstepped_interrupts: u32,
    /// Turn runs in a row that a person's message interrupted, stepped or
    /// not (`HOLD_AFTER_INTERRUPTED`, `bot_inputs.rs`).
    interrupted_runs: u32,
}

impl Actor for BotActor {
    type Msg = BotMsg;
    type State = BotState;
    type Arguments = BotArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<BotMsg>,
        args: BotArgs,
    ) -> Result<BotState, ActorProcessingErr> {
        let record = args
            .rt
            .store
            .get_bot(&args.id)
            .await?
            .ok_or_else(|| format!("bot {} is not registered", args.id))?;
        Ok(BotState {
            rt: args.rt,
            router: args.router,
            live: args.live,
            record: Arc::new(record),
            queue: BotQueue::default(),
            running: None,
            pending: VecDeque::new(),
            tails: Tails::default(),
            crashes: HashMap::new(),
            store_wait: None,
            store_timers: 0,
            cancel_answer: None,
            recheck_after_run: false,
            compact_due: Vec::new(),
            paused_until: None,
            paused_told: HashSet::new(),
            window: None,
            last_user_dm: None,
            generation: 0,
            inputs_seen: 0,
            idle_since: None,
            idle_armed: false,
            unstepped_interrupts: 0,
            interrupted_runs: 0,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<BotMsg>,
        state: &mut BotState,
    ) -> Result<(), ActorProcessingErr> {
        let id = &state.record.id;
        for turn in state.rt.store.open_turns(id).await? {
            state.pending.push_back(Pending::Resume {
                turn: turn.id,
                session: turn.session,
                inputs: Vec::new(),
                last_input: turn.inputs.iter().copied().max().unwrap_or(i64::MAX),
                replaces_start: false,
            });
        }
        let pending = state.rt.store.pending_inbox(id).await?;
        // the floors of the bot's sessions, whose queued or cut-off work
        // may predate an owner change (a routine's runs, a room's
        // messages, and an approval's decision there): what came before
        // is taken into a turn of its own (`BotQueue::take_session`) and
        // ends `owner_changed` (`TurnPlan::floor`). Only routines' and
        // rooms' sessions get one, never a person's DM: a queue of DMs
        // with no turn to resume reads none (review: keyed on background
        // work, the queue missed a decision, which is a bot-class input).
        // Floors are set only as a host starts, before any bot wakes: work
        // that comes later is past them.
        if !state.pending.is_empty() || pending.iter().any(|i| i.priority != Priority::UserDm) {
            let floors = state
                .rt
                .store
                .bot_session_floors(id, &state.record.owner)
                .await?;
            state.queue.set_floors(floors.into_iter().collect());
        }
        for item in pending {
            // a person's message that wakes the bot starts its turn at
            // once, and the window counts from it: one that follows
            // within the window is folded as on an awake bot
            if item.priority == Priority::UserDm {
                state.last_user_dm = Some(Instant::now());
            }
            // in gid order from the store: each is new
            let _ = state.queue.push(QueuedInput { item, entry: None });
        }
        tracing::debug!(bot = %id, queued = state.queue.len(), resuming = state.pending.len(), "bot activated");
        if state.record.removed_at().is_some() {
            tracing::info!(bot = %id, queued = state.queue.len(), resuming = state.pending.len(), "bot is no longer in the fleet's config: its work waits until a config lists it again");
        }
        state.schedule(&myself);
        state.publish();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<BotMsg>,
        msg: BotMsg,
        state: &mut BotState,
    ) -> Result<(), ActorProcessingErr> {
        let handled = self.dispatch(myself, msg, state).await;
        // whatever the message changed (a turn started or ended, inputs
        // queued), status readers see it without asking this actor
        state.publish();
        handled
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<BotMsg>,
        state: &mut BotState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(r) = &state.running {
            // the turn task holds no lock on the actor; cancel it so it ends
            // (its state is in the store and resumes on the next activation)
            r.hard.cancel();
        }
        Ok(())
    }
}

impl BotActor {
    /// Handles one message (the status is published after it).
    async fn dispatch(
        &self,
        myself: ActorRef<BotMsg>,
        msg: BotMsg,
        state: &mut BotState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            BotMsg::Input(input) => state.on_input(&myself, *input),
            BotMsg::Refresh => state.on_refresh(&myself).await?,
            BotMsg::Woken => {
                state.inputs_seen += 1;
                state.on_refresh(&myself).await?;
            }
            BotMsg::DebounceDue { generation } => {
                if state
                    .window
                    .as_ref()
                    .is_some_and(|w| w.generation == generation)
                {
                    state.window = None;
                    state.schedule(&myself);
                }
            }
            BotMsg::TurnEnded(end) => state.on_turn_end(&myself, end),
            BotMsg::IdleCheck => state.on_idle_check(&myself),
            BotMsg::Cancel(reply) => {
                // `true` only for the request that cancelled: a turn already
                // cancelled stays `running` until it ends, and a second
                // request cancels nothing. The one that cancels is answered
                // once the run has stopped and its end is committed
                // (`on_turn_end`): answered at once, a host killed before
                // that commit resumed the turn at its next start, and the
                // work the person was told was cancelled ran on.
                match &mut state.running {
                    Some(r) if r.hard.is_cancelled() => {
                        let _ = reply.send(CancelAnswer::Nothing);
                    }
                    // a background compaction runs on; the queue's turn
                    // starts when it ends
                    Some(r) if r.plan == RunPlan::Compact => {
                        let _ = reply.send(CancelAnswer::Nothing);
                    }
                    // the turn is being failed for good already (a cancel
                    // of it waits for this run: review, its answer was
                    // stranded by a second cancel's)
                    Some(r) if matches!(r.plan, RunPlan::Fail(_)) => {
                        let _ = reply.send(CancelAnswer::Nothing);
                    }
                    Some(r) => {
                        r.hard.cancel();
                        r.cancelled_by = Some(reply);
                    }
                    // a waiting turn's failure runs now; its end answers
                    None => state.cancel_waiting(&myself, reply),
                }
            }
            BotMsg::Status(reply) => {
                let _ = reply.send(state.status());
            }
            BotMsg::StoreRetry { generation } => state.on_store_retry(&myself, generation),
            BotMsg::StoreProbed {
                generation,
                refused,
            } => state.on_store_probed(&myself, generation, refused),
            BotMsg::Unpause => {
                // read the wall clock again (turns::PAUSE_RECHECK): before
                // the pause's end, look again later
                let left = state
                    .paused_until
                    .map(|until| until - state.rt.store.clock().now_ms());
                if let Some(left) = left.filter(|&left| left > 0) {
                    myself.send_after(turns::pause_timer(left), || BotMsg::Unpause);
                } else {
                    state.paused_until = None;
                    state.paused_told.clear();
                    state.schedule(&myself);
                }
            }
            BotMsg::Reload => {
                if let Some(record) = state.rt.store.get_bot(&state.record.id).await? {
                    state.record = Arc::new(record);
                }
            }
        }
        Ok(())
    }
}

impl BotState {
    /// What the bot is doing now.
    fn status(&self) -> BotStatus {
        BotStatus {
            id: self.record.id.clone(),
            // a background compaction is no turn: it has no record, takes
            // no input and is not the person's to cancel
            turn: self.running_turn().map(|r| RunningTurn {
                turn: r.turn,
                session: r.session,
                inputs: r.inputs.iter().map(|i| i.item.gid).collect(),
                started_at: r.started_at,
            }),
            // the inputs of a turn waiting to run again (after a crash, or
            // while the store refuses writes) wait too
            queued: self.queue.len() + self.pending.iter().map(|p| p.inputs().len()).sum::<usize>(),
            paused_until: self.paused_until,
            starting: false,
            // the running turn holds its session's context out of the
            // held ones (`Tails::take` made room for it)
            contexts: self.tails.len() + usize::from(self.running.is_some()),
        }
    }

    /// The running turn: the run, unless it is a background compaction.
    fn running_turn(&self) -> Option<&Running> {
        self.running.as_ref().filter(|r| r.plan != RunPlan::Compact)
    }

    /// Publishes the status on the router's live board.
    fn publish(&self) {
        self.live.publish(self.status());
    }

    /// Whether the running turn, or a turn waiting to run again, holds the
    /// input with `gid`.
    fn holds(&self, gid: i64) -> bool {
        self.running
            .iter()
            .flat_map(|r| r.inputs.iter())
            .chain(self.pending.iter().flat_map(Pending::inputs))
            .any(|i| i.item.gid == gid)
    }
}

#[path = "bot_tails.rs"]
mod tails;
use tails::Tails;

#[path = "bot_inputs.rs"]
mod inputs;
use inputs::Start;

#[path = "bot_turns.rs"]
mod turns;

#[path = "bot_store_wait.rs"]
mod store_wait;
