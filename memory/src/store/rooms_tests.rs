//! The writer's room changes: members replaced (or not) with their
//! notice, a change decided from members that changed meanwhile refused,
//! a close written once, and a closed room refusing messages and changes.
#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;

use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::RoomId;
use crate::ids::UserId;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::RoomRecord;
use crate::record::SessionRecord;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;
use crate::store::StoreOptions;

fn ids(list: &[&str]) -> Vec<BotId> {
    list.iter().map(|m| BotId::new(*m).unwrap()).collect()
}

fn room() -> RoomRecord {
    RoomRecord {
        id: RoomId::new("team").unwrap(),
        name: "team".into(),
        owner: UserId::new("alice").unwrap(),
        members: ids(&["a", "b"]),
        shared: false,
        created_at: 0,
        updated_at: 0,
        closed_at: None,
    }
}

fn notice(room: &RoomRecord, code: &str) -> Box<NewEntry> {
    Box::new(NewEntry {
        id: EntryId::new_v7(),
        session: room.timeline().id(),
        author: "system".into(),
        turn: None,
        kind: EntryKind::Notice {
            code: code.into(),
            text: code.into(),
            retry_turn: None,
        },
    })
}

fn set(room: &RoomRecord, from: &[&str], to: &[&str], shared: bool) -> Mutation {
    Mutation::SetRoomMembers {
        room: room.id.clone(),
        from: ids(from),
        to: ids(to),
        shared,
        notice: notice(room, "members_changed"),
        fresh_start: None,
    }
}

async fn open_store(dir: &tempfile::TempDir) -> Store {
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let room = room();
    let key = room.timeline();
    store
        .write(vec![
            Mutation::CreateRoom(Box::new(room.clone())),
            Mutation::EnsureSession(SessionRecord {
                id: key.id(),
                key,
                owner: room.owner.clone(),
                epoch: 0,
                last_seq: 0,
                created_at: 0,
            }),
        ])
        .await
        .unwrap();
    store
}

/// Which of a start's bot ids a room holds, ignoring case (a bot added
/// to the fleet file after a room of its id is warned of).
#[tokio::test]
async fn rooms_holding_finds_room_ids_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir).await;
    let asked: Vec<String> = ["a", "Team", "teams", "team"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    assert_eq!(
        store.rooms_holding(&asked).await.unwrap(),
        vec![
            ("Team".to_owned(), "team".to_owned()),
            ("team".to_owned(), "team".to_owned())
        ]
    );
    store.close().await;
}

/// The codes of the room timeline's notices.
async fn notices(store: &Store) -> Vec<String> {
    store
        .entries_after(room().timeline().id(), 0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| {
            let EntryKind::Notice { code, .. } = e.kind else {
                return None;
            };
            Some(code)
        })
        .collect()
}

#[tokio::test]
async fn members_change_once_with_their_notice() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir).await;
    let room = room();
    let out = store
        .write(vec![set(&room, &["a", "b"], &["b", "c"], true)])
        .await
        .unwrap();
    assert_eq!(out, vec![MutationResult::Count(1)]);
    let stored = store.get_room(&room.id).await.unwrap().unwrap();
    assert_eq!((stored.members, stored.shared), (ids(&["b", "c"]), true));
    // the same list again: nothing written
    let out = store
        .write(vec![set(&room, &["b", "c"], &["b", "c"], true)])
        .await
        .unwrap();
    assert_eq!(out, vec![MutationResult::Count(0)]);
    assert_eq!(notices(&store).await, ["members_changed"]);
    // decided from members that are no longer the room's: refused, and
    // its batch (here an append too) with it
    let err = store
        .write(vec![
            Mutation::Append(notice(&room, "other")),
            set(&room, &["a", "b"], &["a", "c"], false),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Rejected(m) if m.contains("changed while")),
        "{err}"
    );
    assert_eq!(notices(&store).await, ["members_changed"]);
    store.close().await;
}

#[tokio::test]
async fn a_closed_room_is_closed_once_and_refuses_changes() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir).await;
    let room = room();
    let close = || Mutation::CloseRoom {
        room: room.id.clone(),
        notice: notice(&room, "room_closed"),
    };
    assert_eq!(
        store.write(vec![close()]).await.unwrap(),
        vec![MutationResult::Count(1)]
    );
    let closed_at = store.get_room(&room.id).await.unwrap().unwrap().closed_at;
    assert!(closed_at.is_some());
    assert_eq!(
        store.write(vec![close()]).await.unwrap(),
        vec![MutationResult::Count(0)]
    );
    let again = store.get_room(&room.id).await.unwrap().unwrap();
    assert_eq!(again.closed_at, closed_at);
    let err = store
        .write(vec![set(&room, &["a", "b"], &["a", "c"], false)])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Rejected(m) if m.starts_with("the room is closed")),
        "{err}"
    );
    assert_eq!(again.members, ids(&["a", "b"]));
    assert_eq!(notices(&store).await, ["room_closed"]);
    store.close().await;
}

