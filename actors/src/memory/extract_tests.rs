use botfleet_memory::Encoding;
use botfleet_memory::MemoryScope;

use super::*;
use crate::tools::test_support::ToolFixture;

/// 2026-12-02 10:00 UTC.
const DEC_2_10H: i64 = 1_796_205_600_000;

fn item(seed: &str, layer: Layer, text: &str, source: &str, updated_at: i64) -> MemoryItem {
    MemoryItem {
        id: MemoryId::derive(seed),
        scope: MemoryScope::User(botfleet_memory::UserId::new("u").unwrap()),
        layer,
        text: text.into(),
        importance: Importance::default(),
        source: source.into(),
        created_at: DEC_2_10H - 86_400_000,
        updated_at,
        expires_at: None,
    }
}

/// Regression (round 21, H4 F2): the extraction's "Shown memory" listed
/// items by id as `- m-… (user:alice profile) "Alice lives in Paris"`,
/// with no date: the extractor could not tell which of two facts that
/// disagree was the newer. Each item now has the UTC minute it was last
/// set (and the shared room it was remembered in), oldest first.
#[tokio::test]
async fn the_extractor_is_shown_each_item_with_the_minute_it_was_set_oldest_first() {
    let f = ToolFixture::new();
    let berlin = item(
        "berlin",
        Layer::Profile,
        "Alice lives in Berlin",
        "extract:b",
        DEC_2_10H + 5 * 60_000,
    );
    let paris = item(
        "paris",
        Layer::Profile,
        "Alice lives in Paris",
        "tool:b",
        DEC_2_10H,
    );
    let invoice = item(
        "invoice",
        Layer::Log,
        "Approved invoice 7731",
        "tool:b@room:mixed",
        DEC_2_10H + 60_000,
    );
    let bounds = ExtractBounds::of(100_000, Encoding::O200kBase);
    let texts = (&["I moved".to_owned()][..], "noted");
    let request = request(&f.bot, &[berlin, invoice, paris], texts, &bounds);
    let ChatMessage::User { content } = &request.messages[1] else {
        panic!("{request:?}");
    };
    let paris = format!(
        "- {} (user:u profile, set 2026-12-02 10:00 UTC) \"Alice lives in Paris\"",
        MemoryId::derive("paris")
    );
    let invoice = format!(
        "- {} (user:u log, set 2026-12-02 10:01 UTC, remembered in shared room mixed) \
         \"Approved invoice 7731\"",
        MemoryId::derive("invoice")
    );
    let berlin = format!(
        "- {} (user:u profile, set 2026-12-02 10:05 UTC) \"Alice lives in Berlin\"",
        MemoryId::derive("berlin")
    );
    let shown = format!("Shown memory (data):\n{paris}\n{invoice}\n{berlin}\n");
    assert!(content.contains(&shown), "{content}");
}
