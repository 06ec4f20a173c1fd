//! No part of a secret in a tool result cut at the output limit (32 KiB).
//! Regression (round 14, H2): the host cut a tool's output first and
//! scrubbed it of secrets after, so a secret the cut went through reached
//! the model and the transcript in part (`…AAAASUPERSEC`, 8 of the 16
//! chars of another user's token), and the window Read's note pointed to
//! next began with the rest (`RETVALUE_0123…`).

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;

/// The fleet file's `[[secrets]]` value (bot `r` does not list it: every
/// bot's results are scrubbed of it).
const FLEET_SECRET: &str = "SUPERSECRETVALUE_0123456789abcdef";

/// The calls the model makes, one after the other: each file read whole
/// (cut at the limit inside the secret), then on from Read's note, then
/// printed by Shell.
fn calls() -> Vec<(&'static str, Value)> {
    vec![
        ("Read", json!({"path": "sec1.txt"})),
        (
            "Read",
            json!({"path": "sec1.txt", "offset": 1, "column": 32769}),
        ),
        ("Shell", json!({"command": "cat sec1.txt"})),
        ("Read", json!({"path": "tok.txt"})),
        (
            "Read",
            json!({"path": "tok.txt", "offset": 1, "column": 32769}),
        ),
        ("Shell", json!({"command": "cat tok.txt"})),
    ]
}

fn model(request: &Value) -> Reply {
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    // the next call is the one after the results so far
    let next = match last["role"].as_str() {
        Some("user" | "tool") => request["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count()),
        _ => usize::MAX,
    };
    match calls().get(next) {
        Some((name, args)) => Reply::tool_call(&format!("c{next}"), name, args.to_string()),
        None => Reply::text("done"),
    }
}

/// Every run of `len` chars of `secret` found in `text`.
fn parts_in(secret: &str, text: &str, len: usize) -> Vec<String> {
    (0..=secret.len() - len)
        .map(|i| &secret[i..i + len])
        .filter(|part| text.contains(part))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn tool_results_cut_through_a_secret_show_no_part_of_it() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let fleet = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage", "Read", "Shell"])
        // commands that may read others' arguments: every bot's results
        // are scrubbed of the host's and other people's secrets (with
        // isolated commands only of its owner's: suite::shell_limits)
        .runtime(
            "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n\
             shell_sandbox = \"off\"\n",
        )
        // the commands run (shadow review) so that their output is seen
        .tables(&format!(
            "[[secrets]]\nname = \"DEPLOY_KEY\"\nvalue = \"{FLEET_SECRET}\"\n\n\
             [review]\nshell = \"shadow\"\n"
        ));
    let workspace = fleet.path().join("data/workspace/alice");
    std::fs::create_dir_all(&workspace).unwrap();
    for (file, secret) in [("sec1.txt", FLEET_SECRET), ("tok.txt", BOB_TOKEN)] {
        // the secret starts 8 bytes before the limit
        let text = format!("{}{secret}{}", "A".repeat(32760), "B".repeat(100));
        std::fs::write(workspace.join(file), text).unwrap();
    }
    let host = fleet.start().await;
    let (session, end) = host.end_turn("r", "read the files").await;
    // the model answers in text, which no one is sent: "undelivered"
    assert_eq!(end["status"], "undelivered", "{end}");

    // what the model was given: each result once it was answered
    let results: Vec<String> = server
        .requests()
        .last()
        .unwrap()
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(results.len(), calls().len(), "{results:#?}");
    let entries = serde_json::to_string(&host.entries(&session).await).unwrap();
    for (i, result) in results.iter().enumerate() {
        for secret in [FLEET_SECRET, BOB_TOKEN] {
            let parts = parts_in(secret, result, 4);
            assert!(
                parts.is_empty(),
                "result {i} shows {parts:?}: …{}",
                tail(result)
            );
        }
        // the text around the secret is all there, the secret redacted
        match i % 3 {
            0 => assert!(
                result.contains("AAAA[redacted]\n[truncated at the output limit"),
                "result {i}: …{}",
                tail(result)
            ),
            1 => assert_eq!(result, &format!("[redacted]{}", "B".repeat(100))),
            _ => {
                // the secret is left out whole: it and the Bs not shown
                let secret = if i < 3 { FLEET_SECRET } else { BOB_TOKEN };
                let note = format!("AAAA\n[... {} more bytes not shown]", secret.len() + 100);
                assert!(result.contains(&note), "result {i}: …{}", tail(result));
            }
        }
    }
    // the stored results too (runs of 8: the transcript says "tokens")
    for secret in [FLEET_SECRET, BOB_TOKEN] {
        let parts = parts_in(secret, &entries, 8);
        assert!(parts.is_empty(), "the transcript shows {parts:?}");
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// The last 200 bytes of `text`, for a message.
fn tail(text: &str) -> &str {
    let mut at = text.len().saturating_sub(200);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}
