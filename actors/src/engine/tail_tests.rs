#![allow(clippy::unwrap_used)]

use botfleet_memory::AdmitOutcome;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::TurnId;

use super::*;
use crate::tools::test_support::ToolFixture;

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
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (session, first) = admit(store, bot, "long job").await;
    let (_, second) = admit(store, bot, "stop, do this instead").await;
    let state = StateBlock::default();

    let mut tail = SessionTail::new(session);
    let encoding = Encoding::default();
    let bound = ContextBound {
        upto: first,
        own: None,
    };
    tail.load(store, "id", &state, 50, encoding, Some(bound))
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
    all.load(store, "id", &state, 50, encoding, None)
        .await
        .unwrap();
    assert_eq!(users(&all), ["long job", "stop, do this instead"]);
    store.close().await;
}

/// A resumed turn, or one reloaded after a compaction in its middle, keeps
/// its own entries past its inputs but not a message admitted meanwhile.
#[tokio::test]
async fn a_running_turn_reloads_its_inputs_and_own_entries_only() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let turn = TurnId::new_v7();
    let own = |text: &str| {
        Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session: crate::protocol::user_message(&bot.owner, bot, "", None)
                .entry
                .session,
            author: "b".into(),
            turn: Some(turn),
            kind: EntryKind::Reminder { text: text.into() },
        }))
    };
    let (session, first) = admit(store, bot, "first").await;
    store.write(vec![own("own step one")]).await.unwrap();
    let (_, later) = admit(store, bot, "admitted meanwhile").await;
    store.write(vec![own("own step two")]).await.unwrap();

    let mut tail = SessionTail::new(session);
    let bound = ContextBound {
        upto: first,
        own: Some(turn),
    };
    tail.load(
        store,
        "id",
        &StateBlock::default(),
        50,
        Encoding::default(),
        Some(bound),
    )
    .await
    .unwrap();
    assert_eq!(users(&tail), ["first", "own step one", "own step two"]);
    // the next turn claims the message: it joins the context then, once
    let entry = store.entries_between(session, later, later).await.unwrap();
    tail.push(&entry[0]);
    tail.push(&entry[0]);
    assert_eq!(
        users(&tail),
        [
            "first",
            "own step one",
            "own step two",
            "admitted meanwhile"
        ]
    );
    store.close().await;
}
