use pretty_assertions::assert_eq;

use std::fs::OpenOptions;
use std::io::Write;

use super::*;
use crate::ids::EntryId;
use crate::index::mirror_file::FAIL_NEXT_WRITE;
use crate::index::mirror_file::TAIL_CHUNK;
use crate::index::test_support::TestResult;
use crate::index::test_support::bot;
use crate::index::test_support::session;
use crate::index::test_support::user_text;
use crate::store::Store;

fn entry(gid: i64, seq: i64, text: &str) -> Entry {
    Entry {
        id: EntryId::new_v7(),
        session: session("r", "alice"),
        seq,
        gid,
        author: "alice".into(),
        turn: None,
        created_at: 1_000 + gid,
        kind: user_text(text),
    }
}

fn lines(path: &Path) -> Vec<Entry> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn appends_one_json_line_per_entry_under_bot_and_session() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut mirror = JsonlMirror::open(dir.path().join("transcripts"))?;
    let (a, b) = (entry(1, 1, "hello"), entry(2, 2, "第二家供应商"));
    assert!(mirror.append(&a, &bot("r"))?);
    assert!(mirror.append(&b, &bot("r"))?);
    mirror.flush()?;
    let path = dir
        .path()
        .join("transcripts")
        .join("r")
        .join(format!("{}.jsonl", session("r", "alice")));
    assert_eq!(mirror.path_of(&bot("r"), session("r", "alice")), path);
    assert_eq!(lines(&path), vec![a, b]);
    assert_eq!(mirror.mirrored_gid(), 2);
    Ok(())
}

#[test]
fn is_idempotent_by_gid_across_restarts() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("transcripts");
    let entries: Vec<Entry> = (1..=3).map(|i| entry(i, i, "x")).collect();
    let mut mirror = JsonlMirror::open(&root)?;
    mirror.append(&entries[0], &bot("r"))?;
    mirror.append(&entries[1], &bot("r"))?;
    mirror.flush()?;
    drop(mirror);

    let mut mirror = JsonlMirror::open(&root)?;
    assert_eq!(mirror.mirrored_gid(), 2);
    let written: Vec<bool> = entries
        .iter()
        .map(|e| mirror.append(e, &bot("r")))
        .collect::<Result<_, _>>()?;
    assert_eq!(written, vec![false, false, true]);
    mirror.flush()?;
    assert_eq!(
        lines(&mirror.path_of(&bot("r"), session("r", "alice"))),
        entries
    );
    Ok(())
}

#[test]
fn a_line_cut_by_a_crash_is_truncated_and_rewritten() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("transcripts");
    let (a, b) = (entry(1, 1, "kept"), entry(2, 2, "cut"));
    let mut mirror = JsonlMirror::open(&root)?;
    mirror.append(&a, &bot("r"))?;
    mirror.flush()?;
    let path = mirror.path_of(&bot("r"), session("r", "alice"));
    drop(mirror);
    // A crash in the middle of writing b.
    let full = serde_json::to_string(&b)?;
    let mut file = OpenOptions::new().append(true).open(&path)?;
    file.write_all(&full.as_bytes()[..full.len() / 2])?;
    drop(file);

    let mut mirror = JsonlMirror::open(&root)?;
    assert!(mirror.append(&b, &bot("r"))?);
    mirror.flush()?;
    assert_eq!(lines(&path), vec![a, b]);
    Ok(())
}

#[test]
fn finds_the_last_line_past_a_long_one() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("transcripts");
    let long = "y".repeat(3 * TAIL_CHUNK);
    let mut mirror = JsonlMirror::open(&root)?;
    mirror.append(&entry(1, 1, "short"), &bot("r"))?;
    mirror.append(&entry(7, 2, &long), &bot("r"))?;
    mirror.flush()?;
    drop(mirror);
    let mut mirror = JsonlMirror::open(&root)?;
    assert!(!mirror.append(&entry(7, 2, &long), &bot("r"))?);
    assert!(mirror.append(&entry(8, 3, "next"), &bot("r"))?);
    Ok(())
}

#[test]
fn a_mirror_dropped_without_a_flush_completes_its_files_and_marker() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("transcripts");
    let entries: Vec<Entry> = (1..=2).map(|i| entry(i, i, "x")).collect();
    let mut mirror = JsonlMirror::open(&root)?;
    assert!(!mirror.has_unflushed());
    for e in &entries {
        mirror.append(e, &bot("r"))?;
    }
    assert!(mirror.has_unflushed());
    let path = mirror.path_of(&bot("r"), session("r", "alice"));
    drop(mirror);
    assert_eq!(lines(&path), entries);
    assert_eq!(std::fs::read_to_string(root.join(MARKER_FILE))?, "2");
    assert_eq!(JsonlMirror::open(&root)?.mirrored_gid(), 2);
    Ok(())
}

