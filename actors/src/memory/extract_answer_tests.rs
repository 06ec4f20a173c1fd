use serde_json::json;

use super::proposal_json;

const OBJECT: &str =
    r#"{"add": [{"text": "Drinks green tea", "layer": "profile"}], "replace": [], "remove": []}"#;

fn expected() -> serde_json::Value {
    json!({"add": [{"text": "Drinks green tea", "layer": "profile"}], "replace": [], "remove": []})
}

#[test]
fn a_bare_object_is_taken_as_it_is() {
    assert_eq!(proposal_json(OBJECT).unwrap(), expected());
    assert_eq!(
        proposal_json(&format!("  \n{OBJECT}\n")).unwrap(),
        expected()
    );
}

#[test]
fn a_leading_reasoning_block_is_skipped() {
    let answer = format!("<think>\nThe user mentioned tea {{not json}}.\n</think>\n\n{OBJECT}");
    assert_eq!(proposal_json(&answer).unwrap(), expected());
    let answer = format!("<THINKING>hmm</THINKING>{OBJECT}");
    assert_eq!(proposal_json(&answer).unwrap(), expected());
}

#[test]
fn a_reasoning_block_that_never_closes_says_so() {
    let err = proposal_json("<think>\nI wonder whether the person").unwrap_err();
    assert!(err.contains("never closes"), "{err}");
}

#[test]
fn a_fenced_object_after_prose_is_taken() {
    let answer = format!("Here are the changes:\n```json\n{OBJECT}\n```\nHope that helps.");
    assert_eq!(proposal_json(&answer).unwrap(), expected());
    let answer = format!("```\n{OBJECT}\n```");
    assert_eq!(proposal_json(&answer).unwrap(), expected());
}

#[test]
fn an_object_in_prose_needs_a_proposal_key() {
    let answer = format!("Sure {{\"note\": 1}} — the update is {OBJECT}. Done.");
    assert_eq!(proposal_json(&answer).unwrap(), expected());
    let err = proposal_json("Nothing to change {\"note\": 1}.").unwrap_err();
    assert!(err.contains("answer starts"), "{err}");
}

#[test]
fn an_object_with_other_keys_is_taken_whole_for_validation_to_name_them() {
    assert_eq!(
        proposal_json(r#"{"adds": []}"#).unwrap(),
        json!({"adds": []})
    );
}

#[test]
fn empty_and_non_object_answers_are_refused() {
    assert_eq!(proposal_json("  ").unwrap_err(), "the answer is empty");
    assert_eq!(
        proposal_json("<think>x</think>").unwrap_err(),
        "the answer is empty"
    );
    let err = proposal_json("[1, 2]").unwrap_err();
    assert!(err.contains("not an object"), "{err}");
}
