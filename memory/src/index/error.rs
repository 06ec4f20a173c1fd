//! Errors of the transcript index: bad queries ([`QueryError`], the caller
//! can fix them) nested in [`IndexError`] (everything else).

use std::path::PathBuf;

use super::tokenizer::MAX_WORD_CHARS;
use super::tokenizer::has_overlong_word;
use crate::error::StoreError;

/// Longest query text accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 512;

/// Most hits one search may return.
pub const MAX_SEARCH_LIMIT: usize = 100;

/// Most hits one search may skip (paging): deeper pages cost memory and
/// time in proportion to `offset + limit`, so a narrower query is the way on.
pub const MAX_SEARCH_OFFSET: usize = 10_000;

/// A query the index refuses. Every message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The query text is empty or only spaces.
    #[error("the search query is empty: give at least one word to search for")]
    Empty,
    /// The query has text, but no searchable word in it: punctuation
    /// alone, or words longer than [`MAX_WORD_CHARS`] (the message says
    /// which).
    #[error("the search query {} has no searchable words {}", crate::quote::quote_as_written(.query), no_words_hint(.query))]
    NoWords {
        /// The query as given.
        query: String,
    },
    /// The query is longer than [`MAX_QUERY_CHARS`].
    #[error(
        "the search query is {chars} characters long; the limit is {max}: shorten it to its key words"
    )]
    TooLong {
        /// Length of the query in characters.
        chars: usize,
        /// The limit.
        max: usize,
    },
    /// A quote opens a phrase that never closes.
    #[error(
        "unbalanced quote: the {quote} at character {} opens a phrase that is never closed; add a closing {close} or remove it",
        .at + 1
    )]
    UnbalancedQuote {
        /// The opening quote character.
        quote: char,
        /// The quote that would close it.
        close: char,
        /// Its position in the query, in characters from 0 (the message
        /// counts from 1, as a person does: QA, "character 0" read as
        /// meaningless).
        at: usize,
    },
    /// A quoted phrase has no searchable word inside.
    #[error(
        "the phrase starting at character {} has no searchable words; put words between the quotes or remove them",
        .at + 1
    )]
    EmptyPhrase {
        /// Position of the opening quote, in characters from 0.
        at: usize,
    },
    /// Every term of the query is excluded with `-`.
    #[error(
        "the query only excludes terms (with '-'); add at least one term to search for, e.g. `deploy -staging`"
    )]
    OnlyExclusions,
    /// The limit is outside `1..=MAX_SEARCH_LIMIT`.
    #[error("limit {limit} is out of range: ask for 1 to {max} hits (MAX_SEARCH_LIMIT)")]
    LimitOutOfRange {
        /// The limit given.
        limit: usize,
        /// The largest limit accepted.
        max: usize,
    },
    /// The offset is over `MAX_SEARCH_OFFSET`.
    #[error(
        "offset {offset} is out of range: skip 0 to {max} hits (MAX_SEARCH_OFFSET), or narrow the query"
    )]
    OffsetOutOfRange {
        /// The offset given.
        offset: usize,
        /// The largest offset accepted.
        max: usize,
    },
    /// A role filter names no known role.
    #[error("unknown role {role:?} in the role filter; known roles: {known}")]
    UnknownRole {
        /// The role given.
        role: String,
        /// The known roles, comma separated.
        known: &'static str,
    },
    /// A kind filter names no known entry kind.
    #[error("unknown entry kind {kind:?} in the kind filter; known kinds: {known}")]
    UnknownKind {
        /// The kind given.
        kind: String,
        /// The known kinds, comma separated.
        known: &'static str,
    },
}

/// Why a query without searchable words has none, and what to do.
fn no_words_hint(query: &str) -> String {
    if has_overlong_word(query) {
        format!(
            "(words longer than {MAX_WORD_CHARS} characters are not indexed): give at least one shorter word"
        )
    } else {
        "(punctuation and symbols are ignored): give at least one word".to_owned()
    }
}

