//! The single writer of the index.
//!
//! [`Indexer`] owns the only tantivy `IndexWriter` (tantivy's directory lock
//! refuses a second one, in this process or another). Entries are added in
//! gid order; an entry at or below the high-water mark is skipped, so
//! feeding the same entries twice is harmless. Every commit carries the
//! marker `{format, last_gid}` as its payload: the documents and the marker
//! become durable together, so after a crash the index knows exactly which
//! entries it holds and catches up from the store after `last_gid`.
//!
//! The methods block (tantivy does I/O and waits for its indexing threads);
//! async code moves the indexer into `spawn_blocking` (see the actor).

use std::time::Duration;

use serde::Deserialize;
use serde::Serialize;
use tantivy::IndexWriter;
use tantivy::TantivyDocument;

use super::error::IndexError;
use super::schema::Marker;
use super::search::TranscriptIndex;
use super::search::lock_error;
use super::search::read_marker;
use crate::ids::BotId;
use crate::record::Entry;

/// How the index is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexOptions {
    /// Indexing threads of the writer.
    pub writer_threads: usize,
    /// Memory budget of the writer in bytes, shared by its threads (tantivy
    /// needs at least 15 MB per thread).
    pub writer_memory: usize,
    /// Commit as soon as this many entries wait uncommitted.
    pub commit_batch: usize,
    /// Commit this long after the first uncommitted entry arrived; new
    /// entries become searchable within about this delay.
    pub commit_interval: Duration,
    /// Entries read from the store per catch-up step.
    pub catch_up_batch: usize,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            writer_threads: 1,
            writer_memory: 64 << 20,
            commit_batch: 10_000,
            commit_interval: Duration::from_millis(300),
            catch_up_batch: 2_000,
        }
    }
}

/// Where the indexer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexProgress {
    /// Highest gid handed to the writer (committed or not).
    pub added_gid: i64,
    /// Highest gid durably committed and visible to searches.
    pub committed_gid: i64,
    /// Entries added since the last commit.
    pub pending: usize,
}

/// The single writer of a [`TranscriptIndex`].
pub struct Indexer {
    index: TranscriptIndex,
    writer: IndexWriter<TantivyDocument>,
    options: IndexOptions,
    added_gid: i64,
    committed_gid: i64,
    pending: usize,
    /// Set when a rollback failed: tantivy's writer then has no directory
    /// lock, and touching it again panics ("This is a bug, please
    /// report"), so every later call fails with this instead.
    broken: Option<String>,
}

impl std::fmt::Debug for Indexer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Indexer")
            .field("dir", &self.index.dir())
            .field("progress", &self.progress())
            .finish()
    }
}

impl Indexer {
    /// Takes the writer lock of `index` and reads its commit marker.
    /// Fails with [`IndexError::Locked`] if another writer holds the index.
    pub fn open(index: &TranscriptIndex, options: IndexOptions) -> Result<Self, IndexError> {
        let threads = options.writer_threads.max(1);
        let memory = options.writer_memory.max(threads * 15_000_000);
        let writer = index
            .index()
            .writer_with_num_threads(threads, memory)
            .map_err(|e| lock_error(index.dir(), e))?;
        let last = read_marker(&index.index(), index.dir())?.map_or(0, |m| m.last_gid);
        Ok(Self {
            index: index.clone(),
            writer,
            options,
            added_gid: last,
            committed_gid: last,
            pending: 0,
            broken: None,
        })
    }

    /// The index this writer writes (clone it to search).
    pub fn index(&self) -> &TranscriptIndex {
        &self.index
    }

    /// The options the indexer was opened with.
    pub fn options(&self) -> &IndexOptions {
        &self.options
    }

    /// Where the indexer stands.
    pub fn progress(&self) -> IndexProgress {
        IndexProgress {
            added_gid: self.added_gid,
            committed_gid: self.committed_gid,
            pending: self.pending,
        }
    }

    /// Adds one entry of `bot`'s session. Entries must come in gid order;
    /// one at or below the high-water mark is skipped (returns `false`).
    /// An entry without searchable text only moves the mark.
    pub fn add(&mut self, entry: &Entry, bot: &BotId) -> Result<bool, IndexError> {
        if entry.gid <= self.added_gid {
            return Ok(false);
        }
        self.check_usable()?;
        if let Some(doc) = self.index.fields().document(entry, bot) {
            self.writer.add_document(doc)?;
        }
        self.added_gid = entry.gid;
        self.pending += 1;
        Ok(true)
    }

    /// Moves the mark past an entry that is not indexed (its session is
    /// gone from the store).
    pub(crate) fn pass(&mut self, gid: i64) {
        if gid > self.added_gid {
            self.added_gid = gid;
            self.pending += 1;
        }
    }

    /// Adds entries in order (see [`Indexer::add`]); returns how many were new.
    pub fn add_all<'a>(
        &mut self,
        entries: impl IntoIterator<Item = (&'a Entry, &'a BotId)>,
    ) -> Result<usize, IndexError> {
        let mut added = 0;
        for (entry, bot) in entries {
            added += usize::from(self.add(entry, bot)?);
        }
        Ok(added)
    }

    /// Whether enough entries wait for a commit to be due now.
    pub fn batch_full(&self) -> bool {
        self.pending >= self.options.commit_batch
    }

    /// Commits what was added with the marker, then makes it visible to
    /// searches. Nothing to commit is a no-op.
    pub fn commit(&mut self) -> Result<IndexProgress, IndexError> {
        if self.added_gid == self.committed_gid && self.pending == 0 {
            return Ok(self.progress());
        }
        self.check_usable()?;
        let mut prepared = self.writer.prepare_commit()?;
        prepared.set_payload(&Marker::new(self.added_gid).to_payload());
        prepared.commit()?;
        self.committed_gid = self.added_gid;
        self.pending = 0;
        self.index.reload()?;
        Ok(self.progress())
    }

    /// Drops everything uncommitted (as a crash would) and returns to the
    /// last commit's marker.
    pub fn rollback(&mut self) -> Result<IndexProgress, IndexError> {
        self.check_usable()?;
        if let Err(e) = self.writer.rollback() {
            self.broken = Some(e.to_string());
            return Err(e.into());
        }
        self.added_gid = self.committed_gid;
        self.pending = 0;
        Ok(self.progress())
    }

    /// Deletes every document and resets the mark to 0 (committed, so a
    /// crash during a rebuild resumes as a catch-up from the start).
    pub fn clear(&mut self) -> Result<IndexProgress, IndexError> {
        self.check_usable()?;
        self.writer.delete_all_documents()?;
        self.added_gid = 0;
        self.pending = 1;
        self.commit()
    }
}

impl Indexer {
    /// Fails if a failed rollback left the writer unusable.
    fn check_usable(&self) -> Result<(), IndexError> {
        match &self.broken {
            None => Ok(()),
            Some(cause) => Err(IndexError::Task(format!(
                "the index writer is unusable since returning it to its last commit failed ({cause})"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let index = TranscriptIndex::open(dir.path())?;
        let _first = Indexer::open(&index, IndexOptions::default())?;
        let second = Indexer::open(&index, IndexOptions::default());
        assert!(
            matches!(second, Err(IndexError::Locked { .. })),
            "{second:?}"
        );
        Ok(())
    }
}
