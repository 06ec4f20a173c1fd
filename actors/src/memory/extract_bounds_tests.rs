use botfleet_memory::Encoding;

use super::*;

fn words(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|w| format!("{prefix}{w}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn texts_are_clipped_to_the_cap_and_share_the_budget() {
    let encoding = Encoding::O200kBase;
    let bounds = ExtractBounds::of(1_000, encoding);
    assert_eq!(bounds.text_cap, 1_000);
    assert_eq!(bounds.texts_budget, 1_000);
    let huge = words("a", 5_000);
    let small = "short message".to_owned();
    let (users, reply) = bounds.texts(&[huge.clone(), small.clone()], &words("r", 5_000));
    assert_eq!(users[1], small, "what fits stays whole");
    let total: u64 = users
        .iter()
        .chain([&reply])
        .map(|t| u64::from(encoding.count(t)))
        .sum();
    // the shares and the notes' slack
    assert!(total < 1_300, "{total} tokens");
    assert!(users[0].contains("characters are cut here"));
    assert!(users[0].starts_with("a0 a1"));
    assert!(users[0].ends_with("a4999"));
    assert!(reply.ends_with("r4999"));
}

#[test]
fn texts_that_fit_are_untouched() {
    let bounds = ExtractBounds::of(100_000, Encoding::O200kBase);
    let (users, reply) = bounds.texts(&["hi".to_owned()], "hello");
    assert_eq!(users, ["hi"]);
    assert_eq!(reply, "hello");
}

#[test]
fn shown_lines_stop_at_their_bound() {
    let bounds = ExtractBounds::of(1_000, Encoding::O200kBase);
    let lines: Vec<String> = (0..100)
        .map(|i| format!("- item {i}: {}", words("s", 40)))
        .collect();
    let kept = bounds.shown(lines.clone());
    assert!(!kept.is_empty() && kept.len() < 100);
    assert_eq!(kept[..], lines[..kept.len()]);
}
