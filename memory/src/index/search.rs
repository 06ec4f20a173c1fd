//! The opened index and the read side: [`TranscriptIndex`] serves searches
//! from a shared, manually reloaded reader, and implements
//! [`TranscriptSearch`], the seam a shared search engine would fill later
//! (DESIGN §10).

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::RwLock;
use serde::Deserialize;
use serde::Serialize;
use tantivy::DocAddress;
use tantivy::DocId;
use tantivy::Index;
use tantivy::IndexReader;
use tantivy::ReloadPolicy;
use tantivy::Score;
use tantivy::Searcher;
use tantivy::SegmentReader;
use tantivy::TantivyDocument;
use tantivy::TantivyError;
use tantivy::collector::Count;
use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::schema::Field;
use tantivy::schema::Value;

use super::error::IndexError;
use super::health::Health;
use super::health::Searched;
use super::query::SearchQuery;
use super::query::compile;
use super::query::parse_text;
use super::query::validate;
use super::schema::FORMAT;
use super::schema::Fields;
use super::schema::GID_FIELD;
use super::schema::Marker;
use super::schema::QUOTING_TOOLS;
use super::schema::schema;
use super::snippet::Snippets;
use super::tokenizer::TOKENIZER_NAME;
use super::tokenizer::index_analyzer;
use super::tokenizer::warm_up;
use crate::ids::BotId;
use crate::ids::SessionId;

/// One matching transcript entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// Session of the entry.
    pub session: SessionId,
    /// Its seq in the session (ReadTranscript reads around it).
    pub seq: i64,
    /// Its global order.
    pub gid: i64,
    /// Bot of the session.
    pub bot: BotId,
    /// Author of the entry.
    pub author: String,
    /// Role the author plays (`user`, `assistant`, ...).
    pub role: String,
    /// Entry kind (`user_message`, `delivery`, ...).
    pub kind: String,
    /// Time written (ms since epoch).
    pub time_ms: i64,
    /// Relevance (BM25; only comparable within one search).
    pub score: f32,
    /// The best fragment of the text, matches marked `«…»` (a literal
    /// `«` or `»` of the text looks the same: use `snippet_parts` to tell).
    pub snippet: String,
    /// The same fragment without marks, as alternating pieces: plain text
    /// at even indices (the first may be empty), matched text at odd ones.
    pub snippet_parts: Vec<String>,
}

/// The answer to a search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    /// Best hits first, at most the query's limit, after skipping the
    /// query's offset.
    pub hits: Vec<SearchHit>,
    /// How many entries match in all.
    pub total: usize,
}

impl SearchResults {
    fn empty() -> Self {
        Self {
            hits: Vec::new(),
            total: 0,
        }
    }
}

/// Full-text search over the transcript, whatever engine serves it.
pub trait TranscriptSearch: Send + Sync {
    /// Runs `query`.
    fn search(&self, query: SearchQuery) -> BoxFuture<'static, Result<SearchResults, IndexError>>;
}

/// One opened index directory. A damaged index is replaced by a new
/// generation (see `repair.rs`); searches that still run on the old one
/// keep it alive until they end.
pub(crate) struct Inner {
    index: Index,
    reader: IndexReader,
    /// Counts the replacements, from 0.
    generation: u64,
}

impl Inner {
    /// The tantivy index of this generation.
    pub(crate) fn index(&self) -> &Index {
        &self.index
    }

    /// Which generation this is (0 for the index opened first).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

/// What every clone of a [`TranscriptIndex`] shares.
struct Shared {
    dir: PathBuf,
    fields: Fields,
    current: RwLock<Arc<Inner>>,
    health: Health,
}

/// An opened transcript index. Cheap to clone; every clone shares one
/// reader, which the [`Indexer`](super::Indexer) reloads after each commit,
/// and the index that replaces a damaged one.
#[derive(Clone)]
pub struct TranscriptIndex {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TranscriptIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptIndex")
            .field("dir", &self.shared.dir)
            .finish()
    }
}

/// A file [`check_writable`] makes and deletes in the index directory.
const WRITE_PROBE: &str = ".botfleet-write-probe";

