//! Turn counts per bot and status (`turn_counts` of migration 11, kept by
//! the writer as turns end): exact through every status change, resumes,
//! retries, a failed batch and a restart, and read through indexes only.

use pretty_assertions::assert_eq;
use rusqlite::Connection;
use rusqlite::params;
use serde_json::json;

use super::ENDED_TURNS;
use super::RUNNING_TURNS;
use crate::error::Result;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::record::BotRecord;
use crate::record::TurnStatus;
use crate::store::Mutation;
use crate::store::Store;
use crate::store::StoreOptions;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn bot(id: &str) -> BotId {
    BotId::new(id).unwrap_or_else(|e| panic!("{e}"))
}

fn record(id: &str) -> BotRecord {
    BotRecord {
        id: bot(id),
        name: id.into(),
        owner: UserId::new("alice").unwrap_or_else(|e| panic!("{e}")),
        role: "r".into(),
        provider: "p".into(),
        tools: vec![],
        settings: json!({}),
        origin: "api".into(),
        created_at: 0,
        updated_at: 0,
    }
}

fn start(turn: TurnId, b: &str) -> Mutation {
    Mutation::StartTurn {
        turn,
        bot: bot(b),
        session: SessionId::derive(&bot(b), "dm", "alice"),
        inputs: vec![],
        checkpoint: json!({}),
        started_at: 0,
    }
}

fn end(turn: TurnId, status: TurnStatus) -> Mutation {
    Mutation::EndTurn {
        turn,
        status,
        error: None,
    }
}

/// The counts as they were read before migration 11: over every turn.
fn counted_over_turns(conn: &Connection, b: &str) -> Result<Vec<(TurnStatus, i64)>> {
    let mut stmt = conn.prepare(
        "SELECT status, COUNT(*) FROM turns WHERE bot_id = ?1 GROUP BY status ORDER BY status",
    )?;
    let rows = stmt.query_map(params![b], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (s, n) = row?;
        out.push((TurnStatus::parse(&s).unwrap_or_else(|| panic!("{s}")), n));
    }
    Ok(out)
}

/// Checks both bots' counts against `expected` and against a count over
/// every turn, through the one-bot read and the bot list.
async fn check(store: &Store, expected: &[(&str, Vec<(TurnStatus, i64)>)]) -> TestResult {
    let listed = store.list_bots_with_activity(None, "2026-12-01").await?;
    for (b, want) in expected {
        assert_eq!(&store.turn_status_counts(&bot(b)).await?, want, "bot {b}");
        let truth = store.read_blocking(|c| counted_over_turns(c, b))?;
        assert_eq!(&truth, want, "bot {b}, counted over the turns");
        let (_, activity) = listed
            .iter()
            .find(|(r, _)| r.id.as_str() == *b)
            .unwrap_or_else(|| panic!("{b} is not listed"));
        assert_eq!(&activity.turns, want, "bot {b} in the list");
    }
    Ok(())
}

#[tokio::test]
async fn counts_follow_ends_retries_a_failed_batch_and_a_restart() -> TestResult {
    use TurnStatus::*;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("fleet.db");
    let store = Store::open(StoreOptions::new(&path))?;
    store
        .write(vec![
            Mutation::UpsertBot(record("a")),
            Mutation::UpsertBot(record("b")),
        ])
        .await?;
    check(&store, &[("a", vec![]), ("b", vec![])]).await?;
    let t: Vec<TurnId> = (0..7).map(|_| TurnId::new_v7()).collect();
    store
        .write((0..5).map(|i| start(t[i], "a")).collect())
        .await?;
    store.write(vec![start(t[5], "b")]).await?;
    check(
        &store,
        &[("a", vec![(Running, 5)]), ("b", vec![(Running, 1)])],
    )
    .await?;

    store
        .write(vec![
            end(t[0], Completed),
            end(t[1], Failed),
            end(t[2], Interrupted),
            end(t[3], Cancelled),
        ])
        .await?;
    store.write(vec![end(t[5], Undelivered)]).await?;
    let a = vec![
        (Cancelled, 1),
        (Completed, 1),
        (Failed, 1),
        (Interrupted, 1),
        (Running, 1),
    ];
    check(&store, &[("a", a.clone()), ("b", vec![(Undelivered, 1)])]).await?;

    // a resume after a crash, a checkpoint and a retry's requeue change no
    // status; the retry runs as a new turn
    store
        .write(vec![Mutation::BumpAttempts { turn: t[4] }])
        .await?;
    store
        .write(vec![Mutation::ResetAttempts { turn: t[4] }])
        .await?;
    store
        .write(vec![Mutation::Checkpoint {
            turn: t[4],
            checkpoint: json!({"step": 1}),
        }])
        .await?;
    store
        .write(vec![Mutation::RequeueInputs { turn: t[1] }])
        .await?;
    check(&store, &[("a", a.clone())]).await?;
    store.write(vec![start(t[6], "a")]).await?;
    store.write(vec![end(t[6], Failed)]).await?;
    let a = vec![
        (Cancelled, 1),
        (Completed, 1),
        (Failed, 2),
        (Interrupted, 1),
        (Running, 1),
    ];
    check(&store, &[("a", a.clone())]).await?;

    // a batch that fails is rolled back with its counts
    let failed = store
        .write(vec![end(t[4], Completed), end(TurnId::new_v7(), Completed)])
        .await;
    assert!(failed.is_err(), "{failed:?}");
    check(&store, &[("a", a.clone())]).await?;

    // an ended turn whose status changes again (no path does it today)
    // moves between counts
    store.write(vec![end(t[1], Completed)]).await?;
    let a = vec![
        (Cancelled, 1),
        (Completed, 2),
        (Failed, 1),
        (Interrupted, 1),
        (Running, 1),
    ];
    check(&store, &[("a", a.clone())]).await?;

    // the counts are in the database: a restart finds them as they were
    store.close().await;
    drop(store);
    let store = Store::open(StoreOptions::new(&path))?;
    check(&store, &[("a", a), ("b", vec![(Undelivered, 1)])]).await?;
    store.write(vec![end(t[4], Completed)]).await?;
    let a = vec![
        (Cancelled, 1),
        (Completed, 3),
        (Failed, 1),
        (Interrupted, 1),
    ];
    check(&store, &[("a", a)]).await?;
    store.close().await;
    Ok(())
}

