//! Context economy: a byte-stable prompt prefix within an epoch, token
//! usage per turn and per bot, compaction, the daily token budget.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;

fn echo_model(request: &Value) -> Reply {
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    if last["role"] == "tool" {
        return Reply::text("").usage(500, 1).cached(400);
    }
    let text = last["content"].as_str().unwrap_or("").to_owned();
    let args = json!({ "text": format!("ok: {text}") }).to_string();
    Reply::tool_call("call_1", "SendMessage", args)
        .usage(480, 9)
        .cached(300)
}

#[tokio::test]
async fn the_prompt_prefix_is_byte_identical_turn_after_turn() {
    let server = OpenAiServer::builder().responder(echo_model).start().await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let mut session = String::new();
    for text in ["first question", "second question", "third question"] {
        let (_, sent) = host.send("r", text, None).await;
        session = sent["session"].as_str().unwrap().to_owned();
        let end = host
            .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
        assert_eq!(end["status"], "completed");
        assert_eq!(end["usage"]["calls"], 2, "{end}");
        assert_eq!(end["usage"]["cached_tokens"], 700);
        assert!(end["usage"]["prefix_tokens"].as_u64().unwrap() > 0);
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    for pair in requests.windows(2) {
        let a = pair[0].body["messages"].as_array().unwrap();
        let b = pair[1].body["messages"].as_array().unwrap();
        assert!(b.len() > a.len());
        // byte-identical prefix: every earlier message, serialised, is unchanged
        for (x, y) in a.iter().zip(b.iter()) {
            assert_eq!(
                serde_json::to_string(x).unwrap(),
                serde_json::to_string(y).unwrap()
            );
        }
        assert_eq!(pair[0].body["tools"], pair[1].body["tools"]);
    }
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let usage = &bots["bots"][0]["usage"];
    assert_eq!(usage["turns"], 3, "{usage}");
    assert_eq!(usage["total"]["cached_tokens"], 2100);
    assert_eq!(usage["today"]["calls"], 6);
    let _ = session;
    host.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn compaction_keeps_the_quoted_constraint_and_starts_a_new_epoch() {
    let script = r#"
[[rule]]
purpose = "compact"
steps = [ { text = "SUMMARY OF: {{input}}" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    // a small compaction threshold for the scripted provider
    let fleet = host.shutdown().await;
    let path = fleet.write();
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "kind = \"scripted\"",
        "kind = \"scripted\"\ncompact_at_tokens = 1000\nbackground_compact_at_tokens = 1000",
    );
    std::fs::write(&path, text).unwrap();
    let host = crate::support::fleet::restart(fleet).await;
    let (_, first) = host
        .send(
            "r",
            "Constraint: \"never email the client before noon\".",
            None,
        )
        .await;
    let session = first["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, first["seq"].as_i64().unwrap())
        .await;
    let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(12);
    let mut last = Value::Null;
    for i in 0..12 {
        let (_, sent) = host.send("r", &format!("note {i}: {filler}"), None).await;
        host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
        last = sent;
    }
    let _ = last;
    let summary = host
        .wait_for(&session, |es| {
            es.iter().find(|e| e["kind"] == "summary").cloned()
        })
        .await;
    let text = summary["text"].as_str().unwrap();
    assert!(
        text.contains("\"never email the client before noon\""),
        "{text}"
    );
    assert!(summary["epoch"].as_i64().unwrap() >= 1);
    // the bot keeps working after the compaction
    let (_, after) = host.send("r", "still there?", None).await;
    let end = host
        .wait_turn_end(&session, after["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed");
    assert!(deliveries(&host.entries(&session).await).len() >= 14);
    host.shutdown().await;
}

#[tokio::test]
async fn a_spent_daily_budget_pauses_the_bot_visibly_and_keeps_messages() {
    let script = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "answer" } } ]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"]);
    let path = fleet.write();
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "tools = [\"SendMessage\"]",
        "tools = [\"SendMessage\"]\ndaily_token_budget = 50",
    );
    std::fs::write(&path, text).unwrap();
    let host = crate::support::fleet::restart(fleet).await;
    let (_, first) = host.send("r", "hello", None).await;
    let session = first["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, first["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed");
    let (_, second) = host.send("r", "and again", None).await;
    let notice = host
        .wait_for(&session, |es| {
            es.iter()
                .find(|e| e["kind"] == "notice" && e["code"] == "budget_exhausted")
                .cloned()
        })
        .await;
    assert!(
        notice["text"].as_str().unwrap().contains("paused until"),
        "{notice}"
    );
    // the message is kept, unanswered, in the inbox
    let es = host.entries(&session).await;
    assert!(
        es.iter()
            .any(|e| e["seq"] == second["seq"] && e["kind"] == "user_message")
    );
    assert_eq!(es.iter().filter(|e| e["kind"] == "turn_end").count(), 1);
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(bots["bots"][0]["usage"]["daily_token_budget"], 50);
    assert!(bots["bots"][0]["paused_until"].is_i64(), "{bots:#}");

    // restarted while paused, it does not tell the person again: one
    // notice per conversation, however many restarts (each added one)
    let mut host = host;
    for _ in 0..2 {
        let fleet = host.shutdown().await;
        host = crate::support::fleet::restart(fleet).await;
        host.send("r", "still there?", None).await;
        host.wait_get("/v1/bots", |v| {
            v["bots"][0]["paused_until"].as_i64().map(Value::from)
        })
        .await;
    }
    let notices = host
        .entries(&session)
        .await
        .into_iter()
        .filter(|e| e["code"] == "budget_exhausted")
        .count();
    assert_eq!(notices, 1);
    host.shutdown().await;
}

/// A long chat of short messages never reaches the token threshold, yet
/// its oldest entries leave the `runtime.context_entries` window: they are
/// summarised before they do, so a constraint said first is still known.
/// (They were dropped with no summary keeping them.)
#[tokio::test]
async fn entries_about_to_leave_the_window_are_summarised_first() {
    let script = r#"
[[rule]]
purpose = "compact"
steps = [ { text = "SUMMARY OF: {{input}}" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]
"#;
    let window = 40;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .runtime(&format!(
            "debounce_ms = 0\nextract_memory = false\ncontext_entries = {window}"
        ))
        .start()
        .await;
    let (_, first) = host
        .send(
            "r",
            "Constraint: \"never email the client before noon\".",
            None,
        )
        .await;
    let session = first["session"].as_str().unwrap().to_owned();
    let constraint = first["seq"].as_i64().unwrap();
    host.wait_turn_end(&session, constraint).await;
    for i in 0..12 {
        let (_, sent) = host.send("r", &format!("short note {i}"), None).await;
        host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
    }
    let entries = host.entries(&session).await;
    let last = entries.last().unwrap()["seq"].as_i64().unwrap();
    assert!(
        last > constraint + window,
        "the chat outgrew the window: {last}"
    );
    let summary = entries
        .iter()
        .find(|e| e["kind"] == "summary")
        .unwrap_or_else(|| panic!("no summary: {entries:#?}"));
    assert!(
        summary["text"]
            .as_str()
            .unwrap()
            .contains("\"never email the client before noon\""),
        "{summary}"
    );
    assert!(summary["covers_to_seq"].as_i64().unwrap() >= constraint);
    // written while the constraint was still inside the window
    assert!(
        summary["seq"].as_i64().unwrap() <= constraint + window,
        "{summary}"
    );
    host.shutdown().await;
}
