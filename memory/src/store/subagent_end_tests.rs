//! `EndSubagentTask`: the end of a subagent's task turn writes its status
//! and admits its report, unless the subagent is stopped by then (its
//! parent's stop landed after the turn read its status): then nothing is
//! written, and the parent is not woken.
#![allow(clippy::unwrap_used)]

use serde_json::json;

use crate::digest::InputDigest;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::UserId;
use crate::record::AdmitOutcome;
use crate::record::AdmitRequest;
use crate::record::BotRecord;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::Priority;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;
use crate::store::StoreOptions;

fn bot(id: &str, origin: &str) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: id.into(),
        owner: UserId::new("alice").unwrap(),
        role: String::new(),
        provider: "main".into(),
        tools: Vec::new(),
        settings: json!({}),
        origin: origin.into(),
        created_at: 0,
        updated_at: 0,
    }
}

fn end_with_report(sub: &BotId, parent_dm: &SessionKey, nonce: &str) -> Mutation {
    Mutation::EndSubagentTask {
        id: sub.clone(),
        status: SubagentStatus::Done,
        result: Some("all done".into()),
        report: Some(Box::new(AdmitRequest {
            source: format!("bot:{sub}"),
            nonce: nonce.into(),
            nonce_time_ms: None,
            digest: InputDigest::of_parts([nonce.as_bytes()]),
            session: parent_dm.clone(),
            owner: UserId::new("alice").unwrap(),
            entry: NewEntry {
                id: EntryId::new_v7(),
                session: parent_dm.id(),
                author: sub.to_string(),
                turn: None,
                kind: EntryKind::AgentMessage {
                    from: sub.clone(),
                    text: "all done".into(),
                    hop: 2,
                    reply_session: None,
                    chain: None,
                    answers: false,
                },
            },
            priority: Priority::Background,
        })),
    }
}

/// A store in `dir`, and the DM of parent `p` with alice.
fn store_of(dir: &tempfile::TempDir) -> (Store, SessionKey) {
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let parent_dm = SessionKey {
        bot: BotId::new("p").unwrap(),
        kind: SessionKind::Dm,
        peer: "alice".into(),
    };
    (store, parent_dm)
}

#[tokio::test]
async fn a_stopped_subagents_task_end_writes_nothing_and_reports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, parent_dm) = store_of(&dir);
    let mut batch = vec![Mutation::UpsertBot(bot("p", "config"))];
    for id in ["p.sub-1", "p.sub-2"] {
        batch.push(Mutation::UpsertBot(bot(id, "subagent:p")));
        batch.push(Mutation::CreateSubagent(SubagentRecord {
            id: BotId::new(id).unwrap(),
            parent: BotId::new("p").unwrap(),
            parent_session: parent_dm.id(),
            description: "a task".into(),
            status: SubagentStatus::Running,
            result: None,
            created_at: 0,
            updated_at: 0,
        }));
    }
    store.write(batch).await.unwrap();
    let (running, stopped) = (
        BotId::new("p.sub-1").unwrap(),
        BotId::new("p.sub-2").unwrap(),
    );
    // the parent stops one after its turn read it running
    store
        .write(vec![Mutation::SetSubagentStatus {
            id: stopped.clone(),
            status: SubagentStatus::Stopped,
            result: None,
        }])
        .await
        .unwrap();
    let results = store
        .write(vec![
            end_with_report(&running, &parent_dm, "t1:end:report"),
            end_with_report(&stopped, &parent_dm, "t2:end:report"),
        ])
        .await
        .unwrap();
    assert!(
        matches!(
            &results[0],
            MutationResult::Admitted(AdmitOutcome::Accepted(_))
        ),
        "{results:?}"
    );
    assert!(
        matches!(results[1], MutationResult::Count(0)),
        "{results:?}"
    );
    let done = store.get_subagent(&running).await.unwrap().unwrap();
    assert_eq!(done.status, SubagentStatus::Done);
    assert_eq!(done.result.as_deref(), Some("all done"));
    let still = store.get_subagent(&stopped).await.unwrap().unwrap();
    assert_eq!(still.status, SubagentStatus::Stopped);
    assert_eq!(still.result, None);
    // one report reached the parent: the running one's
    let entries = store.tail_entries(parent_dm.id(), 10).await.unwrap();
    let from: Vec<String> = entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::AgentMessage { from, .. } => Some(from.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(from, vec!["p.sub-1".to_owned()]);
    let inbox = store
        .pending_inbox(&BotId::new("p").unwrap())
        .await
        .unwrap();
    assert_eq!(inbox.len(), 1, "{inbox:?}");
}

