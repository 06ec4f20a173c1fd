//! The indexer actor against a real store: following change signals,
//! catching up after a crash, the mirror, and the offline rebuild.

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;
use crate::index::SearchQuery;
use crate::index::feed::reindex;
use crate::index::test_support::IndexerSetup;
use crate::index::test_support::TestResult;
use crate::index::test_support::bot;
use crate::index::test_support::seed;
use crate::index::test_support::stop;
use crate::store::StoreOptions;

const WAIT: Duration = Duration::from_secs(30);

type Setup = IndexerSetup;

impl IndexerSetup {
    async fn start(
        &self,
    ) -> Result<(ActorRef<IndexerMsg>, tokio::task::JoinHandle<()>), Box<dyn std::error::Error>>
    {
        let options = IndexOptions {
            catch_up_batch: 2,
            ..IndexOptions::default()
        };
        self.spawn(&self.index, options).await
    }

    /// Starts the indexer over this setup's index and mirror, reading
    /// `store` (another database than the setup's).
    async fn start_over(
        &self,
        store: &Store,
    ) -> Result<(ActorRef<IndexerMsg>, tokio::task::JoinHandle<()>), Box<dyn std::error::Error>>
    {
        let args = IndexerArgs {
            index: self.index.clone(),
            store: store.clone(),
            options: IndexOptions::default(),
            mirror_root: Some(self.mirror_root()),
        };
        Ok(Actor::spawn(None, IndexerActor, args).await?)
    }

    fn total(&self, text: &str) -> Result<usize, IndexError> {
        Ok(self.index.search_blocking(&SearchQuery::new(text))?.total)
    }
}

fn mirror_lines(root: &Path) -> usize {
    let mut n = 0;
    for bot_dir in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if bot_dir.path().is_dir() {
            for file in std::fs::read_dir(bot_dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                n += std::fs::read_to_string(file.path())
                    .unwrap_or_default()
                    .lines()
                    .count();
            }
        }
    }
    n
}

#[tokio::test]
async fn follows_the_store_and_flush_makes_entries_searchable() -> TestResult {
    let s = Setup::new()?;
    let (actor, handle) = s.start().await?;
    seed(
        &s.store,
        "r",
        "alice",
        &["第二家供应商被排除了", "the supplier list"],
    )
    .await?;
    let progress = IndexerActor::flush(&actor, WAIT).await?;
    assert_eq!(progress.committed_gid, 2);
    assert_eq!(s.total("供应商")?, 1);
    assert_eq!(s.total("supplier")?, 1);
    seed(&s.store, "r", "bob", &["东京的供应商"]).await?;
    IndexerActor::flush(&actor, WAIT).await?;
    assert_eq!(s.total("供应商")?, 2);
    assert_eq!(mirror_lines(&s.mirror_root()), 3);
    stop(actor, handle).await
}

#[tokio::test]
async fn catches_up_after_a_crash_between_store_and_index_commits() -> TestResult {
    let s = Setup::new()?;
    seed(
        &s.store,
        "r",
        "alice",
        &["report one", "report two", "report three"],
    )
    .await?;
    {
        // A previous run indexed and committed two entries, added the third
        // without committing, then crashed.
        let entries = s.store.entries_after_gid(0, 10).await?;
        let mut indexer = Indexer::open(&s.index, IndexOptions::default())?;
        indexer.add(&entries[0], &bot("r"))?;
        indexer.add(&entries[1], &bot("r"))?;
        indexer.commit()?;
        indexer.add(&entries[2], &bot("r"))?;
    }
    // Meanwhile the store committed more.
    seed(&s.store, "r", "bob", &["report four", "report five"]).await?;
    assert_eq!(s.index.committed_gid()?, 2);
    assert_eq!(s.total("report")?, 2);

    let (actor, handle) = s.start().await?;
    let progress = IndexerActor::flush(&actor, WAIT).await?;
    assert_eq!(progress.committed_gid, s.store.max_gid().await?);
    assert_eq!(s.total("report")?, 5, "every entry exactly once");
    // The mirror started empty, so it was filled from the start.
    assert_eq!(mirror_lines(&s.mirror_root()), 5);
    stop(actor, handle).await?;

    // A restart neither duplicates index documents nor mirror lines.
    let (actor, handle) = s.start().await?;
    IndexerActor::flush(&actor, WAIT).await?;
    assert_eq!(s.total("report")?, 5);
    assert_eq!(mirror_lines(&s.mirror_root()), 5);
    stop(actor, handle).await
}