/// Fails unless a file can be made in `dir`. An index that opens but
/// cannot be written (a directory owned by another user, read-only, on a
/// read-only mount) serves old searches while every commit fails: the
/// host would run, healthy to `/healthz`, finding nothing new.
fn check_writable(dir: &Path) -> Result<(), IndexError> {
    let probe = dir.join(WRITE_PROBE);
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .and_then(|file| {
            drop(file);
            std::fs::remove_file(&probe)
        })
        .map_err(|cause| not_writable(dir, cause))?;
    // and each file in it: one left another user's by a `sudo botfleet
    // reindex` (mode 0600) stopped the start with tantivy's raw
    // "Failed to open file for read" (QA)
    let entries = std::fs::read_dir(dir).map_err(|cause| not_writable(dir, cause))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if let Err(e) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
        {
            let cause = std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
            return Err(not_writable(dir, cause));
        }
    }
    Ok(())
}

/// [`IndexError::NotWritable`] of `dir`.
fn not_writable(dir: &Path, cause: std::io::Error) -> IndexError {
    IndexError::NotWritable {
        dir: dir.to_path_buf(),
        cause,
    }
}

fn is_lock_busy(e: &TantivyError) -> bool {
    matches!(e, TantivyError::LockFailure(..))
}

impl TranscriptIndex {
    /// The tools whose results are not indexed: they only quote entries
    /// the index holds (a search's hits, the entries ReadTranscript shows,
    /// a subagent's steps), so indexed they would crowd out what they
    /// quote. The JSONL mirror keeps them. See docs/search.md.
    pub const QUOTING_TOOLS: &'static [&'static str] = QUOTING_TOOLS;

    /// Opens the index in `dir`, creating it if needed. An index written by
    /// another format (schema or tokenizer) is derived data: it is deleted
    /// and recreated empty, and the indexer fills it again from the store.
    /// Fails with [`IndexError::Locked`] if that needs a writer and another
    /// process holds one.
    /// Fails with [`IndexError::NotWritable`] when `dir` is not a
    /// directory this process can write.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, IndexError> {
        let dir = dir.as_ref().to_path_buf();
        let (index, reader, fields) = Self::open_parts(&dir)?;
        Ok(Self {
            shared: Arc::new(Shared {
                dir,
                fields,
                current: RwLock::new(Arc::new(Inner {
                    index,
                    reader,
                    generation: 0,
                })),
                health: Health::new(),
            }),
        })
    }

    /// Opens (or creates) the index in `dir`; see [`TranscriptIndex::open`].
    fn open_parts(dir: &Path) -> Result<(Index, IndexReader, Fields), IndexError> {
        let dir = dir.to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| {
            if dir.exists() && !dir.is_dir() {
                // a file where the directory should be
                not_writable(&dir, std::io::ErrorKind::NotADirectory.into())
            } else {
                IndexError::io(&dir, e)
            }
        })?;
        check_writable(&dir)?;
        let (schema, fields) = schema();
        let directory = MmapDirectory::open(&dir).map_err(TantivyError::from)?;
        let index = if Index::exists(&directory).map_err(TantivyError::from)? {
            let index = Index::open(directory)?;
            match stale_reason(&index, &schema)? {
                None => index,
                Some(found) => {
                    tracing::warn!(dir = %dir.display(), found, "search index is of another format; recreating it");
                    recreate(&dir, index)?;
                    let directory = MmapDirectory::open(&dir).map_err(TantivyError::from)?;
                    Index::create(directory, schema, Default::default())?
                }
            }
        } else {
            Index::create(directory, schema, Default::default())?
        };
        index
            .tokenizers()
            .register(TOKENIZER_NAME, index_analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok((index, reader, fields))
    }

    /// Replaces the opened index with the one now in the directory (after
    /// a damaged one was moved aside), and clears the damage.
    pub(crate) fn reopen(&self) -> Result<(), IndexError> {
        let (index, reader, _) = Self::open_parts(&self.shared.dir)?;
        let mut current = self.shared.current.write();
        let generation = current.generation + 1;
        *current = Arc::new(Inner {
            index,
            reader,
            generation,
        });
        self.shared.health.replaced(generation);
        Ok(())
    }

    /// The index searches use now.
    pub(crate) fn current(&self) -> Arc<Inner> {
        self.shared.current.read().clone()
    }

    pub(crate) fn health(&self) -> &Health {
        &self.shared.health
    }

    /// Sets how long an async search may take before the caller gets
    /// [`IndexError::SearchTimeout`] and the index is treated as damaged
    /// (default 10 s);
    /// it applies to every clone.
    pub fn set_search_deadline(&self, deadline: std::time::Duration) {
        self.shared.health.set_deadline(deadline);
    }

    /// Why the index is being rebuilt, if it was found damaged and the
    /// indexer has not replaced it yet.
    pub fn damage(&self) -> Option<String> {
        self.shared.health.damage().map(|d| d.cause)
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Number of entries the reader currently sees.
    pub fn num_entries(&self) -> u64 {
        self.current().reader.searcher().num_docs()
    }

    /// Number of segments the reader currently sees (each search walks
    /// every one).
    pub fn num_segments(&self) -> usize {
        self.current().reader.searcher().segment_readers().len()
    }

    /// The last gid durably in the index (every entry up to it is indexed),
    /// read from the last commit.
    pub fn committed_gid(&self) -> Result<i64, IndexError> {
        Ok(read_marker(&self.current().index, &self.shared.dir)?.map_or(0, |m| m.last_gid))
    }

    /// Loads the jieba dictionary (~0.1 s) now instead of on the first
    /// search with Chinese characters.
    pub fn warm_up(&self) {
        warm_up();
    }

    /// The tantivy index searches use now (a cheap handle).
    pub(crate) fn index(&self) -> Index {
        self.current().index.clone()
    }

    pub(crate) fn fields(&self) -> Fields {
        self.shared.fields
    }

    /// Makes the last commit visible to every clone.
    pub(crate) fn reload(&self) -> Result<(), IndexError> {
        Ok(self.current().reader.reload()?)
    }

    /// Runs a search on the calling thread. It is CPU work of a few
    /// milliseconds; async callers use [`TranscriptSearch::search`], which
    /// moves it to the blocking pool.
    ///
    /// It has no deadline and no bound on how many run at once: a damaged
    /// index can make it panic or never return. Hosts use the async search.
    pub fn search_blocking(&self, query: &SearchQuery) -> Result<SearchResults, IndexError> {
        search_in(&self.current(), self.shared.fields, query)
    }
}