fn bot_of(id: &str, owner: &str) -> crate::record::BotRecord {
    crate::record::BotRecord {
        id: BotId::new(id).unwrap(),
        name: id.into(),
        owner: UserId::new(owner).unwrap(),
        role: String::new(),
        provider: "p".into(),
        tools: vec![],
        settings: serde_json::json!({}),
        origin: "test".into(),
        created_at: 0,
        updated_at: 0,
    }
}

/// Tester H4: alice's room `team` (her bots a, b) gets bob's c. In the
/// change's transaction bob reads the timeline from the change's notice
/// on, and each member's session of the room starts a new epoch with the
/// summary given: a reload of it shows none of what came before (a tool
/// result of a's private turn). A later change that gives nobody the
/// room cuts nothing.
#[tokio::test]
async fn a_change_that_gives_a_user_the_room_cuts_the_members_sessions() {
    use crate::record::SessionKey;
    use crate::record::SessionKind;
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir).await;
    let room = room();
    let alice = UserId::new("alice").unwrap();
    let bob = UserId::new("bob").unwrap();
    let key = SessionKey {
        bot: BotId::new("a").unwrap(),
        kind: SessionKind::Group,
        peer: room.id.to_string(),
    };
    let member = key.id();
    let private = |text: &str| {
        Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session: member,
            author: "room:team".into(),
            turn: None,
            kind: EntryKind::UserMessage { text: text.into() },
        }))
    };
    store
        .write(vec![
            Mutation::UpsertBot(bot_of("a", "alice")),
            Mutation::UpsertBot(bot_of("b", "alice")),
            Mutation::UpsertBot(bot_of("c", "bob")),
            Mutation::EnsureSession(SessionRecord {
                id: member,
                key,
                owner: alice.clone(),
                epoch: 0,
                last_seq: 0,
                created_at: 0,
            }),
            private("the cabin address is 12 Birchwood Lane"),
            private("another private line"),
            Mutation::Append(notice(&room, "before")),
        ])
        .await
        .unwrap();
    let mut change = set(&room, &["a", "b"], &["a", "b", "c"], true);
    if let Mutation::SetRoomMembers { fresh_start, .. } = &mut change {
        *fresh_start = Some("now shared".into());
    }
    assert_eq!(store.room_audience_seq(&room.id).await.unwrap(), None);
    assert_eq!(store.room_audience_since(&room.id).await.unwrap(), None);
    store.write(vec![change]).await.unwrap();
    // the notice is seq 2 of the timeline (after "before")
    assert_eq!(
        store.room_visible_from(&room.id, &bob).await.unwrap(),
        Some(2)
    );
    // the room's latest audience change: that notice, and when
    assert_eq!(store.room_audience_seq(&room.id).await.unwrap(), Some(2));
    assert!(store.room_audience_since(&room.id).await.unwrap().is_some());
    assert_eq!(
        store.room_visible_from(&room.id, &alice).await.unwrap(),
        None
    );
    assert_eq!(
        store.room_history_floors(&bob).await.unwrap(),
        vec![(room.id.clone(), 2)]
    );
    let view = store.session_view(member, 100, None).await.unwrap();
    assert_eq!(view.record.as_ref().map(|r| r.epoch), Some(1));
    assert_eq!(view.covers_to_seq(), 2);
    assert!(
        matches!(&view.summary, Some(e) if e.kind.text() == "now shared"),
        "{view:?}"
    );
    // only the summary itself (a context shows it once, as the summary)
    assert!(
        view.entries
            .iter()
            .all(|e| matches!(e.kind, EntryKind::Summary { .. })),
        "{:?}",
        view.entries
    );
    // nobody gains the room: no new cut, bob keeps his start
    let mut change = set(&room, &["a", "b", "c"], &["b", "a", "c"], true);
    if let Mutation::SetRoomMembers { fresh_start, .. } = &mut change {
        *fresh_start = Some("again".into());
    }
    store.write(vec![change]).await.unwrap();
    let view = store.session_view(member, 100, None).await.unwrap();
    assert_eq!(view.record.map(|r| r.epoch), Some(1));
    assert_eq!(
        store.room_visible_from(&room.id, &bob).await.unwrap(),
        Some(2)
    );
    // bob's bot leaves (seq 4) and joins again (seq 5): bob starts again
    // there, not where he read from before, and a's session is cut again
    store
        .write(vec![set(&room, &["b", "a", "c"], &["b", "a"], false)])
        .await
        .unwrap();
    let mut change = set(&room, &["b", "a"], &["b", "a", "c"], true);
    if let Mutation::SetRoomMembers { fresh_start, .. } = &mut change {
        *fresh_start = Some("shared again".into());
    }
    store.write(vec![change]).await.unwrap();
    assert_eq!(
        store.room_visible_from(&room.id, &bob).await.unwrap(),
        Some(5)
    );
    let view = store.session_view(member, 100, None).await.unwrap();
    assert_eq!(view.record.as_ref().map(|r| r.epoch), Some(2));
    assert!(
        matches!(&view.summary, Some(e) if e.kind.text() == "shared again"),
        "{view:?}"
    );
    store.close().await;
}

