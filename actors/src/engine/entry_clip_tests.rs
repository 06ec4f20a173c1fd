#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;

use super::*;

/// A note as plain as the prompts': `start|[cut of chars]|end`.
fn note(c: Cut<'_>) -> String {
    format!("{}|[{} of {}]|{}", c.head, c.cut, c.chars, c.tail)
}

/// Words that count about as English does, different along the text.
fn words(n: usize) -> String {
    (0..n).map(|k| format!("word{} ", k % 113)).collect()
}

#[test]
fn the_cap_is_a_quarter_of_the_threshold_and_never_tiny() {
    // turn budget = half of compact_at_tokens
    assert_eq!(entry_cap(50_000), 25_000);
    assert_eq!(entry_cap(20_000), 10_000);
    assert_eq!(entry_cap(500), MIN_ENTRY_TOKENS);
}

#[test]
fn a_text_that_fits_is_not_clipped() {
    let text = words(100);
    let e = Encoding::O200kBase;
    let tokens = u64::from(e.count(&text));
    assert_eq!(clip(&text, tokens, e, &note), None);
    assert!(clip(&text, tokens - 1, e, &note).is_some());
}

/// A long text keeps its start and its end, about as many tokens as it
/// may take, and the note counts the characters cut; the same text gives
/// the same clip.
#[test]
fn a_long_text_keeps_its_start_and_end_within_the_budget() {
    let e = Encoding::O200kBase;
    let text = format!("FIRST {} LAST", words(60_000));
    let chars = text.chars().count();
    let out = clip(&text, 2_000, e, &note).unwrap();
    let tokens = u64::from(e.count(&out));
    assert!(tokens <= 2_000, "{tokens}");
    assert!(tokens > 1_800, "{tokens}: the budget is used");
    assert!(out.starts_with("FIRST word0 "), "{out:.100}");
    assert!(out.ends_with(" LAST"), "{out:.100}");
    let (head, rest) = out.split_once("|[").unwrap();
    let (counts, tail) = rest.split_once("]|").unwrap();
    let (cut, all) = counts.split_once(" of ").unwrap();
    assert_eq!(all, chars.to_string());
    assert_eq!(
        head.chars().count() + tail.chars().count() + cut.parse::<usize>().unwrap(),
        chars
    );
    assert!(text.starts_with(head) && text.ends_with(tail));
    assert_eq!(clip(&text, 2_000, e, &note), Some(out));
}

/// Text of several bytes per character and more tokens per character
/// (CJK) is cut at character boundaries and still fits.
#[test]
fn wide_characters_are_cut_whole_and_fit() {
    let e = Encoding::O200kBase;
    let text: String = "漢字かな交じり文、".repeat(20_000);
    let out = clip(&text, 1_500, e, &note).unwrap();
    assert!(u64::from(e.count(&out)) <= 1_500);
    let (head, _) = out.split_once("|[").unwrap();
    assert!(head.starts_with("漢字"), "{head:.20}");
}
