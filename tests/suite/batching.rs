//! Debounce batching of rapid user messages and interrupts of long turns.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

#[tokio::test]
async fn fifty_rapid_messages_become_few_turns_and_all_are_kept_in_order() {
    let script = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "got them" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .runtime("debounce_ms = 300\ndebounce_max_ms = 3000")
        .start()
        .await;
    let mut last = Value::Null;
    for i in 0..50 {
        let (status, body) = host
            .send("r", &format!("message {i}"), Some(&format!("k{i}")))
            .await;
        assert_eq!(status, 202);
        last = body;
    }
    let session = last["session"].as_str().unwrap().to_owned();
    let last_seq = last["seq"].as_i64().unwrap();
    host.wait_turn_end(&session, last_seq).await;
    let entries = host.entries(&session).await;
    let users: Vec<String> = entries
        .iter()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        users,
        (0..50).map(|i| format!("message {i}")).collect::<Vec<_>>()
    );
    let turns = entries.iter().filter(|e| e["kind"] == "turn_end").count();
    assert!(
        turns <= 5,
        "50 messages in well under the window cap should fold into few turns, got {turns}"
    );
    let answered: Vec<i64> = entries
        .iter()
        .filter(|e| e["kind"] == "turn_end" && e["status"] == "completed")
        .flat_map(|e| {
            e["inputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut want: Vec<i64> = entries
        .iter()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    want.sort_unstable();
    assert_eq!(
        answered, want,
        "every message answered by exactly one completed turn"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_user_message_interrupts_a_long_turn() {
    let script = r#"
[[rule]]
match = "^long"
steps = [ { delay_ms = 20000, tool = "SendMessage", args = { text = "finally" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "both: {{inputs}}" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, first) = host.send("r", "long job", None).await;
    let session = first["session"].as_str().unwrap().to_owned();
    host.wait_running("r").await;
    let (_, second) = host.send("r", "stop, do this instead", None).await;
    let end = host
        .wait_turn_end(&session, second["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed");
    assert_eq!(
        end["inputs"],
        json!([first["seq"], second["seq"]]),
        "the next turn carries both messages"
    );
    let entries = host.entries(&session).await;
    // the long model call was cut short, not waited out: a call that
    // answered (20 s on) would have left its step (SendMessage "finally")
    // and an interrupted turn_end; the cut one left nothing, and the only
    // turn is the one over both messages
    assert!(
        !entries
            .iter()
            .any(|e| e["kind"] == "assistant" && e.to_string().contains("finally")),
        "the long call was waited out: {entries:#?}"
    );
    assert_eq!(
        entries
            .iter()
            .filter(|e| e["kind"] == "turn_end")
            .collect::<Vec<_>>(),
        [&end],
        "the long turn was cut before its step: {entries:#?}"
    );
    assert_eq!(
        deliveries(&entries),
        vec!["both: long job\nstop, do this instead".to_string()]
    );
    host.shutdown().await;
}
