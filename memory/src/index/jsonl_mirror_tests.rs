use pretty_assertions::assert_eq;

use super::*;
use crate::ids::EntryId;
use crate::index::test_support::TestResult;
use crate::index::test_support::bot;
use crate::index::test_support::session;
use crate::index::test_support::user_text;

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
