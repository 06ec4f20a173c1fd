//! Fact extraction's log entries roll through a full log: each takes the
//! place of the least important, oldest entry when that one is not more
//! important; a bot's own Remember is still refused with entries to
//! forget, and no other layer rolls.

use pretty_assertions::assert_eq;

use super::test_fixture::Fixture;
use super::test_fixture::fixture;
use super::*;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::store::Mutation;

fn scope() -> MemoryScope {
    MemoryScope::Agent(BotId::new("a1").unwrap())
}

fn entry(seed: &str, layer: Layer, text: &str, importance: u8) -> NewMemory {
    NewMemory {
        id: MemoryId::derive(seed),
        scope: scope(),
        layer,
        text: text.into(),
        importance: Importance::new(importance).unwrap(),
        expires_at: None,
        source: "extract:a1".into(),
    }
}

async fn running_turn(f: &Fixture) -> TurnId {
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

/// A log of `MAX_LOG_ENTRIES` entries written a minute apart, the 501st
/// (`log500`) of importance 2, the others 3; `log0` is the oldest.
async fn full_log(f: &Fixture) {
    for i in 0..MAX_LOG_ENTRIES {
        let importance = if i == 500 { 2 } else { 3 };
        let new = entry(
            &format!("log{i}"),
            Layer::Log,
            &format!("did thing {i}"),
            importance,
        );
        f.store
            .write(vec![Mutation::Memory(Box::new(MemoryOp::Add(new)))])
            .await
            .unwrap();
        f.clock.advance_ms(60_000);
    }
}

async fn log_ids(f: &Fixture) -> Vec<MemoryId> {
    f.store
        .memory_items(vec![scope()], f.now())
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.layer == Layer::Log)
        .map(|i| i.id)
        .collect()
}

#[tokio::test]
async fn an_extracted_entry_takes_the_place_of_the_least_important_oldest() {
    let f = fixture();
    full_log(&f).await;
    let turn = running_turn(&f).await;
    let new = entry("x1", Layer::Log, "vendor meeting moved to Thursday", 3);
    let r = f
        .hub
        .apply(MemoryOp::AddExtracted { new, turn })
        .await
        .unwrap();
    assert!(
        matches!(&r, MemoryOpResult::Added(i) if i.id == MemoryId::derive("x1")),
        "{r:?}"
    );
    let ids = log_ids(&f).await;
    assert_eq!(ids.len(), MAX_LOG_ENTRIES);
    assert!(
        !ids.contains(&MemoryId::derive("log500")),
        "the least important went first"
    );
    assert!(ids.contains(&MemoryId::derive("log0")));

    // then the oldest of the most common importance
    let new = entry("x2", Layer::Log, "shipment 7 arrived", 3);
    let r = f
        .hub
        .apply(MemoryOp::AddExtracted { new, turn })
        .await
        .unwrap();
    assert!(matches!(r, MemoryOpResult::Added(_)), "{r:?}");
    let ids = log_ids(&f).await;
    assert_eq!(ids.len(), MAX_LOG_ENTRIES);
    assert!(
        !ids.contains(&MemoryId::derive("log0")),
        "the oldest went next"
    );
    assert!(ids.contains(&MemoryId::derive("log1")));
}

#[tokio::test]
async fn a_less_important_entry_does_not_push_out_a_more_important_one() {
    let f = fixture();
    full_log(&f).await;
    let turn = running_turn(&f).await;
    let new = entry("x1", Layer::Log, "saw a cloud", 1);
    let r = f
        .hub
        .apply(MemoryOp::AddExtracted { new, turn })
        .await
        .unwrap();
    assert!(
        matches!(&r, MemoryOpResult::Refused(MemoryRefusal::LogFull { .. })),
        "{r:?}"
    );
    assert_eq!(log_ids(&f).await.len(), MAX_LOG_ENTRIES);
}

#[tokio::test]
async fn a_bots_own_remember_into_a_full_log_is_still_refused() {
    let f = fixture();
    full_log(&f).await;
    let r = f
        .add(entry("x1", Layer::Log, "vendor meeting moved", 5))
        .await;
    assert!(
        matches!(&r, MemoryOpResult::Refused(MemoryRefusal::LogFull { .. })),
        "{r:?}"
    );
    assert!(log_ids(&f).await.contains(&MemoryId::derive("log500")));
}

#[tokio::test]
async fn a_full_profile_does_not_roll() {
    let f = fixture();
    for i in 0..MAX_PROFILE_FACTS {
        let r = f
            .add(entry(
                &format!("p{i}"),
                Layer::Profile,
                &format!("fact {i}"),
                1,
            ))
            .await;
        assert!(matches!(r, MemoryOpResult::Added(_)), "{r:?}");
    }
    let turn = running_turn(&f).await;
    let new = entry("x1", Layer::Profile, "allergic to penicillin", 5);
    let r = f
        .hub
        .apply(MemoryOp::AddExtracted { new, turn })
        .await
        .unwrap();
    assert!(
        matches!(
            &r,
            MemoryOpResult::Refused(MemoryRefusal::ProfileFull { .. })
        ),
        "{r:?}"
    );
}
