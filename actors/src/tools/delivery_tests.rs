#![allow(clippy::unwrap_used)]

use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use serde_json::json;

use super::SendMessage;
use crate::tools::Tool;
use crate::tools::test_support::ToolFixture;

fn delivered_entry(effects: &[Mutation]) -> (botfleet_memory::EntryId, String) {
    let Some(Mutation::Append(entry)) = effects.first() else {
        panic!("a delivery appends its entry first: {effects:?}");
    };
    let EntryKind::Delivery { text, .. } = &entry.kind else {
        panic!("not a delivery: {:?}", entry.kind);
    };
    (entry.id, text.clone())
}

#[tokio::test]
async fn send_message_results_are_the_same_text_and_the_ids_stay_in_the_entries() {
    let f = ToolFixture::new();
    let first = SendMessage
        .call(&f.ctx("c1"), json!({"text": "one"}))
        .await
        .unwrap();
    let second = SendMessage
        .call(&f.ctx("c2"), json!({"text": "two"}))
        .await
        .unwrap();
    // no per-message id in what the model reads back: it would be resent
    // in every later prompt and defeat the cached token counts
    assert_eq!(first.content, "delivered");
    assert_eq!(second.content, first.content);
    assert!(first.delivered && second.delivered);
    let (id1, text1) = delivered_entry(&first.effects);
    let (id2, text2) = delivered_entry(&second.effects);
    assert_eq!((text1.as_str(), text2.as_str()), ("one", "two"));
    assert_ne!(id1, id2, "each delivery keeps its own stable id");
    // the id is derived from the turn and the call: a re-run gives the same
    let again = SendMessage
        .call(&f.ctx("c1"), json!({"text": "one"}))
        .await
        .unwrap();
    assert_eq!(delivered_entry(&again.effects).0, id1);
}
