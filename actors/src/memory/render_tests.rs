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
    // the items take the budget; the headings and the note come on top
    let lines: u64 = text
        .lines()
        .filter(|l| l.starts_with("- "))
        .map(|l| u64::from(encoding.count(l)) + 1)
        .sum();
    assert!(lines <= 1_000, "{text}");
    let fixed =
        encoding.count(&render_sections(&[], &[], &[], [0; 3])) + encoding.count(&left_out(11));
    assert!(
        u64::from(encoding.count(&text)) <= 1_000 + u64::from(fixed),
        "{text}"
    );
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

/// A Chinese profile fact of 36 characters (about one token each).
fn zh_fact(i: usize) -> String {
    format!("第{i}条：小明每周去健身房锻炼身体，喜欢跑步和游泳，周末和朋友爬山。")
}

/// The tokens of an item's line with its newline, as the budget counts it.
fn line_tokens(text: &str, id: &MemoryId, encoding: Encoding) -> u64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("- {id} ")))
        .unwrap_or_else(|| panic!("{id} is not shown: {text}"));
    u64::from(encoding.count(line)) + 1
}

/// Regression (round 20, H3): the headings and the left-out note (about
/// 240 tokens) were charged to the block's budget, whose floor is 256
/// tokens, so with a `compact_at_tokens` under about 2,000 no item fit
/// once the items did not all fit: the block was all headings, "(none)"
/// under each, and the model saw none of what was remembered. Now the
/// items have the whole budget and profile facts go in first.
#[tokio::test]
async fn a_small_budget_shows_the_items_that_fit_and_profile_facts_first() {
    let f = ToolFixture::new();
    let mut facts = Vec::new();
    for i in 1..=7 {
        facts.push(add(&f, &format!("p{i}"), Layer::Profile, 3, &zh_fact(i)).await);
    }
    let urgent = add(
        &f,
        "n",
        Layer::Notes,
        5,
        "明天上午十点和供应商开会，带上合同。",
    )
    .await;
    let snap = snapshot(&f).await;
    let encoding = Encoding::O200kBase;

    let (text, shown) = render_memory_within(&snap, MIN_MEMORY_TOKENS, encoding);
    assert!(!shown.is_empty(), "no item fits 256 tokens: {text}");
    assert!(shown.len() < 8, "{text}");
    assert!(
        shown.iter().all(|id| facts.contains(id)),
        "profile facts go in before a note of importance 5: {text}"
    );
    assert!(!shown.contains(&urgent));
    // as many facts as fit: none of those left out would
    let used: u64 = shown
        .iter()
        .map(|id| line_tokens(&text, id, encoding))
        .sum();
    assert!(used <= MIN_MEMORY_TOKENS, "{used} tokens: {text}");
    let whole = render_memory(&snap);
    for id in facts.iter().filter(|id| !shown.contains(id)) {
        let next = line_tokens(&whole, id, encoding);
        assert!(used + next > MIN_MEMORY_TOKENS, "{id} fits too: {text}");
    }
    assert!(text.ends_with(&left_out(8 - shown.len())), "{text}");
    for id in &shown {
        assert!(text.contains(id.as_str()), "{text}");
    }
}

/// A profile fact goes in before a more important note, within the
/// items' own budget: exactly the fact's line.
#[tokio::test]
async fn a_profile_fact_goes_in_before_a_more_important_note() {
    let f = ToolFixture::new();
    let fact = add(&f, "p", Layer::Profile, 1, &zh_fact(1)).await;
    add(&f, "n", Layer::Notes, 5, "开会").await;
    let snap = snapshot(&f).await;
    let encoding = Encoding::O200kBase;
    let budget = line_tokens(&render_memory(&snap), &fact, encoding);
    let (text, shown) = render_memory_within(&snap, budget, encoding);
    assert_eq!(shown, vec![fact], "{text}");
    assert!(text.ends_with(&left_out(1)), "{text}");
    // the notes section does not say there are none (QA, 2026-12-04);
    // the log, which has none, still does
    let notes = text.split("## Notes").nth(1).unwrap_or_default();
    assert!(!notes.contains("(none)"), "{text}");
    assert!(notes.contains("1 left out"), "{text}");
    let log = text.split("## Log").nth(1).unwrap_or_default();
    assert!(
        log.split("## Notes")
            .next()
            .unwrap_or_default()
            .contains("(none)"),
        "{text}"
    );
}

