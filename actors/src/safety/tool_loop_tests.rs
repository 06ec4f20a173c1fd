use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn looped(period: usize, repeats: usize, tools: &[&str]) -> ToolLoopVerdict {
    ToolLoopVerdict::Loop {
        period,
        repeats,
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
    }
}

#[test]
fn third_identical_call_trips() {
    let mut guard = ToolCallLoopGuard::default();
    let args = json!({"path": "src/main.rs"});
    assert_eq!(guard.observe("Read", &args), ToolLoopVerdict::Continue);
    assert_eq!(guard.observe("Read", &args), ToolLoopVerdict::Continue);
    assert_eq!(guard.observe("Read", &args), looped(1, 3, &["Read"]));
}

#[test]
fn key_order_does_not_matter() {
    let mut guard = ToolCallLoopGuard::default();
    guard.observe("Edit", &json!({"path": "a", "old": "x", "new": "y"}));
    guard.observe("Edit", &json!({"new": "y", "path": "a", "old": "x"}));
    assert_eq!(
        guard.observe("Edit", &json!({"old": "x", "new": "y", "path": "a"})),
        looped(1, 3, &["Edit"])
    );
}

#[test]
fn alternating_pair_trips_on_its_third_copy() {
    let mut guard = ToolCallLoopGuard::default();
    let read = json!({"path": "a.rs"});
    let test = json!({"command": "cargo test"});
    let mut verdicts = Vec::new();
    for _ in 0..3 {
        verdicts.push(guard.observe("Read", &read));
        verdicts.push(guard.observe("Shell", &test));
    }
    let mut expected = vec![ToolLoopVerdict::Continue; 5];
    expected.push(looped(2, 3, &["Read", "Shell"]));
    assert_eq!(verdicts, expected);
}

#[test]
fn progress_between_repeated_calls_does_not_trip() {
    let mut guard = ToolCallLoopGuard::default();
    let test = json!({"command": "cargo test"});
    for i in 0..10 {
        assert_eq!(guard.observe("Shell", &test), ToolLoopVerdict::Continue);
        let edit = json!({"path": "a.rs", "old": format!("v{i}"), "new": format!("v{}", i + 1)});
        assert_eq!(guard.observe("Edit", &edit), ToolLoopVerdict::Continue);
    }
}

#[test]
fn same_arguments_to_different_tools_do_not_trip() {
    let mut guard = ToolCallLoopGuard::default();
    let args = json!({"path": "a.rs"});
    for tool in ["Read", "Write", "Edit", "Read", "Write"] {
        assert_eq!(guard.observe(tool, &args), ToolLoopVerdict::Continue);
    }
}

#[test]
fn values_of_different_types_are_different_calls() {
    let distinct = [
        json!(null),
        json!(false),
        json!(true),
        json!(1),
        json!(1.5),
        json!("1"),
        json!([]),
        json!({}),
        json!([1, 2]),
        json!([[1], 2]),
        json!({"a": "b"}),
        json!({"ab": ""}),
        json!(["a", "b"]),
        json!(["ab"]),
    ];
    let hashes: Vec<u64> = distinct.iter().map(|v| hash_value(FNV_START, v)).collect();
    for (i, a) in hashes.iter().enumerate() {
        for (j, b) in hashes.iter().enumerate().skip(i + 1) {
            assert!(a != b, "{} and {} hash alike", distinct[i], distinct[j]);
        }
    }
}

#[test]
fn reset_forgets_the_turn() {
    let mut guard = ToolCallLoopGuard::default();
    let args = json!({});
    guard.observe("List", &args);
    guard.observe("List", &args);
    guard.reset();
    assert_eq!(guard.observe("List", &args), ToolLoopVerdict::Continue);
    assert_eq!(guard.observe("List", &args), ToolLoopVerdict::Continue);
    assert_eq!(guard.observe("List", &args), looped(1, 3, &["List"]));
}

#[test]
fn config_sets_repeats_and_period() {
    let mut guard = ToolCallLoopGuard::new(ToolLoopConfig {
        repeats: 0,
        max_period: 1,
    });
    let (a, b) = (json!("a"), json!("b"));
    assert_eq!(guard.observe("T", &a), ToolLoopVerdict::Continue);
    assert_eq!(
        guard.observe("T", &a),
        looped(1, 2, &["T"]),
        "repeats raised to 2"
    );
    guard.reset();
    for _ in 0..5 {
        assert_eq!(guard.observe("T", &a), ToolLoopVerdict::Continue);
        assert_eq!(
            guard.observe("T", &b),
            ToolLoopVerdict::Continue,
            "period 2 is not checked"
        );
    }
}
