//! A Forget wins over an extraction's add of a turn that started before
//! it; a turn that started after it may remember the fact again; marks
//! are pruned once no extraction can predate them.

use MemoryOpResult::Added;
use pretty_assertions::assert_eq;

use super::super::test_fixture::Fixture;
use super::super::test_fixture::fixture;
use super::super::*;
use super::MIN_KEEP_MS;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::store::Mutation;

fn alice() -> MemoryScope {
    MemoryScope::User(UserId::new("alice").unwrap())
}

fn fact(seed: &str, text: &str) -> NewMemory {
    NewMemory {
        id: MemoryId::derive(seed),
        scope: alice(),
        layer: Layer::Profile,
        text: text.into(),
        importance: Importance::NORMAL,
        expires_at: None,
        source: "extract:a1".into(),
    }
}

/// A turn of a1 that starts now (running until the test ends it).
async fn start_turn(f: &Fixture) -> TurnId {
    let turn = TurnId::new_v7();
    f.store
        .write(vec![Mutation::StartTurn {
            turn,
            bot: BotId::new("a1").unwrap(),
            session: SessionId::new_v7(),
            inputs: Vec::new(),
            checkpoint: serde_json::json!({}),
            started_at: f.now(),
        }])
        .await
        .unwrap();
    turn
}

async fn apply(f: &Fixture, op: MemoryOp) -> MemoryOpResult {
    f.hub.apply(op).await.unwrap()
}

/// An extraction's add of `new` for `turn`, as the writer answers it.
async fn add_extracted(f: &Fixture, new: NewMemory, turn: TurnId) -> MemoryOpResult {
    apply(f, MemoryOp::AddExtracted { new, turn }).await
}

async fn forget_matching(f: &Fixture, needle: &str) {
    let op = MemoryOp::ForgetMatching {
        scope: alice(),
        needle: needle.into(),
    };
    assert_eq!(apply(f, op).await, MemoryOpResult::Purged(0));
}

fn marks(f: &Fixture) -> Vec<(Option<String>, Option<String>)> {
    let conn = rusqlite::Connection::open(f.store.path()).unwrap();
    let mut stmt = conn
        .prepare("SELECT needle, text_hash FROM memory_forget_marks ORDER BY forgotten_at")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn added(r: &MemoryOpResult) -> bool {
    matches!(r, MemoryOpResult::Added(_))
}

#[tokio::test]
async fn a_forget_by_text_drops_the_add_of_a_turn_that_started_before_it() {
    let f = fixture();
    let said = start_turn(&f).await;
    f.clock.advance_ms(1_500);
    forget_matching(&f, "ZED").await;
    f.clock.advance_ms(8_000);
    let new = fact("t1", "Dog is called Zed");
    let r = add_extracted(&f, new.clone(), said).await;
    assert_eq!(r, MemoryOpResult::AlreadyForgotten(new.id));
    // another fact of the same turn is not covered
    let other = add_extracted(&f, fact("t1b", "Likes tea"), said).await;
    assert!(added(&other));
    // said again after the Forget: remembered
    let later = start_turn(&f).await;
    let again = add_extracted(&f, fact("t2", "Dog is called Zed"), later).await;
    assert!(added(&again));
    // a plain add (Remember, the API) is not checked
    assert!(added(&f.add(fact("r", "Zed the second")).await));
}

#[tokio::test]
async fn a_forget_by_id_drops_the_same_text_and_keeps_only_its_hash() {
    let f = fixture();
    let said = start_turn(&f).await;
    let Added(item) = f.add(fact("remember", "Dog is called Zed")).await else {
        panic!("not added");
    };
    f.clock.advance_ms(10);
    let removed = apply(
        &f,
        MemoryOp::Remove {
            id: item.id.clone(),
            scope: alice(),
        },
    )
    .await;
    assert!(matches!(removed, MemoryOpResult::Removed(_)));
    // the extraction proposes the same fact, in other case and spacing
    let new = fact("t1", "dog  is called ZED");
    let r = add_extracted(&f, new.clone(), said).await;
    assert_eq!(r, MemoryOpResult::AlreadyForgotten(new.id));
    let m = marks(&f);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].0, None);
    let hash = m[0].1.clone().unwrap();
    assert!(!hash.to_lowercase().contains("zed"), "{hash}");
}

#[tokio::test]
async fn an_extraction_run_again_does_not_bring_back_its_forgotten_add() {
    let f = fixture();
    // a turn the store does not know: only its ids are checked
    let turn = TurnId::new_v7();
    let new = fact("t1", "Dog is called Zed");
    let op = MemoryOp::AddExtracted {
        new: new.clone(),
        turn,
    };
    assert!(added(&apply(&f, op.clone()).await));
    let forget = MemoryOp::Remove {
        id: new.id.clone(),
        scope: alice(),
    };
    assert!(matches!(
        apply(&f, forget).await,
        MemoryOpResult::Removed(_)
    ));
    assert_eq!(
        apply(&f, op).await,
        MemoryOpResult::AlreadyForgotten(new.id)
    );
}

