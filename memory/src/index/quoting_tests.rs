//! Entries that only quote the transcript (the results of SearchTranscript,
//! ReadTranscript and CheckSubagent) are left out of the index, live and
//! in a rebuild alike, and kept in the JSONL mirror.

use std::time::Duration;

use pretty_assertions::assert_eq;

use super::test_support::Docs;
use super::test_support::IndexerSetup;
use super::test_support::TestResult;
use super::test_support::seed;
use super::test_support::session;
use super::test_support::stop;
use super::*;
use crate::ids::EntryId;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::store::Mutation;

const WAIT: Duration = Duration::from_secs(30);

fn result_of(tool: &str, content: &str, is_error: bool) -> EntryKind {
    EntryKind::ToolResult {
        call_id: format!("call_{tool}"),
        name: tool.into(),
        content: content.into(),
        is_error,
    }
}

/// What each tool returned after the fact was said once; only the memory
/// tool's and Shell's results are more than quotes.
fn results() -> Vec<EntryKind> {
    vec![
        result_of(
            "SearchTranscript",
            "1 of 1 matching entries, best first.\n\n[1] {\"session\": \"s\", \"seq\": 1} · alice (user_message)\n    the «walrus» code is 4411",
            false,
        ),
        result_of(
            "ReadTranscript",
            "→ #1 2026-11-29 10:41 UTC alice: (user message) the walrus code is 4411",
            false,
        ),
        result_of(
            "SearchTranscript",
            "the search was refused: unbalanced quote in \"walrus",
            true,
        ),
        result_of(
            "CheckSubagent",
            "subagent x [done]: find the walrus code\nresult: 4411",
            false,
        ),
        result_of("Shell", "grep: walrus.txt: 4411", false),
        result_of("Remember", "remembered: the walrus code is 4411", false),
    ]
}

/// Regression: each SearchTranscript result was indexed, so a search for
/// `walrus` found the message and every earlier search's quote of it.
#[test]
fn results_of_tools_that_quote_the_transcript_are_not_indexed() -> TestResult {
    let mut docs = Docs::new()?;
    let said = docs.add("the walrus code is 4411")?;
    let mut last = said;
    for kind in results() {
        last = docs.add_kind("r", session("r", "alice"), "r", kind)?;
    }
    docs.commit()?;
    assert_eq!(
        docs.find_sorted("walrus")?,
        vec![
            "grep: walrus.txt: 4411".to_owned(),
            "remembered: the walrus code is 4411".to_owned(),
            "the walrus code is 4411".to_owned(),
        ]
    );
    // the skipped entries still move the marker
    assert_eq!(docs.index.committed_gid()?, last);
    assert_eq!(docs.index.num_entries(), 3);
    Ok(())
}

/// The list is read from the entry alone, so live indexing and a rebuild
/// leave out the same entries; the mirror, the transcript's plain copy,
/// keeps every one.
#[tokio::test]
async fn live_indexing_and_a_rebuild_agree_and_the_mirror_keeps_all() -> TestResult {
    let s = IndexerSetup::new()?;
    let id = seed(&s.store, "r", "alice", &["the walrus code is 4411"]).await?;
    let appended: Vec<Mutation> = results()
        .into_iter()
        .map(|kind| {
            Mutation::Append(Box::new(NewEntry {
                id: EntryId::new_v7(),
                session: id,
                author: "r".into(),
                turn: None,
                kind,
            }))
        })
        .collect();
    s.store.write(appended).await?;
    let total = |q: &str| -> Result<usize, IndexError> {
        Ok(s.index.search_blocking(&SearchQuery::new(q))?.total)
    };

    let (actor, handle) = s.spawn(&s.index, IndexOptions::default()).await?;
    assert_eq!(IndexerActor::flush(&actor, WAIT).await?.committed_gid, 7);
    stop(actor, handle).await?;
    assert_eq!((total("walrus")?, total("4411")?), (3, 3));

    let report = reindex(&s.index, &s.store, IndexOptions::default(), |_, _| ()).await?;
    assert_eq!((report.entries, report.documents), (7, 3));
    assert_eq!((total("walrus")?, total("4411")?), (3, 3));

    let mirror = s.mirror_root().join("r").join(format!("{id}.jsonl"));
    let names: Vec<String> = std::fs::read_to_string(&mirror)?
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).map(|v| v["name"].to_string()))
        .collect::<Result<_, _>>()?;
    assert_eq!(
        names,
        [
            "null",
            "\"SearchTranscript\"",
            "\"ReadTranscript\"",
            "\"SearchTranscript\"",
            "\"CheckSubagent\"",
            "\"Shell\"",
            "\"Remember\""
        ]
    );
    Ok(())
}

/// What a host before format 4 left, a SearchTranscript result indexed
/// under a format-3 marker, is rebuilt at open: the index is emptied and
/// refilled from the store without the quote.
#[tokio::test]
async fn an_index_that_holds_quotes_is_rebuilt_without_them() -> TestResult {
    let s = IndexerSetup::new()?;
    let id = seed(&s.store, "r", "alice", &["the walrus code is 4411"]).await?;
    s.store
        .write(vec![Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session: id,
            author: "r".into(),
            turn: None,
            kind: results().remove(0),
        }))])
        .await?;
    {
        // the documents a format-3 indexer wrote: both entries
        let fields = s.index.fields();
        let mut writer = s
            .index
            .index()
            .writer_with_num_threads::<tantivy::TantivyDocument>(1, 15_000_000)?;
        for entry in s.store.entries_after_gid(0, 10).await? {
            let mut doc = tantivy::TantivyDocument::default();
            doc.add_text(fields.text, entry.kind.text());
            doc.add_text(fields.bot, "r");
            doc.add_text(fields.session, entry.session.to_string());
            doc.add_text(fields.author, &entry.author);
            doc.add_text(fields.role, entry.kind.role());
            doc.add_text(fields.kind, entry.kind.name());
            doc.add_i64(fields.time, entry.created_at);
            doc.add_i64(fields.gid, entry.gid);
            doc.add_i64(fields.seq, entry.seq);
            writer.add_document(doc)?;
        }
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload(r#"{"format":3,"last_gid":2}"#);
        prepared.commit()?;
    }
    s.index.reload()?;
    assert_eq!(s.index.num_entries(), 2);
    let dir = s.index.dir().to_path_buf();
    let index = TranscriptIndex::open(&dir)?;
    assert_eq!((index.num_entries(), index.committed_gid()?), (0, 0));
    let (actor, handle) = s.spawn(&index, IndexOptions::default()).await?;
    assert_eq!(IndexerActor::flush(&actor, WAIT).await?.committed_gid, 2);
    stop(actor, handle).await?;
    let found = index.search_blocking(&SearchQuery::new("walrus"))?;
    assert_eq!(
        found.hits.iter().map(|h| h.gid).collect::<Vec<_>>(),
        vec![1]
    );
    Ok(())
}