/// Regression (round 20, H3): an update held only item lines, so once
/// new items no longer fit, the turn got no update at all, not even the
/// note that items were left out. Now the fresh block's note goes in
/// when the frozen block does not end with the same one.
#[tokio::test]
async fn an_update_carries_the_left_out_note() {
    let f = ToolFixture::new();
    let encoding = Encoding::O200kBase;
    let a = add(&f, "a", Layer::Profile, 3, &zh_fact(1)).await;
    let b = add(&f, "b", Layer::Profile, 3, &zh_fact(2)).await;
    let snap = snapshot(&f).await;
    let whole = render_memory(&snap);
    let budget = line_tokens(&whole, &a, encoding) + line_tokens(&whole, &b, encoding);
    let (frozen, shown) = render_memory_within(&snap, budget, encoding);
    assert_eq!(shown.len(), 2, "{frozen}");
    assert!(!frozen.contains("more remembered items"), "{frozen}");

    // two less important facts that no longer fit: no item line is new
    add(&f, "c", Layer::Profile, 2, &zh_fact(3)).await;
    add(&f, "d", Layer::Profile, 2, &zh_fact(4)).await;
    let (fresh, shown) = render_memory_within(&snapshot(&f).await, budget, encoding);
    assert!(
        shown.len() == 2 && shown.contains(&a) && shown.contains(&b),
        "{fresh}"
    );
    let update = render_memory_changes(&frozen, &fresh).expect("no update");
    assert!(update.ends_with(&left_out(2)), "{update}");
    assert!(!update.contains(&zh_fact(1)), "{update}");
    // sent once: a frozen block ending with the same note needs none
    assert_eq!(render_memory_changes(&fresh, &fresh), None);

    assert!(is_left_out(&left_out(2)));
    assert!(is_left_out(&left_out(1234)));
    assert!(!is_left_out(&format!("{} 2", left_out(2))));
    assert!(!is_left_out("## Profile"));
}

#[test]
fn the_memory_budget_is_an_eighth_of_the_threshold_with_a_floor() {
    assert_eq!(memory_budget(100_000), 12_500);
    assert_eq!(memory_budget(1_000), MIN_MEMORY_TOKENS);
}

/// A profile fact of `scope` last set at `updated_at`, written by `source`.
fn fact(seed: &str, scope: MemoryScope, text: &str, source: &str, updated_at: i64) -> MemoryItem {
    MemoryItem {
        id: MemoryId::derive(seed),
        scope,
        layer: Layer::Profile,
        text: text.into(),
        importance: Importance::new(3).unwrap(),
        source: source.into(),
        created_at: updated_at,
        updated_at,
        expires_at: None,
    }
}

/// 2026-12-02 10:00 UTC.
const DEC_2_10H: i64 = 1_796_205_600_000;

/// A snapshot of these profile facts only, in the order given.
fn of_profile(profile: Vec<MemoryItem>) -> MemorySnapshot {
    MemorySnapshot {
        scopes: Vec::new(),
        profile,
        log: Vec::new(),
        notes: Vec::new(),
        ranking: Vec::new(),
        taken_at: DEC_2_10H + 3_600_000,
        hash: String::new(),
    }
}

/// Regression (round 21, H4 F2): "Alice lives in Paris" and, five minutes
/// later, "Alice lives in Berlin" both read `set 2026-12-02`, listed in
/// scope order (the bot's own scope first), so the newer fact could come
/// first and the prompt's rule "the later one is more likely true now"
/// could not be applied. Profile facts are now listed in the order they
/// were last set, as the heading says, whatever their scope.
#[tokio::test]
async fn profile_facts_are_listed_in_the_order_they_were_last_set() {
    let f = ToolFixture::new();
    let berlin = fact(
        "berlin",
        MemoryScope::Agent(f.bot.id.clone()),
        "Alice lives in Berlin",
        "tool:b",
        DEC_2_10H + 5 * 60_000,
    );
    let paris = fact(
        "paris",
        MemoryScope::User(f.bot.owner.clone()),
        "Alice lives in Paris",
        "tool:b",
        DEC_2_10H,
    );
    // the snapshot's order: by scope, the bot's own first
    let snap = of_profile(vec![berlin, paris]);
    for text in [
        render_memory(&snap),
        render_memory_within(&snap, u64::MAX, Encoding::O200kBase).0,
        render_memory_within(&snap, MIN_MEMORY_TOKENS, Encoding::O200kBase).0,
    ] {
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle}: {text}"))
        };
        assert!(at("lives in Paris") < at("lives in Berlin"), "{text}");
        assert!(
            text.contains("in the order they were last set, oldest first"),
            "{text}"
        );
        assert!(!text.contains("always shown"), "{text}");
        assert!(
            text.contains("(user:u, set 2026-12-02) \"Alice lives in Paris\""),
            "{text}"
        );
    }
}

