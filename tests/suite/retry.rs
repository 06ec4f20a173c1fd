//! Turns as people see them: a retry runs a turn's inputs again once,
//! never for a running or completed turn, never a second time for the
//! same turn; a running turn is visible before its first step is stored.
//! (Before, every `POST /v1/turns/{turn}/retry` requeued the inputs again,
//! a completed turn's included: three clicks, three more turns and three
//! more deliveries.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;

const SCRIPT: &str = r#"
[[rule]]
match = "^fail"
steps = [ { fail = "provider down" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "answer: {{inputs}}" } } ]
"#;

fn turn_ends(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["kind"] == "turn_end")
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_turn_is_retried_once_and_a_completed_turn_not_at_all() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;

    // a failed turn: the first retry requeues its input, a second is refused
    let (_, body) = host.send("r", "fail please", None).await;
    let session = body["session"].as_str().unwrap().to_owned();
    let seq = body["seq"].as_i64().unwrap();
    let failed = host.wait_turn_end(&session, seq).await;
    assert_eq!(failed["status"], "failed");
    let turn = failed["turn"].as_str().unwrap().to_owned();
    let (status, first) = host.retry(&turn).await;
    assert_eq!(
        (status, first["requeued"].clone()),
        (200, json!(1)),
        "{first}"
    );
    let (status, again) = host.retry(&turn).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "conflict", "{again}");
    // queued again, or taken by the retried turn already
    let said = again.to_string();
    assert!(
        said.contains("retried already") || said.contains("were taken by turn"),
        "{again}"
    );
    assert!(again["error"].get("transient").is_none(), "{again}");
    let ends = host
        .wait_for(&session, |es| {
            let ends = turn_ends(es);
            (ends.len() >= 2).then(|| Value::from(ends))
        })
        .await;
    // the retried turn fails again (same input): retrying it works once
    let second = ends[1]["turn"].as_str().unwrap().to_owned();
    assert_ne!(second, turn);
    // the refusal names the turn to retry instead (QA: it said only
    // "already retried or taken by a later turn")
    let (status, refused) = host.retry(&turn).await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused.to_string().contains(&format!(
            "its inputs were taken by turn {second}, which ended failed: retry that turn instead"
        )),
        "{refused}"
    );

    // a completed turn answered its inputs: nothing to retry
    let (_, body) = host.send("r", "hello", None).await;
    let seq = body["seq"].as_i64().unwrap();
    let done = host.wait_turn_end(&session, seq).await;
    assert_eq!(done["status"], "completed");
    let (status, refused) = host.retry(done["turn"].as_str().unwrap()).await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused.to_string().contains("completed"), "{refused}");

    let entries = host.entries(&session).await;
    let ends = turn_ends(&entries);
    let inputs: Vec<&Value> = ends.iter().map(|e| &e["inputs"]).collect();
    assert_eq!(
        inputs,
        [&json!([1]), &json!([1]), &json!([6])],
        "{entries:#?}"
    );
    // one delivery: the failed turns sent nothing (the scripted model shows
    // the unanswered message before "hello" as part of its inputs)
    let sent = deliveries(&entries);
    assert!(sent.len() == 1 && sent[0].ends_with("hello"), "{sent:?}");
    host.shutdown().await;
}

/// A turn is readable from the moment its bot starts it, before its first
/// step is stored: GET /v1/turns/{turn} and the bot's turn list show it
/// running, and a retry is refused as running, not as unknown. (Before,
/// both answered 404 until the first model call returned.)
#[tokio::test]
async fn a_running_turn_is_visible_before_its_first_step_is_stored() {
    let slow = r#"
[[rule]]
steps = [ { delay_ms = 1500, tool = "SendMessage", args = { text = "late" } } ]
"#;
    let host = TestFleet::new()
        .script("s", slow)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, sent) = host.send("r", "take your time", None).await;
    host.wait_running("r").await;
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let turn = bots["bots"][0]["running_turn"].as_str().unwrap().to_owned();

    let (status, body) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["turn"]["status"], "running", "{body}");
    assert_eq!(body["turn"]["session"], sent["session"], "{body}");
    let (_, list) = host.get("/v1/bots/r/turns", TOKEN).await;
    assert_eq!(list["turns"][0]["id"], json!(turn), "{list}");
    let (status, refused) = host.retry(&turn).await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused.to_string().contains("still running"), "{refused}");
    assert_eq!(refused["error"]["transient"], true, "{refused}");
    // bob does not see alice's running turn
    let (status, _) = host
        .get(
            &format!("/v1/turns/{turn}"),
            crate::support::fleet::BOB_TOKEN,
        )
        .await;
    assert_eq!(status, 404);

    let end = host
        .wait_turn_end(
            sent["session"].as_str().unwrap(),
            sent["seq"].as_i64().unwrap(),
        )
        .await;
    assert_eq!(end["turn"], json!(turn));
    let (_, body) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    assert_eq!(body["turn"]["status"], "completed", "{body}");
    host.shutdown().await;
}

