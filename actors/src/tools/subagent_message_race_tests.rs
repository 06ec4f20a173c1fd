//! A MessageSubagent that reads its subagent running, and commits after
//! the subagent's task ended (its report written): the message is not
//! sent, and the call's result says the task had finished. Before, it
//! was sent as to a running subagent ("sent to subagent …", no check of
//! `runtime.max_subagents`): the finished subagent ran again on it, and
//! the parent got a second report of what it took for one task.
#![allow(clippy::unwrap_used)]

use botfleet_memory::BotId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::SubagentStatus;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::tools::MessageSubagent;
use crate::tools::Tool;
use crate::tools::test_support::ToolFixture;

/// b's running subagent `sub`, whose task turn runs.
async fn running_subagent(f: &ToolFixture, sub: &str) -> BotId {
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(f.bot.clone()),
            Mutation::EnsureSession(f.scope.session.clone()),
        ])
        .await
        .unwrap();
    f.subagent_task_started(sub, SubagentStatus::Running)
        .await
        .0
}

/// b's running subagent `b.sub-1`, and b's MessageSubagent call to it,
/// its step not committed yet.
async fn steered(f: &ToolFixture) -> (BotId, crate::tools::ToolOutput) {
    let sub = running_subagent(f, "b.sub-1").await;
    let steer = MessageSubagent
        .call(
            &f.ctx("c1"),
            json!({"id": "b.sub-1", "text": "also look there"}),
        )
        .await
        .unwrap();
    (sub, steer)
}

#[tokio::test]
async fn a_message_committed_after_the_task_ended_is_refused_as_finished() {
    let f = ToolFixture::new();
    let (sub, steer) = steered(&f).await;
    // the subagent's task turn ends before the call's step commits
    f.rt.store
        .write(vec![Mutation::EndSubagentTask {
            id: sub.clone(),
            status: SubagentStatus::Done,
            result: Some("all done".into()),
            report: None,
        }])
        .await
        .unwrap();
    f.rt.store.write(steer.effects).await.unwrap();

    let record = f.rt.store.get_subagent(&sub).await.unwrap().unwrap();
    assert_eq!(record.status, SubagentStatus::Done);
    assert_eq!(record.result.as_deref(), Some("all done"));
    assert_eq!(f.rt.store.pending_inbox(&sub).await.unwrap(), Vec::new());
    let own =
        f.rt.store
            .tail_entries(f.scope.session.id, 100)
            .await
            .unwrap();
    let refusals: Vec<&str> = own
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::ToolResult {
                name,
                content,
                is_error: true,
                ..
            } if name == "MessageSubagent" => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(refusals.len(), 1, "{own:#?}");
    assert!(
        refusals[0].contains("b.sub-1 had already finished its task")
            && refusals[0].contains("was not sent"),
        "{}",
        refusals[0]
    );
}

/// The same message, committed while the task still runs, is sent.
#[tokio::test]
async fn a_message_committed_while_the_task_runs_is_sent() {
    let f = ToolFixture::new();
    let (sub, steer) = steered(&f).await;
    assert_eq!(steer.content, "sent to subagent b.sub-1");
    f.rt.store.write(steer.effects).await.unwrap();
    let record = f.rt.store.get_subagent(&sub).await.unwrap().unwrap();
    assert_eq!(record.status, SubagentStatus::Running);
    assert_eq!(f.rt.store.pending_inbox(&sub).await.unwrap().len(), 1);
}