#[test]
fn a_write_that_fails_partway_leaves_no_partial_line() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("transcripts");
    let entries: Vec<Entry> = (1..=3).map(|i| entry(i, i, &"z".repeat(9_000))).collect();
    let mut mirror = JsonlMirror::open(&root)?;
    mirror.append(&entries[0], &bot("r"))?;
    mirror.flush()?;
    let path = mirror.path_of(&bot("r"), session("r", "alice"));

    mirror.append(&entries[1], &bot("r"))?;
    FAIL_NEXT_WRITE.set(Some(5_750));
    assert!(mirror.flush().is_err(), "the injected failure is reported");
    // what was cut is handed over again from the durable point
    assert_eq!(mirror.written_gid(), 1);
    assert_eq!(lines(&path), vec![entries[0].clone()]);

    // the retry (the indexer reads the store again after written_gid)
    assert!(mirror.append(&entries[1], &bot("r"))?);
    assert!(mirror.append(&entries[2], &bot("r"))?);
    mirror.flush()?;
    assert_eq!(lines(&path), entries);
    assert_eq!(mirror.mirrored_gid(), 3);
    Ok(())
}

#[test]
fn a_garbage_resume_marker_starts_the_mirror_over() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("transcripts");
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join(MARKER_FILE), "zz")?;
    let mut mirror = JsonlMirror::open(&root)?;
    assert_eq!(mirror.mirrored_gid(), 0);
    assert!(
        !root.join(MARKER_FILE).exists(),
        "the bad marker is removed"
    );
    mirror.append(&entry(1, 1, "x"), &bot("r"))?;
    mirror.flush()?;
    assert_eq!(std::fs::read_to_string(root.join(MARKER_FILE))?, "1");
    Ok(())
}

/// Writes a line cut by a failed write followed by the whole entry again,
/// as the mirror did when a retry appended after a partial write.
fn tear(path: &Path, entry: &Entry) -> TestResult {
    let full = serde_json::to_string(entry)?;
    let mut file = OpenOptions::new().append(true).open(path)?;
    file.write_all(&full.as_bytes()[..full.len() / 2])?;
    file.write_all(full.as_bytes())?;
    file.write_all(b"\n")?;
    Ok(())
}

#[test]
fn a_torn_last_line_without_a_store_names_the_fix() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("transcripts");
    let mut mirror = JsonlMirror::open(&root)?;
    mirror.append(&entry(1, 1, "kept"), &bot("r"))?;
    mirror.flush()?;
    let path = mirror.path_of(&bot("r"), session("r", "alice"));
    drop(mirror);
    tear(&path, &entry(2, 2, "torn"))?;

    let mut mirror = JsonlMirror::open(&root)?;
    let err = mirror
        .append(&entry(3, 3, "next"), &bot("r"))
        .expect_err("a damaged file without a store is an error");
    let text = err.to_string();
    assert!(matches!(err, IndexError::MirrorDamaged { .. }), "{err:?}");
    assert!(text.contains("botfleet reindex"), "{text}");
    Ok(())
}

#[tokio::test]
async fn a_torn_last_line_is_written_again_from_the_store() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(crate::store::StoreOptions::new(dir.path().join("fleet.db")))?;
    let id =
        crate::index::test_support::seed(&store, "r", "alice", &["one", "two", "three"]).await?;
    let stored = store.entries_after_gid(0, 100).await?;
    let root = dir.path().join("transcripts");
    let mut mirror = JsonlMirror::open(&root)?.with_store(store.clone());
    mirror.append(&stored[0], &bot("r"))?;
    mirror.flush()?;
    let path = mirror.path_of(&bot("r"), id);
    drop(mirror);
    tear(&path, &stored[1])?;

    let mut mirror = JsonlMirror::open(&root)?.with_store(store.clone());
    assert!(mirror.append(&stored[2], &bot("r"))?);
    mirror.flush()?;
    assert_eq!(lines(&path), stored);
    let aside: Vec<String> = std::fs::read_dir(dir.path().join("transcripts").join("r"))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    assert!(
        aside.iter().any(|n| n.contains(".jsonl.damaged-")),
        "the damaged file is kept aside: {aside:?}"
    );
    store.close().await;
    Ok(())
}

