//! What the writer counts of a turn's starts: a step resets the count, a
//! clean close takes back the starts it recorded of turns still running.

use pretty_assertions::assert_eq;

use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::record::TurnStatus;
use crate::store::Mutation;
use crate::store::Store;
use crate::store::StoreOptions;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn open(dir: &tempfile::TempDir) -> crate::error::Result<Store> {
    Store::open(StoreOptions::new(dir.path().join("fleet.db")))
}

fn start(turn: TurnId) -> crate::error::Result<Mutation> {
    Ok(Mutation::StartTurn {
        turn,
        bot: BotId::new("r")?,
        session: SessionId::new_v7(),
        inputs: Vec::new(),
        checkpoint: serde_json::json!({}),
        started_at: 0,
    })
}

/// Each turn's `attempts`, in the order given.
async fn attempts(store: &Store, turns: &[TurnId]) -> crate::error::Result<Vec<i64>> {
    let mut out = Vec::new();
    for turn in turns {
        out.push(store.get_turn(*turn).await?.map_or(-1, |t| t.attempts));
    }
    Ok(out)
}

#[tokio::test]
async fn a_clean_close_takes_back_the_starts_of_running_turns() -> TestResult {
    let dir = tempfile::tempdir()?;
    // running, resumed once; ended; running, resumed then a step
    let (a, b, c) = (TurnId::new_v7(), TurnId::new_v7(), TurnId::new_v7());
    let store = open(&dir)?;
    store.write(vec![start(a)?]).await?;
    store.write(vec![start(b)?]).await?;
    store.write(vec![start(c)?]).await?;
    store
        .write(vec![Mutation::BumpAttempts { turn: a }])
        .await?;
    store
        .write(vec![Mutation::BumpAttempts { turn: c }])
        .await?;
    store
        .write(vec![Mutation::EndTurn {
            turn: b,
            status: TurnStatus::Completed,
            error: None,
        }])
        .await?;
    store
        .write(vec![Mutation::ResetAttempts { turn: c }])
        .await?;
    assert_eq!(attempts(&store, &[a, b, c]).await?, vec![2, 1, 1]);
    store.close().await;

    // the running turns' last starts did not crash: they are taken back
    let store = open(&dir)?;
    assert_eq!(attempts(&store, &[a, b, c]).await?, vec![1, 1, 0]);
    // resumed in this process: only that start is taken back at its close
    store
        .write(vec![Mutation::BumpAttempts { turn: a }])
        .await?;
    store.close().await;

    let store = open(&dir)?;
    assert_eq!(
        attempts(&store, &[a, b, c]).await?,
        vec![1, 1, 0],
        "c was not started by the last process: its count stays"
    );
    store.close().await;
    Ok(())
}
