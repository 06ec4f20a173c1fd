//! SearchTranscript when things go wrong: a damaged index is a clear tool
//! error within the search deadline, and a cancelled turn ends the search
//! (the `World` fixture of `recall_tests.rs`).

use serde_json::json;

use super::*;

/// Overwrites the middle half of the largest `.idx` file in `index` with
/// other bytes, keeping the file's end (its footer) intact.
fn damage_largest_idx(index: &std::path::Path) {
    let largest = std::fs::read_dir(index)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "idx"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&largest).unwrap();
    let len = bytes.len();
    let mut x: u32 = 0x9e37_79b9;
    for b in &mut bytes[len / 4..len * 3 / 4] {
        // xorshift: the same bytes every run
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x.to_le_bytes()[0];
    }
    std::fs::write(&largest, bytes).unwrap();
}

/// A search on a damaged index (tantivy panics or loops in it) is a clear
/// tool error that says the index is being rebuilt, within the search
/// deadline, and the turn goes on (before: "index task failed: … panicked"
/// with "try again", or a call that never returned).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_index_is_a_clear_tool_error_within_the_deadline() {
    let w = World::new().await;
    let dm = w.my_dm();
    for i in 0..300 {
        w.say(
            &dm,
            "u",
            &format!("supplier audit number {i} for the quarterly review of vendor {i}"),
        )
        .await;
    }
    w.index_all().await;
    let dir = w.fx._dir.path().join("index");
    damage_largest_idx(&dir);
    let damaged = TranscriptIndex::open(&dir).unwrap();
    damaged.set_search_deadline(std::time::Duration::from_secs(2));
    w.fx.rt.set_transcript_index(damaged);

    let err = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        w.search(json!({"query": "\"supplier audit number\""})),
    )
    .await
    .expect("the search never returned")
    .unwrap_err();
    assert!(
        err.message.contains("unavailable") && err.message.contains("being rebuilt"),
        "{err}"
    );
    assert!(err.hint.contains("answer without searching"), "{err}");
}

/// Cancelling the turn ends a SearchTranscript call (before, the call
/// waited for the search, which on a damaged index never ended).
#[tokio::test]
async fn a_cancelled_turn_ends_the_search() {
    let w = World::new().await;
    let dm = w.my_dm();
    w.say(&dm, "u", "the supplier list").await;
    w.index_all().await;
    w.fx.cancel.cancel();
    let err = w.search(json!({"query": "supplier"})).await.unwrap_err();
    assert!(err.message.contains("cancelled"), "{err}");
}
