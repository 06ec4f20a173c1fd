//! What the writer counts of a turn's starts: a step resets the count, a
//! clean close takes back the starts it recorded of turns still running;
//! a start before a turn is stored is counted on its inputs.
//! What the ledger keeps when pruned, and whose a bot's sessions are when
//! its owner changes. A new bot's id that differs from a bot's only in
//! case is refused as it is inserted. A group with a failed job still
//! signals the sessions its other jobs wrote.

use std::sync::Arc;

use pretty_assertions::assert_eq;

use crate::clock::Clock;
use crate::clock::ManualClock;
use crate::digest::InputDigest;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::record::AdmitOutcome;
use crate::record::AdmitRequest;
use crate::record::BotRecord;
use crate::record::CatchUp;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::Priority;
use crate::record::RoutineOrigin;
use crate::record::RoutineRecord;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SessionRecord;
use crate::record::TurnStatus;
use crate::store::Mutation;
use crate::store::MutationResult;
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

/// `CountStart` of `r`'s `inputs`: the highest count it answers (0 when
/// none is pending).
async fn count_start(store: &Store, inputs: &[i64]) -> Result<i64, Box<dyn std::error::Error>> {
    let count = Mutation::CountStart {
        bot: BotId::new("r")?,
        inputs: inputs.to_vec(),
    };
    match store.write(vec![count]).await?.pop() {
        Some(MutationResult::StartCounts(counts)) => {
            Ok(counts.iter().map(|&(_, n)| n).max().unwrap_or(0))
        }
        other => Err(format!("expected counts, got {other:?}").into()),
    }
}

/// The `starts` of inbox rows, in the order given.
fn starts(store: &Store, gids: &[i64]) -> crate::error::Result<Vec<i64>> {
    store.read_blocking(|c| {
        let mut out = Vec::new();
        for gid in gids {
            out.push(
                c.query_row("SELECT starts FROM inbox WHERE gid = ?1", [gid], |r| {
                    r.get(0)
                })?,
            );
        }
        Ok(out)
    })
}

/// A turn over inputs no stored turn has taken counts its start on them
/// (a turn is stored with its first step: a crash before it left no
/// count, and the inputs came back as a new turn forever). Once per
/// process; a clean close takes it back; the turn that takes the inputs
/// sets their count back to 0.
#[tokio::test]
async fn a_start_before_the_first_step_is_counted_on_its_inputs() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let mut gids = Vec::new();
    for nonce in ["a", "b"] {
        let AdmitOutcome::Accepted(rec) = admit(&store, user_message(nonce, None)?).await? else {
            return Err("not accepted".into());
        };
        gids.push(rec.gid);
    }
    let (a, b) = (gids[0], gids[1]);
    assert_eq!(count_start(&store, &[a]).await?, 1);
    assert_eq!(count_start(&store, &[a]).await?, 1, "once per process");
    assert_eq!(count_start(&store, &[a, b]).await?, 1);
    assert_eq!(starts(&store, &[a, b])?, vec![1, 1]);
    store.close().await;

    // the host stopped those turns: not crashes
    let store = open(&dir)?;
    assert_eq!(starts(&store, &[a, b])?, vec![0, 0]);
    assert_eq!(count_start(&store, &[b]).await?, 1);
    let turn = TurnId::new_v7();
    store
        .write(vec![Mutation::StartTurn {
            turn,
            bot: BotId::new("r")?,
            session: SessionId::new_v7(),
            inputs: vec![b],
            checkpoint: serde_json::json!({}),
            started_at: 0,
        }])
        .await?;
    assert_eq!(starts(&store, &[a, b])?, vec![0, 0], "b's turn is stored");
    assert_eq!(
        count_start(&store, &[b]).await?,
        0,
        "b is no longer pending"
    );
    assert_eq!(count_start(&store, &[a]).await?, 1);
    store.close().await;
    let store = open(&dir)?;
    assert_eq!(starts(&store, &[a, b])?, vec![0, 0]);
    store.close().await;
    Ok(())
}

