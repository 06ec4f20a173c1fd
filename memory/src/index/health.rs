//! Keeping a damaged index from hurting the host.
//!
//! A segment file damaged on disk can make tantivy panic in the middle of a
//! search ("Compressed array seems too small"), or loop forever (a corrupt
//! skip list). A thread that spins cannot be killed, so async searches
//! ([`TranscriptSearch::search`](super::TranscriptSearch::search)) are
//! bounded here:
//!
//! - at most [`MAX_RUNNING_SEARCHES`] run at once (a semaphore whose permit
//!   the blocking task holds until it really ends), so stuck searches
//!   cannot take every blocking thread or every core;
//! - each has a deadline ([`DEFAULT_SEARCH_DEADLINE`]), after which the
//!   caller gets [`IndexError::SearchTimeout`] while the thread is left to
//!   finish or spin;
//! - a search that passes its deadline marks the index damaged
//!   ([`Health::mark_damaged`]): searches are refused with
//!   [`IndexError::Damaged`] until the indexer has set the index aside and
//!   opened a new one, which it fills again from the store (see
//!   `repair.rs`);
//! - a search that panics is damage only if the evidence says so: the
//!   same task then checks the segment files' checksums (milliseconds per
//!   100,000 entries). Files that fail it mark the index damaged as above;
//!   intact files mean a bug set off by this query (tantivy 0.27 panicked
//!   on every excluded phrase, see `query_exclusion.rs`), so the index is
//!   kept and only this search fails, with [`IndexError::SearchFailed`]
//!   naming the query, logged with the panic's message. Taking any panic
//!   for damage let one query set the whole index aside, again on every
//!   repeat.
//!
//! A damaged index is also found by checking the segment files' checksums,
//! which the indexer does in the background after it starts.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::sync::watch;

use super::error::IndexError;
use super::repair::damaged_segments;
use super::repair::is_damage;

/// Searches that may run at once; more wait for a permit (within their
/// deadline). A search is CPU work of milliseconds, so this only bites
/// when searches are stuck on a damaged index.
pub const MAX_RUNNING_SEARCHES: usize = 8;

/// How long an async search may take, waiting for a permit included,
/// before the caller gets [`IndexError::SearchTimeout`]. Searches take
/// milliseconds; one that takes this long is stuck on a damaged index.
pub const DEFAULT_SEARCH_DEADLINE: Duration = Duration::from_secs(10);

/// Why the index was found damaged, and in which generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damage {
    /// The generation of the index found damaged (see [`Health`]).
    pub(crate) generation: u64,
    /// What was found.
    pub(crate) cause: String,
}

/// What a bounded search runs on: named in its errors, and checked when
/// it panics.
pub(crate) struct Searched {
    /// The generation of the index searched (see [`Health`]).
    pub(crate) generation: u64,
    /// That generation's index, whose files are checked after a panic.
    pub(crate) index: tantivy::Index,
    /// The query text, named in the error of a search that panicked.
    pub(crate) query: String,
}

/// How a search task ended (other than by passing its deadline).
enum Ran<T> {
    /// It returned.
    Done(Result<T, IndexError>),
    /// It panicked; the segment files were checked after.
    Panicked {
        /// The panic's message.
        message: String,
        /// What the check of the segment files found: `Some` names the
        /// files that fail their checksum.
        check: Result<Option<String>, IndexError>,
    },
}

/// The damage state and search limits shared by every clone of a
/// [`TranscriptIndex`](super::TranscriptIndex).
pub(crate) struct Health {
    /// `Some` from when damage is found until the index is replaced; the
    /// indexer watches it.
    damage: watch::Sender<Option<Damage>>,
    /// Permits of running searches.
    permits: Arc<Semaphore>,
    /// The search deadline, in milliseconds.
    deadline_ms: AtomicU64,
    /// The generation of the index searches use now: damage found in an
    /// older one (a stuck search that ends after the index was replaced)
    /// is ignored.
    generation: AtomicU64,
}

impl Health {
    pub(crate) fn new() -> Self {
        Self {
            damage: watch::Sender::new(None),
            permits: Arc::new(Semaphore::new(MAX_RUNNING_SEARCHES)),
            deadline_ms: AtomicU64::new(millis(DEFAULT_SEARCH_DEADLINE)),
            generation: AtomicU64::new(0),
        }
    }

    /// The damage found, if the index has not been replaced since.
    pub(crate) fn damage(&self) -> Option<Damage> {
        self.damage.borrow().clone()
    }

    /// Records that generation `generation` is damaged; the first cause
    /// found is kept. Returns whether this call found it first (and so
    /// should log it).
    pub(crate) fn mark_damaged(&self, generation: u64, cause: String) -> bool {
        if generation != self.generation.load(Ordering::SeqCst) {
            return false;
        }
        self.damage.send_if_modified(|d| match d {
            Some(_) => false,
            None => {
                *d = Some(Damage { generation, cause });
                true
            }
        })
    }

