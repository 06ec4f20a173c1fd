//! What a bot's new owner takes along besides its sessions: the approvals
//! pending in them, and its subagents (child bot records, their sessions
//! and their pending approvals). What stays: a person's DM and its
//! approvals, decided or expired approvals, another bot's subagents. And
//! what changes around it: the rooms it is in are shared or not again.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::clock::Clock;
use crate::clock::ManualClock;
use crate::ids::ApprovalId;
use crate::ids::BotId;
use crate::ids::RoomId;
use crate::ids::UserId;
use crate::record::ApprovalDecision;
use crate::record::ApprovalRequestOutcome;
use crate::record::BotRecord;
use crate::record::NewApproval;
use crate::record::RoomRecord;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SessionRecord;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;
use crate::store::StoreOptions;

/// A store in `dir` on a clock the test moves.
fn clocked_store(dir: &std::path::Path) -> (Store, ManualClock) {
    let clock = ManualClock::new(chrono::Utc::now());
    let store = Store::open(StoreOptions {
        clock: Arc::new(clock.clone()),
        ..StoreOptions::new(dir.join("fleet.db"))
    })
    .unwrap();
    (store, clock)
}

pub(super) fn bot(id: &str, owner: &str, origin: &str) -> BotRecord {
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

pub(super) fn session(bot: &str, kind: SessionKind, peer: &str, owner: &str) -> SessionRecord {
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

fn subagent(id: &str, parent: &SessionRecord) -> SubagentRecord {
    SubagentRecord {
        id: BotId::new(id).unwrap(),
        parent: parent.key.bot.clone(),
        parent_session: parent.id,
        description: "a task".into(),
        status: SubagentStatus::Done,
        result: None,
        created_at: 0,
        updated_at: 0,
    }
}

async fn ask(store: &Store, s: &SessionRecord, what: &str, ttl_ms: i64) -> ApprovalId {
    let new = NewApproval {
        id: ApprovalId::new_v7(),
        bot: s.key.bot.clone(),
        session: s.id,
        turn: None,
        call_id: "c1".into(),
        tool: "Shell".into(),
        fingerprint: what.into(),
        summary: format!("run {what}"),
        reason: "pipes a download into a shell".into(),
        action: json!({"command": what}),
        ttl_ms,
        max_pending: 10,
    };
    let r = store
        .write(vec![Mutation::RequestApproval(Box::new(new))])
        .await
        .unwrap();
    match r.into_iter().next() {
        Some(MutationResult::ApprovalRequested(o)) => match *o {
            ApprovalRequestOutcome::Created(a) => a.id,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
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

async fn owner_of(store: &Store, id: ApprovalId) -> String {
    store.approval(id).await.unwrap().unwrap().owner.to_string()
}

/// fleet.toml gives bot `p` to bob. The approvals pending in its own
/// sessions and in its subagent's are bob's to decide; alice cannot. A
/// person's DM keeps its approvals with that person; approvals decided or
/// expired stay as they were; the subagent's record and sessions are
/// bob's; another bot's subagent is not touched. (Before, the approvals
/// and the subagents stayed with alice.)
#[tokio::test]
async fn a_new_owner_takes_the_pending_approvals_and_the_subagents_along() {
    let dir = tempfile::tempdir().unwrap();
    let (store, clock) = clocked_store(dir.path());
    let work = session("p", SessionKind::Agent, "b", "alice");
    let alices_dm = session("p", SessionKind::Dm, "alice", "alice");
    let carols_dm = session("p", SessionKind::Dm, "carol", "carol");
    let child_task = session("p.sub-1", SessionKind::Subagent, "p", "alice");
    let others_task = session("b.sub-1", SessionKind::Subagent, "b", "alice");
    // a task of p's own work (a task from alice's DM is hers, and its
    // approvals expire with the change: `approvals_owner_tests.rs`)
    let nightly = session("p", SessionKind::Routine, "nightly", "alice");
    let mut batch = vec![
        Mutation::UpsertBot(bot("p", "alice", "config")),
        Mutation::UpsertBot(bot("b", "alice", "config")),
        Mutation::UpsertBot(bot("p.sub-1", "alice", "subagent:p")),
        Mutation::UpsertBot(bot("b.sub-1", "alice", "subagent:b")),
        Mutation::CreateSubagent(subagent("p.sub-1", &nightly)),
    ];
    for s in [
        &work,
        &alices_dm,
        &carols_dm,
        &child_task,
        &others_task,
        &nightly,
    ] {
        batch.push(Mutation::EnsureSession(s.clone()));
    }
    let others_dm = session("b", SessionKind::Dm, "alice", "alice");
    batch.push(Mutation::EnsureSession(others_dm.clone()));
    batch.push(Mutation::CreateSubagent(subagent("b.sub-1", &others_dm)));
    store.write(batch).await.unwrap();

    const TTL: i64 = 600_000;
    let approved = ask(&store, &work, "approved", TTL).await;
    decide(&store, approved, ApprovalDecision::Approve, "alice")
        .await
        .unwrap();
    let denied = ask(&store, &work, "denied", TTL).await;
    decide(&store, denied, ApprovalDecision::Deny, "alice")
        .await
        .unwrap();
    let lapsed = ask(&store, &work, "lapsed", 1).await;
    clock.advance_ms(1);
    let pending = ask(&store, &work, "pending", TTL).await;
    let in_alices_dm = ask(&store, &alices_dm, "alices", TTL).await;
    let in_carols_dm = ask(&store, &carols_dm, "carols", TTL).await;
    let childs = ask(&store, &child_task, "childs", TTL).await;
    let others_childs = ask(&store, &others_task, "others", TTL).await;

    store
        .write(vec![Mutation::UpsertBot(bot("p", "bob", "config"))])
        .await
        .unwrap();

    let mut owners = Vec::new();
    for (what, id) in [
        ("pending", pending),
        ("subagent's", childs),
        ("alice's DM", in_alices_dm),
        ("carol's DM", in_carols_dm),
        ("approved", approved),
        ("denied", denied),
        ("lapsed", lapsed),
        ("another bot's subagent's", others_childs),
    ] {
        owners.push((what, owner_of(&store, id).await));
    }
    let expected = [
        ("pending", "bob"),
        ("subagent's", "bob"),
        ("alice's DM", "alice"),
        ("carol's DM", "carol"),
        ("approved", "alice"),
        ("denied", "alice"),
        ("lapsed", "alice"),
        ("another bot's subagent's", "alice"),
    ]
    .map(|(w, o)| (w, o.to_owned()));
    assert_eq!(owners, expected);
    let bobs: Vec<ApprovalId> = store
        .approvals_of_owner(&UserId::new("bob").unwrap(), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(bobs, vec![pending, childs]);

    // the subagent is bob's: its record and its task session
    let child = store
        .get_bot(&BotId::new("p.sub-1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(child.owner.as_str(), "bob");
    let task = store.get_session(child_task.id).await.unwrap().unwrap();
    assert_eq!(task.owner.as_str(), "bob");
    let other = store
        .get_bot(&BotId::new("b.sub-1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.owner.as_str(), "alice");

    // bob decides what was alice's; alice no longer can
    let refused = decide(&store, childs, ApprovalDecision::Deny, "alice").await;
    assert!(
        matches!(
            refused,
            Err(crate::StoreError::NotFound {
                what: "approval",
                ..
            })
        ),
        "{refused:?}"
    );
    decide(&store, childs, ApprovalDecision::Approve, "bob")
        .await
        .unwrap();
    decide(&store, pending, ApprovalDecision::Deny, "bob")
        .await
        .unwrap();
    store.close().await;
}

fn room(id: &str, members: &[&str], shared: bool) -> RoomRecord {
    RoomRecord {
        id: RoomId::new(id).unwrap(),
        name: id.into(),
        owner: UserId::new("alice").unwrap(),
        members: members.iter().map(|m| BotId::new(*m).unwrap()).collect(),
        shared,
        created_at: 0,
        updated_at: 0,
        closed_at: None,
    }
}

/// Each room's `shared` and `updated_at`, by id.
async fn sharing(store: &Store, ids: &[&str]) -> Vec<(String, bool, i64)> {
    let mut out = Vec::new();
    for id in ids {
        let r = store
            .get_room(&RoomId::new(*id).unwrap())
            .await
            .unwrap()
            .unwrap();
        out.push((id.to_string(), r.shared, r.updated_at));
    }
    out
}

/// A room is shared while its members belong to more than one user:
/// giving a member (or the bot whose subagent is a member) to another
/// owner makes its rooms shared, giving it back makes them the owner's
/// alone again, rooms it is not in are not touched, and a room left
/// unshared by an owner change made before this rule is repaired at the
/// member's next upsert. (Before, `shared` was fixed at creation: a
/// member given to bob ran in alice's room with its private connectors
/// and searched bob's DMs into her timeline.)
#[tokio::test]
async fn a_rooms_sharing_follows_its_members_owners() {
    let dir = tempfile::tempdir().unwrap();
    let (store, clock) = clocked_store(dir.path());
    let dm = session("p", SessionKind::Dm, "alice", "alice");
    // a room's record carries its times (the API's clock)
    let room = |id: &str, members: &[&str], shared| RoomRecord {
        created_at: clock.now_ms(),
        updated_at: clock.now_ms(),
        ..room(id, members, shared)
    };
    store
        .write(vec![
            Mutation::UpsertBot(bot("p", "alice", "config")),
            Mutation::UpsertBot(bot("b", "alice", "config")),
            Mutation::UpsertBot(bot("c", "alice", "config")),
            Mutation::UpsertBot(bot("q", "bob", "config")),
            Mutation::UpsertBot(bot("p.sub-1", "alice", "subagent:p")),
            Mutation::EnsureSession(dm.clone()),
            Mutation::CreateSubagent(subagent("p.sub-1", &dm)),
            Mutation::CreateRoom(Box::new(room("mine", &["b", "p"], false))),
            Mutation::CreateRoom(Box::new(room("others", &["b", "c"], false))),
            Mutation::CreateRoom(Box::new(room("mixed", &["b", "q"], true))),
            Mutation::CreateRoom(Box::new(room("tasks", &["b", "p.sub-1"], false))),
            // as an owner change made before this rule left it
            Mutation::CreateRoom(Box::new(room("stale", &["c", "q"], false))),
        ])
        .await
        .unwrap();
    let ids = ["mine", "others", "mixed", "tasks", "stale"];
    let t0 = clock.now_ms();
    let row = |id: &str, shared, at| (id.to_owned(), shared, at);

    clock.advance_ms(10);
    let t1 = clock.now_ms();
    store
        .write(vec![Mutation::UpsertBot(bot("p", "bob", "config"))])
        .await
        .unwrap();
    assert_eq!(
        sharing(&store, &ids).await,
        vec![
            row("mine", true, t1),
            row("others", false, t0),
            row("mixed", true, t0),
            // p's subagent went to bob with p
            row("tasks", true, t1),
            row("stale", false, t0),
        ]
    );

    clock.advance_ms(10);
    let t2 = clock.now_ms();
    // q's owner does not change: its rooms are set right anyway
    store
        .write(vec![Mutation::UpsertBot(bot("q", "bob", "config"))])
        .await
        .unwrap();
    assert_eq!(
        sharing(&store, &ids).await,
        vec![
            row("mine", true, t1),
            row("others", false, t0),
            row("mixed", true, t0),
            row("tasks", true, t1),
            row("stale", true, t2),
        ]
    );

    clock.advance_ms(10);
    let t3 = clock.now_ms();
    store
        .write(vec![
            Mutation::UpsertBot(bot("p", "alice", "config")),
            Mutation::UpsertBot(bot("q", "alice", "config")),
        ])
        .await
        .unwrap();
    assert_eq!(
        sharing(&store, &ids).await,
        vec![
            row("mine", false, t3),
            row("others", false, t0),
            row("mixed", false, t3),
            row("tasks", false, t3),
            row("stale", false, t3),
        ]
    );
    // the readers follow: no shared room is left to list to bob
    let bobs: Vec<String> = store
        .rooms_for(&UserId::new("bob").unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(bobs, Vec::<String>::new());
    store.close().await;
}

/// A subagent's approval of a task from alice's DM expires (`owner_changed`)
/// when fleet.toml gives `p` to bob, and the expiry is stored (a listing
/// wrote it); given back, the approval goes back to alice with the task
/// session, and bob, who no longer owns `p`, has it no more (review: it
/// stayed bob's, who read alice's command, and alice got `404`).
#[tokio::test]
async fn an_approval_an_owner_change_expired_follows_its_session_back() {
    let dir = tempfile::tempdir().unwrap();
    let (store, clock) = clocked_store(dir.path());
    let alices_dm = session("p", SessionKind::Dm, "alice", "alice");
    let task = session("p.sub-1", SessionKind::Subagent, "p", "alice");
    store
        .write(vec![
            Mutation::UpsertBot(bot("p", "alice", "config")),
            Mutation::UpsertBot(bot("p.sub-1", "alice", "subagent:p")),
            Mutation::EnsureSession(alices_dm.clone()),
            Mutation::EnsureSession(task.clone()),
            Mutation::CreateSubagent(subagent("p.sub-1", &alices_dm)),
        ])
        .await
        .unwrap();
    // one whose TTL runs out before the change lapsed with alice, and
    // stays hers through every change (review: written `owner_changed`,
    // it followed the session to each later owner)
    let lapsed = ask(&store, &task, "lapsed-before", 1_000).await;
    let asked = ask(&store, &task, "alices-private-path", 600_000).await;
    // (nothing writes its expiry before the change: the host was down)
    clock.advance_ms(1_000);
    store
        .write(vec![Mutation::UpsertBot(bot("p", "bob", "config"))])
        .await
        .unwrap();
    store
        .write(vec![Mutation::ExpireApprovals { bot: None }])
        .await
        .unwrap();
    let stored = store.approval(asked).await.unwrap().unwrap();
    assert_eq!(
        (stored.owner.as_str(), stored.status, stored.expired_by),
        (
            "bob",
            crate::record::ApprovalStatus::Expired,
            Some(crate::record::ExpiryCause::OwnerChanged)
        )
    );
    store
        .write(vec![Mutation::UpsertBot(bot("p", "alice", "config"))])
        .await
        .unwrap();
    assert_eq!(owner_of(&store, asked).await, "alice");
    let bobs = store
        .approvals_of_owner(&UserId::new("bob").unwrap(), 100)
        .await
        .unwrap();
    assert!(bobs.is_empty(), "{bobs:?}");
    store
        .write(vec![Mutation::UpsertBot(bot("p", "bob", "config"))])
        .await
        .unwrap();
    let lapsed = store.approval(lapsed).await.unwrap().unwrap();
    assert_eq!(
        (lapsed.owner.as_str(), lapsed.expired_by),
        ("alice", Some(crate::record::ExpiryCause::Ttl))
    );
    store.close().await;
}
