#![allow(clippy::unwrap_used)]

use botfleet_memory::AdmitOutcome;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;
use serde_json::json;

use super::*;

fn users(tail: &SessionTail) -> Vec<String> {
    tail.context
        .messages()
        .iter()
        .filter_map(|m| match m {
            ChatMessage::User { content } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

async fn admit(store: &Store, bot: &BotRecord, text: &str) -> (SessionId, i64) {
    let req = crate::protocol::user_message(&bot.owner, bot, text, None);
    let mut out = store
        .write(vec![Mutation::Admit(Box::new(req))])
        .await
        .unwrap();
    match out.pop() {
        Some(MutationResult::Admitted(AdmitOutcome::Accepted(a))) => (a.session, a.seq),
        other => panic!("{other:?}"),
    }
}

/// Regression: a turn loading its context while a second message was being
/// admitted answered that message too without claiming it, and the next
/// turn answered it again.
#[tokio::test]
async fn a_new_turn_loads_the_session_only_up_to_its_last_input() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("db.sqlite"))).unwrap();
    let bot = BotRecord {
        id: BotId::new("b").unwrap(),
        name: "B".into(),
        owner: UserId::new("u").unwrap(),
        role: String::new(),
        provider: "p".into(),
        tools: Vec::new(),
        settings: json!({}),
        origin: "test".into(),
        created_at: 0,
        updated_at: 0,
    };
    let (session, first) = admit(&store, &bot, "long job").await;
    let (_, second) = admit(&store, &bot, "stop, do this instead").await;
    let state = StateBlock::default();

    let mut tail = SessionTail::new(session);
    let encoding = Encoding::default();
    tail.load(&store, "id", &state, 50, encoding, Some(first))
        .await
        .unwrap();
    assert_eq!(users(&tail), ["long job"]);
    // the next turn's input joins the context when that turn begins
    let later = store
        .entries_between(session, second, second)
        .await
        .unwrap();
    tail.push(&later[0]);
    assert_eq!(users(&tail), ["long job", "stop, do this instead"]);

    let mut all = SessionTail::new(session);
    all.load(&store, "id", &state, 50, encoding, None)
        .await
        .unwrap();
    assert_eq!(users(&all), ["long job", "stop, do this instead"]);
    store.close().await;
}