/// alice's message to bot `r` with idempotency key `nonce`, made at
/// `nonce_time_ms` (a UUIDv7 key says when).
fn user_message(nonce: &str, nonce_time_ms: Option<i64>) -> crate::error::Result<Mutation> {
    let key = SessionKey {
        bot: BotId::new("r")?,
        kind: SessionKind::Dm,
        peer: "alice".into(),
    };
    Ok(Mutation::Admit(Box::new(AdmitRequest {
        source: "user:alice".into(),
        nonce: nonce.into(),
        nonce_time_ms,
        digest: InputDigest::of_parts([b"hello".as_slice()]),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: key.id(),
            author: "alice".into(),
            turn: None,
            kind: EntryKind::UserMessage {
                text: "hello".into(),
            },
        },
        session: key,
        owner: UserId::new("alice")?,
        priority: Priority::UserDm,
    })))
}

async fn admit(store: &Store, m: Mutation) -> Result<AdmitOutcome, Box<dyn std::error::Error>> {
    match store.write(vec![m]).await?.pop() {
        Some(MutationResult::Admitted(o)) => Ok(o),
        other => Err(format!("expected an admission, got {other:?}").into()),
    }
}

/// A sender whose clock runs 30 minutes fast: its key is stamped after
/// its admission. Pruned by admission time alone, its row went while the
/// guard still took the key for a new one, and a retry ran the message
/// twice. It is kept until the horizon passes the key's time too; a key
/// stamped on time is `unknown` from the first prune, as before.
#[tokio::test]
async fn a_key_stamped_ahead_of_the_clock_stays_a_duplicate_until_the_horizon_passes_it()
-> TestResult {
    const MINUTE: i64 = 60_000;
    const RETENTION: i64 = 7 * 24 * 60 * MINUTE;
    let dir = tempfile::tempdir()?;
    let start = chrono::DateTime::parse_from_rfc3339("2027-01-01T00:00:00Z")?.to_utc();
    let clock = ManualClock::new(start);
    let t0 = clock.now_ms();
    let store = Store::open(StoreOptions {
        clock: Arc::new(clock.clone()),
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })?;
    let prune = async |store: &Store| {
        store
            .write(vec![Mutation::PruneLedger {
                before_ms: clock.now_ms() - RETENTION,
            }])
            .await
    };
    let fast = || user_message("fast", Some(t0 + 30 * MINUTE));
    let on_time = || user_message("on-time", Some(t0));
    let AdmitOutcome::Accepted(first) = admit(&store, fast()?).await? else {
        return Err("the fast key was not accepted".into());
    };
    assert_eq!(
        admit(&store, fast()?).await?,
        AdmitOutcome::Duplicate(first.clone())
    );
    assert!(matches!(
        admit(&store, on_time()?).await?,
        AdmitOutcome::Accepted(_)
    ));

    // a week and 10 minutes later: the horizon (00:10) is past both
    // admissions, and past the on-time key, but not the fast key (00:30)
    clock.advance_ms(RETENTION + 10 * MINUTE);
    prune(&store).await?;
    let o = admit(&store, on_time()?).await?;
    assert!(matches!(o, AdmitOutcome::Unknown { .. }), "{o:?}");
    assert_eq!(
        admit(&store, fast()?).await?,
        AdmitOutcome::Duplicate(first),
        "kept while the guard would take the key for a new one"
    );
    assert_eq!(store.count("ledger").await?, 1);

    // once the horizon passes the key's time, the guard answers for it
    clock.advance_ms(30 * MINUTE);
    prune(&store).await?;
    assert_eq!(store.count("ledger").await?, 0);
    let o = admit(&store, fast()?).await?;
    assert!(matches!(o, AdmitOutcome::Unknown { .. }), "{o:?}");

    // the prune still walks the ledger's age index, not the whole ledger
    let plan: String = store.read_blocking(|c| {
        Ok(c.query_row(
            "EXPLAIN QUERY PLAN DELETE FROM ledger
             WHERE created_at < ?1 AND (nonce_ms IS NULL OR nonce_ms < ?1)",
            [0],
            |r| r.get(3),
        )?)
    })?;
    assert!(plan.contains("ledger_age"), "{plan}");
    store.close().await;
    Ok(())
}

fn bot_of(id: &str, owner: &str) -> crate::error::Result<BotRecord> {
    Ok(BotRecord {
        id: BotId::new(id)?,
        name: id.into(),
        owner: UserId::new(owner)?,
        role: "helps".into(),
        provider: "main".into(),
        tools: Vec::new(),
        settings: serde_json::json!({}),
        origin: "config".into(),
        created_at: 0,
        updated_at: 0,
    })
}

