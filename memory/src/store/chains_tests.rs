//! Chains of bot-to-bot messages: counted as their messages are written,
//! across a restart, and told once.

use pretty_assertions::assert_eq;

use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::SessionId;
use crate::ids::UserId;
use crate::record::ChainOrigin;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SessionRecord;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;
use crate::store::StoreOptions;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn session(bot: &str) -> SessionRecord {
    let key = SessionKey {
        bot: BotId::new(bot).unwrap_or_else(|e| panic!("{e}")),
        kind: SessionKind::Agent,
        peer: "hub".into(),
    };
    SessionRecord {
        id: key.id(),
        key,
        owner: UserId::new("alice").unwrap_or_else(|e| panic!("{e}")),
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    }
}

fn message(session: SessionId, chain: Option<ChainOrigin>) -> Mutation {
    Mutation::Append(Box::new(NewEntry {
        id: EntryId::new_v7(),
        session,
        author: "hub".into(),
        turn: None,
        kind: EntryKind::AgentMessage {
            from: BotId::new("hub").unwrap_or_else(|e| panic!("{e}")),
            text: "fan".into(),
            hop: 1,
            reply_session: None,
            chain,
            answers: false,
        },
    }))
}

fn notice(session: SessionId) -> Box<NewEntry> {
    Box::new(NewEntry {
        id: EntryId::new_v7(),
        session,
        author: "hub".into(),
        turn: None,
        kind: EntryKind::Notice {
            code: "hop_budget".into(),
            text: "cut off".into(),
            retry_turn: None,
        },
    })
}

#[tokio::test]
async fn messages_are_counted_by_chain_and_the_chain_is_told_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("fleet.db");
    let leaf = session("leaf");
    let origin = ChainOrigin {
        session: leaf.id,
        entry: EntryId::new_v7(),
    };
    let other = ChainOrigin {
        session: leaf.id,
        entry: EntryId::new_v7(),
    };
    {
        let store = Store::open(StoreOptions::new(&path))?;
        store
            .write(vec![
                Mutation::EnsureSession(leaf.clone()),
                message(leaf.id, Some(origin)),
                message(leaf.id, Some(origin)),
                message(leaf.id, Some(other)),
                // a message of a chain started before chains were counted
                message(leaf.id, None),
            ])
            .await?;
        assert_eq!(store.chain_messages(&origin).await?, 2);
        assert_eq!(store.chain_messages(&other).await?, 1);
        let told = store
            .write(vec![Mutation::TellChain {
                origin,
                notice: notice(leaf.id),
            }])
            .await?;
        assert!(
            matches!(told[..], [MutationResult::Appended { .. }]),
            "{told:?}"
        );
        assert!(store.chain_told(&origin).await?);
        assert!(!store.chain_told(&other).await?);
    }
    // a restart keeps the count and the notice
    let store = Store::open(StoreOptions::new(&path))?;
    store.write(vec![message(leaf.id, Some(origin))]).await?;
    assert_eq!(store.chain_messages(&origin).await?, 3);
    let again = store
        .write(vec![Mutation::TellChain {
            origin,
            notice: notice(leaf.id),
        }])
        .await?;
    assert_eq!(again, vec![MutationResult::Done]);
    let notices = store
        .tail_entries(leaf.id, 100)
        .await?
        .into_iter()
        .filter(|e| matches!(e.kind, EntryKind::Notice { .. }))
        .count();
    assert_eq!(notices, 1);
    // an unknown chain has sent nothing
    let unknown = ChainOrigin {
        session: leaf.id,
        entry: EntryId::new_v7(),
    };
    assert_eq!(store.chain_messages(&unknown).await?, 0);
    Ok(())
}

