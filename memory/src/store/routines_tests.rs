#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;

use crate::digest::InputDigest;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::UserId;
use crate::record::AdmitRequest;
use crate::record::CatchUp;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::Priority;
use crate::record::RoutineOrigin;
use crate::record::RoutineRecord;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::store::Mutation;
use crate::store::Store;
use crate::store::StoreOptions;

fn routine(next: Option<i64>) -> RoutineRecord {
    RoutineRecord {
        bot: BotId::new("r").unwrap(),
        name: "brief".into(),
        cron: "0 8 * * *".into(),
        timezone: "Asia/Shanghai".into(),
        prompt: "Brief me.".into(),
        silent_ok: true,
        catch_up: CatchUp::Once,
        origin: RoutineOrigin::Api,
        next_fire_ms: next,
        last_fire_ms: None,
        created_at: 0,
        updated_at: 0,
    }
}

fn fire(slot: i64) -> Mutation {
    let key = SessionKey {
        bot: BotId::new("r").unwrap(),
        kind: SessionKind::Routine,
        peer: "brief".into(),
    };
    Mutation::Admit(Box::new(AdmitRequest {
        source: "routine:r".into(),
        nonce: format!("brief@{slot}"),
        nonce_time_ms: None,
        digest: InputDigest::of_parts([b"x".as_slice()]),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: key.id(),
            author: "system".into(),
            turn: None,
            kind: EntryKind::Event {
                origin: "routine:brief".into(),
                text: "Brief me.".into(),
                trusted: true,
                hop: None,
                chain: None,
                asked: None,
            },
        },
        session: key,
        owner: UserId::new("alice").unwrap(),
        priority: Priority::Background,
    }))
}

fn advance(slot: i64, next: i64) -> Mutation {
    Mutation::AdvanceRoutine {
        bot: BotId::new("r").unwrap(),
        name: "brief".into(),
        slot_ms: slot,
        fired: true,
        next_fire_ms: Some(next),
    }
}

#[tokio::test]
async fn a_fire_commits_with_its_advance_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let bot = BotId::new("r").unwrap();
    store
        .write(vec![Mutation::PutRoutine(Box::new(routine(Some(100))))])
        .await
        .unwrap();
    store
        .write(vec![fire(100), advance(100, 200)])
        .await
        .unwrap();
    let r = store.get_routine(&bot, "brief").await.unwrap().unwrap();
    assert_eq!((r.next_fire_ms, r.last_fire_ms), (Some(200), Some(100)));
    // the same slot again: the advance is refused, and the admission with it
    let err = store
        .write(vec![fire(100), advance(100, 200)])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not waiting for slot 100"),
        "{err}"
    );
    assert_eq!(store.count("ledger").await.unwrap(), 1);
    assert_eq!(store.count("entries").await.unwrap(), 1);

    // a replace keeps the creation time the record keeps; a skip does not
    // touch last_fire
    let created = r.created_at;
    let mut changed = routine(Some(200));
    changed.prompt = "Brief me, shortly.".into();
    changed.last_fire_ms = Some(100);
    store
        .write(vec![Mutation::PutRoutine(Box::new(changed))])
        .await
        .unwrap();
    store
        .write(vec![Mutation::AdvanceRoutine {
            bot: bot.clone(),
            name: "brief".into(),
            slot_ms: 200,
            fired: false,
            next_fire_ms: Some(300),
        }])
        .await
        .unwrap();
    let r = store.get_routine(&bot, "brief").await.unwrap().unwrap();
    assert_eq!(r.created_at, created);
    assert_eq!(r.prompt, "Brief me, shortly.");
    assert_eq!((r.next_fire_ms, r.last_fire_ms), (Some(300), Some(100)));
    assert_eq!(store.routines(None).await.unwrap(), vec![r]);

    let deleted = store
        .write(vec![Mutation::DeleteRoutine {
            bot: bot.clone(),
            name: "brief".into(),
        }])
        .await
        .unwrap();
    assert_eq!(deleted, vec![crate::store::MutationResult::Count(1)]);
    assert!(store.routines(Some(&bot)).await.unwrap().is_empty());
}

