//! What a turn resumed after a crash sees of the turn before it: every
//! entry that turn wrote, also those written after the resumed turn's
//! input arrived.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;

use super::crash::turn_ended;
use super::crash::wait_until;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

/// The messages the person sends.
const ASKED: [&str; 2] = ["first", "second"];

/// A model that answers a person's message with a slow Shell command
/// (marked by `<message>-started.txt` in the workspace), then reports
/// with SendMessage every message it has not reported yet (`[first]`),
/// then stops: a request missing what an earlier turn sent makes it
/// answer that message again.
fn model(request: &Value) -> Reply {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    match last["role"].as_str() {
        Some("user") => {
            let text = last["content"].as_str().unwrap_or("").to_owned();
            Reply::tool_call(
                &format!("shell-{text}"),
                "Shell",
                json!({ "command": format!("echo {text} > {text}-started.txt; sleep 3") })
                    .to_string(),
            )
        }
        Some("tool") if last["content"].as_str().is_some_and(|c| c == "delivered") => {
            Reply::text("")
        }
        _ => {
            let said = sent_texts(&messages).join(" ");
            let todo: Vec<String> = ASKED
                .iter()
                .filter(|a| {
                    messages
                        .iter()
                        .any(|m| m["role"] == "user" && m["content"] == **a)
                })
                .map(|a| format!("[{a}]"))
                .filter(|tag| !said.contains(tag.as_str()))
                .collect();
            Reply::tool_call(
                &format!("send-{}", messages.len()),
                "SendMessage",
                json!({ "text": format!("done {}", todo.join(" ")) }).to_string(),
            )
        }
    }
}

/// The texts of the SendMessage calls among `messages`.
fn sent_texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["function"]["name"] == "SendMessage")
        .filter_map(|c| {
            let args: Value = serde_json::from_str(c["function"]["arguments"].as_str()?).ok()?;
            Some(args["text"].as_str()?.to_owned())
        })
        .collect()
}

/// Waits (polling every 10 ms, at most 10 s) until `path` exists.
async fn wait_file(path: &Path) {
    for _ in 0..1000 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} never appeared", path.display());
}

/// Regression: turn A ("first") was cut off by a kill in its Shell call
/// while "second" waited; after the restart A finished (outcome unknown,
/// reply) and turn B began over "second". B, killed in its own Shell call
/// and resumed, had a context rebuilt only up to its input: everything A
/// wrote after "second" arrived was gone, A's call got a made-up "no
/// result recorded", and the model answered "first" a second time.
#[tokio::test]
async fn a_turn_resumed_twice_over_sees_all_the_turn_before_it_did() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let fleet = TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            "max_retries = 0\nstream = false",
        )
        .bot("r", "main", &["SendMessage", "Shell"])
        .tables("[review]\nshell = \"off\"");
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let workspace = fleet.path().join("data/workspace");
    let port = free_port();

    let host = HostProcess::start(&path, port, &log).await;
    let url = host.url.clone();
    let client = botfleet::client::Client::new(&url, TOKEN).unwrap();
    let (status, first) = client.send_message("r", "first", "k-first").await.unwrap();
    assert_eq!(status.as_u16(), 202, "{first}");
    let session = first["session"].as_str().unwrap().to_owned();
    wait_file(&workspace.join("first-started.txt")).await;
    // "second" waits in the queue while A's command runs
    let (status, second) = client
        .send_message("r", "second", "k-second")
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202, "{second}");
    let second_seq = second["seq"].as_i64().unwrap();
    host.kill9().await;

    // A resumes (outcome unknown), replies and completes; B starts its
    // command and is killed in it
    let host = HostProcess::start(&path, port, &log).await;
    wait_file(&workspace.join("second-started.txt")).await;
    let before = server.request_count();
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let es = wait_until(&url, &session, turn_ended(second_seq)).await;
    let requests = server.requests();
    let resumed = requests
        .get(before)
        .unwrap_or_else(|| panic!("no request after B resumed; log at {}", log.display()));
    let messages = resumed.messages();
    let shown = serde_json::to_string_pretty(messages).unwrap();
    // A's reply is in B's context, and A's call has its recorded result
    assert!(
        sent_texts(messages).iter().any(|t| t.contains("[first]")),
        "A's reply is missing from the resumed turn's request: {shown}"
    );
    let a_result = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "shell-first")
        .unwrap_or_else(|| panic!("A's call has no result: {shown}"));
    assert!(
        a_result["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("outcome unknown")),
        "{shown}"
    );
    assert!(
        !shown.contains("no result recorded"),
        "a result was made up: {shown}"
    );
    // B's input comes after what A did, as before the crash
    let at = |pick: &dyn Fn(&Value) -> bool| messages.iter().position(pick).unwrap();
    let input = at(&|m| m["role"] == "user" && m["content"] == "second");
    let reply =
        at(&|m| m["role"] == "assistant" && !sent_texts(std::slice::from_ref(m)).is_empty());
    assert!(reply < input, "{shown}");
    // "first" is answered once, "second" once
    let delivered = deliveries(&es);
    let count = |tag: &str| delivered.iter().filter(|d| d.contains(tag)).count();
    assert_eq!(count("[first]"), 1, "{delivered:?}");
    assert_eq!(count("[second]"), 1, "{delivered:?}");
    host.kill9().await;
    server.shutdown().await;
}