/// A turn cancelled during its first model call keeps the time it began.
/// (Before, its row was first written at the cancel, so `started_at` was
/// the cancel time and the turn read as taking no time at all.)
#[tokio::test]
async fn a_turn_cancelled_in_its_first_model_call_keeps_its_start() {
    let slow = r#"
[[rule]]
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "late" } } ]
"#;
    let host = TestFleet::new()
        .script("s", slow)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, sent) = host.send("r", "take your time", None).await;
    host.wait_running("r").await;
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let turn = bots["bots"][0]["running_turn"].as_str().unwrap().to_owned();
    let (_, running) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    let began = running["turn"]["started_at"].as_i64().unwrap();
    let (status, body) = host
        .post_raw("/v1/bots/r/cancel", Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 200, "{body}");
    host.wait_turn_end(
        sent["session"].as_str().unwrap(),
        sent["seq"].as_i64().unwrap(),
    )
    .await;
    let (_, body) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    assert_eq!(body["turn"]["status"], "cancelled", "{body}");
    // the start the API showed while it ran, not the time of the cancel
    assert_eq!(body["turn"]["started_at"].as_i64(), Some(began), "{body}");
    // the person is told, with a retry (before, only a turn_end said
    // "cancelled" and the message sat unanswered with nothing to retry)
    let entries = host.entries(sent["session"].as_str().unwrap()).await;
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_cancelled")
        .unwrap_or_else(|| panic!("no turn_cancelled notice: {entries:#?}"));
    assert_eq!(notice["retry_turn"], json!(turn), "{notice}");
    let (status, body) = host.retry(&turn).await;
    assert_eq!(
        (status, body["requeued"].clone()),
        (200, json!(1)),
        "{body}"
    );
    host.shutdown().await;
}

/// Answers the newest user message with a SendMessage quoting it, and a
/// tool result with a plain stop.
fn quoting_model(request: &Value) -> Reply {
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    if last["role"] == "tool" {
        return Reply::text("");
    }
    let text = last_user_text(request).unwrap_or("").to_owned();
    let args = json!({ "text": format!("re: {text}") }).to_string();
    Reply::tool_call("call_1", "SendMessage", args)
}

/// Sends `text`, which fails (the server is told to), and returns its
/// turn and session.
async fn failed_turn(host: &TestHost, text: &str) -> (String, String) {
    let (_, sent) = host.send("r", text, None).await;
    let end = host
        .wait_turn_end(
            sent["session"].as_str().unwrap(),
            sent["seq"].as_i64().unwrap(),
        )
        .await;
    assert_eq!(end["status"], "failed", "{end}");
    (
        end["turn"].as_str().unwrap().to_owned(),
        sent["session"].as_str().unwrap().to_owned(),
    )
}

/// Retries `turn` and returns the last user message of the model request
/// that answered it and what the bot delivered.
async fn retried(
    host: &TestHost,
    server: &OpenAiServer,
    failed: &(String, String),
) -> (String, String) {
    let (turn, session) = failed;
    let before = server.request_count();
    let (status, body) = host.retry(turn).await;
    assert_eq!(status, 200, "{body}");
    server.wait_for_requests(before + 2).await;
    let asked = server.requests()[before].body.clone();
    let delivered = host
        .wait_for(session, |es| {
            deliveries(es).last().cloned().map(Value::from)
        })
        .await;
    (
        last_user_text(&asked).unwrap_or("").to_owned(),
        delivered.as_str().unwrap_or("").to_owned(),
    )
}

