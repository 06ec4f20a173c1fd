//! ReadTranscript: the entries around a seq, a long entry read on from an
//! offset, and clipping between grapheme clusters (the `World` fixture
//! of `recall_tests.rs`).

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

#[tokio::test]
async fn read_transcript_returns_the_neighbours_of_a_seq() {
    let w = World::new().await;
    let dm = w.my_dm();
    for i in 1..=12 {
        w.say(&dm, "u", &format!("message number {i}")).await;
    }
    let out = w
        .read(json!({"session": dm.id.to_string(), "seq": 6}))
        .await
        .unwrap();
    let shown: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("  #") || l.starts_with("→ #"))
        .collect();
    assert_eq!(shown.len(), 7, "{out}");
    assert!(out.ends_with("(more after #9: call ReadTranscript with a later seq)\n"));
    assert!(out.starts_with(&format!(
        "Session {} (this conversation), entries 3 to 9 of 12; → marks seq 6:",
        dm.id
    )));
    assert!(shown[0].starts_with("  #3 "), "{out}");
    assert!(shown[3].starts_with("→ #6 "), "{out}");
    assert!(
        shown[3].ends_with("u: (user message) message number 6"),
        "{out}"
    );
    assert!(shown[6].starts_with("  #9 "), "{out}");

    // clamped at the ends; before/after chosen by the model
    let out = w
        .read(json!({"session": dm.id.to_string(), "seq": 2, "before": 5, "after": 20}))
        .await
        .unwrap();
    assert!(out.contains("entries 1 to 12 of 12"), "{out}");
    assert!(!out.contains("more after"), "{out}");
    let out = w
        .read(json!({"session": dm.id.to_string(), "seq": 1, "before": 0, "after": 0}))
        .await
        .unwrap();
    assert!(out.contains("entries 1 to 1 of 12"), "{out}");
    assert!(out.contains("(more after #1"), "{out}");
}

/// Regression: ReadTranscript cut an entry at a char count, so a flag or
/// an accented letter at the cut was split and its half sat before the
/// "…". The cut falls between grapheme clusters, within the budget.
#[test]
fn a_transcript_clip_keeps_grapheme_clusters_whole() {
    assert_eq!(clip("e\u{301}e\u{301}", 3), "e\u{301}… [2 more characters]");
    assert_eq!(clip("🇫🇷🇩🇪", 3), "🇫🇷… [2 more characters]");
    assert_eq!(clip("abc", 3), "abc");
}

/// A message longer than ReadTranscript shows at once can be read to its
/// end with `offset`, in this conversation without naming it. (Before,
/// only its first 6,000 characters could ever be read: the middle of a
/// long message was out of reach but for a search snippet.)
#[tokio::test]
async fn read_transcript_reads_a_long_entry_on_from_an_offset() {
    let w = World::new().await;
    let dm = w.my_dm();
    let text: String = (0..1_400).map(|i| format!("w{i:04} ")).collect();
    assert_eq!(text.chars().count(), 8_400);
    let seq = w.say(&dm, "u", &text).await;

    let first = w
        .read(json!({"seq": seq, "before": 0, "after": 0}))
        .await
        .unwrap();
    assert!(first.contains("w0000 "), "{first}");
    assert!(!first.contains("w1000 "), "{first}");
    assert!(
        first.contains("… [2400 more characters: ReadTranscript with \"offset\": 6000 reads on]"),
        "{first}"
    );

    let rest = w
        .read(json!({"session": dm.id.to_string(), "seq": seq, "offset": 6000, "before": 0, "after": 0}))
        .await
        .unwrap();
    assert!(rest.contains("[6000 characters before] …w1000 "), "{rest}");
    assert!(rest.contains("w1399 "), "{rest}");
    assert!(!rest.contains("more characters"), "{rest}");

    let err = w
        .read(json!({"seq": seq, "offset": 8_400}))
        .await
        .unwrap_err();
    assert!(err.message.contains("past the end"), "{err}");
}
