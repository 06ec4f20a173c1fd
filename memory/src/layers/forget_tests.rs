//! Forgetting several items at once, for one tool call: all or none, and
//! the call's items can be found again.

use pretty_assertions::assert_eq;

use super::test_fixture::bot;
use super::test_fixture::fixture;
use super::*;
use crate::ids::UserId;

fn user(u: &str) -> MemoryScope {
    MemoryScope::User(UserId::new(u).unwrap())
}

fn fact(seed: &str, scope: &MemoryScope, text: &str) -> NewMemory {
    NewMemory {
        id: MemoryId::derive(seed),
        scope: scope.clone(),
        layer: Layer::Profile,
        text: text.into(),
        importance: Importance::NORMAL,
        expires_at: None,
        source: "test".into(),
    }
}

fn remove_by(item: &MemoryItem, call: &str) -> MemoryOp {
    MemoryOp::RemoveByCall {
        id: item.id.clone(),
        scope: item.scope.clone(),
        call: call.into(),
        text: item.text.clone(),
    }
}

#[tokio::test]
async fn a_failure_in_the_middle_forgets_nothing_and_the_call_is_recorded() {
    let f = fixture();
    let a = bot("a", "alice", &[]);
    let agent = MemoryScope::Agent(a.id.clone());
    for i in 0..20 {
        let scope = if i % 2 == 0 {
            user("alice")
        } else {
            agent.clone()
        };
        f.add(fact(&format!("c{i}"), &scope, &format!("crashme {i}")))
            .await;
    }
    let found = f
        .store
        .find_memory(bot_scopes(&a), "crashme", f.now())
        .await
        .unwrap();
    assert_eq!(found.len(), 20);
    assert_eq!(f.snapshot(&a, "").await.profile.len(), 20);
    // a fault at the 7th removal (a crash would be the same: nothing of
    // the transaction reaches the disk)
    let conn = rusqlite::Connection::open(f.store.path()).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn.execute_batch(&format!(
        "CREATE TRIGGER fault BEFORE INSERT ON memory_forgotten WHEN NEW.id = '{}'
         BEGIN SELECT RAISE(ABORT, 'injected fault'); END",
        found[6].id
    ))
    .unwrap();
    let ops: Vec<MemoryOp> = found.iter().map(|i| remove_by(i, "t/c1")).collect();
    let e = f.hub.apply_all(ops.clone()).await.unwrap_err();
    assert!(e.to_string().contains("injected fault"), "{e}");
    let left = f.store.memory_items(bot_scopes(&a), f.now()).await.unwrap();
    assert_eq!(left.len(), 20, "all or none");
    assert!(
        f.store
            .memory_forgotten_by("t/c1")
            .await
            .unwrap()
            .is_empty()
    );

    conn.execute_batch("DROP TRIGGER fault").unwrap();
    let results = f.hub.apply_all(ops.clone()).await.unwrap();
    assert!(
        results
            .iter()
            .all(|r| matches!(r, MemoryOpResult::Removed(_))),
        "{results:?}"
    );
    let left = f.store.memory_items(bot_scopes(&a), f.now()).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        f.snapshot(&a, "").await.is_empty(),
        "gone from the next prompt"
    );
    let mut expected: Vec<(MemoryId, MemoryScope)> = found
        .iter()
        .map(|i| (i.id.clone(), i.scope.clone()))
        .collect();
    expected.sort_by(|a, b| {
        (a.1.kind().as_str(), a.1.key(), &a.0).cmp(&(b.1.kind().as_str(), b.1.key(), &b.0))
    });
    assert_eq!(f.store.memory_forgotten_by("t/c1").await.unwrap(), expected);
    assert!(
        f.store
            .memory_forgotten_by("t/c2")
            .await
            .unwrap()
            .is_empty()
    );
    // applied again: every item answers "already forgotten", the record
    // keeps the call that forgot them
    let again = f.hub.apply_all(ops).await.unwrap();
    assert!(
        again
            .iter()
            .all(|r| matches!(r, MemoryOpResult::AlreadyForgotten(_))),
        "{again:?}"
    );
    assert_eq!(f.store.memory_forgotten_by("t/c1").await.unwrap(), expected);
}

/// Regression (round 22): a project fact bob's bot replaced between
/// alice's Forget by text reading it and its removal committing was
/// deleted with bob's new text, which alice's bot never read nor matched.
/// The removal now compares the text it read at commit, and keeps an item
/// replaced since.
#[tokio::test]
async fn a_removal_keeps_an_item_replaced_since_it_was_read() {
    let f = fixture();
    let a = bot("a", "alice", &["apollo"]);
    let apollo = MemoryScope::Project(crate::ids::ProjectId::new("apollo").unwrap());
    f.add(fact("launch", &apollo, "Apollo launch is on 2027-03-14"))
        .await;
    // alice's Forget reads what matches
    let found = f
        .store
        .find_memory(bot_scopes(&a), "Apollo launch", f.now())
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    // bob's bot replaces it before alice's removal commits
    const BOBS: &str = "Apollo launch moved to 2027-04-01 (Bob)";
    let replaced = f
        .hub
        .apply(MemoryOp::Replace {
            id: found[0].id.clone(),
            scope: apollo.clone(),
            text: BOBS.into(),
            importance: None,
            source: "tool:b1".into(),
        })
        .await
        .unwrap();
    assert!(
        matches!(replaced, MemoryOpResult::Replaced { .. }),
        "{replaced:?}"
    );
    let results = f
        .hub
        .apply_all(vec![remove_by(&found[0], "t/c1")])
        .await
        .unwrap();
    assert!(
        matches!(&results[..], [MemoryOpResult::Unchanged(i)] if i.text == BOBS),
        "{results:?}"
    );
    let left = f.store.memory_items(bot_scopes(&a), f.now()).await.unwrap();
    assert_eq!(
        left.iter().map(|i| i.text.as_str()).collect::<Vec<_>>(),
        [BOBS],
        "bob's fact is kept"
    );
    assert!(
        f.store
            .memory_forgotten_by("t/c1")
            .await
            .unwrap()
            .is_empty()
    );
}
