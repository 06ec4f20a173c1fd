//! A damaged index on disk: set aside and replaced at open, wiped by
//! `open_empty`, and left alone while another writer holds it.

use std::path::Path;

use super::IndexError;
use super::IndexOptions;
use super::Indexer;
use super::SearchQuery;
use super::TranscriptIndex;
use super::test_support::TestResult;
use super::test_support::bot;
use super::test_support::session;
use super::test_support::user_text;
use crate::ids::EntryId;
use crate::record::Entry;

/// An index in `dir` holding one committed entry with `text`.
fn write_index(dir: &Path, text: &str) -> TestResult {
    let index = TranscriptIndex::open(dir)?;
    let mut indexer = Indexer::open(&index, IndexOptions::default())?;
    let entry = Entry {
        id: EntryId::new_v7(),
        session: session("r", "alice"),
        seq: 1,
        gid: 1,
        author: "alice".into(),
        turn: None,
        created_at: 1_700_000_000_000,
        kind: user_text(text),
    };
    indexer.add(&entry, &bot("r"))?;
    indexer.commit()?;
    Ok(())
}

/// The names in `dir` that start with `prefix`.
fn names_starting(dir: &Path, prefix: &str) -> Result<Vec<String>, std::io::Error> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) {
            out.push(name);
        }
    }
    Ok(out)
}

/// Breaks the index in `dir`: garbage in meta.json, or one file of a
/// segment deleted.
fn damage(dir: &Path, how: &str) -> TestResult {
    match how {
        "meta" => std::fs::write(dir.join("meta.json"), "garbage\n")?,
        "term" => {
            let term = names_starting(dir, "")?
                .into_iter()
                .find(|n| n.ends_with(".term"))
                .ok_or("no .term file")?;
            std::fs::remove_file(dir.join(term))?;
        }
        other => return Err(format!("unknown damage {other}").into()),
    }
    Ok(())
}

#[test]
fn a_damaged_index_is_set_aside_and_replaced_by_an_empty_one() -> TestResult {
    for how in ["meta", "term"] {
        let root = tempfile::tempdir()?;
        let dir = root.path().join("index");
        write_index(&dir, "the wombat manifest")?;
        damage(&dir, how)?;
        assert!(TranscriptIndex::open(&dir).is_err(), "{how}");

        let (index, set_aside) = TranscriptIndex::open_or_set_aside(&dir)?;
        let set_aside = set_aside.ok_or("nothing was set aside")?;
        assert_eq!(index.num_entries(), 0, "{how}");
        assert_eq!(index.committed_gid()?, 0, "{how}");
        let aside = names_starting(root.path(), "index.damaged-")?;
        assert_eq!(aside.len(), 1, "{how}: {aside:?}");
        assert_eq!(set_aside.moved_to, root.path().join(&aside[0]));
        assert!(!set_aside.cause.is_empty());
        // the damaged files are kept as they were
        if how == "meta" {
            let meta = std::fs::read_to_string(set_aside.moved_to.join("meta.json"))?;
            assert_eq!(meta, "garbage\n");
        }
        // the new index takes entries again
        drop(index);
        write_index(&dir, "the wombat manifest")?;
        let (index, set_aside) = TranscriptIndex::open_or_set_aside(&dir)?;
        assert_eq!(set_aside, None);
        let found = index.search_blocking(&SearchQuery::new("wombat"))?;
        assert_eq!(found.total, 1, "{how}");
    }
    Ok(())
}

#[test]
fn a_healthy_index_opens_as_it_is() -> TestResult {
    let root = tempfile::tempdir()?;
    let dir = root.path().join("index");
    write_index(&dir, "the wombat manifest")?;
    let (index, set_aside) = TranscriptIndex::open_or_set_aside(&dir)?;
    assert_eq!(set_aside, None);
    assert_eq!(index.num_entries(), 1);
    assert_eq!(names_starting(root.path(), "index.damaged-")?.len(), 0);
    Ok(())
}

#[test]
fn open_empty_wipes_a_damaged_or_healthy_index() -> TestResult {
    let root = tempfile::tempdir()?;
    let dir = root.path().join("index");
    write_index(&dir, "the wombat manifest")?;
    let index = TranscriptIndex::open_empty(&dir)?;
    assert_eq!(index.num_entries(), 0);
    drop(index);
    write_index(&dir, "the wombat manifest")?;
    damage(&dir, "meta")?;
    let index = TranscriptIndex::open_empty(&dir)?;
    assert_eq!((index.num_entries(), index.committed_gid()?), (0, 0));
    assert_eq!(names_starting(root.path(), "index.damaged-")?.len(), 0);
    Ok(())
}

#[test]
fn an_index_another_writer_holds_is_not_touched() -> TestResult {
    let root = tempfile::tempdir()?;
    let dir = root.path().join("index");
    write_index(&dir, "the wombat manifest")?;
    let index = TranscriptIndex::open(&dir)?;
    let _writer = Indexer::open(&index, IndexOptions::default())?;
    let wiped = TranscriptIndex::open_empty(&dir);
    assert!(matches!(wiped, Err(IndexError::Locked { .. })), "{wiped:?}");
    damage(&dir, "meta")?;
    let opened = TranscriptIndex::open_or_set_aside(&dir);
    assert!(
        matches!(opened, Err(IndexError::Locked { .. })),
        "{:?}",
        opened.map(|(_, s)| s)
    );
    assert_eq!(names_starting(root.path(), "index.damaged-")?.len(), 0);
    assert_eq!(index.num_entries(), 1);
    Ok(())
}
