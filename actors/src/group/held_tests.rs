#![allow(clippy::unwrap_used)]

use botfleet_memory::Mutation;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::StoreOptions;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;
use pretty_assertions::assert_eq;

use super::*;

/// A member session of room `standup` in a fresh store.
async fn session(dir: &tempfile::TempDir) -> (Store, SessionId) {
    let store = Store::open(StoreOptions::new(dir.path().join("db"))).unwrap();
    let key = SessionKey {
        bot: BotId::new("a").unwrap(),
        kind: SessionKind::Group,
        peer: "standup".into(),
    };
    let id = key.id();
    store
        .write(vec![Mutation::EnsureSession(SessionRecord {
            id,
            key,
            owner: UserId::new("alice").unwrap(),
            epoch: 0,
            last_seq: 0,
            created_at: 0,
        })])
        .await
        .unwrap();
    (store, id)
}

fn append(session: SessionId, author: &str, kind: EntryKind) -> Mutation {
    Mutation::Append(Box::new(NewEntry {
        id: EntryId::new_v7(),
        session,
        author: author.into(),
        turn: Some(TurnId::new_v7()),
        kind,
    }))
}

fn input(session: SessionId, room: &str) -> Mutation {
    append(
        session,
        &input_author(room),
        EntryKind::Event {
            origin: format!("room {room}"),
            text: "new public messages".into(),
            trusted: false,
            hop: None,
            chain: None,
            asked: None,
        },
    )
}

fn end(session: SessionId, status: TurnStatus, inputs: Vec<i64>) -> Mutation {
    append(
        session,
        "a",
        EntryKind::TurnEnd {
            status,
            inputs,
            deliveries: 0,
            usage: None,
        },
    )
}

fn other(session: SessionId) -> Mutation {
    append(
        session,
        "m2",
        EntryKind::AgentMessage {
            from: BotId::new("m2").unwrap(),
            text: "an answer".into(),
            hop: 1,
            reply_session: None,
            chain: None,
            answers: false,
        },
    )
}

#[tokio::test]
async fn the_floor_is_the_members_while_its_input_is_unanswered() {
    let dir = tempfile::tempdir().unwrap();
    let (store, s) = session(&dir).await;
    let floor = async |store: &Store| floor(store, s, "standup").unwrap();
    // never asked to speak
    assert_eq!(floor(&store).await, Floor::NotYours);
    store.write(vec![input(s, "standup")]).await.unwrap(); // seq 1
    assert_eq!(floor(&store).await, Floor::Yours);
    // an input of another room does not count
    assert_eq!(super::floor(&store, s, "other").unwrap(), Floor::NotYours);
    // interrupted: the input is handed to the next turn
    store
        .write(vec![end(s, TurnStatus::Interrupted, vec![1])])
        .await
        .unwrap();
    assert_eq!(floor(&store).await, Floor::Yours);
    // answered for good, also by a failed turn
    store
        .write(vec![end(s, TurnStatus::Failed, vec![1])])
        .await
        .unwrap();
    assert_eq!(floor(&store).await, Floor::NotYours);
    // a reply of another bot starts a turn that nobody awaits
    store.write(vec![other(s)]).await.unwrap();
    assert_eq!(floor(&store).await, Floor::NotYours);
    // the next input gives it the floor again, however far back it is
    store.write(vec![input(s, "standup")]).await.unwrap(); // seq 5
    let busy: Vec<Mutation> = (0..131).map(|_| other(s)).collect();
    store.write(busy).await.unwrap();
    assert_eq!(floor(&store).await, Floor::Yours);
    store
        .write(vec![end(s, TurnStatus::Completed, vec![5])])
        .await
        .unwrap();
    assert_eq!(floor(&store).await, Floor::NotYours);
    store.close().await;
}

#[tokio::test]
async fn held_messages_are_counted_up_to_the_next_input() {
    let dir = tempfile::tempdir().unwrap();
    let (store, s) = session(&dir).await;
    let bot = BotId::new("a").unwrap();
    let held = |text: &str| {
        let h = hold(s, "standup", &bot, (TurnId::new_v7(), "c1"), text, false);
        Mutation::Append(Box::new(h.notice))
    };
    store
        .write(vec![
            input(s, "standup"),                    // 1
            end(s, TurnStatus::Completed, vec![1]), // 2
            other(s),                               // 3
            held("one"),                            // 4
            held("two"),                            // 5
            input(s, "standup"),                    // 6
            held("after the next input"),           // 7
        ])
        .await
        .unwrap();
    assert_eq!(count_held(&store, s, "standup", 2).await.unwrap(), 2);
    assert_eq!(count_held(&store, s, "standup", 4).await.unwrap(), 1);
    assert_eq!(count_held(&store, s, "standup", 6).await.unwrap(), 1);
    let h = hold(
        s,
        "standup",
        &bot,
        (TurnId::new_v7(), "c1"),
        "the text",
        false,
    );
    assert!(h.result.starts_with("not published"), "{}", h.result);
    assert!(
        h.notice.kind.text().contains("standup") && h.notice.kind.text().contains("the text"),
        "{:?}",
        h.notice
    );
    store.close().await;
}
