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

/// Remember in a shared room of a text the bot already holds in private
/// writes the room its own item: "already remembered" would tell the
/// room's people what the private memory holds, and the room would never
/// see the fact. The reverse (a private write of a room's text) is a twin:
/// private turns see the room's items.
#[tokio::test]
async fn a_room_write_is_not_a_twin_of_a_private_item() {
    let f = fixture();
    let scope = MemoryScope::Agent(BotId::new("b1").unwrap());
    let add = |seed: &str, text: &str, source: &str| NewMemory {
        id: MemoryId::derive(seed),
        scope: scope.clone(),
        layer: Layer::Profile,
        text: text.into(),
        importance: Importance::NORMAL,
        expires_at: None,
        source: source.into(),
    };
    let private = f
        .add(add("p", "Alice has a peanut allergy", "tool:b1"))
        .await;
    assert!(matches!(private, MemoryOpResult::Added(_)), "{private:?}");
    let in_room = f
        .add(add("r", "alice has a PEANUT allergy", "tool:b1@room:r"))
        .await;
    let MemoryOpResult::Added(item) = in_room else {
        panic!("a room write must not find the private twin: {in_room:?}");
    };
    assert_eq!(item.source, "tool:b1@room:r");
    let again = f
        .add(add("r2", "Alice has a peanut allergy", "tool:b1@room:r"))
        .await;
    assert!(
        matches!(&again, MemoryOpResult::Unchanged(i) if i.id == item.id),
        "the room's own twin counts: {again:?}"
    );
    let other_room = f
        .add(add("s", "Alice has a peanut allergy", "tool:b1@room:s"))
        .await;
    assert!(
        matches!(other_room, MemoryOpResult::Added(_)),
        "{other_room:?}"
    );
    let private_again = f
        .add(add("p2", "Alice has a peanut allergy", "tool:b1"))
        .await;
    assert!(
        matches!(private_again, MemoryOpResult::Unchanged(_)),
        "{private_again:?}"
    );
}
