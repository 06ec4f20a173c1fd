//! Helpers for the index tests: entries without a store ([`Docs`]) and
//! sessions seeded into a real store ([`seed`]).

use std::collections::HashMap;

use ractor::Actor;
use ractor::ActorRef;

use super::IndexError;
use super::IndexOptions;
use super::Indexer;
use super::IndexerActor;
use super::IndexerArgs;
use super::IndexerMsg;
use super::SearchQuery;
use super::SearchResults;
use super::TranscriptIndex;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::SessionId;
use crate::ids::UserId;
use crate::record::Entry;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SessionRecord;
use crate::store::Mutation;
use crate::store::Store;

pub(crate) type TestResult = Result<(), Box<dyn std::error::Error>>;

pub(crate) fn bot(name: &str) -> BotId {
    BotId::new(name).unwrap_or_else(|e| panic!("{e}"))
}

pub(crate) fn session(bot_name: &str, peer: &str) -> SessionId {
    SessionId::derive(&bot(bot_name), "dm", peer)
}

pub(crate) fn user_text(text: &str) -> EntryKind {
    EntryKind::UserMessage { text: text.into() }
}

/// An index in a temp dir with its writer, fed entries by hand.
pub(crate) struct Docs {
    _dir: tempfile::TempDir,
    pub(crate) index: TranscriptIndex,
    pub(crate) indexer: Indexer,
    next_gid: i64,
    seqs: HashMap<SessionId, i64>,
    texts: HashMap<i64, String>,
}

impl Docs {
    pub(crate) fn new() -> Result<Self, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let index = TranscriptIndex::open(dir.path().join("index"))?;
        let indexer = Indexer::open(&index, IndexOptions::default())?;
        Ok(Self {
            _dir: dir,
            index,
            indexer,
            next_gid: 1,
            seqs: HashMap::new(),
            texts: HashMap::new(),
        })
    }

    /// Adds an entry of any kind; returns its gid.
    pub(crate) fn add_kind(
        &mut self,
        bot_name: &str,
        session: SessionId,
        author: &str,
        kind: EntryKind,
    ) -> Result<i64, IndexError> {
        let gid = self.next_gid;
        self.next_gid += 1;
        let seq = self.seqs.entry(session).or_insert(0);
        *seq += 1;
        self.texts.insert(gid, kind.text().to_owned());
        let entry = Entry {
            id: EntryId::new_v7(),
            session,
            seq: *seq,
            gid,
            author: author.into(),
            turn: None,
            created_at: 1_700_000_000_000 + gid,
            kind,
        };
        self.indexer.add(&entry, &bot(bot_name))?;
        Ok(gid)
    }

    /// Adds a user message of `alice` in bot `r`'s DM session.
    pub(crate) fn add(&mut self, text: &str) -> Result<i64, IndexError> {
        self.add_kind("r", session("r", "alice"), "alice", user_text(text))
    }

    pub(crate) fn commit(&mut self) -> Result<(), IndexError> {
        self.indexer.commit().map(|_| ())
    }

    pub(crate) fn search(&self, query: SearchQuery) -> Result<SearchResults, IndexError> {
        self.index.search_blocking(&query)
    }

    /// The texts of the hits of a plain query, best first.
    pub(crate) fn find(&self, text: &str) -> Result<Vec<String>, IndexError> {
        let results = self.search(SearchQuery::new(text).with_limit(100))?;
        Ok(results
            .hits
            .iter()
            .map(|h| self.texts.get(&h.gid).cloned().unwrap_or_default())
            .collect())
    }

    /// The texts of the hits, sorted (for set comparisons).
    pub(crate) fn find_sorted(&self, text: &str) -> Result<Vec<String>, IndexError> {
        let mut found = self.find(text)?;
        found.sort();
        Ok(found)
    }
}

/// Creates bot `bot_name`'s DM session with `peer` in the store and
/// appends `texts` as user messages; returns the session id.
pub(crate) async fn seed(
    store: &Store,
    bot_name: &str,
    peer: &str,
    texts: &[&str],
) -> Result<SessionId, Box<dyn std::error::Error>> {
    let key = SessionKey {
        bot: bot(bot_name),
        kind: SessionKind::Dm,
        peer: peer.into(),
    };
    let id = key.id();
    let mut batch = vec![Mutation::EnsureSession(SessionRecord {
        id,
        key,
        owner: UserId::new(peer)?,
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    })];
    for text in texts {
        batch.push(Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session: id,
            author: peer.into(),
            turn: None,
            kind: user_text(text),
        })));
    }
    store.write(batch).await?;
    Ok(id)
}

/// A store, an index in the same temporary directory, and the indexer
/// actor started over them (the indexer's tests).
pub(crate) struct IndexerSetup {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) store: Store,
    pub(crate) index: TranscriptIndex,
}

impl IndexerSetup {
    pub(crate) fn new() -> Result<Self, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(crate::store::StoreOptions::new(dir.path().join("fleet.db")))?;
        let index = TranscriptIndex::open(dir.path().join("index"))?;
        Ok(Self { dir, store, index })
    }

    /// Where the JSONL mirror is written.
    pub(crate) fn mirror_root(&self) -> std::path::PathBuf {
        self.dir.path().join("transcripts")
    }

    /// Starts the indexer over `index` (this setup's, or one opened again
    /// in its directory) with `options`.
    pub(crate) async fn spawn(
        &self,
        index: &TranscriptIndex,
        options: IndexOptions,
    ) -> Result<(ActorRef<IndexerMsg>, tokio::task::JoinHandle<()>), Box<dyn std::error::Error>>
    {
        let args = IndexerArgs {
            index: index.clone(),
            store: self.store.clone(),
            options,
            mirror_root: Some(self.mirror_root()),
        };
        Ok(Actor::spawn(None, IndexerActor, args).await?)
    }
}

/// Stops the indexer and waits for it.
pub(crate) async fn stop(
    actor: ActorRef<IndexerMsg>,
    handle: tokio::task::JoinHandle<()>,
) -> TestResult {
    actor.stop(None);
    handle.await?;
    Ok(())
}
