//! The store's reads of a session: its latest summary (through its
//! index), its view (record, summary, newest entries) and its pages, also
//! while it is written. A child of the store's tests, whose helpers
//! (`open`, `admit`, `alice_dm`) it uses.

use pretty_assertions::assert_eq;

use super::*;
use crate::UserId;
use crate::ids::SessionId;
use crate::record::Entry;
use crate::record::SessionView;

/// Appends an entry of `kind` to `session`, written by bot `r`.
fn entry(session: SessionId, kind: EntryKind) -> Mutation {
    Mutation::Append(Box::new(NewEntry {
        id: EntryId::new_v7(),
        session,
        author: "r".into(),
        turn: None,
        kind,
    }))
}

fn said(text: &str) -> EntryKind {
    EntryKind::UserMessage { text: text.into() }
}

fn summary(text: &str, covers_to_seq: i64, epoch: i64) -> EntryKind {
    EntryKind::Summary {
        text: text.into(),
        covers_to_seq,
        epoch,
    }
}

/// SQLite's plan for `sql` with `args`: the detail of its first step.
fn query_plan(store: &Store, sql: &str, args: &[&dyn rusqlite::ToSql]) -> crate::Result<String> {
    store.read_blocking(|c| {
        Ok(c.query_row(&format!("EXPLAIN QUERY PLAN {sql}"), args, |r| r.get(3))?)
    })
}

#[tokio::test]
async fn latest_summary_is_the_newest_and_found_through_its_index() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    store.write(vec![admit("n1", "hello", None)]).await?;
    let session = alice_dm().id();
    assert_eq!(store.latest_summary(session).await?, None);
    let mut batch = Vec::new();
    for i in 0..3i64 {
        for _ in 0..5 {
            batch.push(entry(session, said("more")));
        }
        batch.push(entry(
            session,
            summary(&format!("summary {i}"), 5 * (i + 1), i + 1),
        ));
    }
    batch.push(entry(session, said("after")));
    store.write(batch).await?;
    let latest = store.latest_summary(session).await?.ok_or("no summary")?;
    assert_eq!(latest.seq, 19);
    assert_eq!(
        latest.kind,
        EntryKind::Summary {
            text: "summary 2".into(),
            covers_to_seq: 15,
            epoch: 3,
        }
    );
    // the read must not walk the session: it goes through the partial index
    let plan = query_plan(
        &store,
        "SELECT seq FROM entries
         WHERE session_id = ?1 AND kind = 'summary' ORDER BY seq DESC LIMIT 1",
        &[&session.to_string()],
    )?;
    assert!(plan.contains("entries_summary"), "{plan}");
    store.close().await;
    Ok(())
}

#[tokio::test]
async fn a_session_view_is_its_record_summary_and_newest_entries() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    store.write(vec![admit("n1", "hello", None)]).await?;
    let session = alice_dm().id();
    // seqs 2-6 messages, 7 a summary covering 1-6, 8 and 9 messages
    let mut batch = Vec::new();
    for _ in 0..5 {
        batch.push(entry(session, said("m")));
    }
    batch.push(entry(
        session,
        EntryKind::Summary {
            text: "summary".into(),
            covers_to_seq: 6,
            epoch: 1,
        },
    ));
    for _ in 0..2 {
        batch.push(entry(session, said("n")));
    }
    store.write(batch).await?;
    let seqs = |v: &SessionView| v.entries.iter().map(|e| e.seq).collect::<Vec<_>>();

    let narrow = store.session_view(session, 2, None).await?;
    assert_eq!(narrow.record.as_ref().map(|r| r.last_seq), Some(9));
    assert_eq!(narrow.summary.as_ref().map(|e| e.seq), Some(7));
    assert_eq!(narrow.covers_to_seq(), 6);
    assert_eq!(seqs(&narrow), [8, 9]);
    // a wide window still starts after what the summary covers
    let wide = store.session_view(session, 100, None).await?;
    assert_eq!(seqs(&wide), [7, 8, 9]);
    // a running turn's first input is in, however narrow the window; but
    // not what the summary covers
    let kept = store.session_view(session, 1, Some(8)).await?;
    assert_eq!(seqs(&kept), [8, 9]);
    let kept = store.session_view(session, 1, Some(3)).await?;
    assert_eq!(seqs(&kept), [7, 8, 9]);

    // the read leaves no transaction open on its pooled connection: the
    // next view sees a newer commit
    store.write(vec![entry(session, said("o"))]).await?;
    let later = store.session_view(session, 2, None).await?;
    assert_eq!(later.record.as_ref().map(|r| r.last_seq), Some(10));
    assert_eq!(seqs(&later), [9, 10]);

    let missing = SessionKey {
        bot: BotId::new("nobody")?,
        kind: SessionKind::Dm,
        peer: "alice".into(),
    }
    .id();
    assert_eq!(
        store.session_view(missing, 2, None).await?,
        SessionView::default()
    );
    store.close().await;
    Ok(())
}

