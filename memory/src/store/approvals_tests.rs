//! The approval state machine as the store keeps it: limit, same-action
//! reuse, TTL and user-message expiry, decisions, single use, cards.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use pretty_assertions::assert_eq;
use rusqlite::params;
use serde_json::json;

use super::SELECT;
use super::owner_not_pending_filter;
use super::owner_status_filter;

use crate::clock::ManualClock;
use crate::digest::InputDigest;
use crate::ids::ApprovalId;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::UserId;
use crate::record::AdmitRequest;
use crate::record::ApprovalDecision;
use crate::record::ApprovalRecord;
use crate::record::ApprovalRequestOutcome;
use crate::record::ApprovalStatus;
use crate::record::EntryKind;
use crate::record::ExpiryCause;
use crate::record::NewApproval;
use crate::record::NewEntry;
use crate::record::Priority;
use crate::record::ReviewRecord;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;
use crate::store::StoreOptions;

const TTL: i64 = 10 * 60 * 1000;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    clock: ManualClock,
    key: SessionKey,
    messages: u32,
}

impl Fixture {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(chrono::Utc::now());
        let store = Store::open(StoreOptions {
            clock: Arc::new(clock.clone()),
            ..StoreOptions::new(dir.path().join("fleet.db"))
        })
        .unwrap();
        let key = SessionKey {
            bot: BotId::new("r").unwrap(),
            kind: SessionKind::Dm,
            peer: "alice".into(),
        };
        let mut f = Self {
            _dir: dir,
            store,
            clock,
            key,
            messages: 0,
        };
        f.user_message().await;
        f
    }

    async fn user_message(&mut self) -> i64 {
        self.messages += 1;
        let text = format!("message {}", self.messages);
        let r = self
            .store
            .write(vec![Mutation::Admit(Box::new(AdmitRequest {
                source: "user:alice".into(),
                nonce: format!("n{}", self.messages),
                nonce_time_ms: None,
                digest: InputDigest::of_parts([text.as_bytes()]),
                entry: NewEntry {
                    id: EntryId::new_v7(),
                    session: self.key.id(),
                    author: "alice".into(),
                    turn: None,
                    kind: EntryKind::UserMessage { text },
                },
                session: self.key.clone(),
                owner: UserId::new("alice").unwrap(),
                priority: Priority::UserDm,
            }))])
            .await
            .unwrap();
        match r.as_slice() {
            [MutationResult::Admitted(crate::record::AdmitOutcome::Accepted(rec))] => rec.seq,
            other => panic!("{other:?}"),
        }
    }

    fn new_approval(&self, fingerprint: &str) -> NewApproval {
        NewApproval {
            id: ApprovalId::new_v7(),
            bot: self.key.bot.clone(),
            session: self.key.id(),
            turn: None,
            call_id: "c1".into(),
            tool: "Shell".into(),
            fingerprint: fingerprint.into(),
            summary: format!("run {fingerprint}"),
            reason: "pipes a download into a shell".into(),
            action: json!({"command": fingerprint}),
            ttl_ms: TTL,
            max_pending: 4,
        }
    }

    async fn request(&self, fingerprint: &str) -> ApprovalRequestOutcome {
        let new = self.new_approval(fingerprint);
        match self
            .store
            .write(vec![Mutation::RequestApproval(Box::new(new))])
            .await
            .unwrap()
            .pop()
        {
            Some(MutationResult::ApprovalRequested(o)) => *o,
            other => panic!("{other:?}"),
        }
    }

    async fn created(&self, fingerprint: &str) -> ApprovalRecord {
        match self.request(fingerprint).await {
            ApprovalRequestOutcome::Created(r) => r,
            other => panic!("{other:?}"),
        }
    }

    /// Alice's approvals page of at most `limit`: ids and statuses.
    async fn owner_page(&self, limit: i64) -> Vec<(ApprovalId, ApprovalStatus)> {
        self.store
            .approvals_of_owner(&UserId::new("alice").unwrap(), limit)
            .await
            .unwrap()
            .into_iter()
            .map(|a| (a.id, a.status))
            .collect()
    }

    async fn decide(
        &self,
        id: ApprovalId,
        decision: ApprovalDecision,
    ) -> crate::Result<Vec<MutationResult>> {
        self.store
            .write(vec![Mutation::DecideApproval {
                id,
                decision,
                by: UserId::new("alice").unwrap(),
            }])
            .await
    }

    async fn cards(&self) -> Vec<(ApprovalId, ApprovalStatus)> {
        self.store
            .entries_after(self.key.id(), 0, 1000)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.kind {
                EntryKind::Approval {
                    approval, status, ..
                } => Some((approval, status)),
                _ => None,
            })
            .collect()
    }
}

