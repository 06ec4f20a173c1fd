//! Transcript recall: a tantivy index over every transcript entry, and a
//! JSONL mirror of each session.
//!
//! SQLite stays the source of truth; both are derived and can be rebuilt
//! from the store at any time.
//!
//! - [`TranscriptIndex`] is the opened index. Clones share one reader and
//!   serve searches ([`TranscriptIndex::search_blocking`], or
//!   [`TranscriptSearch::search`] from async code) without going through
//!   any actor.
//! - [`Indexer`] is the single writer: entries in gid order, commits that
//!   carry the last indexed gid as their payload.
//! - [`IndexerActor`] runs the writer in the fleet: it follows the store's
//!   change signals, catches up after a crash, commits on a short timer and
//!   keeps the [`JsonlMirror`] beside the index.
//! - [`reindex`] rebuilds the index (and a data directory's JSONL mirror)
//!   from the store (the `botfleet reindex` command).
//!
//! How text is tokenized (CJK bigrams in the index, jieba on the query
//! side, Latin words lowercased and stemmed) and the query language are
//! described in `docs/search.md`, in the `tokenizer` module and on
//! [`SearchQuery`].
//!
//! ```no_run
//! # async fn demo(store: botfleet_memory::Store) -> Result<(), Box<dyn std::error::Error>> {
//! use botfleet_memory::{IndexOptions, SearchQuery, TranscriptIndex, reindex};
//! let index = TranscriptIndex::open("./botfleet-data/index")?;
//! // Offline rebuild (host stopped), with a progress callback for a bar.
//! let report = reindex(&index, &store, IndexOptions::default(), |done, total| {
//!     let _ = (done, total);
//! })
//! .await?;
//! let results = index.search_blocking(&SearchQuery::new("供应商").with_limit(5))?;
//! for hit in results.hits {
//!     let _ = (hit.session, hit.seq, hit.snippet);
//! }
//! # let _ = report; Ok(()) }
//! ```

mod actor;
mod error;
mod feed;
mod health;
mod jsonl_mirror;
mod mirror_file;
mod query;
mod repair;
mod schema;
mod search;
mod snippet;
mod tokenizer;
mod writer;

pub use actor::IndexerActor;
pub use actor::IndexerArgs;
pub use actor::IndexerMsg;
pub use actor::IndexerState;
pub use error::IndexError;
pub use error::MAX_QUERY_CHARS;
pub use error::MAX_SEARCH_LIMIT;
pub use error::MAX_SEARCH_OFFSET;
pub use error::QueryError;
pub use feed::MIRROR_DIR;
pub use feed::ReindexReport;
pub use feed::reindex;
pub use jsonl_mirror::JsonlMirror;
pub use query::BotCopies;
pub use query::DEFAULT_SEARCH_LIMIT;
pub use query::RoomCopies;
pub use query::SearchQuery;
pub use repair::SetAside;
pub use search::SearchHit;
pub use search::SearchResults;
pub use search::TranscriptIndex;
pub use search::TranscriptSearch;
pub use snippet::HIGHLIGHT_CLOSE;
pub use snippet::HIGHLIGHT_OPEN;
pub(crate) use tokenizer::CharClass;
pub use tokenizer::MAX_WORD_CHARS;
pub(crate) use tokenizer::Script;
pub(crate) use tokenizer::classify;
/// Cuts text into the units queries use (stemmed words, CJK bigrams); the
/// memory log ranks its entries with the same units.
pub(crate) use tokenizer::query_analyzer;
pub(crate) use tokenizer::recall_analyzer;
pub use writer::IndexOptions;
pub use writer::IndexProgress;
pub use writer::Indexer;

#[cfg(test)]
mod test_support;

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "recall_tests.rs"]
mod recall_tests;

#[cfg(test)]
#[path = "snippet_tests.rs"]
mod snippet_tests;

#[cfg(test)]
#[path = "repair_tests.rs"]
mod repair_tests;

#[cfg(test)]
#[path = "damage_tests.rs"]
mod damage_tests;

#[cfg(test)]
#[path = "quoting_tests.rs"]
mod quoting_tests;