/// Regression (audit): a file cut short at a line's end while the host was
/// stopped (its last complete line taken for where it stands) was written
/// on after it, and the lines cut were never written again: a gap for
/// good. The lines it lacks are written again from the store.
#[tokio::test]
async fn a_file_cut_short_at_a_line_is_completed_from_the_store() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(crate::store::StoreOptions::new(dir.path().join("fleet.db")))?;
    let id = crate::index::test_support::seed(
        &store,
        "r",
        "alice",
        &["one", "two", "three", "four", "five"],
    )
    .await?;
    let stored = store.entries_after_gid(0, 100).await?;
    let root = dir.path().join("transcripts");
    let mut mirror = JsonlMirror::open(&root)?.with_store(store.clone());
    for entry in &stored[..4] {
        mirror.append(entry, &bot("r"))?;
    }
    mirror.flush()?;
    let path = mirror.path_of(&bot("r"), id);
    drop(mirror);
    // cut after the second line
    let kept: String = std::fs::read_to_string(&path)?
        .lines()
        .take(2)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, kept)?;

    let mut mirror = JsonlMirror::open(&root)?.with_store(store.clone());
    assert!(mirror.append(&stored[4], &bot("r"))?);
    mirror.flush()?;
    assert_eq!(lines(&path), stored);
    store.close().await;
    Ok(())
}

/// A session whose file follows on is not read again from the store when
/// the next entry comes: nothing is missing, nothing is moved aside.
#[tokio::test]
async fn a_file_that_follows_on_is_appended_to() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(crate::store::StoreOptions::new(dir.path().join("fleet.db")))?;
    let id =
        crate::index::test_support::seed(&store, "r", "alice", &["one", "two", "three"]).await?;
    let stored = store.entries_after_gid(0, 100).await?;
    let root = dir.path().join("transcripts");
    let mut mirror = JsonlMirror::open(&root)?.with_store(store.clone());
    mirror.append(&stored[0], &bot("r"))?;
    mirror.append(&stored[1], &bot("r"))?;
    mirror.flush()?;
    let path = mirror.path_of(&bot("r"), id);
    drop(mirror);
    let mut mirror = JsonlMirror::open(&root)?.with_store(store.clone());
    assert!(mirror.append(&stored[2], &bot("r"))?);
    mirror.flush()?;
    assert_eq!(lines(&path), stored);
    let names: Vec<String> = std::fs::read_dir(root.join("r"))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    assert!(!names.iter().any(|n| n.contains(".damaged-")), "{names:?}");
    store.close().await;
    Ok(())
}

/// Regression (CI flake of `deleting_transcripts_under_a_running_host_…`):
/// the mirror checks that its root is in place, then opens a session's
/// file, making its directory. A root deleted between the two was made
/// again (`create_dir_all`), holding only that file and then a resume
/// marker: the mirror went on, `/healthz` said `ok`, and a restart took
/// the new root for the whole mirror, so the other sessions' files were
/// never written again. Opening a file (a new one, or one written again
/// from the store) makes the bot's directory only, and fails without the
/// root.
#[tokio::test]
async fn a_file_opened_just_after_the_root_was_deleted_does_not_make_it_again() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(crate::store::StoreOptions::new(dir.path().join("fleet.db")))?;
    let id = crate::index::test_support::seed(&store, "r", "alice", &["one", "two"]).await?;
    let root = dir.path().join("transcripts");
    let mut mirror = JsonlMirror::open(&root)?.with_store(store.clone());
    let path = mirror.path_of(&bot("r"), id);
    // deleted after the check that passed
    mirror.check_root_in_place()?;
    std::fs::remove_dir_all(&root)?;

    let opened = open_file(&path);
    assert!(
        matches!(&opened, Err(IndexError::Io { cause, .. }) if cause.kind() == std::io::ErrorKind::NotFound),
        "{:?}",
        opened.as_ref().err()
    );
    assert!(!root.exists(), "opening a file made the root again");
    let restored = mirror.restore_missing(&path, id, 100, "was missing");
    assert!(restored.is_err(), "written again without its root");
    assert!(!root.exists(), "writing a file again made the root again");
    assert!(mirror.root_gone());
    store.close().await;
    Ok(())
}

#[test]
fn a_bots_directory_is_made_once_and_a_file_in_its_place_is_an_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let bot_dir = dir.path().join("r");
    make_bot_dir(&bot_dir)?;
    make_bot_dir(&bot_dir)?;
    assert!(bot_dir.is_dir());
    let file = dir.path().join("f");
    std::fs::write(&file, b"")?;
    assert!(make_bot_dir(&file).is_err());
    Ok(())
}