#[tokio::test]
async fn creates_with_epoch_and_card_reuses_same_action_and_refuses_a_fifth() {
    let f = Fixture::new().await;
    let first = f.created("a").await;
    assert_eq!(first.status, ApprovalStatus::Pending);
    assert_eq!(first.epoch, 1, "the seq of the newest user message");
    assert_eq!(first.owner.as_str(), "alice");
    assert_eq!(first.expires_at - first.created_at, TTL);
    // the same action again: the same approval, no new card
    assert_eq!(
        f.request("a").await,
        ApprovalRequestOutcome::Existing(first.clone())
    );
    for fp in ["b", "c", "d"] {
        f.created(fp).await;
    }
    let ApprovalRequestOutcome::TooMany { pending } = f.request("e").await else {
        panic!("a fifth pending approval must be refused");
    };
    assert_eq!(pending.len(), 4);
    assert_eq!(pending[0].id, first.id);
    assert_eq!(f.cards().await.len(), 4);
}

#[tokio::test]
async fn expires_after_ttl_and_frees_its_slot() {
    let f = Fixture::new().await;
    let a = f.created("a").await;
    f.clock.advance_ms(TTL - 1);
    assert_eq!(
        f.store.approval(a.id).await.unwrap().unwrap().status,
        ApprovalStatus::Pending
    );
    f.clock.advance_ms(1);
    let read = f.store.approval(a.id).await.unwrap().unwrap();
    assert_eq!(
        (read.status, read.expired_by),
        (ApprovalStatus::Expired, Some(ExpiryCause::Ttl))
    );
    // deciding an expired approval fails, and changes nothing
    assert!(f.decide(a.id, ApprovalDecision::Approve).await.is_err());
    // a new request persists the expiry (with a card) and is created
    let b = f.created("a").await;
    assert_ne!(a.id, b.id);
    assert_eq!(
        f.cards().await,
        vec![
            (a.id, ApprovalStatus::Pending),
            (a.id, ApprovalStatus::Expired),
            (b.id, ApprovalStatus::Pending)
        ]
    );
}

#[tokio::test]
async fn a_newer_user_message_expires_pending_approvals() {
    let mut f = Fixture::new().await;
    let a = f.created("a").await;
    let newer = f.user_message().await;
    let read = f.store.approval(a.id).await.unwrap().unwrap();
    assert_eq!(
        (read.status, read.expired_by),
        (ApprovalStatus::Expired, Some(ExpiryCause::UserMessage))
    );
    let n = f
        .store
        .write(vec![Mutation::ExpireApprovals { bot: None }])
        .await
        .unwrap();
    assert_eq!(n, vec![MutationResult::Count(1)]);
    // asked again now: the new message's epoch, pending
    let b = f.created("a").await;
    assert_eq!((b.epoch, b.status), (newer, ApprovalStatus::Pending));
}

