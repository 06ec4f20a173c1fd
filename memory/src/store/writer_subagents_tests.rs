//! `RequeueSubagentTask`: a retry of a subagent's task turn is refused,
//! with nothing written, while its parent has its limit of running
//! subagents; otherwise its inputs are requeued and the subagent is
//! `running` again, in the same transaction, so two retries in one group
//! commit cannot both pass the limit. `StopSubagent`: decided on the
//! status found as it commits, and recorded with the call that stopped.
#![allow(clippy::unwrap_used)]

use serde_json::json;

use crate::digest::InputDigest;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::record::AdmitRequest;
use crate::record::BotRecord;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::Priority;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;
use crate::record::TurnStatus;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;
use crate::store::StoreOptions;

fn id(s: &str) -> BotId {
    BotId::new(s).unwrap()
}

fn bot(s: &str) -> BotRecord {
    BotRecord {
        id: id(s),
        name: s.into(),
        owner: UserId::new("alice").unwrap(),
        role: String::new(),
        provider: "main".into(),
        tools: Vec::new(),
        settings: json!({}),
        origin: "subagent:p".into(),
        created_at: 0,
        updated_at: 0,
    }
}

fn task_session(sub: &str) -> SessionKey {
    SessionKey {
        bot: id(sub),
        kind: SessionKind::Subagent,
        peer: "p".into(),
    }
}

/// Subagent `sub` of `p` with `status`; for a failed one, its task turn,
/// cancelled while it held its task.
async fn subagent(store: &Store, sub: &str, status: SubagentStatus) -> Option<TurnId> {
    let key = task_session(sub);
    let mut batch = vec![
        Mutation::UpsertBot(bot(sub)),
        Mutation::CreateSubagent(SubagentRecord {
            id: id(sub),
            parent: id("p"),
            parent_session: key.id(),
            description: "a task".into(),
            status,
            result: None,
            created_at: 0,
            updated_at: 0,
        }),
    ];
    if status == SubagentStatus::Failed {
        batch.push(Mutation::Admit(Box::new(AdmitRequest {
            source: "bot:p".into(),
            nonce: format!("task-{sub}"),
            nonce_time_ms: None,
            digest: InputDigest::of_parts([sub.as_bytes()]),
            session: key.clone(),
            owner: UserId::new("alice").unwrap(),
            entry: NewEntry {
                id: EntryId::new_v7(),
                session: key.id(),
                author: "p".into(),
                turn: None,
                kind: EntryKind::UserMessage {
                    text: "the task".into(),
                },
            },
            priority: Priority::UserDm,
        })));
    }
    store.write(batch).await.unwrap();
    if status != SubagentStatus::Failed {
        return None;
    }
    let inputs: Vec<i64> = store
        .pending_inbox(&id(sub))
        .await
        .unwrap()
        .iter()
        .map(|i| i.gid)
        .collect();
    let turn = TurnId::new_v7();
    store
        .write(vec![
            Mutation::StartTurn {
                turn,
                bot: id(sub),
                session: key.id(),
                inputs,
                checkpoint: json!({}),
                started_at: 0,
            },
            Mutation::EndTurn {
                turn,
                status: TurnStatus::Cancelled,
                error: None,
            },
        ])
        .await
        .unwrap();
    Some(turn)
}

fn retry(turn: TurnId) -> Mutation {
    Mutation::RequeueSubagentTask {
        turn,
        max_running: 2,
    }
}

async fn status_of(store: &Store, sub: &str) -> SubagentStatus {
    store.get_subagent(&id(sub)).await.unwrap().unwrap().status
}

async fn queued(store: &Store, sub: &str) -> usize {
    store.pending_inbox(&id(sub)).await.unwrap().len()
}