#[tokio::test]
async fn a_deleted_mirror_is_rebuilt_and_flushed_without_new_entries() -> TestResult {
    let s = Setup::new()?;
    seed(&s.store, "r", "alice", &["one", "two", "three"]).await?;
    let (actor, handle) = s.start().await?;
    IndexerActor::flush(&actor, WAIT).await?;
    stop(actor, handle).await?;
    std::fs::remove_dir_all(s.mirror_root())?;

    // The index is caught up, so the restart has only the mirror to
    // rebuild. No new entry and no Flush call: the commit timer must
    // complete it.
    let (actor, handle) = s.start().await?;
    let marker = s.mirror_root().join(".mirrored_gid");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&marker).ok().as_deref() != Some("3")
        || mirror_lines(&s.mirror_root()) != 3
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "mirror not flushed: {} lines, marker {:?}",
            mirror_lines(&s.mirror_root()),
            std::fs::read_to_string(&marker).ok()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop(actor, handle).await
}

#[tokio::test]
async fn given_entries_are_indexed_once_and_gaps_fall_back_to_the_store() -> TestResult {
    let s = Setup::new()?;
    let (actor, handle) = s.start().await?;
    seed(
        &s.store,
        "r",
        "alice",
        &["alpha one", "alpha two", "alpha three"],
    )
    .await?;
    let entries = s.store.entries_after_gid(0, 10).await?;
    // Out of order (a gap after the cursor) and duplicates.
    actor.send_message(IndexerMsg::Index(entries[2..].to_vec()))?;
    actor.send_message(IndexerMsg::Index(entries.clone()))?;
    actor.send_message(IndexerMsg::Index(entries))?;
    IndexerActor::flush(&actor, WAIT).await?;
    assert_eq!(s.total("alpha")?, 3);
    stop(actor, handle).await
}

#[tokio::test]
async fn a_stopped_indexer_is_reported_gone() -> TestResult {
    let s = Setup::new()?;
    let (actor, handle) = s.start().await?;
    actor.stop(None);
    handle.await?;
    assert!(matches!(
        IndexerActor::flush(&actor, WAIT).await,
        Err(IndexError::IndexerGone)
    ));
    Ok(())
}

#[tokio::test]
async fn reindex_rebuilds_from_the_store_and_reports_progress() -> TestResult {
    let s = Setup::new()?;
    let texts: Vec<String> = (0..2_500)
        .map(|i| format!("entry {i} 第{i}个供应商"))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    seed(&s.store, "r", "alice", &refs).await?;
    {
        // A stale partial index: one entry, committed.
        let entries = s.store.entries_after_gid(0, 1).await?;
        let mut indexer = Indexer::open(&s.index, IndexOptions::default())?;
        indexer.add(&entries[0], &bot("r"))?;
        indexer.commit()?;
    }
    let mut calls = Vec::new();
    let report = reindex(
        &s.index,
        &s.store,
        IndexOptions::default(),
        |done, total| calls.push((done, total)),
    )
    .await?;
    assert_eq!(
        (report.entries, report.documents, report.last_gid),
        (2_500, 2_500, 2_500)
    );
    assert_eq!(calls.first(), Some(&(0, 2_500)));
    assert_eq!(calls.last(), Some(&(2_500, 2_500)));
    assert!(calls.len() >= 3, "{calls:?}");
    assert_eq!(s.total("供应商")?, 2_500);
    assert_eq!(s.total("\"entry 1234\"")?, 1);
    Ok(())
}

#[tokio::test]
async fn reindex_rewrites_a_torn_mirror() -> TestResult {
    let s = Setup::new()?;
    seed(&s.store, "r", "alice", &["one", "two", "three"]).await?;
    let (actor, handle) = s.start().await?;
    IndexerActor::flush(&actor, WAIT).await?;
    stop(actor, handle).await?;
    // a line torn in the middle of the file (a failed write retried by an
    // older version), which reading the last line does not see
    let bot_dir = s.mirror_root().join("r");
    let file = std::fs::read_dir(&bot_dir)?
        .next()
        .ok_or("no mirror file")??
        .path();
    let text = std::fs::read_to_string(&file)?;
    let first = text.lines().next().ok_or("empty mirror file")?;
    std::fs::write(&file, format!("{}{text}", &first[..first.len() / 2]))?;

    reindex(&s.index, &s.store, IndexOptions::default(), |_, _| {}).await?;
    let stored = s.store.entries_after_gid(0, 10).await?;
    let lines: Vec<crate::record::Entry> = std::fs::read_to_string(&file)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(lines, stored);
    assert_eq!(
        std::fs::read_to_string(s.mirror_root().join(".mirrored_gid"))?,
        "3"
    );
    Ok(())
}