#[tokio::test]
async fn approve_then_consume_once_deny_is_final() {
    let f = Fixture::new().await;
    let a = f.created("a").await;
    let b = f.created("b").await;
    f.clock.advance_ms(60_000);
    let r = f.decide(a.id, ApprovalDecision::Approve).await.unwrap();
    let [MutationResult::ApprovalChanged(approved)] = r.as_slice() else {
        panic!("{r:?}")
    };
    assert_eq!(approved.status, ApprovalStatus::Approved);
    assert_eq!(
        approved.decided_by.as_ref().map(UserId::as_str),
        Some("alice")
    );
    // the use window starts at the decision
    assert_eq!(approved.expires_at, approved.decided_at.unwrap() + TTL);
    // a second decision is refused
    assert!(f.decide(a.id, ApprovalDecision::Deny).await.is_err());
    // another user cannot decide (and does not learn it exists)
    let err = f
        .store
        .write(vec![Mutation::DecideApproval {
            id: b.id,
            decision: ApprovalDecision::Approve,
            by: UserId::new("bob").unwrap(),
        }])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
    f.decide(b.id, ApprovalDecision::Deny).await.unwrap();
    // used once
    f.store
        .write(vec![Mutation::ConsumeApproval { id: a.id }])
        .await
        .unwrap();
    let again = f
        .store
        .write(vec![Mutation::ConsumeApproval { id: a.id }])
        .await
        .unwrap_err();
    assert!(again.to_string().contains("already used"), "{again}");
    assert!(
        f.store
            .write(vec![Mutation::ConsumeApproval { id: b.id }])
            .await
            .is_err(),
        "a denied approval cannot be used"
    );
    assert!(f.store.open_approvals(&f.key.bot).await.unwrap().is_empty());
    assert_eq!(
        f.cards().await,
        vec![
            (a.id, ApprovalStatus::Pending),
            (b.id, ApprovalStatus::Pending),
            (a.id, ApprovalStatus::Approved),
            (b.id, ApprovalStatus::Denied),
        ]
    );
}

#[tokio::test]
async fn an_unused_approval_expires_after_its_window() {
    let f = Fixture::new().await;
    let a = f.created("a").await;
    f.decide(a.id, ApprovalDecision::Approve).await.unwrap();
    f.clock.advance_ms(TTL);
    let read = f.store.approval(a.id).await.unwrap().unwrap();
    assert_eq!(read.status, ApprovalStatus::Expired);
    assert!(
        f.store
            .write(vec![Mutation::ConsumeApproval { id: a.id }])
            .await
            .is_err()
    );
}