/// A message of the parent committed while the subagent's task turn ran,
/// and not taken by it: the task is not over. The end keeps the subagent
/// running with its result and reports nothing; the end of the turn over
/// the message reports.
#[tokio::test]
async fn a_task_end_with_a_message_waiting_stays_running_and_reports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, parent_dm) = store_of(&dir);
    let sub = BotId::new("p.sub-1").unwrap();
    let task = SessionKey {
        bot: sub.clone(),
        kind: SessionKind::Subagent,
        peer: "p".into(),
    };
    let steer = |nonce: &str| {
        Mutation::Admit(Box::new(AdmitRequest {
            source: "bot:p".into(),
            nonce: nonce.into(),
            nonce_time_ms: None,
            digest: InputDigest::of_parts([nonce.as_bytes()]),
            session: task.clone(),
            owner: UserId::new("alice").unwrap(),
            entry: NewEntry {
                id: EntryId::new_v7(),
                session: task.id(),
                author: "p".into(),
                turn: None,
                kind: EntryKind::UserMessage { text: nonce.into() },
            },
            priority: Priority::UserDm,
        }))
    };
    store
        .write(vec![
            Mutation::UpsertBot(bot("p", "config")),
            Mutation::UpsertBot(bot("p.sub-1", "subagent:p")),
            Mutation::CreateSubagent(SubagentRecord {
                id: sub.clone(),
                parent: BotId::new("p").unwrap(),
                parent_session: parent_dm.id(),
                description: "a task".into(),
                status: SubagentStatus::Running,
                result: None,
                created_at: 0,
                updated_at: 0,
            }),
            steer("task"),
        ])
        .await
        .unwrap();
    let start = |turn: crate::ids::TurnId, gids: Vec<i64>| Mutation::StartTurn {
        turn,
        bot: sub.clone(),
        session: task.id(),
        inputs: gids,
        checkpoint: json!({}),
        started_at: 0,
    };
    let gids = |items: Vec<crate::record::InboxItem>| items.iter().map(|i| i.gid).collect();
    let first = crate::ids::TurnId::new_v7();
    let inputs = store.pending_inbox(&sub).await.unwrap();
    store.write(vec![start(first, gids(inputs))]).await.unwrap();
    // the parent's message lands while the turn ends
    store.write(vec![steer("steer")]).await.unwrap();
    let results = store
        .write(vec![end_with_report(&sub, &parent_dm, "t1:end:report")])
        .await
        .unwrap();
    assert!(
        matches!(results[0], MutationResult::Count(1)),
        "{results:?}"
    );
    let record = store.get_subagent(&sub).await.unwrap().unwrap();
    assert_eq!(record.status, SubagentStatus::Running);
    assert_eq!(record.result.as_deref(), Some("all done"));
    let reports = |es: &[crate::record::Entry]| {
        es.iter()
            .filter(|e| matches!(e.kind, EntryKind::AgentMessage { .. }))
            .count()
    };
    let entries = store.tail_entries(parent_dm.id(), 10).await.unwrap();
    assert_eq!(reports(&entries), 0, "{entries:#?}");
    // the turn over the message ends the task, with its report
    let second = crate::ids::TurnId::new_v7();
    let inputs = store.pending_inbox(&sub).await.unwrap();
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    store
        .write(vec![start(second, gids(inputs))])
        .await
        .unwrap();
    let results = store
        .write(vec![end_with_report(&sub, &parent_dm, "t2:end:report")])
        .await
        .unwrap();
    assert!(
        matches!(
            &results[0],
            MutationResult::Admitted(AdmitOutcome::Accepted(_))
        ),
        "{results:?}"
    );
    let record = store.get_subagent(&sub).await.unwrap().unwrap();
    assert_eq!(record.status, SubagentStatus::Done);
    let entries = store.tail_entries(parent_dm.id(), 10).await.unwrap();
    assert_eq!(reports(&entries), 1, "{entries:#?}");
}

/// Regression (QA): a finished subagent given more work (MessageSubagent)
/// kept its last result while it ran again, and CheckSubagent showed the
/// old report as the result of the run under way. Running again clears
/// it; stopping keeps it.
#[tokio::test]
async fn running_again_clears_the_last_result() {
    let dir = tempfile::tempdir().unwrap();
    let (store, parent_dm) = store_of(&dir);
    let sub = BotId::new("p.sub-1").unwrap();
    store
        .write(vec![
            Mutation::UpsertBot(bot("p", "config")),
            Mutation::UpsertBot(bot("p.sub-1", "subagent:p")),
            Mutation::CreateSubagent(SubagentRecord {
                id: sub.clone(),
                parent: BotId::new("p").unwrap(),
                parent_session: parent_dm.id(),
                description: "a task".into(),
                status: SubagentStatus::Running,
                result: None,
                created_at: 0,
                updated_at: 0,
            }),
        ])
        .await
        .unwrap();
    store
        .write(vec![end_with_report(&sub, &parent_dm, "t1:end:report")])
        .await
        .unwrap();
    let set = |status| Mutation::SetSubagentStatus {
        id: sub.clone(),
        status,
        result: None,
    };
    store
        .write(vec![set(SubagentStatus::Running)])
        .await
        .unwrap();
    let again = store.get_subagent(&sub).await.unwrap().unwrap();
    assert_eq!(
        (again.status, again.result),
        (SubagentStatus::Running, None)
    );
    store
        .write(vec![end_with_report(&sub, &parent_dm, "t2:end:report")])
        .await
        .unwrap();
    store
        .write(vec![set(SubagentStatus::Stopped)])
        .await
        .unwrap();
    let stopped = store.get_subagent(&sub).await.unwrap().unwrap();
    assert_eq!(stopped.result.as_deref(), Some("all done"));
}