fn session_of(bot: &str, kind: SessionKind, peer: &str) -> crate::error::Result<SessionRecord> {
    let key = SessionKey {
        bot: BotId::new(bot)?,
        kind,
        peer: peer.into(),
    };
    Ok(SessionRecord {
        id: key.id(),
        key,
        owner: UserId::new("alice")?,
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    })
}

/// Bot `r`'s routine `name`, from `origin`.
fn routine_of(name: &str, origin: RoutineOrigin) -> crate::error::Result<RoutineRecord> {
    Ok(RoutineRecord {
        bot: BotId::new("r")?,
        name: name.into(),
        cron: "0 9 * * *".into(),
        timezone: "UTC".into(),
        prompt: "Tick.".into(),
        silent_ok: true,
        catch_up: CatchUp::Once,
        origin,
        next_fire_ms: None,
        last_fire_ms: None,
        created_at: 0,
        updated_at: 0,
    })
}

/// fleet.toml gives bot `r` to bob: its own work (routine and webhook
/// runs, its talks with bots and subagents, its sessions of rooms) is
/// bob's from then on, new entries signal bob; bob reads its room session
/// from the change on; alice keeps her DM with it, another bot's sessions
/// are not touched.
#[tokio::test]
async fn a_new_owner_takes_the_bots_own_sessions_and_their_signals() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let sessions = [
        session_of("r", SessionKind::Routine, "daily")?,
        session_of("r", SessionKind::Hook, "gh")?,
        session_of("r", SessionKind::Agent, "b")?,
        session_of("r", SessionKind::Subagent, "p")?,
        session_of("r", SessionKind::Dm, "alice")?,
        session_of("r", SessionKind::Group, "room1")?,
        session_of("b", SessionKind::Hook, "gh")?,
    ];
    let mut batch = vec![
        Mutation::UpsertBot(bot_of("r", "alice")?),
        Mutation::UpsertBot(bot_of("b", "alice")?),
        // the file's: its runs go to bob whole
        Mutation::PutRoutine(Box::new(routine_of("daily", RoutineOrigin::Config)?)),
    ];
    batch.extend(sessions.iter().cloned().map(Mutation::EnsureSession));
    store.write(batch).await?;
    let hook = sessions[1].id;
    let event = |session: SessionId| {
        Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session,
            author: "hook:gh".into(),
            turn: None,
            kind: EntryKind::UserMessage {
                text: "delivery".into(),
            },
        }))
    };
    // the writer now knows the hook session as alice's
    store.write(vec![event(hook)]).await?;

    store
        .write(vec![Mutation::UpsertBot(bot_of("r", "bob")?)])
        .await?;
    let mut owners = Vec::new();
    for s in &sessions {
        let record = store.get_session(s.id).await?.ok_or("no session")?;
        owners.push((
            format!("{} {}", record.key.bot, record.key.kind.as_str()),
            record.owner.to_string(),
        ));
    }
    let expected = [
        ("r routine", "bob"),
        ("r hook", "bob"),
        ("r agent", "bob"),
        ("r subagent", "bob"),
        ("r dm", "alice"),
        ("r group", "bob"),
        ("b hook", "alice"),
    ]
    .map(|(s, o)| (s.to_owned(), o.to_owned()));
    assert_eq!(owners, expected);
    let bob = UserId::new("bob")?;
    let room = sessions[5].id;
    assert_eq!(store.session_floor(room, &bob).await?.map(|f| f.0), Some(1));
    assert_eq!(store.history_floors(&bob).await?, vec![(room, 1)]);
    assert_eq!(store.session_floor(hook, &bob).await?, None);

    // the next run's entries signal bob, not the owner the writer knew
    let mut changes = store.subscribe();
    store.write(vec![event(hook)]).await?;
    let change = changes.recv().await?;
    assert_eq!((change.session, change.seq), (hook, 2));
    assert_eq!(change.owner.as_str(), "bob");
    store.close().await;
    Ok(())
}

