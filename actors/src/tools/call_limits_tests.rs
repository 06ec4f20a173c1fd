//! Limits the store's writer checks as a call's outcome commits: calls
//! of different steps that each found room when they ran, and commit
//! after the room was taken, are refused by the writer (a chain's
//! breadth, a parent's running subagents). Before, each call decided from
//! its own read, and both went through.
#![allow(clippy::unwrap_used)]

use botfleet_memory::BotId;
use botfleet_memory::ChainOrigin;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::SubagentStatus;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use serde_json::json;

use crate::tools::SendToAgent;
use crate::tools::Task;
use crate::tools::Tool;
use crate::tools::test_support::ToolFixture;
use crate::tools::test_support::bot_record;

/// The store's entries of `f`'s own session.
async fn own_entries(f: &ToolFixture) -> Vec<EntryKind> {
    let session = f.scope.session.id;
    let entries = f.rt.store.tail_entries(session, 100).await.unwrap();
    entries.into_iter().map(|e| e.kind).collect()
}

/// b, at hop 1 of a chain its person's message started, with room for one
/// more message: two of its calls from different steps each find that
/// room, and both outcomes commit together. The writer sends the first,
/// writes the second's refusal as its result and tells the person, once;
/// the chain ends at its bound.
#[tokio::test]
async fn two_calls_that_each_found_the_chains_last_room_send_one_message() {
    let mut f = ToolFixture::new();
    f.rt.settings.max_chain_messages = 2;
    let dm = f.scope.session.clone();
    let started = EntryId::new_v7();
    let chain = ChainOrigin {
        session: dm.id,
        entry: started,
    };
    f.scope.hop = 1;
    f.scope.chain = Some(chain);
    let t = bot_record("t", "T", &f.bot.owner, &["SendMessage"]);
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(f.bot.clone()),
            Mutation::UpsertBot(t.clone()),
            Mutation::EnsureSession(dm.clone()),
        ])
        .await
        .unwrap();
    // the chain's first message
    let first = SendToAgent
        .call(&f.ctx("c0"), json!({"agent": "t", "text": "one"}))
        .await
        .unwrap();
    f.rt.store.write(first.effects).await.unwrap();
    assert_eq!(f.rt.store.chain_messages(&chain).await.unwrap(), 1);

    let a = SendToAgent
        .call(&f.ctx("c1"), json!({"agent": "t", "text": "two"}))
        .await
        .unwrap();
    let b = SendToAgent
        .call(&f.ctx("c2"), json!({"agent": "t", "text": "three"}))
        .await
        .unwrap();
    let (ra, rb) = tokio::join!(f.rt.store.write(a.effects), f.rt.store.write(b.effects));
    ra.unwrap();
    rb.unwrap();

    assert_eq!(f.rt.store.chain_messages(&chain).await.unwrap(), 2);
    assert_eq!(f.rt.store.pending_inbox(&t.id).await.unwrap().len(), 2);
    let own = own_entries(&f).await;
    let refusals: Vec<&EntryKind> = own
        .iter()
        .filter(|k| {
            matches!(k, EntryKind::ToolResult { name, content, is_error: true, .. }
                if name == "SendToAgent" && content.contains("set off 2 bot-to-bot messages"))
        })
        .collect();
    assert_eq!(refusals.len(), 1, "{own:#?}");
    let notices = own
        .iter()
        .filter(|k| matches!(k, EntryKind::Notice { code, .. } if code == "hop_budget"))
        .count();
    assert_eq!(notices, 1, "{own:#?}");
}

/// A failed subagent of b, with its cancelled task turn.
async fn failed_subagent(f: &ToolFixture, sub: &str) -> TurnId {
    let (_, turn) = f.subagent_task_started(sub, SubagentStatus::Failed).await;
    f.rt.store
        .write(vec![Mutation::EndTurn {
            turn,
            status: TurnStatus::Cancelled,
            error: None,
        }])
        .await
        .unwrap();
    turn
}

/// b may run one subagent; its only one failed. A Task call finds the
/// place free, then a person's retry of the failed task takes it before
/// the call's step commits: the writer refuses the new subagent (the
/// call's result says why), and b never runs more than one.
#[tokio::test]
async fn a_task_whose_place_a_retry_took_meanwhile_is_refused() {
    let mut f = ToolFixture::new();
    f.rt.settings.max_subagents = 1;
    f.bot.tools = vec!["SendMessage".into(), "Task".into()];
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(f.bot.clone()),
            Mutation::EnsureSession(f.scope.session.clone()),
        ])
        .await
        .unwrap();
    let failed = failed_subagent(&f, "b.s1").await;

    let task = Task
        .call(
            &f.ctx("c1"),
            json!({"description": "look", "prompt": "look it up"}),
        )
        .await
        .unwrap();
    let retried =
        f.rt.store
            .write(vec![Mutation::RequeueSubagentTask {
                turn: failed,
                max_running: 1,
            }])
            .await
            .unwrap();
    assert_eq!(retried, vec![botfleet_memory::MutationResult::Count(1)]);
    f.rt.store.write(task.effects).await.unwrap();

    let subs =
        f.rt.store
            .subagents_listed(&f.bot.id, usize::MAX)
            .await
            .unwrap()
            .0;
    let running: Vec<&BotId> = subs
        .iter()
        .filter(|s| s.status == SubagentStatus::Running)
        .map(|s| &s.id)
        .collect();
    assert_eq!(running, vec![&BotId::new("b.s1").unwrap()], "{subs:#?}");
    assert_eq!(subs.len(), 1, "{subs:#?}");
    let own = own_entries(&f).await;
    assert!(
        own.iter().any(
            |k| matches!(k, EntryKind::ToolResult { name, content, is_error: true, .. }
            if name == "Task" && content.contains("1 running subagent (the limit is 1)"))
        ),
        "{own:#?}"
    );
}