/// Regression: a catch-up compaction writes one summary per chunk, all
/// after the running turn's input. The window counted seqs, so with more
/// summaries than the window the next turn's view left that input out,
/// though no summary covered it.
#[tokio::test]
async fn a_session_views_window_does_not_count_summaries() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    store.write(vec![admit("n1", "hello", None)]).await?;
    let session = alice_dm().id();
    // seq 2 the turn's input; 3-8 six chunk summaries covering through 1;
    // 9 the reply, 10 the next input
    let mut batch = vec![entry(session, said("book the train"))];
    for epoch in 1..=6 {
        batch.push(entry(session, summary(&format!("chunk {epoch}"), 1, epoch)));
    }
    for text in ["Booked.", "thanks"] {
        batch.push(entry(session, said(text)));
    }
    store.write(batch).await?;
    let seqs = |v: &SessionView| v.entries.iter().map(|e| e.seq).collect::<Vec<_>>();
    let view = store.session_view(session, 3, None).await?;
    assert_eq!(view.covers_to_seq(), 1);
    assert_eq!(seqs(&view), [2, 3, 4, 5, 6, 7, 8, 9, 10]);
    // two entries of the transcript: the newest two, the summaries between
    let view = store.session_view(session, 2, None).await?;
    assert_eq!(seqs(&view), [9, 10]);
    // the count goes through the partial index
    let plan = query_plan(
        &store,
        "SELECT COUNT(*) FROM entries
         WHERE session_id = ?1 AND kind = 'summary' AND seq > ?2",
        &[&session.to_string(), &3],
    )?;
    assert!(plan.contains("entries_summary"), "{plan}");
    store.close().await;
    Ok(())
}

#[tokio::test]
async fn a_session_page_is_its_record_and_entries_in_one_read() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    store.write(vec![admit("n1", "hello", None)]).await?;
    let session = alice_dm().id();
    let batch = (0..4).map(|_| entry(session, said("m"))).collect();
    store.write(batch).await?;
    let page = |after, limit| store.session_page(session, after, limit);
    let seqs = |entries: &[Entry]| entries.iter().map(|e| e.seq).collect::<Vec<_>>();

    let Some((record, entries)) = page(1, 2).await? else {
        panic!("the session exists")
    };
    assert_eq!(record.key, alice_dm());
    assert_eq!(record.last_seq, 5);
    assert_eq!(seqs(&entries), [2, 3]);
    let Some((_, rest)) = page(3, 100).await? else {
        panic!("the session exists")
    };
    assert_eq!(seqs(&rest), [4, 5]);
    // the read leaves no transaction open on its pooled connection
    store.write(vec![entry(session, said("o"))]).await?;
    let Some((later, newest)) = page(5, 100).await? else {
        panic!("the session exists")
    };
    assert_eq!(later.last_seq, 6);
    assert_eq!(seqs(&newest), [6]);

    let missing = SessionKey {
        bot: BotId::new("nobody")?,
        kind: SessionKind::Dm,
        peer: "alice".into(),
    }
    .id();
    assert_eq!(store.session_page(missing, 0, 10).await?, None);

    // as its owner reads it, and as another user: no entry of it is read
    // for them (the API answers them as for an unknown id, and its time
    // must not tell the session's length)
    let Some((_, own)) = store
        .session_page_for(session, &UserId::new("alice")?, 0, 100)
        .await?
    else {
        panic!("the session exists")
    };
    assert_eq!(seqs(&own), [1, 2, 3, 4, 5, 6]);
    let Some((theirs, none)) = store
        .session_page_for(session, &UserId::new("bob")?, 0, 100)
        .await?
    else {
        panic!("the session exists")
    };
    assert_eq!(theirs.owner, UserId::new("alice")?);
    assert_eq!(seqs(&none), [] as [i64; 0]);
    store.close().await;
    Ok(())
}

#[tokio::test]
async fn a_session_pages_last_seq_is_never_behind_its_entries_while_writing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    store.write(vec![admit("n1", "hello", None)]).await?;
    let session = alice_dm().id();
    let writer = store.clone();
    let writes = tokio::spawn(async move {
        for i in 0..300 {
            let text = format!("m{i}");
            writer
                .write(vec![entry(session, EntryKind::UserMessage { text })])
                .await?;
        }
        Ok::<_, StoreError>(())
    });
    let mut reads = 0;
    let mut newest = 0;
    while !writes.is_finished() || reads == 0 {
        // the page of the newest entries: the one a commit races with
        let after = (newest - 5).max(0);
        let Some((record, entries)) = store.session_page(session, after, 1000).await? else {
            panic!("the session exists")
        };
        for e in &entries {
            assert!(
                e.seq <= record.last_seq,
                "entry {} beyond last_seq {} (read {reads})",
                e.seq,
                record.last_seq
            );
        }
        newest = record.last_seq;
        reads += 1;
    }
    writes.await??;
    assert!(reads > 1, "read while writing");
    store.close().await;
    Ok(())
}