#[tokio::test]
async fn owner_listing_puts_pending_first_and_reviews_are_logged() {
    let f = Fixture::new().await;
    let a = f.created("a").await;
    f.clock.advance_ms(1);
    let b = f.created("b").await;
    f.clock.advance_ms(1);
    let c = f.created("c").await;
    f.decide(b.id, ApprovalDecision::Deny).await.unwrap();
    let listed: Vec<ApprovalId> = f
        .store
        .approvals_of_owner(&UserId::new("alice").unwrap(), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(listed, vec![a.id, c.id, b.id]);
    assert!(
        f.store
            .approvals_of_owner(&UserId::new("bob").unwrap(), 100)
            .await
            .unwrap()
            .is_empty()
    );

    let review = ReviewRecord {
        bot: f.key.bot.clone(),
        session: f.key.id(),
        turn: None,
        call_id: "c9".into(),
        tool: "Shell".into(),
        surface: "shell".into(),
        mode: "shadow".into(),
        decision: "ask".into(),
        reason: "pipes a download into a shell".into(),
        fingerprint: "f".into(),
        at: 0,
    };
    f.store
        .write(vec![Mutation::RecordReview(Box::new(review.clone()))])
        .await
        .unwrap();
    let logged = f.store.reviews_of_bot(&f.key.bot, 10).await.unwrap();
    assert_eq!(logged.len(), 1);
    assert_eq!(
        logged[0],
        ReviewRecord {
            at: f.clock_now(),
            ..review
        }
    );
}

#[tokio::test]
async fn owner_listing_by_status_filters_on_the_status_as_of_now() {
    let mut f = Fixture::new().await;
    let ids = |v: Vec<ApprovalRecord>| v.into_iter().map(|a| a.id).collect::<Vec<_>>();
    // stored expired
    let ttl = f.created("ttl").await;
    f.clock.advance_ms(TTL);
    f.store
        .write(vec![Mutation::ExpireApprovals { bot: None }])
        .await
        .unwrap();
    // approved and used: approved for good
    let used = f.created("used").await;
    f.decide(used.id, ApprovalDecision::Approve).await.unwrap();
    f.store
        .write(vec![Mutation::ConsumeApproval { id: used.id }])
        .await
        .unwrap();
    // stored approved, unused past its window: reads expired
    f.clock.advance_ms(1);
    let late = f.created("late").await;
    f.decide(late.id, ApprovalDecision::Approve).await.unwrap();
    f.clock.advance_ms(TTL);
    // stored pending, behind a newer user message: reads expired
    let msg = f.created("msg").await;
    f.clock.advance_ms(1);
    f.user_message().await;
    f.clock.advance_ms(1);
    let denied = f.created("denied").await;
    f.decide(denied.id, ApprovalDecision::Deny).await.unwrap();
    f.clock.advance_ms(1);
    let approved = f.created("approved").await;
    f.decide(approved.id, ApprovalDecision::Approve)
        .await
        .unwrap();
    f.clock.advance_ms(1);
    let pending = f.created("pending").await;
    f.clock.advance_ms(1);
    let pending_2 = f.created("pending-2").await;

    let alice = UserId::new("alice").unwrap();
    let all = f.store.approvals_of_owner(&alice, 100).await.unwrap();
    let by = async |status| {
        f.store
            .approvals_of_owner_with_status(&alice, status, 100)
            .await
            .unwrap()
    };
    for status in [
        ApprovalStatus::Pending,
        ApprovalStatus::Approved,
        ApprovalStatus::Denied,
        ApprovalStatus::Expired,
    ] {
        // the same records as the whole listing, in the same order
        let expected: Vec<ApprovalRecord> =
            all.iter().filter(|a| a.status == status).cloned().collect();
        assert_eq!(by(status).await, expected, "{status:?}");
    }
    assert_eq!(
        ids(by(ApprovalStatus::Pending).await),
        [pending.id, pending_2.id]
    );
    assert_eq!(
        ids(by(ApprovalStatus::Approved).await),
        [approved.id, used.id]
    );
    assert_eq!(ids(by(ApprovalStatus::Denied).await), [denied.id]);
    assert_eq!(
        ids(by(ApprovalStatus::Expired).await),
        [msg.id, late.id, ttl.id]
    );
    // the limit counts matches only
    let two = f
        .store
        .approvals_of_owner_with_status(&alice, ApprovalStatus::Expired, 2)
        .await
        .unwrap();
    assert_eq!(ids(two), [msg.id, late.id]);
    assert!(
        f.store
            .approvals_of_owner_with_status(
                &UserId::new("bob").unwrap(),
                ApprovalStatus::Expired,
                100
            )
            .await
            .unwrap()
            .is_empty()
    );
}

impl Fixture {
    fn clock_now(&self) -> i64 {
        use crate::clock::Clock;
        self.clock.now_ms()
    }
}

#[tokio::test]
async fn cards_are_searchable_by_their_summary() {
    let f = Fixture::new().await;
    let a = f.created("curl-x").await;
    let entries = f.store.entries_after(f.key.id(), 0, 100).await.unwrap();
    let card = entries
        .iter()
        .find(|e| matches!(e.kind, EntryKind::Approval { .. }))
        .unwrap();
    assert_eq!(
        (card.kind.name(), card.kind.role(), card.kind.text()),
        ("approval", "system", a.summary.as_str())
    );
    assert_eq!(card.author, "system");
    // the entry's own id and the approval's id do not collide in JSON
    let json = serde_json::to_value(card).unwrap();
    assert_eq!(json["approval"], json!(a.id));
    assert_eq!(json["id"], json!(card.id));
}

#[tokio::test]
async fn open_approvals_are_found_across_decisions_and_a_reopen() {
    let mut f = Fixture::new().await;
    let bot = f.key.bot.clone();
    assert!(f.store.open_approvals(&bot).await.unwrap().is_empty());
    let a = f.created("fp-1").await;
    assert_eq!(f.store.open_approvals(&bot).await.unwrap().len(), 1);
    f.decide(a.id, ApprovalDecision::Deny).await.unwrap();
    // none open: the bot is forgotten by the hint, and found again when it asks
    assert!(f.store.open_approvals(&bot).await.unwrap().is_empty());
    assert!(f.store.open_approvals(&bot).await.unwrap().is_empty());
    let b = f.created("fp-2").await;
    let open = f.store.open_approvals(&bot).await.unwrap();
    assert_eq!(open.iter().map(|x| x.id).collect::<Vec<_>>(), [b.id]);
    // expired by a user message but not yet persisted: still reported
    f.user_message().await;
    let open = f.store.open_approvals(&bot).await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].status, ApprovalStatus::Expired);
    // a reopened store knows which bots have open rows
    let c = f.created("fp-3").await;
    let path = f.store.path().to_path_buf();
    f.store.close().await;
    let store = Store::open(StoreOptions {
        clock: Arc::new(f.clock.clone()),
        ..StoreOptions::new(path)
    })
    .unwrap();
    let open = store.open_approvals(&bot).await.unwrap();
    assert!(open.iter().any(|x| x.id == c.id), "{open:#?}");
}

