//! A MessageSubagent that reads its subagent running, and commits after
//! the subagent's task ended (its report written): the message is not
//! sent, and the call's result says the task had finished. Before, it
//! was sent as to a running subagent ("sent to subagent …", no check of
//! `runtime.max_subagents`): the finished subagent ran again on it, and
//! the parent got a second report of what it took for one task.
#![allow(clippy::unwrap_used)]

use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SubagentRecord;
use botfleet_memory::SubagentStatus;
use botfleet_memory::TurnId;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::tools::MessageSubagent;
use crate::tools::Tool;
use crate::tools::subagents::subagent_session;
use crate::tools::test_support::ToolFixture;
use crate::tools::test_support::bot_record;

/// b's running subagent `sub`, whose task turn runs.
async fn running_subagent(f: &ToolFixture, sub: &str) -> BotId {
    let id = BotId::new(sub).unwrap();
    let mut record = bot_record(sub, sub, &f.bot.owner, &["SendMessage"]);
    record.origin = format!("subagent:{}", f.bot.id);
    let key = subagent_session(&id, &f.bot.id);
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(f.bot.clone()),
            Mutation::EnsureSession(f.scope.session.clone()),
            Mutation::UpsertBot(record),
            Mutation::CreateSubagent(SubagentRecord {
                id: id.clone(),
                parent: f.bot.id.clone(),
                parent_session: f.scope.session.id,
                description: "a task".into(),
                status: SubagentStatus::Running,
                result: None,
                created_at: 0,
                updated_at: 0,
            }),
            Mutation::Admit(Box::new(AdmitRequest {
                source: format!("bot:{}", f.bot.id),
                nonce: format!("task-{sub}"),
                nonce_time_ms: None,
                digest: InputDigest::of_parts([sub.as_bytes()]),
                session: key.clone(),
                owner: f.bot.owner.clone(),
                entry: NewEntry {
                    id: EntryId::new_v7(),
                    session: key.id(),
                    author: f.bot.id.to_string(),
                    turn: None,
                    kind: EntryKind::UserMessage {
                        text: "the task".into(),
                    },
                },
                priority: Priority::UserDm,
            })),
        ])
        .await
        .unwrap();
    let inputs = f.rt.store.pending_inbox(&id).await.unwrap();
    f.rt.store
        .write(vec![Mutation::StartTurn {
            turn: TurnId::new_v7(),
            bot: id.clone(),
            session: key.id(),
            inputs: inputs.iter().map(|i| i.gid).collect(),
            checkpoint: json!({}),
            started_at: 0,
        }])
        .await
        .unwrap();
    id
}

#[tokio::test]
async fn a_message_committed_after_the_task_ended_is_refused_as_finished() {
    let f = ToolFixture::new();
    let sub = running_subagent(&f, "b.sub-1").await;
    let steer = MessageSubagent
        .call(
            &f.ctx("c1"),
            json!({"id": "b.sub-1", "text": "also look there"}),
        )
        .await
        .unwrap();
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
    let sub = running_subagent(&f, "b.sub-1").await;
    let steer = MessageSubagent
        .call(
            &f.ctx("c1"),
            json!({"id": "b.sub-1", "text": "also look there"}),
        )
        .await
        .unwrap();
    assert_eq!(steer.content, "sent to subagent b.sub-1");
    f.rt.store.write(steer.effects).await.unwrap();
    let record = f.rt.store.get_subagent(&sub).await.unwrap().unwrap();
    assert_eq!(record.status, SubagentStatus::Running);
    assert_eq!(f.rt.store.pending_inbox(&sub).await.unwrap().len(), 1);
}
