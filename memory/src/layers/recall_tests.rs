use proptest::prelude::*;

use super::*;
use crate::ids::BotId;
use crate::layers::types::Importance;
use crate::layers::types::Layer;
use crate::layers::types::MemoryId;
use crate::layers::types::MemoryScope;

const DAY: i64 = 86_400_000;
const NOW: i64 = 1_800_000_000_000;

fn entry(seed: &str, text: &str, age_days: f64, importance: u8) -> MemoryItem {
    let created = NOW - (age_days * DAY as f64) as i64;
    MemoryItem {
        id: MemoryId::derive(seed),
        scope: MemoryScope::Agent(BotId::new("r").unwrap()),
        layer: Layer::Log,
        text: text.into(),
        importance: Importance::new(importance).unwrap(),
        source: "test".into(),
        created_at: created,
        updated_at: created,
        expires_at: None,
    }
}

fn texts(ranked: &[ScoredEntry]) -> Vec<&str> {
    ranked.iter().map(|s| s.item.text.as_str()).collect()
}

#[test]
fn a_relevant_entry_beats_a_fresher_unrelated_one() {
    let entries = vec![
        entry("a", "Lunch with the design team", 0.0, 3),
        entry("b", "Negotiated the supplier contract for Q3", 40.0, 3),
        entry("c", "Fixed the build on CI", 1.0, 3),
    ];
    let ranked = rank_log(
        entries,
        "what did we agree with the suppliers?",
        NOW,
        &RecallParams::default(),
    );
    assert_eq!(
        ranked[0].item.text,
        "Negotiated the supplier contract for Q3"
    );
    assert!(ranked[0].relevance > 0.0);
    assert_eq!(ranked[1].relevance, 0.0);
    // no match is a relevance of 0, not -0 ("-0.000" in the CLI)
    assert_eq!(format!("{:.3}", ranked[1].relevance), "0.000");
}

#[test]
fn chinese_input_finds_chinese_entries() {
    let entries = vec![
        entry("a", "会议记录：讨论了预算", 0.0, 3),
        entry("b", "确认了新的供应商名单", 45.0, 3),
        entry("c", "Release notes drafted", 0.0, 3),
    ];
    let ranked = rank_log(entries, "供应商是哪家？", NOW, &RecallParams::default());
    assert_eq!(ranked[0].item.text, "确认了新的供应商名单");
    let mixed = rank_log(
        vec![
            entry("x", "Weekly sync", 0.0, 3),
            entry("y", "API限流策略 agreed with ops", 5.0, 3),
        ],
        "限流 policy",
        NOW,
        &RecallParams::default(),
    );
    assert_eq!(mixed[0].item.text, "API限流策略 agreed with ops");
}

#[test]
fn recency_halves_every_half_life_and_importance_weighs() {
    let p = RecallParams::default();
    let ranked = rank_log(
        vec![
            entry("new", "same words", 0.0, 3),
            entry("old", "same words", p.half_life_days, 3),
        ],
        "",
        NOW,
        &p,
    );
    assert_eq!(texts(&ranked), vec!["same words", "same words"]);
    assert_eq!(ranked[0].item.id, MemoryId::derive("new"));
    assert!((ranked[1].score / ranked[0].score - 0.5).abs() < 1e-9);

    let ranked = rank_log(
        vec![
            entry("plain", "a plain entry", 0.0, 3),
            entry("vital", "a vital entry", 7.0, 5),
        ],
        "",
        NOW,
        &p,
    );
    // 2.0 · 0.5^(7/30) ≈ 1.70 > 1.0
    assert_eq!(ranked[0].item.id, MemoryId::derive("vital"));
    assert_eq!(ranked[0].weight, 2.0);
}

#[test]
fn an_empty_input_shows_the_newest_first_and_the_cap_holds() {
    let entries: Vec<MemoryItem> = (0..45)
        .map(|i| entry(&format!("e{i}"), &format!("entry number {i}"), i as f64, 3))
        .collect();
    let ranked = rank_log(entries, "", NOW, &RecallParams::default());
    assert_eq!(ranked.len(), LOG_PROMPT_CAP);
    assert_eq!(ranked[0].item.text, "entry number 0");
    assert_eq!(ranked[29].item.text, "entry number 29");
}