/// Regression (round 21, H4 F11): what someone in a room shared with
/// other people's bots got the bot to remember read, in its owner's DM,
/// like anything else the bot remembers: `(agent:b, set …, importance 5)`.
/// Its line now names the room, and the heading says what that means.
#[tokio::test]
async fn an_item_remembered_in_a_shared_room_names_the_room() {
    let f = ToolFixture::new();
    let mut invoice = fact(
        "invoice",
        MemoryScope::Agent(f.bot.id.clone()),
        "Alice approved paying invoice 7731 to Bob Ltd in full",
        "tool:b@room:mixed",
        DEC_2_10H,
    );
    invoice.importance = Importance::new(5).unwrap();
    let own = fact(
        "own",
        MemoryScope::Agent(f.bot.id.clone()),
        "Invoices are paid on Mondays",
        "tool:b",
        DEC_2_10H,
    );
    let text = render_memory(&of_profile(vec![invoice, own]));
    assert!(
        text.contains(
            "(agent:b, set 2026-12-02, remembered in shared room mixed, importance 5) \
             \"Alice approved paying invoice 7731 to Bob Ltd in full\""
        ),
        "{text}"
    );
    assert!(
        text.contains("(agent:b, set 2026-12-02) \"Invoices are paid on Mondays\""),
        "{text}"
    );
    assert!(
        text.contains("anyone in that room may have told you"),
        "{text}"
    );
    assert_eq!(shared_room("tool:b@room:mixed"), Some("mixed"));
    assert_eq!(shared_room("tool:b"), None);
    assert_eq!(shared_room("extract:b"), None);
}

/// Regression (round 21, H4 F2, with F8's bound): of two profile facts of
/// the same importance, the bound kept the older ("Alice lives in Paris")
/// and left out the later correction ("Alice lives in Berlin"), so the
/// model saw only the stale fact. The last set now goes in first.
#[tokio::test]
async fn a_bound_keeps_the_later_of_two_facts_of_the_same_importance() {
    let f = ToolFixture::new();
    let owner = MemoryScope::User(f.bot.owner.clone());
    let paris = fact(
        "paris",
        owner.clone(),
        "Alice lives in Paris",
        "tool:b",
        DEC_2_10H,
    );
    let berlin = fact(
        "berlin",
        owner,
        "Alice lives in Berlin",
        "tool:b",
        DEC_2_10H + 5 * 60_000,
    );
    let encoding = Encoding::O200kBase;
    // the snapshot's order: oldest first
    let snap = of_profile(vec![paris.clone(), berlin.clone()]);
    // room for one of them, either one
    let whole = render_memory(&snap);
    let budget =
        line_tokens(&whole, &berlin.id, encoding).max(line_tokens(&whole, &paris.id, encoding));
    let (text, shown) = render_memory_within(&snap, budget, encoding);
    assert_eq!(shown, vec![berlin.id], "{text}");
    assert!(text.ends_with(&left_out(1)), "{text}");
}

/// The note of items left out speaks in its count's number: one item
/// read "1 more remembered items are not shown" (QA, 2026-12-05).
#[test]
fn the_left_out_note_is_in_its_counts_number() {
    let one = super::left_out(1);
    assert!(
        one.starts_with("[1 more remembered item is not shown here")
            && one.contains("It is still remembered"),
        "{one}"
    );
    let three = super::left_out(3);
    assert!(
        three.starts_with("[3 more remembered items are not shown here")
            && three.contains("They are still remembered"),
        "{three}"
    );
}