/// Runs `query` on one generation of the index.
fn search_in(
    inner: &Inner,
    fields: Fields,
    query: &SearchQuery,
) -> Result<SearchResults, IndexError> {
    validate(query)?;
    let text = parse_text(&query.text)?;
    if query.sessions.as_ref().is_some_and(Vec::is_empty) {
        return Ok(SearchResults::empty());
    }
    let tantivy_query = compile(&fields, query, &text);
    let searcher = inner.reader.searcher();
    // ties in score fall back to the entry's gid, newest first: a total
    // order of the entries themselves, so the pages of one reader neither
    // repeat nor skip a hit. (Tantivy's own fallback, the document's
    // address, did not hold once the tops of several segments were
    // merged: of 205 hits of equal score, pages of one showed 199, some
    // twice, QA.) The key is computed for every match, with no pruning by
    // score: a search reads its few thousand matches in about a
    // millisecond either way (docs/performance.md).
    let by_score_then_gid = TopDocs::with_limit(query.limit)
        .and_offset(query.offset)
        .tweak_score(move |segment: &SegmentReader| {
            // every document has its gid (schema.rs); an index without the
            // column ranks ties as equal, as before
            let gids = segment.fast_fields().i64(GID_FIELD).ok();
            move |doc: DocId, score: Score| {
                let gid = gids.as_ref().and_then(|c| c.first(doc)).unwrap_or(0);
                (score, gid)
            }
        });
    let (top, total) = searcher.search(&tantivy_query, &(by_score_then_gid, Count))?;
    let snippets = Snippets::new(&searcher, fields.text, text.positive_alternatives())?;
    let hits = top
        .into_iter()
        .map(|((score, _), address)| hit(&searcher, &fields, &snippets, score, address))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SearchResults { hits, total })
}