#[test]
fn future_dates_count_as_new_and_cap_zero_is_empty() {
    let ranked = rank_log(
        vec![entry("f", "planned", -3.0, 3)],
        "",
        NOW,
        &RecallParams::default(),
    );
    assert_eq!(ranked[0].recency, 1.0);
    let none = rank_log(
        vec![entry("f", "planned", 0.0, 3)],
        "",
        NOW,
        &RecallParams {
            cap: 0,
            ..RecallParams::default()
        },
    );
    assert!(none.is_empty());
}

/// QA (2026-12-06): an entry's `x86` or `iPhone15` had a relevance of 0
/// for the input `86` or `iPhone`, which transcript search finds.
#[test]
fn a_letter_prefixed_number_is_recalled_by_its_digits_and_letters() {
    let deploy = "The deploy to prod used x86 images";
    let phone = "iPhone15的价格很贵";
    let entries = vec![
        entry("a", deploy, 1.0, 3),
        entry("b", phone, 1.0, 3),
        entry("c", "Lunch with the design team", 0.0, 3),
    ];
    for (input, expected) in [
        ("86", deploy),
        ("x86", deploy),
        ("iPhone", phone),
        ("iphone15", phone),
    ] {
        let ranked = rank_log(entries.clone(), input, NOW, &RecallParams::default());
        assert_eq!(ranked[0].item.text, expected, "{input}");
        assert!(ranked[0].relevance > 0.0, "{input}");
    }
}

#[test]
fn terms_are_the_query_units() {
    assert_eq!(terms("Suppliers 供应商"), vec!["supplier", "供应", "应商"]);
    assert_eq!(terms("What did the supplier say?"), vec!["supplier", "say"]);
}

const WORDS: &[&str] = &[
    "supplier",
    "budget",
    "release",
    "供应商",
    "会议",
    "tea",
    "coffee",
    "Paris",
    "限流",
    "deadline",
];

fn arb_entries() -> impl Strategy<Value = Vec<(Vec<usize>, u32, u8)>> {
    prop::collection::vec(
        (
            prop::collection::vec(0..WORDS.len(), 1..6),
            0u32..400,
            1u8..=5,
        ),
        0..80,
    )
}

fn build(spec: &[(Vec<usize>, u32, u8)]) -> Vec<MemoryItem> {
    spec.iter()
        .enumerate()
        .map(|(i, (words, age_hours, imp))| {
            let text: Vec<&str> = words.iter().map(|w| WORDS[*w]).collect();
            let mut e = entry(&format!("p{i}"), &text.join(" "), 0.0, *imp);
            e.created_at = NOW - i64::from(*age_hours) * 3_600_000 * 24 / 10;
            e
        })
        .collect()
}

proptest! {
    #[test]
    fn ranking_is_capped_deterministic_and_order_free(
        spec in arb_entries(),
        query in prop::collection::vec(0..WORDS.len(), 0..4),
        cap in 0usize..40,
        seed in any::<u64>(),
    ) {
        let params = RecallParams { cap, ..RecallParams::default() };
        let input: Vec<&str> = query.iter().map(|w| WORDS[*w]).collect();
        let input = input.join(" ");
        let entries = build(&spec);
        let n = entries.len();
        let first = rank_log(entries.clone(), &input, NOW, &params);
        prop_assert!(first.len() <= cap);
        prop_assert_eq!(first.len(), n.min(cap));
        // deterministic
        let again = rank_log(entries.clone(), &input, NOW, &params);
        prop_assert_eq!(&first, &again);
        // the order entries arrive in does not matter
        let mut shuffled = entries.clone();
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (s >> 33) as usize % (i + 1));
        }
        let other = rank_log(shuffled, &input, NOW, &params);
        let ids = |r: &[ScoredEntry]| r.iter().map(|e| e.item.id.clone()).collect::<Vec<_>>();
        prop_assert_eq!(ids(&first), ids(&other));
        // best first, and nothing left out beats what was kept
        for w in first.windows(2) {
            prop_assert!(w[0].score >= w[1].score);
        }
        let all = rank_log(entries, &input, NOW, &RecallParams { cap: usize::MAX, ..params });
        if let Some(last) = first.last() {
            for e in &all[first.len()..] {
                prop_assert!(e.score <= last.score);
            }
        }
    }
}