/// The run of a routine's last fire: none before it fires, `None`
/// (waiting) until a turn takes the fire, then that turn, failed here; a
/// later fire waits again.
#[tokio::test]
async fn a_routines_last_run_is_the_turn_that_took_its_last_fire() {
    use crate::ids::TurnId;
    use crate::record::TurnStatus;
    use crate::store::MutationResult;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let bot = BotId::new("r").unwrap();
    store
        .write(vec![Mutation::PutRoutine(Box::new(routine(Some(100))))])
        .await
        .unwrap();
    assert_eq!(store.routine_runs(&bot).await.unwrap(), vec![]);
    let written = store
        .write(vec![fire(100), advance(100, 200)])
        .await
        .unwrap();
    let Some(MutationResult::Admitted(crate::record::AdmitOutcome::Accepted(fired))) =
        written.first()
    else {
        panic!("{written:?}");
    };
    let waiting = |fire: i64| super::RoutineRun {
        name: "brief".to_owned(),
        fire,
        turn: None,
    };
    assert_eq!(
        store.routine_runs(&bot).await.unwrap(),
        vec![waiting(fired.gid)]
    );
    let turn = TurnId::new_v7();
    store
        .write(vec![
            Mutation::StartTurn {
                turn,
                bot: bot.clone(),
                session: fired.session,
                inputs: vec![fired.gid],
                checkpoint: serde_json::json!({}),
                started_at: 1,
            },
            Mutation::Append(Box::new(NewEntry {
                id: EntryId::new_v7(),
                session: fired.session,
                author: "system".into(),
                turn: Some(turn),
                kind: EntryKind::Notice {
                    code: "turn_failed".into(),
                    text: "failed".into(),
                    retry_turn: Some(turn),
                },
            })),
            Mutation::EndTurn {
                turn,
                status: TurnStatus::Failed,
                error: Some("boom".into()),
            },
        ])
        .await
        .unwrap();
    let runs = store.routine_runs(&bot).await.unwrap();
    let [
        super::RoutineRun {
            name,
            fire: taken,
            turn: Some(run),
        },
    ] = runs.as_slice()
    else {
        panic!("{runs:?}");
    };
    assert_eq!(
        (
            name.as_str(),
            *taken,
            run.id,
            run.status,
            run.error.as_deref()
        ),
        ("brief", fired.gid, turn, TurnStatus::Failed, Some("boom"))
    );
    let written = store
        .write(vec![fire(200), advance(200, 300)])
        .await
        .unwrap();
    let Some(MutationResult::Admitted(crate::record::AdmitOutcome::Accepted(again))) =
        written.first()
    else {
        panic!("{written:?}");
    };
    assert_eq!(
        store.routine_runs(&bot).await.unwrap(),
        vec![waiting(again.gid)]
    );
}

/// Regression: a routine's times were the writer's clock, read a moment
/// after the scheduler's, so `PUT …/routines/{name}` answered times 1 ms
/// off what a read then gave. The record's are stored; a replacement
/// keeps the first creation time.
#[tokio::test]
async fn a_routine_is_stored_with_the_times_of_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let put = |created_at, updated_at| RoutineRecord {
        created_at,
        updated_at,
        ..routine(Some(100))
    };
    store
        .write(vec![Mutation::PutRoutine(Box::new(put(1_000, 1_000)))])
        .await
        .unwrap();
    let bot = BotId::new("r").unwrap();
    let read = store.get_routine(&bot, "brief").await.unwrap().unwrap();
    assert_eq!(read, put(1_000, 1_000));
    store
        .write(vec![Mutation::PutRoutine(Box::new(put(1_000, 2_000)))])
        .await
        .unwrap();
    let read = store.get_routine(&bot, "brief").await.unwrap().unwrap();
    assert_eq!(read, put(1_000, 2_000));
}
