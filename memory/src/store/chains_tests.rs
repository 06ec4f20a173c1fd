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