/// Commits `batch`.
async fn write(store: &Store, batch: Vec<Mutation>) {
    store.write(batch).await.unwrap();
}

/// The seq `user` reads `room`'s timeline from (`None`: all of it).
async fn visible_from(store: &Store, room: &RoomRecord, user: &UserId) -> Option<i64> {
    store.room_visible_from(&room.id, user).await.unwrap()
}

/// Whether `room` is shared.
async fn shared(store: &Store, room: &RoomRecord) -> bool {
    store.get_room(&room.id).await.unwrap().unwrap().shared
}

/// Round 22 (F2): alice's room `team` of her a and b, with two entries
/// in its timeline, becomes shared when an `UpsertBot` gives b to bob
/// (an owner change in fleet.toml): in that write bob reads the timeline
/// from its next entry on (the start's notice), as after a change of
/// members that gives him the room; alice reads all of it. The same
/// record again, or b back to alice and a room of hers alone, gives
/// nobody anything; b given to bob again starts him at the entry after
/// that. (Before, the room only turned `shared`, and bob read it from
/// its first entry.)
#[tokio::test]
async fn an_owner_change_that_shares_the_room_gives_the_new_owner_its_timeline_from_then_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir).await;
    let room = room();
    let alice = UserId::new("alice").unwrap();
    let bob = UserId::new("bob").unwrap();
    write(
        &store,
        vec![
            Mutation::UpsertBot(bot_of("a", "alice")),
            Mutation::UpsertBot(bot_of("b", "alice")),
            Mutation::Append(notice(&room, "private one")),
            Mutation::Append(notice(&room, "private two")),
        ],
    )
    .await;
    assert!(!shared(&store, &room).await);
    write(&store, vec![Mutation::UpsertBot(bot_of("b", "bob"))]).await;
    assert!(shared(&store, &room).await);
    assert_eq!(visible_from(&store, &room, &bob).await, Some(3));
    assert_eq!(visible_from(&store, &room, &alice).await, None);
    // the start's notice, then the same config again: bob keeps his start
    write(
        &store,
        vec![
            Mutation::Append(notice(&room, "members_changed")),
            Mutation::UpsertBot(bot_of("b", "bob")),
        ],
    )
    .await;
    assert_eq!(visible_from(&store, &room, &bob).await, Some(3));
    // b back to alice: hers alone again; then bob's again, from seq 5
    write(&store, vec![Mutation::UpsertBot(bot_of("b", "alice"))]).await;
    assert!(!shared(&store, &room).await);
    write(
        &store,
        vec![
            Mutation::Append(notice(&room, "while hers")),
            Mutation::UpsertBot(bot_of("b", "bob")),
        ],
    )
    .await;
    assert_eq!(visible_from(&store, &room, &bob).await, Some(5));
    store.close().await;
}

