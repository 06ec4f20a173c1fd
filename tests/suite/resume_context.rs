//! What a turn resumed after a crash sees of the turns before it: every
//! entry they wrote, also those written after the resumed turn's input
//! arrived.

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
use crate::support::openai_server::without_time;
use crate::support::openai_server::without_times;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

/// The messages the person sends.
const ASKED: [&str; 3] = ["first", "second", "third"];

/// A model that answers a person's message with a slow Shell command
/// (marked by `<message>-started.txt` in the workspace), then reports
/// with SendMessage every message it has not reported yet (`[first]`),
/// then stops: a request missing what an earlier turn sent or did makes
/// it answer that message again.
fn model(request: &Value) -> Reply {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    match last["role"].as_str() {
        Some("user") => {
            let text = without_time(last["content"].as_str().unwrap_or("")).to_owned();
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
                    messages.iter().any(|m| {
                        m["role"] == "user"
                            && m["content"].as_str().map(without_times).as_deref() == Some(*a)
                    })
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

/// Regression: a turn rebuilt from the store after a kill had a context
/// that stopped at its input: what the turn before it wrote after that
/// input arrived was gone, that turn's call got a made-up "no result
/// recorded", and the model answered a message a second time.
///
/// Turn A ("first") is killed in its Shell call while "second" waits.
/// After the restart "second" interrupts A's resumed run, as it would
/// have interrupted the run the kill cut off: A's command is outcome
/// unknown, A ends interrupted without a reply, and turn B takes both
/// messages. B is cancelled in its own Shell call just after "third"
/// came, so its command's result and its end are written after "third";
/// turn C takes "third", is killed in its Shell call and resumed: its
/// context, rebuilt from the store, must hold all A and B did.
#[tokio::test]
async fn a_turn_resumed_twice_over_sees_all_the_turns_before_it_did() {
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
    let workspace = fleet.path().join("data/workspace/alice");
    let port = free_port();

    let host = HostProcess::start(&path, port, &log).await;
    let url = host.url.clone();
    let client = botfleet::client::Client::new(&url, TOKEN).unwrap();
    let seq = |body: &Value| body["seq"].as_i64().unwrap();
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
    host.kill9().await;

    // "second" interrupts A's resumed run; B takes both messages and
    // starts its command, and is cancelled in it after "third" came
    let host = HostProcess::start(&path, port, &log).await;
    wait_file(&workspace.join("second-started.txt")).await;
    let (status, third) = client.send_message("r", "third", "k-third").await.unwrap();
    assert_eq!(status.as_u16(), 202, "{third}");
    let cancel = client
        .post_ok("/v1/bots/r/cancel", &json!({}))
        .await
        .unwrap();
    assert_eq!(cancel["cancelled"], true, "{cancel}");
    // C takes "third", starts its command and is killed in it
    wait_file(&workspace.join("third-started.txt")).await;
    let before = server.request_count();
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let es = wait_until(&url, &session, turn_ended(seq(&third))).await;
    let requests = server.requests();
    let resumed = requests
        .get(before)
        .unwrap_or_else(|| panic!("no request after C resumed; log at {}", log.display()));
    let messages = resumed.messages();
    let shown = serde_json::to_string_pretty(messages).unwrap();
    let at = |pick: &dyn Fn(&Value) -> bool| {
        messages
            .iter()
            .position(pick)
            .unwrap_or_else(|| panic!("not in the resumed turn's request: {shown}"))
    };
    let call = |id: &'static str| {
        at(&move |m: &Value| {
            m["role"] == "assistant"
                && m["tool_calls"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["id"] == id))
        })
    };
    let result =
        |id: &'static str| at(&move |m: &Value| m["role"] == "tool" && m["tool_call_id"] == id);
    // an input after its time line
    let input = |text: &'static str| {
        at(&move |m: &Value| {
            m["role"] == "user" && m["content"].as_str().map(without_times).as_deref() == Some(text)
        })
    };
    // A's call has its recorded result, and so has B's (written after
    // "third"): none is made up
    let a_result = &messages[result("shell-first")];
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
    // in the order the turns saw them
    let order = [
        input("first"),
        call("shell-first"),
        result("shell-first"),
        input("second"),
        call("shell-second"),
        result("shell-second"),
        input("third"),
        call("shell-third"),
    ];
    assert!(order.is_sorted(), "{order:?}: {shown}");
    // A ended interrupted without a reply, B cancelled: C answered all
    let end_of = |inputs: Vec<i64>| {
        es.iter()
            .find(|e| e["kind"] == "turn_end" && e["inputs"] == json!(inputs))
            .map(|e| e["status"].clone())
            .unwrap_or_else(|| panic!("no turn over {inputs:?} ended: {es:#?}"))
    };
    assert_eq!(end_of(vec![seq(&first)]), "interrupted");
    assert_eq!(end_of(vec![seq(&first), seq(&second)]), "cancelled");
    let delivered = deliveries(&es);
    let count = |tag: &str| delivered.iter().filter(|d| d.contains(tag)).count();
    for tag in ["[first]", "[second]", "[third]"] {
        assert_eq!(count(tag), 1, "{tag}: {delivered:?}");
    }
    host.kill9().await;
    server.shutdown().await;
}
