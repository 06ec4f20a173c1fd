use botfleet_memory::Encoding;
use botfleet_memory::Importance;
use botfleet_memory::Layer;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryOp;
use botfleet_memory::MemoryOpResult;
use botfleet_memory::MemoryScope;
use botfleet_memory::MemorySnapshot;
use botfleet_memory::NewMemory;

use super::*;
use crate::tools::test_support::ToolFixture;

async fn add(f: &ToolFixture, seed: &str, layer: Layer, importance: u8, text: &str) -> MemoryId {
    let id = MemoryId::derive(seed);
    let now = f.rt.store.clock().now_ms();
    let r =
        f.rt.memory
            .apply(MemoryOp::Add(NewMemory {
                id: id.clone(),
                scope: MemoryScope::Agent(f.bot.id.clone()),
                layer,
                text: text.into(),
                importance: Importance::new(importance).unwrap(),
                expires_at: (layer == Layer::Notes).then_some(now + 3_600_000),
                source: "test".into(),
            }))
            .await
            .unwrap();
    assert!(matches!(r, MemoryOpResult::Added(_)), "{r:?}");
    id
}

async fn snapshot(f: &ToolFixture) -> MemorySnapshot {
    let now = f.rt.store.clock().now_ms();
    f.rt.store
        .bot_memory_snapshot(&f.bot, "", now)
        .await
        .unwrap()
}

/// A long note of words the tokenizer does not merge.
fn long(i: usize) -> String {
    let words: Vec<String> = (0..100).map(|w| format!("n{i}w{w}")).collect();
    words.join(" ")
}

#[tokio::test]
async fn a_block_over_its_budget_keeps_the_most_important_items_and_counts_the_rest() {
    let f = ToolFixture::new();
    for i in 0..10 {
        add(&f, &format!("n{i}"), Layer::Notes, 3, &long(i)).await;
    }
    let key = add(
        &f,
        "key",
        Layer::Notes,
        5,
        "The deploy key rotates on Fridays",
    )
    .await;
    let snap = snapshot(&f).await;
    let encoding = Encoding::O200kBase;
    let whole = render_memory(&snap);
    assert!(u64::from(encoding.count(&whole)) > 1_000);

    let (text, shown) = render_memory_within(&snap, 1_000, encoding);
    assert!(u64::from(encoding.count(&text)) <= 1_000, "{text}");
    assert!(shown.contains(&key), "the important note goes in first");
    assert!(shown.len() < 11);
    assert!(
        text.contains(&format!("{} more remembered items", 11 - shown.len())),
        "{text}"
    );
    for id in &shown {
        assert!(text.contains(id.as_str()));
    }
    // a pure function of the snapshot
    assert_eq!(render_memory_within(&snap, 1_000, encoding).0, text);
    // what fits is the whole block, without a note
    let (all, ids) = render_memory_within(&snap, u64::MAX, encoding);
    assert_eq!(all, whole);
    assert_eq!(ids, snap.shown_ids());
}

#[tokio::test]
async fn an_update_holds_only_the_items_the_frozen_block_lacks() {
    let f = ToolFixture::new();
    add(&f, "a", Layer::Profile, 3, "Prefers tea").await;
    add(&f, "b", Layer::Notes, 3, "Meeting at noon").await;
    let encoding = Encoding::O200kBase;
    let (frozen, _) = render_memory_within(&snapshot(&f).await, 10_000, encoding);
    assert_eq!(render_memory_changes(&frozen, &frozen), None);

    add(&f, "c", Layer::Notes, 3, "The cat is called Miso").await;
    let (fresh, _) = render_memory_within(&snapshot(&f).await, 10_000, encoding);
    let update = render_memory_changes(&frozen, &fresh).unwrap();
    assert!(update.contains("Miso"), "{update}");
    assert!(!update.contains("Prefers tea"), "{update}");
    assert!(!update.contains("Meeting at noon"), "{update}");
    assert!(!update.contains("## Profile"), "{update}");
}

#[test]
fn the_memory_budget_is_an_eighth_of_the_threshold_with_a_floor() {
    assert_eq!(memory_budget(100_000), 12_500);
    assert_eq!(memory_budget(1_000), MIN_MEMORY_TOKENS);
}