/// Regression: the whole listing ordered by the *stored* status before its
/// limit, so a stored `pending` that had expired took the place of a newer
/// decided approval: a page of it disagreed with the listings by status.
/// Also: which bots have an expiry still to write, and that writing it
/// leaves none.
#[tokio::test]
async fn owner_listing_orders_by_the_status_as_of_now_before_its_limit() {
    let f = Fixture::new().await;
    let alice = UserId::new("alice").unwrap();
    let short = NewApproval {
        ttl_ms: 2,
        ..f.new_approval("old")
    };
    let old = short.id;
    f.store
        .write(vec![Mutation::RequestApproval(Box::new(short))])
        .await
        .unwrap();
    f.clock.advance_ms(1);
    let denied = f.created("denied").await;
    f.decide(denied.id, ApprovalDecision::Deny).await.unwrap();
    let live = f.created("live").await;
    f.clock.advance_ms(1);
    let page = async |limit| f.owner_page(limit).await;
    let all = vec![
        (live.id, ApprovalStatus::Pending),
        (denied.id, ApprovalStatus::Denied),
        (old, ApprovalStatus::Expired),
    ];
    assert_eq!(page(3).await, all);
    assert_eq!(page(2).await, all[..2]);
    assert_eq!(page(1).await, all[..1]);
    assert_eq!(
        f.store.bots_with_unwritten_expiry(&alice).await.unwrap(),
        vec![f.key.bot.clone()]
    );
    f.store
        .write(vec![Mutation::ExpireApprovals {
            bot: Some(f.key.bot.clone()),
        }])
        .await
        .unwrap();
    assert!(
        f.store
            .bots_with_unwritten_expiry(&alice)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(page(3).await, all, "the same once written");
}

#[path = "approvals_stopped_tests.rs"]
mod stopped;

#[path = "approvals_owner_tests.rs"]
mod owner;

#[tokio::test]
async fn a_used_approval_is_found_for_its_action_until_its_window_ends_or_the_person_writes() {
    let mut f = Fixture::new().await;
    let alice = UserId::new("alice").unwrap();
    let used = |f: &Fixture, fp: &'static str| {
        let store = f.store.clone();
        let alice = alice.clone();
        let session = f.key.id();
        async move {
            store
                .decided_approval(&alice, session, (fp, "", ""))
                .await
                .unwrap()
        }
    };
    let a = f.created("a").await;
    assert_eq!(used(&f, "a").await, None, "pending: not used");
    f.decide(a.id, ApprovalDecision::Approve).await.unwrap();
    assert_eq!(used(&f, "a").await, None, "approved, not used yet");
    f.store
        .write(vec![Mutation::ConsumeApproval { id: a.id }])
        .await
        .unwrap();
    let found = used(&f, "a").await.expect("used within its window");
    assert_eq!(found.id, a.id);
    assert!(found.consumed_at.is_some());
    assert_eq!(used(&f, "b").await, None, "another action");
    let bob = UserId::new("bob").unwrap();
    assert_eq!(
        f.store
            .decided_approval(&bob, f.key.id(), ("a", "", ""))
            .await
            .unwrap(),
        None,
        "another person's"
    );
    // its window passes
    f.clock.advance_ms(TTL);
    assert_eq!(used(&f, "a").await, None, "past its window");

    // a newer message of the person: a new request, asked anew
    let b = f.created("b").await;
    f.decide(b.id, ApprovalDecision::Approve).await.unwrap();
    f.store
        .write(vec![Mutation::ConsumeApproval { id: b.id }])
        .await
        .unwrap();
    assert_eq!(used(&f, "b").await.map(|r| r.id), Some(b.id));
    f.user_message().await;
    assert_eq!(used(&f, "b").await, None, "the person wrote since");
}

