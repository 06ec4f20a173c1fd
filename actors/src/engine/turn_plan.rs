//! What a turn task is given ([`TurnPlan`], of a [`PlanKind`]) and what
//! it reports to its bot when it ends ([`TurnReport`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;

use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::InboxItem;
use botfleet_memory::SessionId;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use tokio_util::sync::CancellationToken;

use crate::engine::tail::SessionTail;

/// What kind of turn to run.
#[derive(Debug)]
pub(crate) enum PlanKind {
    /// A new turn over these inputs (all of one session, oldest first).
    New {
        /// The inputs, with their entries when the bot has them.
        inputs: Vec<(InboxItem, Option<Entry>)>,
    },
    /// Continue a turn that was running when the host or the turn crashed.
    /// `inputs` are the inputs the bot gave it, used if the turn never
    /// reached the store (then it simply starts over).
    Resume {
        /// Inputs of the crashed run (empty after a host restart).
        inputs: Vec<(InboxItem, Option<Entry>)>,
    },
    /// Compact the session in the background (no turn).
    Compact,
    /// Record that the turn failed for good.
    Fail {
        /// Why.
        error: String,
        /// Inputs of the crashed run (as for `Resume`).
        inputs: Vec<(InboxItem, Option<Entry>)>,
        /// The run before was refused by the store, not cut by a crash: a
        /// call it left without a result is told so, not as a restart.
        after_store: bool,
    },
}

/// Everything a turn task needs.
pub(crate) struct TurnPlan {
    pub turn: TurnId,
    pub session: SessionId,
    pub bot: Arc<BotRecord>,
    pub kind: PlanKind,
    pub tail: SessionTail,
    /// Interrupt: stop at the next safe point.
    pub soft: CancellationToken,
    /// Cancel: stop now, kill running tools.
    pub hard: CancellationToken,
    /// When the bot started it (what the API shows while it runs, and what
    /// its row records when a new turn is first written).
    pub started_at: i64,
    /// Whether this run committed a step: its bot reads it when the run
    /// crashes (a crash after a step is not "in a row" with the ones
    /// before it, as the store's `attempts` count), and holds a person's
    /// message on it.
    pub first_step: Arc<FirstStep>,
    /// The run takes the place of one whose writes the store refused (its
    /// bot waited, `bot_store_wait.rs`): its resume does not count one
    /// more start (`engine/recovery.rs`).
    pub replaces_start: bool,
    /// The seq the bot's owner reads the session from (an owner change in
    /// fleet.toml: `session_floors`), as the bot read it as it woke with
    /// work that may predate the change; floors change only as a host
    /// starts, so the turn reads none (`Runner::before_the_change`).
    pub floor: Option<i64>,
}

/// Whether a run has committed a model step, and whether a person's
/// message waits for that step before it interrupts the run (its bot held
/// the interrupt: `HOLD_AFTER_UNSTEPPED` in `bot.rs`).
///
/// Both sides store their flag, then load the other's, all `SeqCst`: of a
/// `hold` and a `mark_stepped` racing, at least one sees the other's store,
/// so a held message is never left waiting past the step (both seeing it
/// only cancels the run twice, which is harmless).
#[derive(Debug, Default)]
pub(crate) struct FirstStep {
    stepped: AtomicBool,
    held: AtomicBool,
}

impl FirstStep {
    /// A run that counts as stepped from its start when `stepped`.
    pub(crate) fn new(stepped: bool) -> Self {
        Self {
            stepped: AtomicBool::new(stepped),
            held: AtomicBool::new(false),
        }
    }

    /// Whether the run committed a step.
    pub(crate) fn stepped(&self) -> bool {
        self.stepped.load(SeqCst)
    }

    /// Records a committed step. True when a person's message was held
    /// for it: the run then yields to that message at its next safe point.
    pub(crate) fn mark_stepped(&self) -> bool {
        self.stepped.store(true, SeqCst);
        self.held.load(SeqCst)
    }

    /// Holds a person's message until the run's first step. False when
    /// that step is already committed: the message interrupts now.
    pub(crate) fn hold(&self) -> bool {
        self.held.store(true, SeqCst);
        !self.stepped.load(SeqCst)
    }
}

/// How a turn ended, for its bot.
#[derive(Debug)]
pub(crate) struct TurnReport {
    pub turn: TurnId,
    /// Final status, or `None` when the turn could not be persisted (it
    /// stays `running` in the store and resumes later).
    pub status: Option<TurnStatus>,
    /// Inputs to queue again (an interrupted turn's).
    pub requeue: Vec<InboxItem>,
    /// The session tail, to keep for the next turn.
    pub tail: Option<SessionTail>,
    /// Error text, if any.
    pub error: Option<String>,
    /// The session's context passed the background compaction mark.
    pub compaction_due: bool,
    /// The bot's daily token budget was found spent when the turn began
    /// (it did not run, and told its session): no turn until this time (ms).
    pub paused_until: Option<i64>,
    /// Whether that pause was told to the session's people: not when the
    /// turn's inputs were no person's (a subagent's report, a routine), so
    /// the person's next message there is told then.
    pub paused_told: bool,
    /// The turn's own usage, committed with its end, spent the budget: no
    /// turn until this time (ms); its session was not told yet.
    pub spent_until: Option<i64>,
}