/// fleet.toml gives bot `r` to bob: the routine its former owner made
/// through the API is deleted, and its session, which goes to bob with
/// the bot, is read from the change on, by bob and as the bot's context
/// (`session_view`): alice's prompts are not bob's to read, nor the
/// context of a routine bob makes again under that name (QA). A routine
/// of the file keeps its history.
#[tokio::test]
async fn a_former_owners_api_routine_leaves_its_history_behind() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let (api, file, deleted) = (
        session_of("r", SessionKind::Routine, "tick")?,
        session_of("r", SessionKind::Routine, "daily")?,
        session_of("r", SessionKind::Routine, "gone")?,
    );
    store
        .write(vec![
            Mutation::UpsertBot(bot_of("r", "alice")?),
            Mutation::PutRoutine(Box::new(routine_of("tick", RoutineOrigin::Api)?)),
            Mutation::PutRoutine(Box::new(routine_of("daily", RoutineOrigin::Config)?)),
            Mutation::EnsureSession(api.clone()),
            Mutation::EnsureSession(file.clone()),
            Mutation::EnsureSession(deleted.clone()),
        ])
        .await?;
    let run = |session: SessionId, text: &str| {
        Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session,
            author: "system".into(),
            turn: None,
            kind: EntryKind::UserMessage { text: text.into() },
        }))
    };
    // `gone` ran, and alice deleted it before giving the bot away
    store
        .write(vec![
            run(api.id, "alice's tick"),
            run(file.id, "the file's daily"),
            run(deleted.id, "alice's gone"),
        ])
        .await?;
    store
        .write(vec![Mutation::UpsertBot(bot_of("r", "bob")?)])
        .await?;
    let bob = UserId::new("bob")?;
    assert_eq!(
        store.session_floor(api.id, &bob).await?.map(|f| f.0),
        Some(2)
    );
    assert_eq!(store.session_floor(file.id, &bob).await?, None);
    assert_eq!(
        store.session_floor(deleted.id, &bob).await?.map(|f| f.0),
        Some(2),
        "a routine alice deleted before the change: its runs are hers too"
    );
    // bob's own run of a tick made again: alice's is not in its context
    store.write(vec![run(api.id, "bob's tick")]).await?;
    let view = store.session_view(api.id, 50, None).await?;
    let texts: Vec<String> = view
        .entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::UserMessage { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["bob's tick"]);
    let view = store.session_view(file.id, 50, None).await?;
    assert_eq!(view.entries.len(), 1, "{:?}", view.entries);
    store.close().await;
    Ok(())
}

/// The file's routine replaced an API routine of its name (or came after
/// one deleted): their runs share the name's session. At the owner
/// change the new owner reads it from the file's routine's first run on,
/// not the API routine's before it (QA: they were read whole).
#[tokio::test]
async fn the_file_routine_of_an_api_routines_name_hides_its_runs() -> TestResult {
    let dir = tempfile::tempdir()?;
    let start = chrono::DateTime::parse_from_rfc3339("2027-01-01T00:00:00Z")?.to_utc();
    let clock = ManualClock::new(start);
    let store = Store::open(StoreOptions {
        clock: Arc::new(clock.clone()),
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })?;
    let clash = session_of("r", SessionKind::Routine, "clash")?;
    let run = |text: &str| {
        Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session: clash.id,
            author: "system".into(),
            turn: None,
            kind: EntryKind::UserMessage { text: text.into() },
        }))
    };
    store
        .write(vec![
            Mutation::UpsertBot(bot_of("r", "alice")?),
            Mutation::PutRoutine(Box::new(routine_of("clash", RoutineOrigin::Api)?)),
            Mutation::EnsureSession(clash.clone()),
        ])
        .await?;
    store.write(vec![run("alice's own clash")]).await?;
    clock.advance_ms(60_000);
    // the file's now, since this minute
    let file = RoutineRecord {
        created_at: clock.now_ms(),
        ..routine_of("clash", RoutineOrigin::Config)?
    };
    store
        .write(vec![Mutation::PutRoutine(Box::new(file))])
        .await?;
    clock.advance_ms(60_000);
    store.write(vec![run("the file's clash")]).await?;
    store
        .write(vec![Mutation::UpsertBot(bot_of("r", "bob")?)])
        .await?;
    let bob = UserId::new("bob")?;
    assert_eq!(
        store.session_floor(clash.id, &bob).await?.map(|f| f.0),
        Some(2)
    );
    let page = store.session_page_for(clash.id, &bob, 0, 10).await?;
    let texts: Vec<String> = page
        .map(|(_, entries)| entries)
        .unwrap_or_default()
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::UserMessage { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["the file's clash"]);
    store.close().await;
    Ok(())
}