/// The approvals page with many approvals: the effectively pending ones
/// (oldest first) before the rest (newest first), a stored `pending` past
/// its TTL among the rest, every approval once, and a page of `k` the
/// first `k` of the whole listing, for every `k`.
#[tokio::test]
async fn owner_listing_of_many_is_pending_first_then_newest_first() {
    let f = Fixture::new().await;
    let mut pending = Vec::new();
    let mut rest = Vec::new();
    for i in 0..40 {
        f.clock.advance_ms(1);
        if i == 7 {
            // stored pending, read expired: among the rest by its time
            let short = NewApproval {
                ttl_ms: 1,
                ..f.new_approval(&format!("a{i}"))
            };
            let id = short.id;
            f.store
                .write(vec![Mutation::RequestApproval(Box::new(short))])
                .await
                .unwrap();
            rest.push(id);
            continue;
        }
        let a = f.created(&format!("a{i}")).await;
        match i {
            3 | 23 | 39 => pending.push(a.id),
            n => {
                let decision = if n % 2 == 0 {
                    ApprovalDecision::Deny
                } else {
                    ApprovalDecision::Approve
                };
                f.decide(a.id, decision).await.unwrap();
                rest.push(a.id);
            }
        }
    }
    f.clock.advance_ms(1);
    rest.reverse();
    let expected: Vec<ApprovalId> = pending.iter().chain(&rest).copied().collect();
    let page = async |limit| -> Vec<ApprovalId> {
        f.owner_page(limit)
            .await
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    };
    assert_eq!(page(100).await, expected);
    for k in 1..expected.len() {
        assert_eq!(page(k as i64).await, expected[..k], "a page of {k}");
    }
    let statuses: Vec<ApprovalStatus> = f
        .owner_page(100)
        .await
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    assert!(
        statuses[..pending.len()]
            .iter()
            .all(|s| *s == ApprovalStatus::Pending)
    );
    assert!(
        statuses[pending.len()..]
            .iter()
            .all(|s| *s != ApprovalStatus::Pending)
    );
}

/// Regression (QA, 2026-12-05): the approvals page ordered every approval
/// of its user by a computed status before its limit, so it read them all
/// (58 ms at 9,300). Each of its reads now walks an index in the page's
/// order and stops at the limit: no sort of the user's rows.
#[tokio::test]
async fn owner_listing_reads_through_indexes_in_page_order() {
    let f = Fixture::new().await;
    let plan = async |filter: String| {
        let sql = format!("EXPLAIN QUERY PLAN {SELECT} {filter}");
        f.store
            .read_many(move |c| {
                let mut stmt = c.prepare(&sql)?;
                let rows = stmt
                    .query_map(params!["alice", 0, 10], |r| r.get::<_, String>(3))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(rows.join("\n"))
            })
            .await
            .unwrap()
    };
    let pending = plan(owner_status_filter(ApprovalStatus::Pending)).await;
    assert!(
        pending.contains("SEARCH a USING INDEX approvals_owner_pending (owner=?)"),
        "{pending}"
    );
    assert!(!pending.contains("TEMP B-TREE"), "{pending}");
    let others = plan(owner_not_pending_filter()).await;
    assert!(
        others.contains("SEARCH a USING INDEX approvals_owner (owner=?)"),
        "{others}"
    );
    assert!(!others.contains("TEMP B-TREE"), "{others}");
    // whether a person wrote since: the session's kind first (a primary
    // key), only a DM's entries after the approval then
    for plan in [&pending, &others] {
        let session = plan.find("SEARCH us USING INDEX sqlite_autoindex_sessions_1 (id=?)");
        let entries =
            plan.find("SEARCH e USING INDEX sqlite_autoindex_entries_1 (session_id=? AND seq>?)");
        assert!(
            matches!((session, entries), (Some(s), Some(e)) if s < e),
            "{plan}"
        );
    }
}
