//! The turn engine: one turn of one bot, step by step, every step
//! persisted before the next starts.
//!
//! ```text
//! load state → assemble context → call the model (streamed, cancellable)
//!   → persist the step (assistant entry + pending tool calls + checkpoint)
//!   → run each tool call through its effect rules → persist each outcome
//!   → repeat until the model stops → delivery obligation → end the turn
//! ```
//!
//! A resumed turn (after a crash) continues from its last checkpoint: calls
//! recorded as done are never run again; a call that was started but has no
//! outcome is reported to the model as "outcome unknown" unless the tool is
//! idempotent.

mod budget;
mod compaction;
mod context;
mod runner;
mod state;
mod tail;
pub(crate) mod unanswered;
mod watch;

pub(crate) use budget::RunningTurns;
pub(crate) use context::quoted;
pub(crate) use runner::BudgetPause;
pub(crate) use runner::FirstStep;
pub(crate) use runner::PlanKind;
pub(crate) use runner::TurnPlan;
pub(crate) use runner::TurnReport;
pub(crate) use runner::budget_pause;
pub use runner::budget_paused_until;
pub(crate) use runner::came_before_owner_change;
pub(crate) use runner::origin_of;
pub(crate) use runner::run_turn;
pub use runner::stored_budget_pause;
pub(crate) use runner::task_is_former_owners;
pub(crate) use tail::SessionTail;
/// The per-message clip and the turn's budget, which also bound the fact
/// extraction's request (`memory/extract_bounds.rs`).
pub(crate) use tail::request::clip as request_clip;
pub(crate) use tail::request::turn_budget;
