#![allow(clippy::unwrap_used)]

use super::tests::admit;
use super::tests::users;
use super::*;
use crate::tools::test_support::ToolFixture;

/// Regression (round 14, H1 finding 1): runs interrupted before their
/// first step pushed their inputs into the tail kept in memory until it
/// grew past its window; the next run trimmed it to the newest `window`
/// entries, cutting off the oldest of the inputs it was about to answer
/// (a compaction keeps a running turn's inputs, so no summary covered
/// them either). A trim keeps every entry from the turn's first input on,
/// as the reload bounded by the turn reads them.
#[tokio::test]
async fn a_trim_keeps_every_input_of_the_turn_about_to_run() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let state = StateBlock::default();
    let encoding = Encoding::default();
    let window = 4;
    let (session, first) = admit(store, bot, "message 0").await;
    let mut tail = SessionTail::new(session);
    let bound = ContextBound::of_inputs([first].into_iter(), None).unwrap();
    tail.load(store, "id", &state, window, encoding, Some(bound))
        .await
        .unwrap();
    // each interrupted run pushed the message that interrupted the one before
    let mut seqs = vec![first];
    for i in 1..10 {
        let (_, seq) = admit(store, bot, &format!("message {i}")).await;
        let entry = store.entries_between(session, seq, seq).await.unwrap();
        tail.push(&entry[0]);
        seqs.push(seq);
    }
    assert!(tail.can_trim(window));
    assert!(tail.trim(window, Some(first), "id", &state));
    let all: Vec<String> = (0..10).map(|i| format!("message {i}")).collect();
    assert_eq!(users(&tail), all);
    assert!(!tail.drops_unsummarised());

    // what a reload bounded by the turn reads
    let mut fresh = SessionTail::new(session);
    let bound = ContextBound::of_inputs(seqs.into_iter(), None).unwrap();
    fresh
        .load(store, "id", &state, window, encoding, Some(bound))
        .await
        .unwrap();
    assert_eq!(tail.context.messages(), fresh.context.messages());
    store.close().await;
}