#[tokio::test]
async fn a_subagent_task_is_retried_within_its_parents_limit_and_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let mut p = bot("p");
    p.origin = "config".into();
    store.write(vec![Mutation::UpsertBot(p)]).await.unwrap();
    let t1 = subagent(&store, "p.s1", SubagentStatus::Failed)
        .await
        .unwrap();
    let t4 = subagent(&store, "p.s4", SubagentStatus::Failed)
        .await
        .unwrap();
    subagent(&store, "p.s2", SubagentStatus::Running).await;
    subagent(&store, "p.s3", SubagentStatus::Running).await;

    // at the limit: refused, nothing written
    let results = store.write(vec![retry(t1)]).await.unwrap();
    assert_eq!(
        results,
        vec![MutationResult::SubagentLimit {
            parent: id("p"),
            running: 2
        }]
    );
    assert_eq!(status_of(&store, "p.s1").await, SubagentStatus::Failed);
    assert_eq!(queued(&store, "p.s1").await, 0);

    // one finished: room for one; of two retries together, the first runs
    store
        .write(vec![Mutation::SetSubagentStatus {
            id: id("p.s3"),
            status: SubagentStatus::Done,
            result: None,
        }])
        .await
        .unwrap();
    let results = store.write(vec![retry(t1), retry(t4)]).await.unwrap();
    assert_eq!(
        results,
        vec![
            MutationResult::Count(1),
            MutationResult::SubagentLimit {
                parent: id("p"),
                running: 2
            }
        ]
    );
    assert_eq!(status_of(&store, "p.s1").await, SubagentStatus::Running);
    assert_eq!(queued(&store, "p.s1").await, 1);
    assert_eq!(status_of(&store, "p.s4").await, SubagentStatus::Failed);
    assert_eq!(queued(&store, "p.s4").await, 0);

    // retried already: nothing more to requeue, and the refusal says
    // where its input is (queued again)
    match store.write(vec![retry(t1)]).await {
        Err(StoreError::Rejected(m)) => assert!(m.contains("retried already"), "{m}"),
        other => panic!("{other:?}"),
    }

    // a subagent its parent stopped since it was read is not retried
    store
        .write(vec![Mutation::SetSubagentStatus {
            id: id("p.s4"),
            status: SubagentStatus::Stopped,
            result: None,
        }])
        .await
        .unwrap();
    let refused = store.write(vec![retry(t4)]).await;
    assert!(
        matches!(&refused, Err(StoreError::Rejected(m)) if m.contains("stopped")),
        "{refused:?}"
    );
    assert_eq!(queued(&store, "p.s4").await, 0);
}

/// `StopSubagent` decides on the status it finds as it commits and
/// records it with the call that stopped: a subagent whose task ended
/// keeps that it was done (and since when); a second stop writes nothing
/// and leaves the first one's record.
#[tokio::test]
async fn a_stop_records_what_it_found_and_a_second_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    subagent(&store, "p.sub-1", SubagentStatus::Running).await;
    store
        .write(vec![Mutation::EndSubagentTask {
            id: id("p.sub-1"),
            status: SubagentStatus::Done,
            result: Some("all done".into()),
            report: None,
        }])
        .await
        .unwrap();
    let done = store.get_subagent(&id("p.sub-1")).await.unwrap().unwrap();
    let stop = |call: &str| Mutation::StopSubagent {
        id: id("p.sub-1"),
        call: call.into(),
    };
    let r = store.write(vec![stop("t:c1")]).await.unwrap();
    assert_eq!(r, vec![MutationResult::Count(1)]);
    let recorded = crate::record::SubagentStop {
        call: "t:c1".into(),
        from: SubagentStatus::Done,
        since: done.updated_at,
        expired: 0,
    };
    assert_eq!(
        store.subagent_stop(&id("p.sub-1")).await.unwrap(),
        Some(recorded.clone())
    );
    let stopped = store.get_subagent(&id("p.sub-1")).await.unwrap().unwrap();
    assert_eq!(
        (stopped.status, stopped.result.as_deref()),
        (SubagentStatus::Stopped, Some("all done"))
    );

    let r = store.write(vec![stop("t:c2")]).await.unwrap();
    assert_eq!(r, vec![MutationResult::Count(0)]);
    assert_eq!(
        store.subagent_stop(&id("p.sub-1")).await.unwrap(),
        Some(recorded)
    );
    assert_eq!(
        store.get_subagent(&id("p.sub-1")).await.unwrap().unwrap(),
        stopped
    );
    // one never stopped has no stop
    subagent(&store, "p.sub-2", SubagentStatus::Running).await;
    assert_eq!(store.subagent_stop(&id("p.sub-2")).await.unwrap(), None);
}
