//! From the store to the index and the mirror: reading entries in gid
//! order, finding each entry's bot, and applying batches off the async
//! threads. Shared by the [actor](super::IndexerActor) and [`reindex`].

use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use serde::Deserialize;
use serde::Serialize;

use super::error::IndexError;
use super::jsonl_mirror::JsonlMirror;
use super::search::TranscriptIndex;
use super::writer::IndexOptions;
use super::writer::IndexProgress;
use super::writer::Indexer;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::record::Entry;
use crate::store::Store;

/// Name of the index directory in a data directory.
const INDEX_DIR: &str = "index";
/// Name of the JSONL mirror's directory in a data directory.
pub const MIRROR_DIR: &str = "transcripts";

/// Sessions whose bot is remembered before the cache starts over.
const BOT_CACHE: usize = 65_536;

/// An entry with the bot of its session (`None` if the session is gone).
pub(crate) type Resolved = (Entry, Option<BotId>);

/// Reads entries after a gid and resolves their bots, caching session → bot.
pub(crate) struct Feed {
    store: Store,
    batch: usize,
    bots: HashMap<SessionId, Option<BotId>>,
}

impl Feed {
    pub(crate) fn new(store: Store, batch: usize) -> Self {
        Self {
            store,
            batch: batch.max(1),
            bots: HashMap::new(),
        }
    }

    /// The store read from.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The next entries after `after`, oldest first (empty when caught up).
    pub(crate) async fn next_batch(&mut self, after: i64) -> Result<Vec<Resolved>, IndexError> {
        let limit = i64::try_from(self.batch).unwrap_or(i64::MAX);
        let entries = self.store.entries_after_gid(after, limit).await?;
        self.resolve(entries).await
    }

    /// Pairs entries with their bots.
    pub(crate) async fn resolve(
        &mut self,
        entries: Vec<Entry>,
    ) -> Result<Vec<Resolved>, IndexError> {
        if self.bots.len() > BOT_CACHE {
            self.bots.clear();
        }
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let bot = match self.bots.get(&entry.session) {
                Some(bot) => bot.clone(),
                None => {
                    let bot = self
                        .store
                        .get_session(entry.session)
                        .await?
                        .map(|s| s.key.bot);
                    if bot.is_none() {
                        tracing::warn!(session = %entry.session, gid = entry.gid, "entry of an unknown session: not indexed");
                    }
                    self.bots.insert(entry.session, bot.clone());
                    bot
                }
            };
            out.push((entry, bot));
        }
        Ok(out)
    }
}

/// The writing side, moved into the blocking pool for each batch: the
/// indexer and, if enabled, the JSONL mirror.
pub(crate) struct Sink {
    pub(crate) indexer: Indexer,
    pub(crate) mirror: Option<JsonlMirror>,
}

impl Sink {
    /// The gid after which the store must be read: the lower of what the
    /// index and the mirror hold.
    pub(crate) fn cursor(&self) -> i64 {
        let indexed = self.indexer.progress().added_gid;
        self.mirror
            .as_ref()
            .map_or(indexed, |m| indexed.min(m.written_gid()))
    }

    /// Whether anything waits for [`Sink::commit`]: entries the index has
    /// not committed, or mirror lines not flushed (a mirror rebuilt behind a
    /// caught-up index has only the latter).
    pub(crate) fn has_pending(&self) -> bool {
        self.indexer.progress().pending > 0
            || self.mirror.as_ref().is_some_and(JsonlMirror::has_unflushed)
    }

    /// Adds a batch to the index and the mirror; commits if the batch
    /// threshold is reached.
    pub(crate) fn apply(&mut self, batch: &[Resolved]) -> Result<(), IndexError> {
        for (entry, bot) in batch {
            match bot {
                Some(bot) => {
                    if let Err(e) = self.indexer.add(entry, bot) {
                        return Err(self.reset(e));
                    }
                    if let Some(mirror) = &mut self.mirror
                        && let Err(e) = mirror.append(entry, bot)
                    {
                        self.mirror_failed(e)?;
                    }
                }
                None => {
                    self.indexer.pass(entry.gid);
                    if let Some(mirror) = &mut self.mirror {
                        mirror.pass(entry.gid);
                    }
                }
            }
        }
        if self.indexer.batch_full() {
            self.commit()?;
        }
        Ok(())
    }

    /// Makes everything durable: the mirror first, then the index commit,
    /// so the index never claims more than the mirror holds.
    pub(crate) fn commit(&mut self) -> Result<IndexProgress, IndexError> {
        if let Some(mirror) = &mut self.mirror
            && let Err(e) = mirror.flush()
        {
            self.mirror_failed(e)?;
        }
        match self.indexer.commit() {
            Ok(progress) => Ok(progress),
            Err(e) => Err(self.reset(e)),
        }
    }

    /// A mirror whose root was deleted while the host runs, or that
    /// cannot write one of its files (owned by another user after a `sudo
    /// botfleet reindex`, a directory in its place), is dropped (it says
    /// so once, [`JsonlMirror::abandon`]): the index goes on without it,
    /// rather than waiting for what only the operator and a restart fix.
    /// (QA: one such file stopped search indexing for every bot, retried
    /// at each commit, and `/healthz` said `ok`.) A full disk is the
    /// caller's: it retries, and the mirror goes on once space is free.
    fn mirror_failed(&mut self, e: IndexError) -> Result<(), IndexError> {
        let unwritable = matches!(&e, IndexError::Io { cause, .. } if !passing(cause));
        match self.mirror.take_if(|m| unwritable || m.root_gone()) {
            Some(mirror) => {
                mirror.abandon(&e);
                Ok(())
            }
            None => Err(e),
        }
    }

