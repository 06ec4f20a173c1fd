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
