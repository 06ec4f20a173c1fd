//! The open approvals of a subagent whose task was delegated from work
//! that is no longer its parent's owner's (fleet.toml gave the parent to
//! another user; the task came from the former owner's DM, or from the
//! parent's conversation with a bot that now belongs to someone else):
//! every read reports them expired (`owner_changed`), the listings by
//! status agree, they move with the task session to its new owner, who is
//! refused a decision, they take no place of the subagent's pending limit,
//! and `ExpireApprovals` gives them their cards. A task of the parent's
//! own work (a routine) keeps its approvals pending, for the new owner.
//! (They stayed pending: the new owner could approve an action that
//! could never run, every turn of the task ending `owner_changed`, and
//! they took places of the subagent's limit of 4.)

use pretty_assertions::assert_eq;
use serde_json::json;

use super::Fixture;
use super::TTL;
use crate::ids::ApprovalId;
use crate::ids::BotId;
use crate::ids::UserId;
use crate::record::ApprovalDecision;
use crate::record::ApprovalRecord;
use crate::record::ApprovalRequestOutcome;
use crate::record::ApprovalStatus;
use crate::record::BotRecord;
use crate::record::EntryKind;
use crate::record::ExpiryCause;
use crate::record::NewApproval;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SessionRecord;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;

fn bot(id: &str, owner: &str, origin: &str) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: id.into(),
        owner: UserId::new(owner).unwrap(),
        role: "helps".into(),
        provider: "main".into(),
        tools: Vec::new(),
        settings: json!({}),
        origin: origin.into(),
        created_at: 0,
        updated_at: 0,
    }
}

fn session(bot: &str, kind: SessionKind, peer: &str, owner: &str) -> SessionRecord {
    let key = SessionKey {
        bot: BotId::new(bot).unwrap(),
        kind,
        peer: peer.into(),
    };
    SessionRecord {
        id: key.id(),
        key,
        owner: UserId::new(owner).unwrap(),
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    }
}

/// Subagent `id` of `p`, its task delegated from `from`, and its task
/// session (alice's, as `p` is).
fn subagent(id: &str, from: &SessionRecord) -> (Vec<Mutation>, SessionRecord) {
    let task = session(id, SessionKind::Subagent, "p", "alice");
    let writes = vec![
        Mutation::UpsertBot(bot(id, "alice", "subagent:p")),
        Mutation::CreateSubagent(SubagentRecord {
            id: BotId::new(id).unwrap(),
            parent: BotId::new("p").unwrap(),
            parent_session: from.id,
            description: "a task".into(),
            status: SubagentStatus::Done,
            result: None,
            created_at: 0,
            updated_at: 0,
        }),
        Mutation::EnsureSession(task.clone()),
    ];
    (writes, task)
}

/// The subagent of task session `task` asks about `what` (at most 4
/// pending, as the review's default).
async fn request(store: &Store, task: &SessionRecord, what: &str) -> ApprovalRequestOutcome {
    let new = NewApproval {
        id: ApprovalId::new_v7(),
        bot: task.key.bot.clone(),
        session: task.id,
        turn: None,
        call_id: "c1".into(),
        tool: "Shell".into(),
        fingerprint: what.into(),
        summary: format!("run {what}"),
        reason: "pipes a download into a shell".into(),
        action: json!({"command": what}),
        ttl_ms: TTL,
        max_pending: 4,
    };
    match store
        .write(vec![Mutation::RequestApproval(Box::new(new))])
        .await
        .unwrap()
        .pop()
    {
        Some(MutationResult::ApprovalRequested(o)) => *o,
        other => panic!("{other:?}"),
    }
}

async fn created(store: &Store, task: &SessionRecord, what: &str) -> ApprovalRecord {
    match request(store, task, what).await {
        ApprovalRequestOutcome::Created(a) => a,
        other => panic!("{what}: {other:?}"),
    }
}

async fn decide(
    store: &Store,
    id: ApprovalId,
    decision: ApprovalDecision,
    by: &str,
) -> crate::Result<Vec<MutationResult>> {
    store
        .write(vec![Mutation::DecideApproval {
            id,
            decision,
            by: UserId::new(by).unwrap(),
        }])
        .await
}

/// `(status, expired_by, owner)` of approval `id` as read now.
async fn state(store: &Store, id: ApprovalId) -> (ApprovalStatus, Option<ExpiryCause>, String) {
    let a = store.approval(id).await.unwrap().unwrap();
    (a.status, a.expired_by, a.owner.to_string())
}