/// A batch that creates a session and then fails is rolled back, session
/// row included; the session must not stay in the writer's cache. (It
/// did: the next admission to that session skipped creating the row, and
/// its entries belonged to a session that did not exist — read as none,
/// their transcript answered 404.)
#[tokio::test]
async fn a_session_created_by_a_failed_batch_is_created_again_by_the_next() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let nowhere = Mutation::Append(Box::new(NewEntry {
        id: EntryId::new_v7(),
        session: SessionId::new_v7(),
        author: "r".into(),
        turn: None,
        kind: EntryKind::Reminder {
            text: "to a session that does not exist".into(),
        },
    }));
    let failed = store
        .write(vec![user_message("first", None)?, nowhere])
        .await;
    assert!(failed.is_err(), "{failed:?}");
    let session = SessionKey {
        bot: BotId::new("r")?,
        kind: SessionKind::Dm,
        peer: "alice".into(),
    }
    .id();
    assert_eq!(store.get_session(session).await?, None);

    let AdmitOutcome::Accepted(a) = admit(&store, user_message("second", None)?).await? else {
        return Err("the second message was not accepted".into());
    };
    assert_eq!(a.session, session);
    let record = store.get_session(session).await?;
    assert_eq!(record.map(|r| r.last_seq), Some(a.seq));
    store.close().await;
    Ok(())
}

/// Two racing creations of `B1` and `b1` (CreateAgent's check of the
/// other ids is a read before the write, so both pass it): the store
/// inserts one and refuses the other as taken, in the transaction; later
/// ones in either case are refused too, and an id that differs in more
/// than case is not.
#[tokio::test]
async fn a_bot_id_differing_from_another_only_in_case_is_refused_as_taken() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let (upper, lower) = tokio::join!(
        store.write(vec![Mutation::CreateBot(bot_of("B1", "alice")?)]),
        store.write(vec![Mutation::CreateBot(bot_of("b1", "bob")?)]),
    );
    let refused = |r: &crate::error::Result<Vec<MutationResult>>| {
        matches!(r, Err(StoreError::Taken { what: "bot", .. }))
    };
    assert!(
        (upper.is_ok() && refused(&lower)) || (lower.is_ok() && refused(&upper)),
        "B1: {upper:?}, b1: {lower:?}"
    );
    let ids = |bots: Vec<BotRecord>| bots.into_iter().map(|b| b.id.to_string()).collect();
    let created: Vec<String> = ids(store.list_bots(None).await?);
    assert_eq!(created.len(), 1, "{created:?}");

    for id in ["b1", "B1"] {
        let again = store
            .write(vec![Mutation::CreateBot(bot_of(id, "carol")?)])
            .await;
        assert!(refused(&again), "{id}: {again:?}");
    }
    store
        .write(vec![Mutation::CreateBot(bot_of("b12", "carol")?)])
        .await?;
    let mut after: Vec<String> = ids(store.list_bots(None).await?);
    after.sort();
    let mut expected = created;
    expected.push("b12".to_owned());
    expected.sort();
    assert_eq!(after, expected);
    store.close().await;
    Ok(())
}

/// alice's message to bot `bot` (their DM), with key `nonce`.
fn message_to(bot: &str, nonce: &str) -> crate::error::Result<Mutation> {
    let key = SessionKey {
        bot: BotId::new(bot)?,
        kind: SessionKind::Dm,
        peer: "alice".into(),
    };
    Ok(Mutation::Admit(Box::new(AdmitRequest {
        source: "user:alice".into(),
        nonce: nonce.into(),
        nonce_time_ms: None,
        digest: InputDigest::of_parts([nonce.as_bytes()]),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: key.id(),
            author: "alice".into(),
            turn: None,
            kind: EntryKind::UserMessage { text: "hi".into() },
        },
        session: key,
        owner: UserId::new("alice")?,
        priority: Priority::UserDm,
    })))
}

