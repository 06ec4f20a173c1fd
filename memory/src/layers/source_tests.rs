//! `Store::memory_snapshot_of_source`: a snapshot of what one writer wrote
//! in one scope (a bot's turn in a room shared with other people's bots).

use pretty_assertions::assert_eq;

use super::test_fixture::fixture;
use super::*;
use crate::ids::BotId;

const HOUR: i64 = 3_600_000;

fn texts(items: &[MemoryItem]) -> Vec<&str> {
    items.iter().map(|i| i.text.as_str()).collect()
}

#[tokio::test]
async fn a_snapshot_of_one_source_shows_only_its_items() {
    let f = fixture();
    let scope = MemoryScope::Agent(BotId::new("b1").unwrap());
    let now = f.now();
    let items = [
        ("p1", Layer::Profile, "Room fact", "tool:b1@room:r"),
        ("p2", Layer::Profile, "Private fact", "tool:b1"),
        (
            "l1",
            Layer::Log,
            "Room log about the deploy",
            "tool:b1@room:r",
        ),
        ("l2", Layer::Log, "Private log about the deploy", "tool:b1"),
        (
            "l3",
            Layer::Log,
            "Other room's deploy log",
            "tool:b1@room:s",
        ),
        ("l4", Layer::Log, "Extracted deploy log", "extract:b1"),
        ("n1", Layer::Notes, "Room note", "tool:b1@room:r"),
        (
            "n2",
            Layer::Notes,
            "Room note that expires",
            "tool:b1@room:r",
        ),
        ("n3", Layer::Notes, "Private note", "tool:b1"),
    ];
    for (seed, layer, text, source) in items {
        let expires_at = match (layer, seed) {
            (Layer::Notes, "n2") => Some(now + HOUR),
            (Layer::Notes, _) => Some(now + 10 * HOUR),
            (Layer::Profile | Layer::Log, _) => None,
        };
        let r = f
            .add(NewMemory {
                id: MemoryId::derive(seed),
                scope: scope.clone(),
                layer,
                text: text.into(),
                importance: Importance::NORMAL,
                expires_at,
                source: source.into(),
            })
            .await;
        assert!(matches!(r, MemoryOpResult::Added(_)), "{r:?}");
    }
    f.clock.advance_ms(2 * HOUR);
    let s = f
        .store
        .memory_snapshot_of_source(
            scope.clone(),
            "tool:b1@room:r".into(),
            "deploy".into(),
            f.now(),
            RecallParams::default(),
        )
        .await
        .unwrap();
    assert_eq!(texts(&s.profile), vec!["Room fact"]);
    assert_eq!(texts(&s.log), vec!["Room log about the deploy"]);
    assert_eq!(
        texts(&s.notes),
        vec!["Room note"],
        "the expired note is gone"
    );
    assert_eq!(s.scopes, vec![scope.clone()]);
    assert!(s.ranking[0].relevance > 0.0, "ranked for the input");
    // the cap holds among the source's own entries
    let capped = f
        .store
        .memory_snapshot_of_source(
            scope,
            "tool:b1".into(),
            String::new(),
            f.now(),
            RecallParams {
                cap: 0,
                ..RecallParams::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(texts(&capped.profile), vec!["Private fact"]);
    assert!(capped.log.is_empty(), "{:?}", capped.log);
}