/// A retried turn answers its own input, not the messages sent after it.
/// (Before, its context held every later message its bot's tail had
/// pushed: retrying "gamma" after "delta" failed too asked the model with
/// "delta" last, and the reply to delta was filed as gamma's.)
#[tokio::test]
async fn a_retried_turn_answers_its_input_not_later_messages() {
    let server = OpenAiServer::builder()
        .responder(quoting_model)
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    // the bot is warm: its tail holds both failed inputs
    server.fail_next(2, Reply::error(500, "down"));
    let gamma = failed_turn(&host, "gamma").await;
    let _delta = failed_turn(&host, "delta").await;
    let (asked, said) = retried(&host, &server, &gamma).await;
    assert_eq!((asked.as_str(), said.as_str()), ("gamma", "re: gamma"));

    // and after a restart, from a tail read from the store
    server.fail_next(2, Reply::error(500, "down"));
    let epsilon = failed_turn(&host, "epsilon").await;
    let _zeta = failed_turn(&host, "zeta").await;
    let fleet = host.shutdown().await;
    let host = restart(fleet).await;
    let (asked, said) = retried(&host, &server, &epsilon).await;
    assert_eq!((asked.as_str(), said.as_str()), ("epsilon", "re: epsilon"));
    host.shutdown().await;
    server.shutdown().await;
}

/// A turn that replied and was then stopped, retried: the person has the
/// reply, so the retried turn is not told it sent nothing (a real model
/// would send the reply again), and it does not end `undelivered`. (A
/// failed call, a refusal, a second loop, the repeated-call guard or the
/// crash limit after the reply end a turn `completed`, without a retry:
/// turn_endings.rs, restarts.rs; a person's cancel leaves it to retry.)
#[tokio::test]
async fn a_retried_turn_that_had_replied_is_not_told_it_sent_nothing() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering;

    use tokio::sync::watch;

    // the reply; the step after it never answers (its gate stays shut):
    // the person stops the turn while it waits; retried, a stop
    let retried = Arc::new(AtomicBool::new(false));
    let after_retry = retried.clone();
    let (_open, shut) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |request| {
            if after_retry.load(Ordering::SeqCst) {
                Reply::text("done")
            } else if last_message(request).is_some_and(|m| m["role"] == "tool") {
                Reply::text("never").hold_until(shut.clone())
            } else {
                Reply::tool_call("call_1", "SendMessage", r#"{"text": "the answer is 42"}"#)
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .runtime("debounce_ms = 0\nextract_memory = false\n")
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (status, sent) = host.send("r", "what is the answer?", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    // the reply is stored and the next step's model call is out
    server.wait_for_requests(2).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    client
        .post_ok("/v1/bots/r/cancel", &json!({}))
        .await
        .unwrap();
    let end = host.wait_turn_end(&session, seq).await;
    assert_eq!(end["status"], "cancelled", "{end}");
    let turn = end["turn"].as_str().unwrap().to_owned();
    assert_eq!(
        deliveries(&host.entries(&session).await),
        ["the answer is 42"]
    );

    // retried once its bot has seen the turn end (a retry in between is
    // not queued: first_call_crash.rs)
    super::first_call_crash::until_its_bot_saw_the_end(&client).await;
    retried.store(true, Ordering::SeqCst);
    let body = client
        .post_ok(&format!("/v1/turns/{turn}/retry"), &json!({}))
        .await
        .unwrap();
    assert_eq!(body["requeued"], 1, "{body}");
    let entries = host
        .wait_for(&session, |es| {
            (turn_ends(es).len() == 2).then(|| serde_json::Value::from(es.to_vec()))
        })
        .await;
    let entries = entries.as_array().unwrap().clone();
    let ends = turn_ends(&entries);
    assert_eq!(ends[1]["status"], "completed", "{entries:#?}");
    assert!(
        !entries.iter().any(|e| e["kind"] == "reminder"),
        "{entries:#?}"
    );
    assert_eq!(deliveries(&entries), ["the answer is 42"]);
    host.shutdown().await;
    server.shutdown().await;
}