    /// After a failed add or commit, returns the writer to its last commit.
    /// tantivy's writer does not recover by itself: a worker thread that
    /// hit an I/O error (a full disk) leaves it refusing every later
    /// document ("an index writer was killed"). The entries after the
    /// commit are read from the store again on the next catch-up. A reset
    /// that fails too leaves the writer unusable: [`IndexError::Task`], on
    /// which the actor restarts.
    fn reset(&mut self, e: IndexError) -> IndexError {
        match self.indexer.rollback() {
            Ok(_) => e,
            Err(again) => IndexError::Task(format!(
                "{e}; returning the index writer to its last commit failed too: {again}"
            )),
        }
    }
}

/// Whether an I/O error may pass by itself (space freed, a retry): the
/// others (a permission, a read-only file system, a directory where a
/// file goes) wait for the operator.
fn passing(cause: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        cause.kind(),
        ErrorKind::StorageFull
            | ErrorKind::QuotaExceeded
            | ErrorKind::Interrupted
            | ErrorKind::TimedOut
            | ErrorKind::WouldBlock
            | ErrorKind::OutOfMemory
            | ErrorKind::FileTooLarge
    )
}

/// The JSONL mirror root of a data directory, `<data_dir>/transcripts`, if
/// `index` is that directory's `index` and the store its `fleet.db`: a
/// mirror is only ever rewritten where the host keeps it.
pub(crate) fn mirror_root_of(index: &TranscriptIndex, store: &Store) -> Option<PathBuf> {
    let data_dir = store.path().parent()?;
    let index_dir = index.dir();
    if index_dir.file_name()? != INDEX_DIR {
        return None;
    }
    let same = |a: &Path, b: &Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    };
    same(index_dir.parent()?, data_dir).then(|| data_dir.join(MIRROR_DIR))
}

/// Runs `f` on the sink in the blocking pool and hands the sink back.
pub(crate) async fn blocking<T: Send + 'static>(
    mut sink: Sink,
    f: impl FnOnce(&mut Sink) -> Result<T, IndexError> + Send + 'static,
) -> Result<(Sink, Result<T, IndexError>), IndexError> {
    tokio::task::spawn_blocking(move || {
        let result = f(&mut sink);
        (sink, result)
    })
    .await
    .map_err(|e| IndexError::Task(e.to_string()))
}

/// What a rebuild did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReindexReport {
    /// Entries read from the store.
    pub entries: u64,
    /// Documents in the rebuilt index (entries without text are skipped).
    pub documents: u64,
    /// The last gid indexed.
    pub last_gid: i64,
    /// Wall time of the rebuild.
    #[serde(with = "millis")]
    pub elapsed: Duration,
}

mod millis {
    use std::time::Duration;

    use serde::Deserialize;
    use serde::Deserializer;
    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// Rebuilds `index` from the store: deletes every document,
/// then indexes every entry in gid order, committing every
/// `options.commit_batch` entries (an interrupted rebuild resumes as a
/// catch-up when the indexer next starts). `progress(done, total)` is
/// called after each batch; `total` is the store's entry count at the
/// start. Needs the writer lock: run it while the host is stopped.
///
/// When the index is a data directory's (`<data_dir>/index` beside the
/// store's `<data_dir>/fleet.db`), the JSONL mirror at
/// `<data_dir>/transcripts` is rewritten too: its session files and marker
/// are deleted and written again from the store, which heals any damage.
pub async fn reindex(
    index: &TranscriptIndex,
    store: &Store,
    options: IndexOptions,
    mut progress: impl FnMut(u64, u64),
) -> Result<ReindexReport, IndexError> {
    let started = Instant::now();
    let indexer = Indexer::open(index, options.clone())?;
    let mirror = match mirror_root_of(index, store) {
        Some(root) => Some(JsonlMirror::open_empty(root)?.with_store(store.clone())),
        None => None,
    };
    let sink = Sink { indexer, mirror };
    let (mut sink, cleared) = blocking(sink, |s| s.indexer.clear()).await?;
    cleared?;
    let total = u64::try_from(store.count("entries").await?).unwrap_or(0);
    progress(0, total);
    let mut feed = Feed::new(store.clone(), options.catch_up_batch.max(1_000));
    let mut done = 0u64;
    loop {
        let batch = feed.next_batch(sink.cursor()).await?;
        if batch.is_empty() {
            break;
        }
        done += batch.len() as u64;
        let (back, applied) = blocking(sink, move |s| s.apply(&batch)).await?;
        sink = back;
        applied?;
        progress(done, total.max(done));
    }
    let (sink, committed) = blocking(sink, Sink::commit).await?;
    let committed = committed?;
    Ok(ReindexReport {
        entries: done,
        documents: sink.indexer.index().num_entries(),
        last_gid: committed.committed_gid,
        elapsed: started.elapsed(),
    })
}
