//! A damaged index while the host runs: segment files that fail their
//! checksum, searches that panic or never end, a writer whose rollback
//! failed, and the JSONL mirror's directory replaced by a file.

use std::io::Seek;
use std::io::SeekFrom;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use ractor::ActorRef;

use crate::ids::EntryId;
use crate::index::IndexError;
use crate::index::IndexOptions;
use crate::index::Indexer;
use crate::index::IndexerActor;
use crate::index::IndexerMsg;
use crate::index::JsonlMirror;
use crate::index::SearchQuery;
use crate::index::TranscriptIndex;
use crate::index::TranscriptSearch;
use crate::index::health::MAX_RUNNING_SEARCHES;
use crate::index::health::Searched;
use crate::index::repair::KEPT_DAMAGED_COPIES;
use crate::index::test_support::IndexerSetup;
use crate::index::test_support::TestResult;
use crate::index::test_support::bot;
use crate::index::test_support::seed;
use crate::index::test_support::session;
use crate::index::test_support::stop;
use crate::index::test_support::user_text;
use crate::record::Entry;

const WAIT: Duration = Duration::from_secs(30);

type Setup = IndexerSetup;

impl IndexerSetup {
    async fn start_on(
        &self,
        index: &TranscriptIndex,
    ) -> Result<(ActorRef<IndexerMsg>, tokio::task::JoinHandle<()>), Box<dyn std::error::Error>>
    {
        self.spawn(index, IndexOptions::default()).await
    }

    /// The directories the damaged index was moved to.
    fn set_aside(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("index.damaged-"))
            })
            .collect()
    }
}

/// Texts with enough shared words that the postings span many blocks.
fn texts(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("supplier audit number {i} for the quarterly review of vendor {i}"))
        .collect()
}

/// Overwrites the middle half of the largest `.idx` file with bytes that
/// are not what was written, keeping its end (the footer) intact. It is
/// written in place (not truncated first), as a disk would: an open index
/// maps the file.
fn damage_largest_idx(dir: &Path) -> TestResult {
    let largest = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "idx"))
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .ok_or("no .idx file")?;
    let bytes = std::fs::read(&largest)?;
    let len = bytes.len();
    let mut middle = bytes[len / 4..len * 3 / 4].to_vec();
    let mut x: u32 = 0x9e37_79b9;
    for b in &mut middle {
        // xorshift: the same "random" bytes every run
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x.to_le_bytes()[0];
    }
    let mut file = std::fs::OpenOptions::new().write(true).open(&largest)?;
    file.seek(SeekFrom::Start(u64::try_from(len / 4)?))?;
    file.write_all(&middle)?;
    file.sync_all()?;
    Ok(())
}

/// A user message of alice in bot r's DM session.
fn entry(gid: i64, text: &str) -> Entry {
    Entry {
        id: EntryId::new_v7(),
        session: session("r", "alice"),
        seq: gid,
        gid,
        author: "alice".into(),
        turn: None,
        created_at: 1_700_000_000_000 + gid,
        kind: user_text(text),
    }
}

