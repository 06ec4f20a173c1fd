//! The open approvals of a subagent its parent stopped: every read
//! reports them expired (`subagent_stopped`), the listings by status
//! agree, and `ExpireApprovals` in the stop's write gives them their
//! cards. (They stayed pending: the person could approve an action that
//! could never run, and the subagent's pending limit stayed taken.)

use pretty_assertions::assert_eq;

use super::Fixture;
use crate::ids::BotId;
use crate::ids::UserId;
use crate::record::ApprovalDecision;
use crate::record::ApprovalStatus;
use crate::record::ExpiryCause;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;
use crate::store::Mutation;
use crate::store::MutationResult;

/// Makes the fixture's bot `r` a running subagent of `p`.
async fn as_subagent(f: &Fixture) {
    f.store
        .write(vec![Mutation::CreateSubagent(SubagentRecord {
            id: f.key.bot.clone(),
            parent: BotId::new("p").unwrap(),
            parent_session: f.key.id(),
            description: "audit".into(),
            status: SubagentStatus::Running,
            result: None,
            created_at: 0,
            updated_at: 0,
        })])
        .await
        .unwrap();
}

/// Its parent's stop, as StopSubagent writes it.
fn stop(f: &Fixture) -> Vec<Mutation> {
    vec![
        Mutation::SetSubagentStatus {
            id: f.key.bot.clone(),
            status: SubagentStatus::Stopped,
            result: None,
        },
        Mutation::ExpireApprovals {
            bot: Some(f.key.bot.clone()),
        },
    ]
}

#[tokio::test]
async fn a_stopped_subagents_open_approvals_expire_with_the_stop() {
    let f = Fixture::new().await;
    as_subagent(&f).await;
    let pending = f.created("a").await;
    let approved = f.created("b").await;
    f.decide(approved.id, ApprovalDecision::Approve)
        .await
        .unwrap();
    let used = f.created("c").await;
    f.decide(used.id, ApprovalDecision::Approve).await.unwrap();
    f.store
        .write(vec![Mutation::ConsumeApproval { id: used.id }])
        .await
        .unwrap();
    let denied = f.created("d").await;
    f.decide(denied.id, ApprovalDecision::Deny).await.unwrap();

    let written = f.store.write(stop(&f)).await.unwrap();
    assert_eq!(written[1], MutationResult::Count(2), "the open ones");
    let stopped = Some(ExpiryCause::SubagentStopped);
    for id in [pending.id, approved.id] {
        let read = f.store.approval(id).await.unwrap().unwrap();
        assert_eq!(
            (read.status, read.expired_by),
            (ApprovalStatus::Expired, stopped)
        );
    }
    // what ran, or was refused, keeps its status
    let read = f.store.approval(used.id).await.unwrap().unwrap();
    assert_eq!(read.status, ApprovalStatus::Approved);
    assert!(read.consumed_at.is_some());
    let read = f.store.approval(denied.id).await.unwrap().unwrap();
    assert_eq!(read.status, ApprovalStatus::Denied);
    // the cards say so, in the stop's write
    let cards = f.cards().await;
    for id in [pending.id, approved.id] {
        let last = cards.iter().rev().find(|(c, _)| *c == id).map(|(_, s)| *s);
        assert_eq!(last, Some(ApprovalStatus::Expired), "{cards:?}");
    }
    // nothing is left to decide, or to use
    assert!(
        f.decide(pending.id, ApprovalDecision::Approve)
            .await
            .is_err()
    );
    assert!(
        f.store
            .write(vec![Mutation::ConsumeApproval { id: approved.id }])
            .await
            .is_err()
    );
    let alice = UserId::new("alice").unwrap();
    let listed = f
        .store
        .approvals_of_owner_with_status(&alice, ApprovalStatus::Pending, 10)
        .await
        .unwrap();
    assert_eq!(listed, vec![]);
    let listed = f
        .store
        .approvals_of_owner_with_status(&alice, ApprovalStatus::Approved, 10)
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|a| a.id).collect::<Vec<_>>(),
        vec![used.id]
    );
    let listed = f
        .store
        .approvals_of_owner_with_status(&alice, ApprovalStatus::Expired, 10)
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|a| a.id).collect::<Vec<_>>(),
        vec![approved.id, pending.id],
        "newest first"
    );
    assert!(listed.iter().all(|a| a.expired_by == stopped));
    assert!(
        f.store
            .open_approvals(&f.key.bot)
            .await
            .unwrap()
            .iter()
            .all(|a| !a.is_pending())
    );
}

/// Without the stop's `ExpireApprovals` (a stop written before it was
/// part of the stop), reads still report them expired, and the next
/// listing's `ExpireApprovals` writes their cards.
#[tokio::test]
async fn reads_report_a_stopped_subagents_approvals_expired_before_their_cards() {
    let f = Fixture::new().await;
    as_subagent(&f).await;
    let a = f.created("a").await;
    f.store
        .write(stop(&f).into_iter().take(1).collect())
        .await
        .unwrap();
    let read = f.store.approval(a.id).await.unwrap().unwrap();
    assert_eq!(
        (read.status, read.expired_by),
        (ApprovalStatus::Expired, Some(ExpiryCause::SubagentStopped))
    );
    let alice = UserId::new("alice").unwrap();
    assert_eq!(
        f.store.bots_with_unwritten_expiry(&alice).await.unwrap(),
        vec![f.key.bot.clone()]
    );
    let n = f
        .store
        .write(vec![Mutation::ExpireApprovals { bot: None }])
        .await
        .unwrap();
    assert_eq!(n, vec![MutationResult::Count(1)]);
    assert_eq!(
        f.cards().await.last().copied(),
        Some((a.id, ApprovalStatus::Expired))
    );
    assert_eq!(
        f.store.bots_with_unwritten_expiry(&alice).await.unwrap(),
        vec![]
    );
}