#[tokio::test]
async fn an_index_and_mirror_ahead_of_a_replaced_database_are_rebuilt() -> TestResult {
    let s = Setup::new()?;
    seed(
        &s.store,
        "r",
        "alice",
        &["alpha one", "alpha two", "alpha three"],
    )
    .await?;
    let (actor, handle) = s.start().await?;
    IndexerActor::flush(&actor, WAIT).await?;
    stop(actor, handle).await?;
    s.store.close().await;

    // The database is replaced by an empty one (gids start over at 1).
    let store = Store::open(StoreOptions::new(s.dir.path().join("other.db")))?;
    seed(&store, "r", "bob", &["gamma one"]).await?;
    let (actor, handle) = s.start_over(&store).await?;
    IndexerActor::flush(&actor, WAIT).await?;
    assert_eq!(s.total("alpha")?, 0, "entries the database lost are gone");
    assert_eq!(s.total("gamma")?, 1, "the new entry is searchable");
    assert_eq!(mirror_lines(&s.mirror_root()), 1);
    let stale = std::fs::read_dir(s.dir.path())?.flatten().any(|e| {
        e.file_name()
            .to_string_lossy()
            .starts_with("transcripts.stale-")
    });
    assert!(stale, "the old mirror is kept aside");
    // a database this open created lost nothing (audit: deleting
    // `fleet.db.generation` to start over, as the refusal of a missing
    // database advises, gave a "lost entries it had committed" alarm)
    let health = store.stats().health.report();
    assert!(health.reasons.is_empty(), "{health:?}");
    stop(actor, handle).await?;
    store.close().await;
    Ok(())
}

/// Regression (audit): an index and a mirror of another history that are
/// *behind* a restored database were kept (only ones ahead of it were
/// dropped): restored over the index of a short run after an older
/// restore, that run's message stayed searchable and the restored ones
/// under its numbers were never indexed. After a restore they are rebuilt
/// whatever their markers say.
#[tokio::test]
async fn an_index_and_mirror_behind_a_restored_database_are_rebuilt() -> TestResult {
    let s = Setup::new()?;
    let db = s.dir.path().join("fleet.db");
    seed(
        &s.store,
        "r",
        "alice",
        &["zeta one", "zeta two", "zeta three"],
    )
    .await?;
    s.store.close().await;
    let backup = s.dir.path().join("backup.db");
    rusqlite::Connection::open(&db)?.execute("VACUUM INTO ?1", [backup.to_string_lossy()])?;

    // a short run on another history, indexed and mirrored: one entry
    let early = Store::open(StoreOptions::new(s.dir.path().join("early.db")))?;
    seed(&early, "r", "alice", &["phantom delta"]).await?;
    let (actor, handle) = s.start_over(&early).await?;
    IndexerActor::flush(&actor, WAIT).await?;
    stop(actor, handle).await?;
    early.close().await;
    assert_eq!(s.total("phantom")?, 1);

    // the documented restore: the backup in place, the generation raised
    std::fs::copy(&backup, &db)?;
    for side in ["fleet.db-wal", "fleet.db-shm"] {
        let _ = std::fs::remove_file(s.dir.path().join(side));
    }
    let sidecar = s.dir.path().join("fleet.db.generation");
    let generation: i64 = std::fs::read_to_string(&sidecar)?.trim().parse()?;
    std::fs::write(&sidecar, (generation + 1).to_string())?;
    let store = Store::open(StoreOptions::new(db))?;
    assert!(store.was_restored());
    let (actor, handle) = s.start_over(&store).await?;
    IndexerActor::flush(&actor, WAIT).await?;
    assert_eq!(s.total("phantom")?, 0, "the other history's entry is gone");
    assert_eq!(s.total("zeta")?, 3, "every restored entry is searchable");
    assert_eq!(mirror_lines(&s.mirror_root()), 3);
    stop(actor, handle).await?;
    store.close().await;
    Ok(())
}
