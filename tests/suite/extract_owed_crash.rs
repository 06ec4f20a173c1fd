//! A turn's end and its owed fact extraction are one commit: a real host
//! (`botfleet run`) is killed with SIGKILL as soon as the API shows the
//! turn ended, while its extractor, an OpenAI-compatible server on
//! loopback, has not answered (it holds every extraction request); the
//! restarted host, whose extractor answers, runs the extraction and the
//! fact reaches memory.
//!
//! Before, the owed record was a write of its own after the end: a kill
//! between the two lost the extraction for good. That window is too short
//! to hit from another process every time; the unit test
//! `a_completed_turn_owes_its_extraction_in_the_commit_that_ends_it`
//! (`actors/src/memory/extract_owed_tests.rs`) holds the store's writer
//! right after the end's commit and fails on the old code. This test is
//! the end-to-end proof that what the end commits is enough to finish the
//! extraction after a crash.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;

use super::crash::send;
use super::crash::turn_ended;
use super::crash::wait_until;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

/// How the extraction's system prompt (`prompts/extract_facts.md`) starts.
const EXTRACTOR: &str = "You maintain the long-term memory of the bot";
const FACT: &str = "Alice owns a green kayak";

fn is_extraction(body: &Value) -> bool {
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with(EXTRACTOR))
}

/// The bot answers with SendMessage, then stops; the extractor adds
/// [`FACT`] once `answer` is set, and until then holds the request (its
/// headers come after a minute, long after the host is killed).
fn model(body: &Value, answer: &AtomicBool) -> Reply {
    if is_extraction(body) {
        let added = json!({ "add": [{ "text": FACT }], "replace": [], "remove": [] });
        let reply = Reply::text(added.to_string());
        return if answer.load(Ordering::SeqCst) {
            reply
        } else {
            reply.delay_headers(Duration::from_secs(60))
        };
    }
    let messages = body["messages"].as_array().unwrap();
    if messages.last().is_some_and(|m| m["role"] == "tool") {
        return Reply::text("");
    }
    let id = format!("call_{}", messages.len());
    Reply::tool_call(
        &id,
        "SendMessage",
        json!({ "text": "A fine boat!" }).to_string(),
    )
}

/// The profile texts of alice's user scope, as the memory API shows them.
async fn profile(url: &str) -> Vec<String> {
    let c = botfleet::client::Client::new(url, TOKEN).unwrap();
    let mem = c.get("/v1/bots/a1/memory").await.unwrap();
    mem["scopes"][1]["profile"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_host_killed_as_its_turn_ends_runs_the_turns_extraction_after_restart() {
    let answer = Arc::new(AtomicBool::new(false));
    let shared = Arc::clone(&answer);
    let server = OpenAiServer::builder()
        .responder(move |b| model(b, &shared))
        .start()
        .await;
    let fleet = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = true\n")
        .bot("a1", "main", &["SendMessage"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();

    let host = HostProcess::start(&path, port, &log).await;
    let sent = send(&host.url, "a1", "I bought a green kayak").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    wait_until(&host.url, &session, turn_ended(seq)).await;
    // at once: whether or not the extractor was asked yet, nothing answered it
    host.kill9().await;

    answer.store(true, Ordering::SeqCst);
    let host = HostProcess::start(&path, port, &log).await;
    let facts = poll(30, async || {
        let p = profile(&host.url).await;
        if p.is_empty() {
            Err("the extraction the killed host owed never ran".into())
        } else {
            Ok(p)
        }
    })
    .await;
    assert_eq!(facts, [FACT]);
    host.kill9().await;
    drop(fleet);
    server.shutdown().await;
}
