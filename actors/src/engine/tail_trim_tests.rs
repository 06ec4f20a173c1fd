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

/// Regression: a catch-up compaction of many chunks writes one summary per
/// chunk after the running turn's input, and the window counted seqs: the
/// next turn's tail left that input out with no summary covering it, and
/// its entry count asked for a compaction at once. The window counts
/// entries of the transcript; a trim never cuts past a summary it holds
/// in the window (a reload widens the window by it).
#[tokio::test]
async fn summaries_take_no_place_in_the_window() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let state = StateBlock::default();
    let encoding = Encoding::default();
    let window = 3;
    let (session, _) = admit(store, bot, "m0").await;
    admit(store, bot, "book the train").await;
    // six chunk summaries covering through the first message (3..=8)
    for epoch in 1..=6 {
        super::tests::summarise(store, session, 1, epoch).await;
    }
    admit(store, bot, "thanks").await;
    let mut tail = SessionTail::new(session);
    tail.load(store, "id", &state, window, encoding, None)
        .await
        .unwrap();
    // (the summary first)
    assert_eq!(users(&tail)[1..], ["book the train", "thanks"]);
    assert!(!tail.drops_unsummarised());
    // two entries of the transcript past the summary, not eight
    assert!(!tail.unsummarised_past(4));
    assert!(tail.unsummarised_past(3));

    // a summary pushed into the window: the tail reloads instead of
    // trimming in memory
    let mut seqs = Vec::new();
    for i in 0..3 {
        seqs.push(admit(store, bot, &format!("more {i}")).await.1);
    }
    super::tests::summarise(store, session, 9, 7).await;
    seqs.push(seqs[2] + 1);
    for &seq in &seqs {
        let e = store.entries_between(session, seq, seq).await.unwrap();
        tail.push(&e[0]);
    }
    assert!(!tail.can_trim(window));
    assert!(!tail.trim(window, None, "id", &state));
    store.close().await;
}
