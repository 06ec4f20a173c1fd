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

/// `PruneChains`: rows last written before the cut-off go, a batch at a
/// time; a chain written since (still sending) stays, its count kept.
#[tokio::test]
async fn chains_silent_past_the_horizon_are_pruned_in_batches() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db")))?;
    let leaf = session("leaf");
    let old: Vec<ChainOrigin> = (0..3)
        .map(|_| ChainOrigin {
            session: leaf.id,
            entry: EntryId::new_v7(),
        })
        .collect();
    let mut batch = vec![Mutation::EnsureSession(leaf.clone())];
    batch.extend(old.iter().map(|o| message(leaf.id, Some(*o))));
    store.write(batch).await?;
    let horizon = store.clock().now_ms() + 1;
    let running = ChainOrigin {
        session: leaf.id,
        entry: old[0].entry,
    };
    let prune = Mutation::PruneChains {
        before_ms: horizon,
        max: 2,
    };
    assert_eq!(
        store.write(vec![prune.clone()]).await?,
        vec![MutationResult::Count(2)]
    );
    assert_eq!(
        store.write(vec![prune.clone()]).await?,
        vec![MutationResult::Count(1)]
    );
    assert_eq!(
        store.write(vec![prune]).await?,
        vec![MutationResult::Count(0)]
    );
    for o in &old {
        assert_eq!(store.chain_messages(o).await?, 0);
    }
    // a chain that sent after the cut-off is kept
    store.write(vec![message(leaf.id, Some(running))]).await?;
    let kept = store
        .write(vec![Mutation::PruneChains {
            before_ms: horizon - 1,
            max: 10,
        }])
        .await?;
    assert_eq!(kept, vec![MutationResult::Count(0)]);
    assert_eq!(store.chain_messages(&running).await?, 1);
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
