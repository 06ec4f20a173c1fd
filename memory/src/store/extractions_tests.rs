//! The owed fact extractions (`extractions_owed`): owed once per turn,
//! read back as written, re-runs counted, cleared for good, and kept
//! across a reopen of the store.

use pretty_assertions::assert_eq;

use super::OwedExtraction;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;
use crate::store::StoreOptions;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn open(dir: &tempfile::TempDir) -> crate::error::Result<Store> {
    Store::open(StoreOptions::new(dir.path().join("fleet.db")))
}

fn owed(turn: TurnId, reply: &str) -> crate::error::Result<OwedExtraction> {
    Ok(OwedExtraction {
        turn,
        bot: BotId::new("r")?,
        session: SessionId::new_v7(),
        owner: UserId::new("alice")?,
        shown: vec!["m-aaaaaaaaaaaa".into()],
        user_texts: vec!["I bought a red bicycle".into()],
        final_reply: reply.into(),
        attempts: 0,
        created_at: 0,
    })
}

#[tokio::test]
async fn an_owed_extraction_is_kept_until_it_is_cleared() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let (a, b) = (TurnId::new_v7(), TurnId::new_v7());
    let first = owed(a, "Nice bike!")?;
    store
        .write(vec![Mutation::OweExtraction(Box::new(first.clone()))])
        .await?;
    // owing the same turn again keeps the first record
    store
        .write(vec![
            Mutation::OweExtraction(Box::new(owed(a, "other")?)),
            Mutation::OweExtraction(Box::new(owed(b, "ok")?)),
        ])
        .await?;
    let bumped = store
        .write(vec![Mutation::BumpExtraction { turn: a }])
        .await?;
    assert_eq!(bumped, [MutationResult::Attempts(1)]);
    store.close().await;

    let store = open(&dir)?;
    let read = store.owed_extractions(10).await?;
    assert_eq!(read.len(), 2);
    let got = read.iter().find(|o| o.turn == a).ok_or("turn a not owed")?;
    assert_eq!(
        (
            &got.session,
            &got.shown,
            &got.user_texts,
            got.final_reply.as_str(),
            got.attempts
        ),
        (
            &first.session,
            &first.shown,
            &first.user_texts,
            "Nice bike!",
            1
        )
    );
    assert_eq!(store.owed_extractions(1).await?.len(), 1, "the limit holds");

    let cleared = store
        .write(vec![
            Mutation::ClearExtraction { turn: a },
            Mutation::ClearExtraction { turn: a },
        ])
        .await?;
    assert_eq!(
        cleared,
        [MutationResult::Count(1), MutationResult::Count(0)]
    );
    let bumped = store
        .write(vec![Mutation::BumpExtraction { turn: a }])
        .await?;
    assert_eq!(bumped, [MutationResult::Attempts(0)], "no longer owed");
    let left: Vec<TurnId> = store
        .owed_extractions(10)
        .await?
        .into_iter()
        .map(|o| o.turn)
        .collect();
    assert_eq!(left, [b]);
    store.close().await;
    Ok(())
}