#[tokio::test]
async fn a_former_owners_subagent_tasks_approvals_expire_with_the_owner_change() {
    let f = Fixture::new().await;
    let store = &f.store;
    let alices_dm = session("p", SessionKind::Dm, "alice", "alice");
    let with_b = session("p", SessionKind::Agent, "b", "alice");
    let routine = session("p", SessionKind::Routine, "nightly", "alice");
    let mut batch = vec![
        Mutation::UpsertBot(bot("p", "alice", "config")),
        Mutation::UpsertBot(bot("b", "alice", "config")),
    ];
    for s in [&alices_dm, &with_b, &routine] {
        batch.push(Mutation::EnsureSession(s.clone()));
    }
    let (writes, from_dm) = subagent("p.sub-1", &alices_dm);
    batch.extend(writes);
    let (writes, from_b) = subagent("p.sub-2", &with_b);
    batch.extend(writes);
    let (writes, from_routine) = subagent("p.sub-3", &routine);
    batch.extend(writes);
    store.write(batch).await.unwrap();

    // the task from alice's DM: one approved and unused, then the limit
    let approved = created(store, &from_dm, "approved").await;
    decide(store, approved.id, ApprovalDecision::Approve, "alice")
        .await
        .unwrap();
    let mut asked = Vec::new();
    for what in ["a", "b", "c", "d"] {
        asked.push(created(store, &from_dm, what).await.id);
    }
    assert!(matches!(
        request(store, &from_dm, "e").await,
        ApprovalRequestOutcome::TooMany { .. }
    ));
    let of_b = created(store, &from_b, "of-b").await.id;
    let of_routine = created(store, &from_routine, "of-routine").await.id;

    // fleet.toml gives p to bob (b stays alice's)
    store
        .write(vec![Mutation::UpsertBot(bot("p", "bob", "config"))])
        .await
        .unwrap();

    let changed = Some(ExpiryCause::OwnerChanged);
    for id in asked.iter().chain([&of_b]) {
        assert_eq!(
            state(store, *id).await,
            (ApprovalStatus::Expired, changed, "bob".to_owned()),
            "moved with its task session, and expired"
        );
    }
    // approved by alice and never used: hers still, and it cannot be used
    assert_eq!(
        state(store, approved.id).await,
        (ApprovalStatus::Expired, changed, "alice".to_owned())
    );
    assert!(
        store
            .write(vec![Mutation::ConsumeApproval { id: approved.id }])
            .await
            .is_err()
    );
    // p's own work is bob's now, and so is its task's approval
    assert_eq!(
        state(store, of_routine).await,
        (ApprovalStatus::Pending, None, "bob".to_owned())
    );

    // bob cannot decide them, and the listings by status agree
    let refused = decide(store, asked[0], ApprovalDecision::Approve, "bob").await;
    assert!(
        matches!(&refused, Err(crate::StoreError::Rejected(m)) if m.contains("expired")),
        "{refused:?}"
    );
    let bob = UserId::new("bob").unwrap();
    let bobs = &bob;
    let listed = move |status| store.approvals_of_owner_with_status(bobs, status, 100);
    let pending: Vec<ApprovalId> = listed(ApprovalStatus::Pending)
        .await
        .unwrap()
        .iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(pending, vec![of_routine]);
    let expired = listed(ApprovalStatus::Expired).await.unwrap();
    let mut ids: Vec<ApprovalId> = expired.iter().map(|a| a.id).collect();
    ids.sort();
    let mut want: Vec<ApprovalId> = asked.iter().copied().chain([of_b]).collect();
    want.sort();
    assert_eq!(ids, want);
    assert!(expired.iter().all(|a| a.expired_by == changed));
    let all = store.approvals_of_owner(&bob, 100).await.unwrap();
    assert_eq!(all.first().map(|a| a.id), Some(of_routine), "pending first");

    // their cards follow at the next `ExpireApprovals`
    let mut lagging = store.bots_with_unwritten_expiry(&bob).await.unwrap();
    lagging.sort();
    assert_eq!(
        lagging,
        vec![
            BotId::new("p.sub-1").unwrap(),
            BotId::new("p.sub-2").unwrap()
        ]
    );
    store
        .write(vec![Mutation::ExpireApprovals { bot: None }])
        .await
        .unwrap();
    let cards: Vec<(ApprovalId, ApprovalStatus, Option<ExpiryCause>)> = store
        .entries_after(from_dm.id, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| {
            if let EntryKind::Approval {
                approval,
                status,
                expired_by,
                ..
            } = e.kind
            {
                Some((approval, status, expired_by))
            } else {
                None
            }
        })
        .collect();
    for id in &asked {
        let last = cards.iter().rev().find(|(c, ..)| c == id);
        assert_eq!(
            last,
            Some(&(*id, ApprovalStatus::Expired, changed)),
            "{cards:?}"
        );
    }

    // they hold no place of the subagent's limit
    for what in ["f", "g", "h", "i"] {
        created(store, &from_dm, what).await;
    }
    store.close().await;
}