/// A group in which one job fails is committed again job by job; the
/// jobs before the failing one are committed, and each still signals its
/// session on `/v1/events`. (They did not: the failure emptied the
/// writer's cache of sessions, and a touched session missing from it was
/// not signalled at all; a web page showing it waited for the next
/// change to see the entries.) The writer is held in the callback of a
/// first job while the next two are queued, so that they form one group.
#[tokio::test]
async fn jobs_committed_beside_a_failed_one_signal_their_sessions() -> TestResult {
    use std::sync::mpsc;
    use std::time::Duration;
    const BOUND: Duration = Duration::from_secs(10);

    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let mut changes = store.subscribe();
    let (entered, is_held) = mpsc::channel();
    let (release, held) = mpsc::channel::<()>();
    store.write_then(
        vec![message_to("w", "w")?],
        Box::new(move |_| {
            let _ = entered.send(());
            let _ = held.recv_timeout(BOUND);
        }),
    )?;
    is_held.recv_timeout(BOUND)?;
    let nowhere = Mutation::Append(Box::new(NewEntry {
        id: EntryId::new_v7(),
        session: SessionId::new_v7(),
        author: "r".into(),
        turn: None,
        kind: EntryKind::Reminder {
            text: "to a session that does not exist".into(),
        },
    }));
    let (done, answers) = mpsc::channel();
    for batch in [vec![message_to("a", "a")?], vec![nowhere]] {
        let done = done.clone();
        store.write_then(
            batch,
            Box::new(move |r| {
                let _ = done.send(r.is_ok());
            }),
        )?;
    }
    release.send(())?;
    let oks = [answers.recv_timeout(BOUND)?, answers.recv_timeout(BOUND)?];
    assert_eq!(oks, [true, false]);
    // a later write: every signal of the group comes before its own
    store.write(vec![message_to("z", "z")?]).await?;
    let mut signalled = Vec::new();
    loop {
        let change = tokio::time::timeout(BOUND, changes.recv()).await??;
        signalled.push((change.bot.to_string(), change.seq));
        if change.bot.as_str() == "z" {
            break;
        }
    }
    let expected = [("w", 1), ("a", 1), ("z", 1)].map(|(b, s)| (b.to_owned(), s));
    assert_eq!(signalled, expected);
    store.close().await;
    Ok(())
}

/// A mutation that always fails: the checkpoint of a turn never started.
fn failing() -> Mutation {
    Mutation::Checkpoint {
        turn: TurnId::new_v7(),
        checkpoint: serde_json::json!({}),
    }
}

/// The ledger's horizon, raised in memory by a prune (or a start's
/// `LedgerHorizon`) whose transaction was then rolled back, kept the
/// replay from writing its meta row, so a restart forgot it and a pruned
/// UUIDv7 key was accepted again (audit, 2026-12-07).
#[tokio::test]
async fn a_horizon_replayed_after_a_rolled_back_batch_survives_a_restart() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let now = store.clock().now_ms();
    let an_hour_ago = Some(now - 3_600_000);
    let first = admit(&store, user_message("old", an_hour_ago)?).await?;
    assert!(matches!(first, AdmitOutcome::Accepted(_)), "{first:?}");
    // past the admission's own time, a few ms after `now`
    let prune = || Mutation::PruneLedger {
        before_ms: now + 60_000,
    };
    // the prune's batch fails (rolled back), then it is written alone
    assert!(store.write(vec![prune(), failing()]).await.is_err());
    store.write(vec![prune()]).await?;
    assert_eq!(store.count("ledger").await?, 0);
    assert_eq!(
        store.meta("ledger_pruned_before_ms").await?,
        Some((now + 60_000).to_string())
    );
    // so is a start's horizon
    let horizon = Mutation::LedgerHorizon {
        at_ms: now + 60_001,
    };
    assert!(store.write(vec![horizon.clone(), failing()]).await.is_err());
    store.write(vec![horizon]).await?;
    assert_eq!(
        store.meta("restored_at_ms").await?,
        Some((now + 60_001).to_string())
    );
    store.close().await;
    drop(store);
    let store = open(&dir)?;
    let again = admit(&store, user_message("old", an_hour_ago)?).await?;
    assert!(matches!(again, AdmitOutcome::Unknown { .. }), "{again:?}");
    store.close().await;
    Ok(())
}

/// Another process holding the write lock past the busy timeout (5 s) is a
/// store that may take the write later (`503`), not a refusal of the
/// write itself (`Rejected`, `500`; audit, 2026-12-07).
#[tokio::test]
async fn a_write_lock_held_elsewhere_is_answered_busy_not_rejected() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    admit(&store, user_message("a", None)?).await?;
    let other = rusqlite::Connection::open(dir.path().join("fleet.db"))?;
    other.execute_batch("BEGIN IMMEDIATE")?;
    let e = store
        .write(vec![user_message("b", None)?])
        .await
        .err()
        .ok_or("the write lock is held elsewhere")?;
    other.execute_batch("ROLLBACK")?;
    assert!(e.is_retryable(), "{e:?}");
    // and it is taken once the lock is free
    assert!(matches!(
        admit(&store, user_message("b", None)?).await?,
        AdmitOutcome::Accepted(_)
    ));
    store.close().await;
    Ok(())
}