#[tokio::test]
async fn marks_go_once_no_extraction_can_predate_them() {
    let f = fixture();
    forget_matching(&f, "first").await;
    f.clock.advance_ms(MIN_KEEP_MS + 1);
    // no turn is running or owed: the first mark goes, the new one stays
    forget_matching(&f, "second").await;
    assert_eq!(marks(&f), [(Some("second".into()), None)]);
    // a running turn keeps what came after its start, however old
    f.clock.advance_ms(1);
    let running = start_turn(&f).await;
    f.clock.advance_ms(1);
    forget_matching(&f, "third").await;
    f.clock.advance_ms(3 * MIN_KEEP_MS);
    forget_matching(&f, "fourth").await;
    assert_eq!(
        marks(&f),
        [(Some("third".into()), None), (Some("fourth".into()), None)]
    );
    let r = add_extracted(&f, fact("x", "The third of May"), running).await;
    assert!(matches!(r, MemoryOpResult::AlreadyForgotten(_)), "{r:?}");
}

#[tokio::test]
async fn a_change_after_the_turn_ended_wins_over_its_extractions_replace_and_remove() {
    let f = fixture();
    let Added(rex) = f.add(fact("rex", "Dog is called Rex")).await else {
        panic!("not added");
    };
    let Added(tea) = f.add(fact("tea", "Likes tea")).await else {
        panic!("not added");
    };
    let said = start_turn(&f).await;
    f.clock.advance_ms(10);
    f.store
        .write(vec![Mutation::EndTurn {
            turn: said,
            status: crate::record::TurnStatus::Completed,
            error: None,
        }])
        .await
        .unwrap();
    // a later turn changes the fact before the earlier extraction lands
    f.clock.advance_ms(10);
    let newer = MemoryOp::Replace {
        id: rex.id.clone(),
        scope: alice(),
        text: "Dog is called Max".into(),
        importance: None,
        source: "extract:a1".into(),
    };
    assert!(matches!(
        apply(&f, newer).await,
        MemoryOpResult::Replaced { .. }
    ));
    f.clock.advance_ms(10);
    let change = |id: &MemoryId, text: &str, remove: bool| MemoryOp::ChangeExtracted {
        id: id.clone(),
        scope: alice(),
        text: text.into(),
        importance: None,
        source: "extract:a1".into(),
        remove,
        turn: said,
    };
    for remove in [false, true] {
        match apply(&f, change(&rex.id, "Dog is called Zed", remove)).await {
            MemoryOpResult::Unchanged(item) => assert_eq!(item.text, "Dog is called Max"),
            other => panic!("the newer fact was overwritten: {other:?}"),
        }
    }
    // an item unchanged since the turn ended is changed
    let r = apply(&f, change(&tea.id, "Likes green tea", false)).await;
    assert!(matches!(r, MemoryOpResult::Replaced { .. }), "{r:?}");
}

/// A replace whose text another item of the scope and layer holds would
/// keep one fact twice (QA, round 32: a Remember with `replaces` and an
/// extraction's replace both made exact twins). A bot's replace is
/// refused naming the twin; an extraction's drops the outdated item.
#[tokio::test]
async fn a_replace_never_makes_a_twin_of_another_item() {
    let f = fixture();
    let Added(cafe) = f.add(fact("cafe", "Café in Zürich")).await else {
        panic!("not added");
    };
    let Added(old) = f.add(fact("old", "Budget 12k")).await else {
        panic!("not added");
    };
    let replace = MemoryOp::Replace {
        id: old.id.clone(),
        scope: alice(),
        text: "  cafe in zurich ".into(),
        importance: None,
        source: "tool:a1".into(),
    };
    let r = apply(&f, replace).await;
    let MemoryOpResult::Refused(refusal) = &r else {
        panic!("{r:?}")
    };
    assert_eq!(
        refusal,
        &MemoryRefusal::Twin {
            twin: cafe.id.clone(),
            replaced: old.id.clone(),
            scope: alice(),
            layer: Layer::Profile,
        }
    );
    assert!(refusal.to_string().contains(cafe.id.as_str()), "{refusal}");
    // replacing an item with its own text in other words is no twin
    let own = MemoryOp::Replace {
        id: cafe.id.clone(),
        scope: alice(),
        text: "CAFÉ in Zürich".into(),
        importance: None,
        source: "tool:a1".into(),
    };
    let r = apply(&f, own).await;
    assert!(matches!(r, MemoryOpResult::Replaced { .. }), "{r:?}");
    // an extraction that finds `old` outdated by a fact already kept
    // removes it, and the kept fact is as important as the extraction
    // said (QA: it kept its own, lower importance)
    let said = start_turn(&f).await;
    let change = MemoryOp::ChangeExtracted {
        id: old.id.clone(),
        scope: alice(),
        text: "cafe in zurich".into(),
        importance: Some(Importance::new(5).unwrap()),
        source: "extract:a1".into(),
        remove: false,
        turn: said,
    };
    let r = apply(&f, change).await;
    assert!(
        matches!(&r, MemoryOpResult::Removed(item) if item.id == old.id),
        "{r:?}"
    );
    let snap = f
        .snapshot(&super::super::test_fixture::bot("a1", "alice", &[]), "")
        .await;
    let texts: Vec<&str> = snap.profile.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(texts, ["CAFÉ in Zürich"]);
    assert_eq!(snap.profile[0].importance.get(), 5);
}