/// Waits until `check` holds, for at most [`WAIT`]: checked again each
/// time `index`'s damage state changes (marked damaged, then cleared when
/// the set-aside index is replaced: the last step of a repair).
async fn until(index: &TranscriptIndex, check: impl Fn() -> bool) -> bool {
    let mut changes = index.health().watch();
    let waited = tokio::time::timeout(WAIT, async {
        while !check() {
            if changes.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    waited.is_ok() && check()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_that_fails_its_checksum_is_set_aside_at_start_and_rebuilt() -> TestResult {
    let s = Setup::new()?;
    let all = texts(300);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    seed(&s.store, "r", "alice", &refs).await?;
    let (actor, handle) = s.start_on(&s.index).await?;
    IndexerActor::flush(&actor, WAIT).await?;
    stop(actor, handle).await?;
    drop(s.index.clone());

    // the host stopped; the disk damaged a segment file
    damage_largest_idx(&s.dir.path().join("index"))?;
    let (index, aside) = TranscriptIndex::open_or_set_aside(s.dir.path().join("index"))?;
    assert_eq!(
        aside, None,
        "the damage is inside a segment, not in meta.json"
    );
    let (actor, handle) = s.start_on(&index).await?;
    assert!(
        until(&index, || !s.set_aside().is_empty()).await,
        "the damaged index was never moved to index.damaged-*"
    );
    assert!(
        until(&index, || index.damage().is_none()).await,
        "{:?}",
        index.damage()
    );
    IndexerActor::flush(&actor, WAIT).await?;
    let found = index.search(SearchQuery::new("supplier audit")).await?;
    assert_eq!(found.total, 300, "every entry is searchable again");
    stop(actor, handle).await
}

/// What a test search ran on: the index's current generation.
fn searched(index: &TranscriptIndex, query: &str) -> Searched {
    let inner = index.current();
    Searched {
        generation: inner.generation(),
        index: inner.index().clone(),
        query: query.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_that_panics_on_damaged_files_marks_the_index_damaged_and_it_is_rebuilt()
-> TestResult {
    let s = Setup::new()?;
    let all = texts(300);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    seed(&s.store, "r", "alice", &refs).await?;
    let (actor, handle) = s.start_on(&s.index).await?;
    IndexerActor::flush(&actor, WAIT).await?;

    // the disk damages a segment file while the host runs; a search on it
    // panics
    damage_largest_idx(s.index.dir())?;
    let failed = s
        .index
        .health()
        .run_bounded(
            searched(&s.index, "supplier"),
            || -> Result<(), IndexError> { panic!("Compressed array seems too small (test)") },
        )
        .await;
    let Err(IndexError::Damaged { cause }) = failed else {
        panic!("a panic on damaged files is not reported as damage: {failed:?}");
    };
    assert!(
        cause.contains("Compressed array") && cause.contains("checksum"),
        "{cause}"
    );
    let err = IndexError::Damaged { cause };
    assert!(!err.is_retryable(), "a panic is not a retry-shortly error");
    assert!(err.to_string().contains("being rebuilt"), "{err}");

    assert!(
        until(&s.index, || !s.set_aside().is_empty()
            && s.index.damage().is_none())
        .await,
        "the index was not set aside and replaced"
    );
    IndexerActor::flush(&actor, WAIT).await?;
    let found = s.index.search(SearchQuery::new("supplier audit")).await?;
    assert_eq!(found.total, 300, "the new index was filled from the store");
    stop(actor, handle).await
}

/// Regression (round 16): every search that panicked was taken for damage,
/// so one query excluding a phrase (a tantivy panic in debug builds) set
/// the whole index aside and rebuilt it, again on every repeat: all users'
/// searches missed hits meanwhile. A panic on files that pass their
/// checksums now fails that search alone, naming the query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_that_panics_on_intact_files_fails_alone_and_keeps_the_index() -> TestResult {
    let s = Setup::new()?;
    seed(
        &s.store,
        "r",
        "alice",
        &["zebra yak zoo", "zebra one", "zebra two"],
    )
    .await?;
    let (actor, handle) = s.start_on(&s.index).await?;
    IndexerActor::flush(&actor, WAIT).await?;
    let generation = s.index.current().generation();

    // the tester's query: it panicked tantivy, and the host rebuilt the index
    let query = "zebra -\"yak zoo\"";
    let found = s.index.search(SearchQuery::new(query)).await?;
    assert_eq!(found.total, 2, "{found:?}");

    let failed = s
        .index
        .health()
        .run_bounded(searched(&s.index, query), || -> Result<(), IndexError> {
            panic!("target (63) should be greater than or equal to doc (2147483647)")
        })
        .await;
    let Err(err @ IndexError::SearchFailed { .. }) = failed else {
        panic!("a panic on intact files is not a failed search: {failed:?}");
    };
    let text = err.to_string();
    assert!(
        text.contains(&format!("{query:?}")),
        "the error names the query: {text}"
    );
    assert!(
        text.contains("target (63)") && text.contains("intact"),
        "{text}"
    );
    assert!(!err.is_retryable(), "the same query fails the same way");
    assert_eq!(s.index.damage(), None, "intact files are not damage");
    assert!(s.set_aside().is_empty(), "the index was moved aside");
    assert_eq!(
        s.index.current().generation(),
        generation,
        "the index was replaced"
    );
    let found = s.index.search(SearchQuery::new("zebra")).await?;
    assert_eq!(found.total, 3, "the index still serves every entry");
    stop(actor, handle).await
}

/// Regression (round 16): a damaged copy was kept per repair, never
/// deleted (13 copies of the index after 13 queries). Only the newest
/// [`KEPT_DAMAGED_COPIES`] set aside are kept; names the host did not make
/// are left alone.
#[test]
fn only_the_newest_damaged_copies_are_kept() -> TestResult {
    let root = tempfile::tempdir()?;
    let dir = root.path().join("index");
    let older = root.path().join("index.damaged-20200101T000000Z");
    let by_hand = root.path().join("index.damaged-keep-me");
    std::fs::create_dir_all(&older)?;
    std::fs::create_dir_all(&by_hand)?;
    let mut moved = Vec::new();
    for _ in 0..4 {
        drop(TranscriptIndex::open(&dir)?);
        std::fs::write(dir.join("meta.json"), "garbage\n")?;
        let (_, aside) = TranscriptIndex::open_or_set_aside(&dir)?;
        moved.push(aside.ok_or("nothing was set aside")?.moved_to);
    }
    let mut kept: Vec<PathBuf> = std::fs::read_dir(root.path())?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("index.damaged-"))
        })
        .collect();
    kept.sort();
    let mut expected = moved[moved.len() - KEPT_DAMAGED_COPIES..].to_vec();
    expected.push(by_hand);
    expected.sort();
    assert_eq!(kept, expected, "set aside: {moved:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_past_its_deadline_ends_with_a_clear_error_and_marks_damage() -> TestResult {
    let s = Setup::new()?;
    s.index.set_search_deadline(Duration::from_millis(50));
    let (release, stuck) = std::sync::mpsc::channel::<()>();
    let result = s
        .index
        .health()
        .run_bounded(searched(&s.index, "supplier"), move || {
            // a search spinning on a damaged skip list, until the test ends
            let _ = stuck.recv();
            Ok(())
        })
        .await;
    assert!(
        matches!(result, Err(IndexError::SearchTimeout { after_ms: 50 })),
        "{result:?}"
    );
    assert!(s.index.damage().is_some(), "a stuck search marks damage");
    // searches are refused while the index waits for its rebuild
    let refused = s.index.search(SearchQuery::new("supplier")).await;
    assert!(
        matches!(refused, Err(IndexError::Damaged { .. })),
        "{refused:?}"
    );
    drop(release);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_searches_cannot_take_more_than_their_permits() -> TestResult {
    let s = Setup::new()?;
    s.index.set_search_deadline(Duration::from_millis(100));
    let mut releases = Vec::new();
    let mut stuck = Vec::new();
    // an older generation: its stuck searches do not mark the current one
    let old = s.index.current().generation() + 1;
    for _ in 0..MAX_RUNNING_SEARCHES {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        releases.push(release);
        let index = s.index.clone();
        stuck.push(tokio::spawn(async move {
            index
                .health()
                .run_bounded(
                    Searched {
                        generation: old,
                        ..searched(&index, "supplier")
                    },
                    move || {
                        let _ = wait.recv();
                        Ok(())
                    },
                )
                .await
        }));
    }
    for task in stuck {
        let result = task.await?;
        assert!(
            matches!(result, Err(IndexError::SearchTimeout { .. })),
            "{result:?}"
        );
    }
    let refused = s.index.search(SearchQuery::new("supplier")).await;
    assert!(
        matches!(refused, Err(IndexError::SearchesBusy { .. })),
        "{refused:?}"
    );
    drop(releases);
    // once they end, their permits come back
    let mut ok = false;
    for _ in 0..100 {
        if s.index.search(SearchQuery::new("supplier")).await.is_ok() {
            ok = true;
            break;
        }
    }
    assert!(ok, "searches did not come back after the stuck ones ended");
    Ok(())
}

#[test]
fn a_writer_whose_rollback_failed_errors_instead_of_panicking() -> TestResult {
    let dir = tempfile::tempdir()?;
    let index = TranscriptIndex::open(dir.path().join("index"))?;
    let mut indexer = Indexer::open(&index, IndexOptions::default())?;
    // the index directory deleted while the host runs
    std::fs::remove_dir_all(dir.path().join("index"))?;
    let _ = indexer.rollback();
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| indexer.rollback()));
    assert!(
        matches!(again, Ok(Err(IndexError::Task(_)))),
        "a second rollback panicked or succeeded"
    );
    let first = entry(1, "the supplier list");
    let add = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        indexer.add(&first, &bot("r"))
    }));
    assert!(
        matches!(add, Ok(Err(_))),
        "an add after it did not fail cleanly"
    );
    Ok(())
}

#[test]
fn a_mirror_directory_that_is_a_file_is_refused_with_what_to_do() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("transcripts");
    std::fs::write(&root, "not a directory")?;
    let err = JsonlMirror::check_root(&root)
        .err()
        .ok_or("a file was accepted")?;
    assert!(
        matches!(err, IndexError::MirrorNotWritable { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("transcripts") && text.contains("move away"),
        "{text}"
    );
    // a missing directory is fine: it is created
    std::fs::remove_file(&root)?;
    JsonlMirror::check_root(&root)?;
    assert!(root.is_dir());
    Ok(())
}