    /// Clears the damage: the index was replaced by generation
    /// `generation`.
    pub(crate) fn replaced(&self, generation: u64) {
        self.generation.store(generation, Ordering::SeqCst);
        self.damage.send_replace(None);
    }

    /// A receiver that sees every change of the damage state.
    pub(crate) fn watch(&self) -> watch::Receiver<Option<Damage>> {
        self.damage.subscribe()
    }

    pub(crate) fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms.load(Ordering::Relaxed))
    }

    pub(crate) fn set_deadline(&self, deadline: Duration) {
        self.deadline_ms.store(millis(deadline), Ordering::Relaxed);
    }

    /// Runs `f` in the blocking pool under a permit and the deadline. A
    /// passed deadline marks `searched`'s generation damaged; a panic does
    /// if the segment files then fail their checksum, and otherwise fails
    /// only this search ([`IndexError::SearchFailed`]).
    pub(crate) async fn run_bounded<T: Send + 'static>(
        &self,
        searched: Searched,
        f: impl FnOnce() -> Result<T, IndexError> + Send + 'static,
    ) -> Result<T, IndexError> {
        if let Some(damage) = self.damage() {
            return Err(IndexError::Damaged {
                cause: damage.cause,
            });
        }
        let Searched {
            generation,
            index,
            query,
        } = searched;
        let deadline = self.deadline();
        let after_ms = millis(deadline);
        let until = tokio::time::Instant::now() + deadline;
        let permit =
            match tokio::time::timeout_at(until, self.permits.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                // the semaphore is never closed
                Ok(Err(closed)) => return Err(IndexError::Task(closed.to_string())),
                Err(_) => {
                    return Err(IndexError::SearchesBusy {
                        running: MAX_RUNNING_SEARCHES,
                        after_ms,
                    });
                }
            };
        let task = tokio::task::spawn_blocking(move || {
            // held until the search (and the check after a panic) really
            // ends, even after its caller gave up on it: checks are bounded
            // like searches
            let _permit = permit;
            // unwind safety: a search only reads; a searcher is its own
            // clone of the reader's segments, dropped with the panic
            match std::panic::catch_unwind(AssertUnwindSafe(f)) {
                Ok(result) => Ran::Done(result),
                Err(payload) => Ran::Panicked {
                    message: panic_message(payload.as_ref()),
                    check: damaged_segments(&index),
                },
            }
        });
        match tokio::time::timeout_at(until, task).await {
            Ok(Ok(Ran::Done(result))) => result,
            Ok(Ok(Ran::Panicked { message, check })) => {
                Err(self.panicked(generation, query, message, check))
            }
            Ok(Err(join)) => {
                // the checksum check itself panicked: its reads of the
                // segment files are what failed
                let cause =
                    format!("checking the index files after a search panicked failed: {join}");
                self.report(generation, &cause);
                Err(IndexError::Damaged { cause })
            }
            Err(_) => {
                let cause = format!("a search did not finish within {after_ms} ms");
                self.report(generation, &cause);
                Err(IndexError::SearchTimeout { after_ms })
            }
        }
    }

    /// The error of a search that panicked with `message`, after the check
    /// of the segment files found `check`: damage (set aside and rebuilt)
    /// only on evidence of it.
    fn panicked(
        &self,
        generation: u64,
        query: String,
        message: String,
        check: Result<Option<String>, IndexError>,
    ) -> IndexError {
        let cause = match check {
            Ok(None) => {
                tracing::error!(
                    query,
                    panic = message,
                    "a search panicked, but the index files pass their checksums: the index is kept and only this search failed (a bug: report it with the query)"
                );
                return IndexError::SearchFailed {
                    query,
                    cause: message,
                };
            }
            Err(e) if !is_damage(&e) => {
                // an environment failure (permissions, memory) says nothing
                // about the files: keep the index
                tracing::error!(
                    query,
                    panic = message,
                    check = %e,
                    "a search panicked, and the index files could not be checked: the index is kept"
                );
                return IndexError::SearchFailed {
                    query,
                    cause: format!("{message}; checking the index files failed too: {e}"),
                };
            }
            Ok(Some(files)) => format!("a search panicked ({message}) and {files}"),
            Err(e) => {
                format!("a search panicked ({message}) and the index files cannot be read: {e}")
            }
        };
        self.report(generation, &cause);
        IndexError::Damaged { cause }
    }

    /// Marks the index damaged and logs it the first time.
    fn report(&self, generation: u64, cause: &str) {
        if self.mark_damaged(generation, cause.to_owned()) {
            tracing::warn!(
                cause,
                "the search index looks damaged: setting it aside and rebuilding it from the store"
            );
        }
    }
}

/// The message of a panic (what `panic!` was given), or a placeholder
/// for a payload of another type.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
