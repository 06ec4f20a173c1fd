//! Whose a subagent's task is once fleet.toml gives its bot to another
//! user (`Writer::floor_task_of_unread_origin`, migration 33): the new
//! owner reads the task session from the change on when the task was
//! given where they read nothing before the change (the former owner's
//! DM, the runs of a routine the former owner made through the API), and
//! whole when it was given where they read (the runs of the file's
//! routine) or when it is theirs (the bot given back).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use pretty_assertions::assert_eq;

use crate::clock::Clock;
use crate::clock::ManualClock;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::SessionId;
use crate::ids::UserId;
use crate::record::CatchUp;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::RoutineOrigin;
use crate::record::RoutineRecord;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SessionRecord;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;
use crate::store::Mutation;
use crate::store::Store;
use crate::store::StoreOptions;

use super::owner_change_tests::bot;

/// `p`'s session of `kind` with `peer`, alice's.
fn session(kind: SessionKind, peer: &str) -> SessionRecord {
    super::owner_change_tests::session("p", kind, peer, "alice")
}

fn routine(name: &str, origin: RoutineOrigin, created_at: i64) -> RoutineRecord {
    RoutineRecord {
        bot: BotId::new("p").unwrap(),
        name: name.into(),
        cron: "0 9 * * *".into(),
        timezone: "UTC".into(),
        prompt: "Tick.".into(),
        silent_ok: true,
        catch_up: CatchUp::Once,
        origin,
        next_fire_ms: None,
        last_fire_ms: None,
        created_at,
        updated_at: created_at,
    }
}

/// A run (or message) in `session`, then subagent `id` given its task
/// there: what a turn that calls Task writes.
fn run_and_task(id: &str, session: SessionId) -> Vec<Mutation> {
    vec![
        Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session,
            author: "system".into(),
            turn: None,
            kind: EntryKind::UserMessage {
                text: format!("work for {id}"),
            },
        })),
        Mutation::UpsertBot(bot(id, "alice", "subagent:p")),
        Mutation::CreateSubagent(SubagentRecord {
            id: BotId::new(id).unwrap(),
            parent: BotId::new("p").unwrap(),
            parent_session: session,
            description: format!("task of {id}"),
            status: SubagentStatus::Done,
            result: Some("a report".into()),
            created_at: 0,
            updated_at: 0,
        }),
    ]
}

/// The seq `user` reads subagent `id`'s task session from, if not its
/// start.
async fn floor_of(store: &Store, id: &str, user: &str) -> Option<i64> {
    let task = SessionKey {
        bot: BotId::new(id).unwrap(),
        kind: SessionKind::Subagent,
        peer: "p".into(),
    }
    .id();
    store
        .session_floor(task, &UserId::new(user).unwrap())
        .await
        .unwrap()
        .map(|(from, _)| from)
}

