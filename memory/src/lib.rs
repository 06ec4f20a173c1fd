//! botfleet-memory: the durable state of a fleet and its recall.
//!
//! Everything that must survive a crash lives here: bots, sessions, the
//! transcript, the idempotency ledger, turns with their checkpoints and tool
//! calls. The [`Store`] is a single SQLite writer with group commit plus a
//! pool of readers. This crate knows no actor of the runtime but its own
//! storage machinery and never calls a model.
#![doc = include_str!("../README.md")]

mod clock;
mod digest;
mod error;
mod ids;
mod index;
mod record;
mod store;

pub use clock::Clock;
pub use clock::ManualClock;
pub use clock::SystemClock;
pub use digest::InputDigest;
pub use error::Result;
pub use error::StoreError;
pub use ids::BotId;
pub use ids::EntryId;
pub use ids::IdError;
pub use ids::SessionId;
pub use ids::TurnId;
pub use ids::UserId;
pub use index::DEFAULT_SEARCH_LIMIT;
pub use index::HIGHLIGHT_CLOSE;
pub use index::HIGHLIGHT_OPEN;
pub use index::IndexError;
pub use index::IndexOptions;
pub use index::IndexProgress;
pub use index::Indexer;
pub use index::IndexerActor;
pub use index::IndexerArgs;
pub use index::IndexerMsg;
pub use index::IndexerState;
pub use index::JsonlMirror;
pub use index::MAX_QUERY_CHARS;
pub use index::MAX_SEARCH_LIMIT;
pub use index::MAX_WORD_BYTES;
pub use index::QueryError;
pub use index::ReindexReport;
pub use index::SearchHit;
pub use index::SearchQuery;
pub use index::SearchResults;
pub use index::TranscriptIndex;
pub use index::TranscriptSearch;
pub use index::reindex;
pub use record::AdmitOutcome;
pub use record::AdmitRequest;
pub use record::AdmittedRecord;
pub use record::BotRecord;
pub use record::Change;
pub use record::Entry;
pub use record::EntryKind;
pub use record::InboxItem;
pub use record::NewEntry;
pub use record::Priority;
pub use record::SessionKey;
pub use record::SessionKind;
pub use record::SessionRecord;
pub use record::ToolCallBody;
pub use record::ToolCallRecord;
pub use record::ToolCallStatus;
pub use record::TurnRecord;
pub use record::TurnStatus;
pub use store::Mutation;
pub use store::MutationResult;
pub use store::Store;
pub use store::StoreOptions;
pub use store::Synchronous;
pub use store::WriterStats;
