//! Loop detection: a looping stream is cut, retried once with a reminder,
//! then the turn fails cleanly; legitimate repetition is not cut; the same
//! tool call repeated is refused, then ends the turn (failed, or
//! `completed` once the turn delivered its reply).

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

/// Bot `r` on `script`, sent "go", once its turn failed: the session's
/// entries and the text of its `turn_failed` notice.
async fn failed_turn(script: &str) -> (Vec<Value>, String) {
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, sent) = host.send("r", "go", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "failed");
    let es = host.entries(&session).await;
    let notice = es
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    host.shutdown().await;
    (es, notice)
}

#[tokio::test]
async fn a_looping_stream_is_cut_retried_once_then_fails() {
    let script = r#"
[[rule]]
steps = [ { text = "I will repeat this sentence forever. ", repeat = 500, chunk = 20 } ]
"#;
    let (es, notice) = failed_turn(script).await;
    let reminders: Vec<_> = es.iter().filter(|e| e["kind"] == "reminder").collect();
    assert_eq!(reminders.len(), 1, "one reminder and one retry");
    assert!(
        reminders[0]["text"]
            .as_str()
            .unwrap()
            .contains("repeating itself")
    );
    assert!(notice.contains("kept looping"), "{notice}");
    // nothing of the looping text was kept as the bot's output
    assert!(es.iter().all(|e| {
        !e["text"]
            .as_str()
            .unwrap_or("")
            .contains("forever. I will repeat")
    }));
}

#[tokio::test]
async fn a_long_repetitive_code_block_is_not_cut() {
    let mut code = String::from("Here is the test:\\n```rust\\n");
    for i in 0..200 {
        code.push_str(&format!("    assert_eq!(values[{i}], {i});\\n"));
    }
    code.push_str("```\\n");
    let script = format!(
        "[[rule]]\nsteps = [ {{ text = \"{code}\", chunk = 24, tool = \"SendMessage\", args = {{ text = \"done\" }} }} ]\n"
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, sent) = host.send("r", "write the test", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed");
    let es = host.entries(&session).await;
    assert!(es.iter().all(|e| e["kind"] != "reminder"));
    assert_eq!(deliveries(&es), vec!["done".to_string()]);
    host.shutdown().await;
}

#[tokio::test]
async fn the_same_tool_call_repeated_is_refused_then_ends_the_turn() {
    let step = r#"{ tool = "Read", args = { path = "a.txt" } }"#;
    let script = format!("[[rule]]\nsteps = [ {} ]\n", [step; 8].join(", "));
    let host = TestFleet::new()
        .script("s", &script)
        .bot("r", "s", &["SendMessage", "Read"])
        .start()
        .await;
    let (_, sent) = host.send("r", "read it", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "failed");
    let es = host.entries(&session).await;
    let refused = es
        .iter()
        .filter(|e| {
            e["kind"] == "tool_result" && e["content"].as_str().unwrap().contains("same arguments")
        })
        .count();
    assert_eq!(refused, 2, "refused once with advice, then the turn ended");
    let notice = es.iter().find(|e| e["kind"] == "notice").unwrap();
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .contains("repeating the same Read call"),
        "{notice}"
    );
    host.shutdown().await;
}

/// The same reply sent again and again in one turn is a loop like any
/// other repeated call: refused, then the turn ends, after one delivery
/// (the second send is refused as already delivered in this turn). The
/// reply is out, so it ends `completed` with a `failed_after_reply`
/// notice and no retry, as a failed call after the reply does
/// (turn_endings.rs); before a delivery the guard fails the turn (above).
#[tokio::test]
async fn the_same_reply_sent_again_and_again_is_refused_then_ends_the_turn() {
    let step = r#"{ tool = "SendMessage", args = { text = "hello again" } }"#;
    let script = format!("[[rule]]\nsteps = [ {} ]\n", [step; 8].join(", "));
    let host = TestFleet::new()
        .script("s", &script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, sent) = host.send("r", "hi", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    let es = host.entries(&session).await;
    let delivered = es.iter().filter(|e| e["kind"] == "delivery").count();
    assert_eq!(end["status"], "completed", "{es:#?}");
    assert_eq!(delivered, 1, "{es:#?}");
    assert_eq!(
        super::turn_endings::notices(&es),
        [("failed_after_reply", &serde_json::Value::Null)],
        "{es:#?}"
    );
    host.shutdown().await;
}

/// The notice of a loop of one character names it in the singular (QA:
/// "the same 1 characters 200 times").
#[tokio::test]
async fn a_loop_of_one_character_is_named_in_the_singular() {
    let script = r#"
[[rule]]
steps = [ { text = "a", repeat = 4000, chunk = 20 } ]
"#;
    let (_, text) = failed_turn(script).await;
    assert!(
        text.contains("the same character ") && !text.contains("1 characters"),
        "{text}"
    );
}

/// Regression (QA): a call the loop detector cut counted for nothing, so
/// a bot whose model looped at every call spent tokens at each message
/// and never its daily token budget. A cut call counts as a call, its
/// request as sent and its text as received so far, and the spent budget
/// pauses the bot.
#[tokio::test]
async fn a_looping_stream_cut_off_counts_against_the_daily_budget() {
    let script = r#"
[[rule]]
steps = [ { text = "I will repeat this sentence forever. ", repeat = 500, chunk = 20 } ]
"#;
    let host = TestFleet::new()
        .midday()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 200")
        .start()
        .await;
    let (_, sent) = host.send("r", "go", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    // the first cut call spends the budget: the turn stops there, its
    // message kept for the pause's end
    host.wait_for(&session, |es| {
        es.iter()
            .find(|e| e["kind"] == "notice" && e["code"] == "budget_exhausted")
            .cloned()
    })
    .await;
    let (_, bots) = host.get("/v1/bots", crate::support::fleet::TOKEN).await;
    let r = &bots["bots"][0];
    let today = &r["usage"]["today"];
    assert_eq!(today["calls"], 1, "{r:#}");
    let prompt = today["prompt_tokens"].as_u64().unwrap();
    let completion = today["completion_tokens"].as_u64().unwrap();
    assert!(prompt > 0 && completion > 0, "{r:#}");
    assert!(prompt + completion >= 200, "{r:#}");
    assert!(r["paused_until"].is_i64(), "the budget is spent: {r:#}");
    host.shutdown().await;
}
