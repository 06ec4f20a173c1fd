//! A host whose bots use an `openai` provider pointed at an OpenAI-compatible
//! server on loopback: the reply the model delivers through a SendMessage
//! tool call reaches the CLI, streaming and not; tool-call ids a provider
//! leaves out or repeats, malformed arguments sent back to a strict server,
//! answers past the size cap or the call deadline, and a stream retried
//! after text.

use std::time::Duration;
use std::time::Instant;

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::Endless;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;
use crate::support::openai_server::without_time;
use crate::support::process::cli;

/// Answers a user message with a SendMessage tool call quoting it, and a
/// tool result with a plain stop.
fn echo_model(request: &Value) -> Reply {
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    if last["role"] == "tool" {
        return Reply::text("").usage(100, 1);
    }
    let text = without_time(last["content"].as_str().unwrap_or("")).to_owned();
    let args = json!({ "text": format!("model says: {text}") }).to_string();
    Reply::tool_call("call_1", "SendMessage", args)
        .usage(120, 9)
        .cached(64)
}

async fn roundtrip(stream: bool) {
    let server = OpenAiServer::builder()
        .arg_chunk_bytes(3)
        .responder(echo_model)
        .start()
        .await;
    let extra = format!("stream = {stream}\nmax_retries = 1");
    let host = TestFleet::new()
        .openai("main", &server.base_url(), &extra)
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (code, out, err) = cli(&["send", "r", "héllo wörld"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!(out.trim(), "model says: héllo wörld");
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "one step with the tool call, one after its result"
    );
    let first = &requests[0].body;
    assert_eq!(first["stream"], json!(stream));
    assert_eq!(first["model"], "test-model");
    assert_eq!(first["tools"][0]["function"]["name"], "SendMessage");
    assert_eq!(first["messages"][0]["role"], "system");
    let second = &requests[1].body;
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_1");
    // the prefix of the second request is the whole first request
    let n = first["messages"].as_array().unwrap().len();
    assert_eq!(
        second["messages"].as_array().unwrap()[..n],
        first["messages"].as_array().unwrap()[..]
    );
    host.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn streaming_provider_roundtrip_through_the_cli() {
    roundtrip(true).await;
}

#[tokio::test]
async fn non_streaming_provider_roundtrip_through_the_cli() {
    roundtrip(false).await;
}

#[tokio::test]
async fn a_provider_down_past_its_retries_fails_the_turn_visibly() {
    let server = OpenAiServer::builder()
        .fail_next(10, Reply::error(503, "overloaded"))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 1")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (code, out, err) = cli(&["send", "r", "anyone there?"], &host.url, TOKEN).await;
    // 3: the turn failed (2 is a usage error)
    assert_eq!(code, 3, "stdout: {out}\nstderr: {err}");
    assert!(err.contains("retry"), "{err}");
    let (_, transcript, _) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert!(transcript.contains("anyone there?"), "{transcript}");
    assert!(
        transcript.contains("[turn_failed]") && transcript.contains("503"),
        "{transcript}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// The step of the turn a request is for: the assistant messages after
/// the newest user message.
fn step_of(request: &Value) -> usize {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last_user = messages.iter().rposition(|m| m["role"] == "user");
    messages[last_user.map_or(0, |i| i + 1)..]
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// Two Shell steps and a reply, each call with the id `id(step)` (empty:
/// no id at all), against a strict server; returns the ids the calls ran
/// under.
async fn shell_steps_with_ids(id: fn(usize) -> &'static str) -> Vec<String> {
    let server = OpenAiServer::builder()
        .strict()
        .responder(move |request| {
            let step = step_of(request);
            match step {
                0 => Reply::tool_call(id(step), "Shell", r#"{"command": "echo one"}"#),
                1 => Reply::tool_call(id(step), "Shell", r#"{"command": "echo two"}"#),
                2 => Reply::tool_call(id(step), "SendMessage", r#"{"text": "done"}"#),
                _ => Reply::text(""),
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage", "Shell"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "run both").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    let results: Vec<(String, String)> = entries
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap().to_owned(),
                e["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(results.len(), 3, "{results:#?}");
    assert!(results[0].1.starts_with("exit code: 0\n") && results[0].1.contains("one"));
    assert!(results[1].1.starts_with("exit code: 0\n") && results[1].1.contains("two"));
    let ids: Vec<String> = results.iter().map(|(id, _)| id.clone()).collect();
    let unique: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), 3, "one id per call: {ids:?}");
    assert_eq!(deliveries(&entries), vec!["done"]);
    // the last request: each call answered under its own id
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let messages = requests[3].messages();
    let called: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let answered: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(called, answered);
    assert_eq!(called, ids);
    host.shutdown().await;
    server.shutdown().await;
    ids
}

#[tokio::test]
async fn calls_without_ids_each_run_under_an_id_of_their_own() {
    let ids = shell_steps_with_ids(|_| "").await;
    assert!(ids.iter().all(|id| id.starts_with("call_")), "{ids:?}");
}

#[tokio::test]
async fn an_id_repeated_in_every_step_is_renamed_and_every_call_runs() {
    let ids = shell_steps_with_ids(|_| "call_0").await;
    assert_eq!(ids[0], "call_0", "the first use keeps the provider's id");
}

#[tokio::test]
async fn cut_off_arguments_do_not_poison_later_requests() {
    let server = OpenAiServer::builder()
        .strict()
        .responder(|request| {
            let asked = last_user_text(request).unwrap_or("").to_owned();
            match (asked.contains("first"), step_of(request)) {
                (true, 0) => Reply::tool_call("c1", "SendMessage", r#"{"text": "cut off"#),
                (true, 1) => Reply::tool_call("c2", "SendMessage", r#"{"text": "whole"}"#),
                (false, 0) => Reply::tool_call("c3", "SendMessage", r#"{"text": "again"}"#),
                _ => Reply::text(""),
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "first message").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (_, end) = host.end_turn("r", "second message").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    assert_eq!(deliveries(&entries), vec!["whole", "again"]);
    // the model was told its arguments were invalid ...
    let first_result = entries.iter().find(|e| e["kind"] == "tool_result").unwrap();
    assert_eq!(first_result["is_error"], true, "{first_result}");
    // ... and every later request sends them as `{}`
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    for request in &requests[1..] {
        let c1 = request
            .messages()
            .iter()
            .filter_map(|m| m["tool_calls"].as_array())
            .flatten()
            .find(|c| c["id"] == "c1")
            .unwrap();
        assert_eq!(c1["function"]["arguments"], "{}");
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// Runs one turn against `reply` with the provider `extra` keys; returns
/// the turn_failed notice text.
async fn failed_turn(reply: Reply, extra: &str) -> String {
    let server = OpenAiServer::builder().reply(reply).start().await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), extra)
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "go").await;
    assert_eq!(end["status"], "failed", "{end}");
    let entries = host.entries(&session).await;
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    assert_eq!(server.request_count(), 1);
    host.shutdown().await;
    server.shutdown().await;
    notice["text"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_endless_answer_fails_the_turn_at_the_size_cap() {
    let text = failed_turn(
        Reply::endless(Endless::Arguments, Duration::ZERO),
        "max_response_bytes = 4096",
    )
    .await;
    assert!(
        text.contains("the model's answer passed 4096 bytes"),
        "{text}"
    );
}

#[tokio::test]
async fn a_keep_alive_drip_fails_the_turn_at_the_call_deadline() {
    let started = Instant::now();
    let text = failed_turn(
        Reply::endless(Endless::Comments, Duration::from_millis(20)),
        "timeout_s = 1\ncall_timeout_s = 1",
    )
    .await;
    assert!(
        text.contains("the model call took longer than 1 s"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_stream_cut_after_text_is_retried_without_doubling_it_for_the_loop_watch() {
    // 8 equal lines are fine; the 16 of both attempts together would be a
    // loop (12 equal lines)
    let lines = "the same line\n".repeat(8);
    let text_events = lines.chars().count().div_ceil(4);
    let server = OpenAiServer::builder()
        .reply(
            Reply::tool_call("c1", "SendMessage", r#"{"text": "never"}"#)
                .with_text(&lines)
                .cut_after(1 + text_events),
        )
        .reply(Reply::tool_call("c1", "SendMessage", r#"{"text": "done"}"#).with_text(&lines))
        .reply(Reply::text(""))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 1")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "go").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    assert_eq!(deliveries(&entries), vec!["done"]);
    let assistant: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "assistant")
        .collect();
    assert_eq!(assistant[0]["text"], lines.as_str(), "stored once");
    assert_eq!(server.request_count(), 3);
    host.shutdown().await;
    server.shutdown().await;
}