/// What can go wrong in the transcript index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The query was refused; the caller can fix it.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// tantivy reported an error.
    // not `#[from]`: the message is part of this one's, and a `source`
    // would be printed again by `{:#}` of anyhow
    #[error("search index: {0}")]
    Tantivy(tantivy::TantivyError),
    /// Another writer holds the index (another host process, or a
    /// `botfleet reindex` running beside the host).
    #[error(
        "the search index at {dir} is in use by another writer; stop the other botfleet process (a running host or reindex) and retry"
    )]
    Locked {
        /// Index directory.
        dir: PathBuf,
    },
    /// The index's commit marker did not parse.
    #[error(
        "the search index at {dir} has an unreadable commit marker ({detail}); rebuild it with `botfleet reindex`"
    )]
    CorruptMarker {
        /// Index directory.
        dir: PathBuf,
        /// What failed to parse.
        detail: String,
    },
    /// A JSONL mirror file is damaged (its last line is not an entry) and
    /// no store was given to write it again from.
    #[error(
        "the JSONL mirror file {path} is damaged ({detail}); move it away (the host writes it again from the store at its next start), or stop the host and run `botfleet reindex`, which rewrites the whole mirror"
    )]
    MirrorDamaged {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// Reading the transcript from the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A file of the index or of the JSONL mirror could not be read or written.
    // `cause`, not `source`: the message already says it
    #[error("index i/o on {path}: {cause}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The index directory is not a directory the host can write (owned by
    /// another user, read-only, on a read-only mount, or a file): searches
    /// would find nothing new while every commit failed.
    #[error(
        "the search index directory {dir} cannot be written ({cause}); make it a directory the user running botfleet can write (e.g. `chown -R $(id -un) {dir}` and `chmod -R u+rwX {dir}`; remount a read-only disk read-write), or move it away: the host creates it again and rebuilds it from the store"
    )]
    NotWritable {
        /// Index directory.
        dir: PathBuf,
        /// What the write test hit.
        cause: std::io::Error,
    },
    /// The JSONL mirror's directory (`<data_dir>/transcripts`) is not a
    /// directory the host can write (a plain file, another user's, on a
    /// read-only mount).
    #[error(
        "the JSONL mirror directory {dir} cannot be used ({cause}); it must be a directory the user running botfleet can write: move away whatever is there (the host creates it again and writes the mirror from the store), or fix its owner and permissions (`chown -R $(id -un) {dir}`, `chmod -R u+rwX {dir}`)"
    )]
    MirrorNotWritable {
        /// The mirror's root directory.
        dir: PathBuf,
        /// What the check hit.
        cause: std::io::Error,
    },
    /// The index was found damaged (a search never finished, or a segment
    /// file failed its checksum, checked in the background or after a
    /// search panicked): the indexer moves it aside
    /// and rebuilds it from the store; searches are refused until the new
    /// index is open.
    #[error(
        "the search index is damaged ({cause}) and is being rebuilt from the store; searches work again within moments and find older entries once the rebuild has caught up (if this persists, restart the host)"
    )]
    Damaged {
        /// What was found.
        cause: String,
    },
    /// A search did not finish within the search deadline; the index is
    /// treated as damaged and rebuilt.
    #[error(
        "the search did not finish within {after_ms} ms, which points to a damaged index: it is being rebuilt from the store; search again in a moment"
    )]
    SearchTimeout {
        /// The deadline.
        after_ms: u64,
    },
    /// A search panicked, but the index files pass their checksums: a bug
    /// set off by this query, not damage, so the index is kept and only
    /// this search failed (a retry of the same query fails the same way).
    #[error(
        "the search for {} failed: the search engine hit an internal error ({cause}); the search index is intact and was kept. This is a bug: rephrase the query (for instance without an excluded phrase) and report it with the query",
        crate::quote::quote_as_written(.query)
    )]
    SearchFailed {
        /// The query text.
        query: String,
        /// The panic's message.
        cause: String,
    },
    /// Every search slot stayed taken for the whole search deadline.
    #[error(
        "the search could not start within {after_ms} ms: {running} searches are already running (some may be stuck on a damaged index); retry shortly, and restart the host if it persists"
    )]
    SearchesBusy {
        /// How many searches may run at once.
        running: usize,
        /// The deadline.
        after_ms: u64,
    },
    /// A blocking index task panicked or was cancelled.
    #[error("index task failed: {0}")]
    Task(String),
    /// The indexer actor has stopped.
    #[error("the indexer has stopped; restart the host")]
    IndexerGone,
    /// The indexer did not answer in time.
    #[error("the indexer did not answer within {after_ms} ms; it may be rebuilding, retry later")]
    Timeout {
        /// How long the caller waited.
        after_ms: u64,
    },
}

impl From<tantivy::TantivyError> for IndexError {
    fn from(e: tantivy::TantivyError) -> Self {
        IndexError::Tantivy(e)
    }
}

impl IndexError {
    /// Whether retrying the same operation later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            IndexError::Store(e) => e.is_retryable(),
            IndexError::Io { .. }
            | IndexError::Task(_)
            | IndexError::Timeout { .. }
            | IndexError::SearchesBusy { .. }
            | IndexError::Locked { .. } => true,
            IndexError::Tantivy(e) => matches!(
                e,
                tantivy::TantivyError::IoError(_) | tantivy::TantivyError::LockFailure(..)
            ),
            IndexError::Query(_)
            | IndexError::CorruptMarker { .. }
            | IndexError::MirrorDamaged { .. }
            | IndexError::NotWritable { .. }
            | IndexError::MirrorNotWritable { .. }
            // a retry succeeds only once the index is rebuilt, which
            // can take minutes: not a "retry shortly"
            | IndexError::Damaged { .. }
            | IndexError::SearchTimeout { .. }
            | IndexError::SearchFailed { .. }
            | IndexError::IndexerGone => false,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IndexError::Io {
            path: path.into(),
            cause: source,
        }
    }
}