/// A room already shared (alice's a, carol's b) whose b the config gives
/// to bob: bob gains the room with that start and reads it from its next
/// entry on, as a change of members would give it to him; the same
/// config again changes nothing. (Before, the writer could not see b's
/// former owner and bob read the whole timeline.)
#[tokio::test]
async fn an_owner_change_in_a_shared_room_gives_the_new_owner_its_timeline_from_then_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir).await;
    let room = room();
    let bob = UserId::new("bob").unwrap();
    write(
        &store,
        vec![
            Mutation::UpsertBot(bot_of("a", "alice")),
            Mutation::UpsertBot(bot_of("b", "carol")),
            Mutation::Append(notice(&room, "carol's era")),
            Mutation::Append(notice(&room, "more of it")),
        ],
    )
    .await;
    assert!(shared(&store, &room).await);
    assert_eq!(visible_from(&store, &room, &bob).await, None);
    write(&store, vec![Mutation::UpsertBot(bot_of("b", "bob"))]).await;
    assert!(shared(&store, &room).await);
    assert_eq!(visible_from(&store, &room, &bob).await, Some(3));
    assert_eq!(store.room_audience_seq(&room.id).await.unwrap(), Some(3));
    // the start's notice, then the same config again: bob keeps his start
    write(
        &store,
        vec![
            Mutation::Append(notice(&room, "members_changed")),
            Mutation::UpsertBot(bot_of("b", "bob")),
        ],
    )
    .await;
    assert_eq!(visible_from(&store, &room, &bob).await, Some(3));
    store.close().await;
}

/// A room's open runs are read through the index of open runs, not by
/// walking every run the room ever had: SQLite without statistics took
/// the primary key for it, so each reply of a room with a long history
/// read all its finished discussions.
#[test]
fn open_runs_read_only_the_open_ones() {
    let mut conn = rusqlite::Connection::open_in_memory().unwrap();
    crate::store::schema::migrate(&mut conn).unwrap();
    for seq in 1..=200 {
        let status = if seq == 200 { "running" } else { "done" };
        conn.execute(
            "INSERT INTO room_runs (room_id, trigger_seq, status, state, created_at, updated_at)
             VALUES ('team', ?1, ?2, '{}', 0, 0)",
            rusqlite::params![seq, status],
        )
        .unwrap();
    }
    let plan = runs_plan(&conn, super::OPEN_RUNS);
    assert!(
        plan.iter().any(|step| step.contains("room_runs_open")),
        "{plan:?}"
    );
    let open = super::open_runs(&conn, &RoomId::new("team").unwrap()).unwrap();
    assert_eq!(
        open.iter().map(|r| r.trigger_seq).collect::<Vec<_>>(),
        vec![200]
    );
}

#[test]
fn the_oldest_open_run_is_one_row_however_many_wait() {
    let mut conn = rusqlite::Connection::open_in_memory().unwrap();
    crate::store::schema::migrate(&mut conn).unwrap();
    // 20 finished discussions, then 50 messages waiting their turn
    for seq in 1..=70 {
        let status = if seq > 20 { "running" } else { "done" };
        conn.execute(
            "INSERT INTO room_runs (room_id, trigger_seq, status, state, created_at, updated_at)
             VALUES ('team', ?1, ?2, '{}', 0, 0)",
            rusqlite::params![seq, status],
        )
        .unwrap();
    }
    let plan = runs_plan(&conn, super::OLDEST_OPEN_RUN);
    assert!(
        plan.iter().any(|step| step.contains("room_runs_open")),
        "{plan:?}"
    );
    let team = RoomId::new("team").unwrap();
    let oldest = super::oldest_open_run(&conn, &team).unwrap();
    assert_eq!(oldest.map(|r| r.trigger_seq), Some(21));
    assert_eq!(super::open_runs(&conn, &team).unwrap().len(), 50);
    let other = RoomId::new("other").unwrap();
    assert!(super::oldest_open_run(&conn, &other).unwrap().is_none());
}

/// The query plan of a read of room `team`'s runs with `filter`.
fn runs_plan(conn: &rusqlite::Connection, filter: &str) -> Vec<String> {
    let sql = format!("EXPLAIN QUERY PLAN SELECT * FROM room_runs {filter}");
    conn.prepare(&sql)
        .unwrap()
        .query_map(["team"], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// Regression: the room's times were the writer's clock, read a moment
/// after the API's, so `POST /v1/groups` answered a `created_at` 1-3 ms
/// off what `GET /v1/groups/{room}` then gave. The record's are stored.
#[tokio::test]
async fn a_room_is_stored_with_the_times_of_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let made = RoomRecord {
        created_at: 1_234,
        updated_at: 1_234,
        ..room()
    };
    store
        .write(vec![Mutation::CreateRoom(Box::new(made.clone()))])
        .await
        .unwrap();
    let read = store.get_room(&made.id).await.unwrap().unwrap();
    assert_eq!(read, made);
}
