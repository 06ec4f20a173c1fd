//! Memory: what bots remember beyond their transcripts.
//!
//! - **Scopes** ([`MemoryScope`]): `agent:<bot>` (one bot), `user:<user>`
//!   (every bot of that user), `project:<name>` (the bots that joined the
//!   project, fleet.toml `projects = [...]`). A bot reaches its own scope,
//!   its owner's and its projects' ([`bot_scopes`]); private transcripts
//!   are never shared, distilled facts are.
//! - **Layers** ([`Layer`]): `profile` (≤ [`MAX_PROFILE_FACTS`] facts and
//!   ≤ [`MAX_PROFILE_CHARS`] characters per scope instance, always in the
//!   prompt), `log` (dated entries; the prompt takes the best
//!   [`LOG_PROMPT_CAP`] by relevance × recency × importance, see
//!   [`rank_log`]), `notes` (working facts with an expiry, gone from the
//!   prompt once expired). The archive is the transcript itself, reached
//!   through search.
//! - **Writes** are [`MemoryOp`]s sent through the [`MemoryHub`] to the
//!   actor of their scope instance, which commits them as
//!   `Mutation::Memory`; the store writer checks limits inside the
//!   transaction and answers a [`MemoryOpResult`]. A full layer is a
//!   [`MemoryRefusal`] naming what to replace — never a silent truncation.
//!   A Forget leaves marks that a fact extraction of an earlier turn,
//!   landing later, cannot undo (`MemoryOp::AddExtracted`,
//!   `forget_marks.rs`).
//! - **Reads** go straight to the store: [`Store::memory_snapshot`]
//!   (what one prompt shows, hashed), [`Store::memory_items`],
//!   [`Store::find_memory`] (what "forget X" should remove).
//!
//! ```no_run
//! # async fn demo(store: botfleet_memory::Store, bot: botfleet_memory::BotRecord)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use botfleet_memory::{Importance, Layer, MemoryHub, MemoryId, MemoryOp, MemoryScope, NewMemory};
//! let hub = MemoryHub::new(store.clone());
//! let result = hub
//!     .apply(MemoryOp::Add(NewMemory {
//!         id: MemoryId::random(),
//!         scope: MemoryScope::User(bot.owner.clone()),
//!         layer: Layer::Profile,
//!         text: "Prefers answers in French.".into(),
//!         importance: Importance::NORMAL,
//!         expires_at: None,
//!         source: "api:alice".into(),
//!     }))
//!     .await?;
//! let now = store.clock().now_ms();
//! let snapshot = store.bot_memory_snapshot(&bot, "what language?", now).await?;
//! # let _ = (result, snapshot); Ok(()) }
//! ```

mod actor;
mod apply;
mod forget_marks;
mod keys_refresh;
mod read;
mod recall;
mod scope_cache;
mod snapshot;
mod types;

pub use actor::DEFAULT_SCOPE_IDLE;
pub use actor::MemoryError;
pub use actor::MemoryHub;
pub(crate) use keys_refresh::refresh as refresh_memory_keys;
pub use read::MemoryLookup;
pub use recall::LOG_PROMPT_CAP;
pub use recall::RecallParams;
pub use recall::ScoredEntry;
pub use recall::rank_log;
pub use recall::terms;
pub(crate) use scope_cache::MemoryGenerations;
pub(crate) use scope_cache::ScopeCache;
pub use snapshot::MemoryDelta;
pub use snapshot::MemorySnapshot;
pub use types::DEFAULT_NOTE_HOURS;
pub use types::Importance;
pub use types::Layer;
pub use types::MAX_ENTRY_CHARS;
pub use types::MAX_FACT_CHARS;
pub use types::MAX_LIVE_NOTES;
pub use types::MAX_LOG_ENTRIES;
pub use types::MAX_NOTE_HOURS;
pub use types::MAX_PROFILE_CHARS;
pub use types::MAX_PROFILE_FACTS;
pub use types::MemoryId;
pub use types::MemoryItem;
pub use types::MemoryOp;
pub use types::MemoryOpResult;
pub use types::MemoryRefusal;
pub use types::MemoryScope;
pub use types::NewMemory;
pub use types::ScopeKind;
pub use types::bot_projects;
pub use types::bot_scopes;
pub use types::normalize_text;
pub use types::shows_nothing;
pub use types::without_invisible;

pub(crate) use apply::apply;

#[cfg(test)]
mod test_fixture;

#[cfg(test)]
#[path = "layers_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "forget_tests.rs"]
mod forget_tests;

#[cfg(test)]
#[path = "source_tests.rs"]
mod source_tests;

#[cfg(test)]
#[path = "log_roll_tests.rs"]
mod log_roll_tests;