impl TranscriptSearch for TranscriptIndex {
    /// Runs the search in the blocking pool, bounded (see `health.rs`): at
    /// most 8 at once, each within the search deadline. A search that
    /// passes the deadline, or panics on segment files that fail their
    /// checksum, marks the index damaged, and the indexer rebuilds it; one
    /// that panics on intact files fails alone ([`IndexError::SearchFailed`]).
    fn search(&self, query: SearchQuery) -> BoxFuture<'static, Result<SearchResults, IndexError>> {
        let index = self.clone();
        Box::pin(async move {
            let inner = index.current();
            let fields = index.shared.fields;
            let searched = Searched {
                generation: inner.generation,
                index: inner.index.clone(),
                query: query.text.clone(),
            };
            index
                .health()
                .run_bounded(searched, move || search_in(&inner, fields, &query))
                .await
        })
    }
}

fn text_of(doc: &TantivyDocument, field: Field) -> &str {
    doc.get_first(field).and_then(|v| v.as_str()).unwrap_or("")
}

fn int_of(doc: &TantivyDocument, field: Field) -> i64 {
    doc.get_first(field).and_then(|v| v.as_i64()).unwrap_or(0)
}

fn corrupt(detail: String) -> IndexError {
    IndexError::Tantivy(TantivyError::InternalError(detail))
}

fn hit(
    searcher: &Searcher,
    fields: &Fields,
    snippets: &Snippets,
    score: f32,
    address: DocAddress,
) -> Result<SearchHit, IndexError> {
    let doc: TantivyDocument = searcher.doc(address)?;
    let snippet = snippets.render(text_of(&doc, fields.text));
    let session = text_of(&doc, fields.session);
    let bot = text_of(&doc, fields.bot);
    Ok(SearchHit {
        session: session
            .parse()
            .map_err(|e| corrupt(format!("stored session of a hit: {e}")))?,
        seq: int_of(&doc, fields.seq),
        gid: int_of(&doc, fields.gid),
        bot: BotId::new(bot).map_err(|e| corrupt(format!("stored bot of a hit: {e}")))?,
        author: text_of(&doc, fields.author).to_owned(),
        role: text_of(&doc, fields.role).to_owned(),
        kind: text_of(&doc, fields.kind).to_owned(),
        time_ms: int_of(&doc, fields.time),
        score,
        snippet: snippet.marked,
        snippet_parts: snippet.parts,
    })
}

/// The commit marker of the index, if any commit carried one.
pub(crate) fn read_marker(index: &Index, dir: &Path) -> Result<Option<Marker>, IndexError> {
    let metas = index.load_metas()?;
    metas
        .payload
        .as_deref()
        .map(|p| {
            Marker::from_payload(p).map_err(|e| IndexError::CorruptMarker {
                dir: dir.to_path_buf(),
                detail: e.to_string(),
            })
        })
        .transpose()
}

/// Why an existing index cannot be used as it is, if it cannot.
fn stale_reason(
    index: &Index,
    expected: &tantivy::schema::Schema,
) -> Result<Option<String>, IndexError> {
    if index.schema() != *expected {
        return Ok(Some("another schema".into()));
    }
    let payload = index.load_metas()?.payload;
    let Some(payload) = payload else {
        return Ok(None);
    };
    Ok(match Marker::from_payload(&payload) {
        Ok(m) if m.format == FORMAT => None,
        Ok(m) => Some(format!("format {}, expected {FORMAT}", m.format)),
        Err(e) => Some(format!("unreadable marker: {e}")),
    })
}

/// Deletes a stale index after making sure no other writer holds it.
fn recreate(dir: &Path, index: Index) -> Result<(), IndexError> {
    match index.writer_with_num_threads::<TantivyDocument>(1, 15_000_000) {
        Ok(writer) => drop(writer),
        Err(e) if is_lock_busy(&e) => {
            return Err(IndexError::Locked {
                dir: dir.to_path_buf(),
            });
        }
        Err(e) => return Err(e.into()),
    }
    drop(index);
    std::fs::remove_dir_all(dir).map_err(|e| IndexError::io(dir, e))?;
    std::fs::create_dir_all(dir).map_err(|e| IndexError::io(dir, e))?;
    Ok(())
}

pub(crate) fn lock_error(dir: &Path, e: TantivyError) -> IndexError {
    if is_lock_busy(&e) {
        IndexError::Locked {
            dir: dir.to_path_buf(),
        }
    } else {
        e.into()
    }
}
