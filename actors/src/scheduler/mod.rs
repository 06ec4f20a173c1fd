//! Routines: a bot's prompts bound to cron schedules in a time zone.
//!
//! ```text
//! SchedulerSupervisor          restarts the scheduler if it fails
//! └── SchedulerActor           routines + next slots; one tokio timer
//!       └─ fire ─→ Runtime::admit-like batch: event + AdvanceRoutine ─→ Router
//! ```
//!
//! - [`RoutineSpec`] is a definition (fleet.toml `[[bots.routines]]` or the
//!   API); [`Schedule`] its parsed cron expression and time zone.
//! - The `routines` table keeps each routine's `next_fire_ms`; a fire
//!   admits a trusted `routine:<name>` event into the session
//!   `{bot, routine, <name>}` at background priority *and* moves
//!   `next_fire_ms` in the same transaction; the nonce is derived from
//!   (bot, routine, slot), so a slot can run at most once.
//! - After downtime a missed routine runs once, late (`catch_up = "once"`),
//!   or not at all (`"skip"`: only the late slots are dropped; a slot not
//!   yet [`LATE_AFTER_MS`] late still runs, once); never once per missed
//!   slot. Several due slots none of which is missed run once, for the
//!   newest. While a bot's daily token budget is spent its slots wait and
//!   are caught up the same way when the pause ends.
//! - Daylight-saving rules: see the `spec` module docs and docs/operations.md.

mod actor;
mod changes;
mod fire;
mod handle;
mod plan;
mod spec;

pub use actor::FireOutcome;
pub use actor::Firing;
pub use actor::MAX_SLEEP;
pub use actor::PutRoutine;
pub use actor::RETRY_AFTER;
pub use actor::SchedulerActor;
pub use actor::SchedulerArgs;
pub use actor::SchedulerError;
pub use actor::SchedulerMsg;
pub use actor::SchedulerState;
pub use handle::MAX_RESTARTS;
pub use handle::SchedulerHandle;
pub use plan::LATE_AFTER_MS;
pub use plan::SlotPlan;
pub use plan::newest_due;
pub use plan::next_after_skip;
pub use plan::plan_slot;
pub use plan::routine_admission;
pub use plan::routine_nonce;
pub use plan::routine_source;
pub use plan::routine_text;
pub use spec::MAX_NAME_LEN;
pub use spec::MAX_PROMPT_CHARS;
pub use spec::NAME_RULE;
pub use spec::RoutineError;
pub use spec::RoutineSpec;
pub use spec::Schedule;
pub use spec::local_rfc3339;
pub use spec::valid_name;