/// `p` delegates from alice's DM, from a routine alice made through the
/// API, from the file's routine, and from a routine name the API's
/// routine ran under before the file's took it; then fleet.toml gives
/// `p` to bob, and back. (Review: a task the API routine gave was read by
/// bob whole, its session having gone to him read from the change on;
/// telling it from a file routine's task needs where in the session it
/// was given, since the floor's time is the change's.)
#[tokio::test]
async fn a_task_is_read_by_a_new_owner_as_the_place_it_was_given_is() {
    let dir = tempfile::tempdir().unwrap();
    let start = chrono::DateTime::parse_from_rfc3339("2027-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let clock = ManualClock::new(start);
    let store = Store::open(StoreOptions {
        clock: Arc::new(clock.clone()),
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })
    .unwrap();
    let (dm, api, file, clash) = (
        session(SessionKind::Dm, "alice"),
        session(SessionKind::Routine, "taxes"),
        session(SessionKind::Routine, "daily"),
        session(SessionKind::Routine, "clash"),
    );
    let mut setup = vec![
        Mutation::UpsertBot(bot("p", "alice", "config")),
        Mutation::PutRoutine(Box::new(routine("taxes", RoutineOrigin::Api, 0))),
        Mutation::PutRoutine(Box::new(routine("daily", RoutineOrigin::Config, 0))),
        Mutation::PutRoutine(Box::new(routine("clash", RoutineOrigin::Api, 0))),
    ];
    for s in [&dm, &api, &file, &clash] {
        setup.push(Mutation::EnsureSession(s.clone()));
    }
    store.write(setup).await.unwrap();
    for (id, s) in [
        ("p.sub-dm", &dm),
        ("p.sub-api", &api),
        ("p.sub-file", &file),
        ("p.sub-clash-api", &clash),
    ] {
        store.write(run_and_task(id, s.id)).await.unwrap();
    }
    // the file's routine takes the name `clash` a minute later, and its
    // run gives a task too
    clock.advance_ms(60_000);
    let file_clash = routine("clash", RoutineOrigin::Config, clock.now_ms());
    store
        .write(vec![Mutation::PutRoutine(Box::new(file_clash))])
        .await
        .unwrap();
    clock.advance_ms(60_000);
    store
        .write(run_and_task("p.sub-clash-file", clash.id))
        .await
        .unwrap();

    clock.advance_ms(60_000);
    store
        .write(vec![Mutation::UpsertBot(bot("p", "bob", "config"))])
        .await
        .unwrap();
    let mut floors = Vec::new();
    for id in [
        "p.sub-dm",
        "p.sub-api",
        "p.sub-file",
        "p.sub-clash-api",
        "p.sub-clash-file",
    ] {
        floors.push((id, floor_of(&store, id, "bob").await.is_some()));
    }
    assert_eq!(
        floors,
        [
            ("p.sub-dm", true),
            ("p.sub-api", true),
            ("p.sub-file", false),
            ("p.sub-clash-api", true),
            ("p.sub-clash-file", false),
        ],
        "floored for bob: the tasks given where bob reads nothing of before the change"
    );
    // bob reads what each withheld task holds from the change on: here,
    // nothing yet
    assert_eq!(floor_of(&store, "p.sub-api", "bob").await, Some(1));

    // given back: alice reads each of her tasks whole again, although the
    // give-back floors the API routine's session for her too
    clock.advance_ms(60_000);
    store
        .write(vec![Mutation::UpsertBot(bot("p", "alice", "config"))])
        .await
        .unwrap();
    for id in [
        "p.sub-dm",
        "p.sub-api",
        "p.sub-file",
        "p.sub-clash-api",
        "p.sub-clash-file",
    ] {
        assert_eq!(floor_of(&store, id, "alice").await, None, "{id}");
    }
    store.close().await;
}

/// The floors a bot reads as it wakes (`Store::bot_session_floors`): its
/// sessions given to its owner with one, whatever their inputs' class,
/// and no other bot's.
#[tokio::test]
async fn a_bot_reads_the_floors_of_its_own_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let routine_session = session(SessionKind::Routine, "taxes");
    let mut setup = vec![
        Mutation::UpsertBot(bot("p", "alice", "config")),
        Mutation::UpsertBot(bot("q", "alice", "config")),
        Mutation::PutRoutine(Box::new(routine("taxes", RoutineOrigin::Api, 0))),
        Mutation::EnsureSession(routine_session.clone()),
        Mutation::EnsureSession(session(SessionKind::Dm, "alice")),
    ];
    setup.extend(run_and_task("p.sub-api", routine_session.id));
    store.write(setup).await.unwrap();
    store
        .write(vec![
            Mutation::UpsertBot(bot("p", "bob", "config")),
            Mutation::UpsertBot(bot("q", "bob", "config")),
        ])
        .await
        .unwrap();
    let bob = UserId::new("bob").unwrap();
    let floors = store
        .bot_session_floors(&BotId::new("p").unwrap(), &bob)
        .await
        .unwrap();
    assert_eq!(floors, [(routine_session.id, 2)]);
    let none = store
        .bot_session_floors(&BotId::new("q").unwrap(), &bob)
        .await
        .unwrap();
    assert_eq!(none, []);
    store.close().await;
}