/// The prune: a reader walks the chains a page at a time and finds those
/// last written before the cut-off; the writer drops them by key. Chains
/// written since (still sending) stay with their counts, and so does one
/// that sent between the read of its page and the write that drops it.
#[tokio::test]
async fn chains_silent_past_the_horizon_are_found_by_pages_and_pruned() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = crate::clock::ManualClock::new(chrono::Utc::now());
    let store = Store::open(StoreOptions {
        clock: std::sync::Arc::new(clock.clone()),
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })?;
    let leaf = session("leaf");
    let chain = || ChainOrigin {
        session: leaf.id,
        entry: EntryId::new_v7(),
    };
    let old: Vec<ChainOrigin> = (0..5).map(|_| chain()).collect();
    let mut batch = vec![Mutation::EnsureSession(leaf.clone())];
    batch.extend(old.iter().map(|o| message(leaf.id, Some(*o))));
    store.write(batch).await?;
    clock.advance_ms(1_000);
    let horizon = store.clock().now_ms();
    clock.advance_ms(1_000);
    // old[1] still sends; a new chain starts
    let young = chain();
    store
        .write(vec![
            message(leaf.id, Some(old[1])),
            message(leaf.id, Some(young)),
        ])
        .await?;

    // pages of 2 over 6 rows: every row is read once, the silent found
    let mut silent = Vec::new();
    let mut pages = 0;
    let mut after = None;
    loop {
        let page = store.silent_chains(after.as_ref(), horizon, 2).await?;
        pages += 1;
        silent.extend(page.silent);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert!(pages <= 4, "{pages} pages");
    let mut expected: Vec<EntryId> = [0, 2, 3, 4].iter().map(|&i| old[i].entry).collect();
    expected.sort_by_key(|e| e.to_string());
    silent.sort_by_key(|e| e.to_string());
    assert_eq!(silent, expected);

    // old[0] sends after its page was read: the writer keeps it
    store.write(vec![message(leaf.id, Some(old[0]))]).await?;
    let pruned = store
        .write(vec![Mutation::PruneChains {
            before_ms: horizon,
            origins: silent,
        }])
        .await?;
    assert_eq!(pruned, vec![MutationResult::Count(3)]);
    let mut counts = Vec::new();
    for o in old.iter().chain([&young]) {
        counts.push(store.chain_messages(o).await?);
    }
    assert_eq!(counts, vec![2, 2, 0, 0, 0, 1]);
    let left = store.silent_chains(None, horizon, 10).await?;
    assert_eq!(left.silent, Vec::<EntryId>::new());
    assert_eq!(left.next, None);
    Ok(())
}

/// The plans of the prune's read of a page and of its deletes: searches
/// of the primary key, never a scan of `chains` (the prune was a delete
/// of `SELECT origin FROM chains WHERE updated_at < ? LIMIT ?`, a scan in
/// the writer that went through every chain still sending, the whole
/// table every hour when none was silent).
#[test]
fn the_prune_reads_and_deletes_by_key_never_scanning_chains() -> TestResult {
    let mut conn = rusqlite::Connection::open_in_memory()?;
    crate::store::schema::migrate(&mut conn)?;
    for i in 0..3 {
        conn.execute(
            "INSERT INTO chains (origin, messages, told, updated_at) VALUES (?1, 1, 0, ?2)",
            rusqlite::params![EntryId::new_v7().to_string(), i],
        )?;
    }
    for sql in [super::CHAINS_PAGE, super::DROP_SILENT] {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
        let plan: Vec<String> = stmt
            .query_map(rusqlite::params!["", 10], |r| r.get::<_, String>(3))?
            .collect::<rusqlite::Result<_>>()?;
        assert!(
            plan.iter().all(|step| !step.starts_with("SCAN"))
                && plan.iter().any(|step| step.contains("PRIMARY KEY")),
            "{sql}: {plan:?}"
        );
    }
    Ok(())
}

/// `WriteLimit::ChainMessages`: of two batches that each fit alone, the
/// second, applied after the first, is refused: its `refused` writes go in
/// instead of its message, and the count stops at the bound.
#[tokio::test]
async fn the_writer_refuses_a_message_past_the_chains_bound() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db")))?;
    let leaf = session("leaf");
    let origin = ChainOrigin {
        session: leaf.id,
        entry: EntryId::new_v7(),
    };
    store
        .write(vec![
            Mutation::EnsureSession(leaf.clone()),
            message(leaf.id, Some(origin)),
        ])
        .await?;
    let limited = || {
        Mutation::Limited(Box::new(crate::store::Limited {
            limits: vec![crate::store::Limit {
                bound: crate::store::WriteLimit::ChainMessages {
                    origin,
                    max: 2,
                    needed: 1,
                },
                refused: vec![Mutation::Append(notice(leaf.id))],
            }],
            within: vec![message(leaf.id, Some(origin))],
        }))
    };
    let (a, b) = tokio::join!(store.write(vec![limited()]), store.write(vec![limited()]));
    let mut refused: Vec<Option<usize>> = [a?, b?]
        .into_iter()
        .flatten()
        .map(|r| match r {
            MutationResult::Limited { refused, .. } => refused,
            other => panic!("{other:?}"),
        })
        .collect();
    refused.sort();
    assert_eq!(refused, vec![None, Some(0)]);
    assert_eq!(store.chain_messages(&origin).await?, 2);
    let kinds: Vec<EntryKind> = store
        .tail_entries(leaf.id, 100)
        .await?
        .into_iter()
        .map(|e| e.kind)
        .collect();
    let messages = kinds
        .iter()
        .filter(|k| matches!(k, EntryKind::AgentMessage { .. }))
        .count();
    let notices = kinds
        .iter()
        .filter(|k| matches!(k, EntryKind::Notice { .. }))
        .count();
    assert_eq!((messages, notices), (2, 1));
    Ok(())
}