/// The plans of the counting queries: index searches, never a scan of
/// `turns` (counting over the turns scanned the whole table for each bot
/// of the bot list: 15-17 s at 300,000 turns over 250 bots).
#[test]
fn counts_are_read_through_indexes() -> TestResult {
    let mut conn = Connection::open_in_memory()?;
    crate::store::schema::migrate(&mut conn)?;
    for (i, status) in ["running", "completed", "failed"].iter().enumerate() {
        conn.execute(
            "INSERT INTO turns (id, bot_id, session_id, status, inputs, checkpoint, attempts, started_at)
             VALUES (?1, 'a', 's', ?2, '[]', '{}', 1, 0)",
            params![format!("t{i}"), status],
        )?;
    }
    for sql in [RUNNING_TURNS, ENDED_TURNS] {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
        let plan: Vec<String> = stmt
            .query_map(params!["a"], |r| r.get::<_, String>(3))?
            .collect::<rusqlite::Result<_>>()?;
        assert!(
            plan.iter().all(|step| !step.starts_with("SCAN"))
                && plan
                    .iter()
                    .any(|step| step.contains("INDEX") || step.contains("PRIMARY KEY")),
            "{sql}: {plan:?}"
        );
    }
    Ok(())
}

/// The plan of `sql` (parameters bound to `a`, `10`, `alice`).
fn plan_of(conn: &Connection, sql: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
    let n = stmt.parameter_count();
    let values: Vec<&dyn rusqlite::ToSql> = [&"a" as &dyn rusqlite::ToSql, &10, &"alice"]
        .into_iter()
        .take(n)
        .collect();
    stmt.query_map(values.as_slice(), |r| r.get::<_, String>(3))?
        .collect()
}

/// The reads of a bot's running turns and of a user's sessions go through
/// the index meant for them: a bot's running turns through `turns_open`
/// (named: with `turns_bot`, migration 21 as first written, SQLite
/// without statistics took that one, all of the bot's turns), a user's
/// sessions through `sessions_owner` (a scan of every session at every
/// API search).
#[test]
fn turns_and_sessions_are_read_through_their_indexes() -> TestResult {
    let mut conn = Connection::open_in_memory()?;
    crate::store::schema::migrate(&mut conn)?;
    let made: i64 = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE name = 'turns_bot'",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(made, 0, "migration 22 drops turns_bot");
    // as a store migrated while migration 21 made it had it
    conn.execute_batch("CREATE INDEX turns_bot ON turns(bot_id)")?;
    let turns = |filter: &str| format!("SELECT id FROM turns {filter}");
    let cases = [
        (turns(super::OPEN_TURNS), "turns_open"),
        (RUNNING_TURNS.to_owned(), "turns_open"),
        (
            format!(
                "SELECT s.id FROM sessions s {}",
                super::super::sessions::OWNER_SESSIONS
            ),
            "sessions_owner",
        ),
    ];
    for (sql, index) in cases {
        let plan = plan_of(&conn, &sql)?;
        assert!(
            plan.iter().all(|step| !step.starts_with("SCAN"))
                && plan.iter().any(|step| step.contains(index)),
            "{sql}: {plan:?}"
        );
    }
    Ok(())
}

/// A bot's turn list is newest first by the order turns started in, also
/// when their `started_at` ties (the list no longer sorts on it: it reads
/// the table backwards and stops at the limit).
#[tokio::test]
async fn a_bots_turns_are_listed_newest_first_up_to_the_limit() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db")))?;
    store
        .write(vec![
            Mutation::UpsertBot(record("a")),
            Mutation::UpsertBot(record("b")),
        ])
        .await?;
    let mut a_turns = Vec::new();
    for i in 0..6 {
        let t = TurnId::new_v7();
        // every turn starts in the same millisecond; b's interleave a's
        let b = if i % 2 == 0 { "a" } else { "b" };
        store.write(vec![start(t, b)]).await?;
        if b == "a" {
            a_turns.push(t);
        }
    }
    let listed: Vec<TurnId> = store
        .turns_of_bot(&bot("a"), 2)
        .await?
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(listed, vec![a_turns[2], a_turns[1]]);
    let all = store.turns_of_bot(&bot("a"), 10).await?;
    assert!(all.iter().all(|t| t.bot.as_str() == "a"), "{all:?}");
    assert_eq!(all.len(), 3);
    Ok(())
}
