//! A fact extraction cut off before an owner change does not carry the
//! former owner's words into the new owner's memory: a real host
//! (`botfleet run`) whose extractor, an OpenAI-compatible server on
//! loopback, holds every extraction request is killed with SIGKILL while
//! two turns of alice owe theirs, one with bot `ann`, one with bot `a1`;
//! it restarts with `ann` given to bob in fleet.toml. `ann`'s owed
//! extraction (alice's PIN) is dropped: bob's memory never gets it and the
//! extractor is not asked again; `a1`'s, whose owner did not change, runs
//! again and lands in alice's memory.
//!
//! Before, the re-run checked only that the bot was not removed, and wrote
//! "alice's PIN is 9876" into `user:bob`, shown in every prompt of bob's
//! bots, while a turn run after the change reads no message of alice.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use super::crash::turn_ended;
use super::crash::wait_until;
use super::memory_restart::answers_once;
use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::memory_model::adds;
use crate::support::memory_model::is_extraction;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

/// What alice tells `ann`, and what its extractor makes of it.
const PIN_SAID: &str = "my PIN is 9876, hello";
const PIN: &str = "9876";
const PIN_FACT: &str = "Alice's PIN is 9876";
/// What alice tells `a1`, and what its extractor makes of it.
const BIKE_SAID: &str = "I bought a red bicycle";
const BIKE_FACT: &str = "Alice owns a red bicycle";

const TOOLS: &[&str] = &["SendMessage"];

/// The bots answer with SendMessage, then stop; the extractor adds the
/// fact of the message it reads once `answer` is set, and until then
/// holds the request (its headers come after a minute, long after the
/// host is killed).
fn model(body: &Value, answer: &AtomicBool) -> Reply {
    if is_extraction(body) {
        let fact = if body.to_string().contains(PIN) {
            PIN_FACT
        } else {
            BIKE_FACT
        };
        let reply = adds(fact);
        return if answer.load(Ordering::SeqCst) {
            reply
        } else {
            reply.delay_headers(Duration::from_secs(60))
        };
    }
    answers_once(body, "Noted.")
}

/// Sends `text` to `bot` as alice and waits until the turn that answers
/// it ended (its extraction is owed from then on).
async fn tell(url: &str, bot: &str, text: &str) {
    let c = botfleet::client::Client::new(url, TOKEN).unwrap();
    let key = format!("owed-owner-{bot}");
    let (status, sent) = c.send_message(bot, text, &key).await.unwrap();
    assert_eq!(status.as_u16(), 202, "{sent}");
    let session = sent["session"].as_str().unwrap();
    wait_until(url, session, turn_ended(sent["seq"].as_i64().unwrap())).await;
}

/// The fact extraction requests the extractor got that read alice's PIN.
fn pin_extractions(server: &OpenAiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| is_extraction(&r.body) && r.body.to_string().contains(PIN))
        .count()
}

/// Waits until the extractor has been asked `n` times in all.
async fn wait_extractions(server: &OpenAiServer, n: usize) {
    let count = || {
        server
            .requests()
            .iter()
            .filter(|r| is_extraction(&r.body))
            .count()
    };
    let wait = async {
        while count() < n {
            server.wait_for_requests(server.request_count() + 1).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("the extractor was not asked {n} times"));
}

/// Every memory text `token`'s user sees of `bot`, in all its scopes and
/// layers.
async fn memory_texts(url: &str, token: &str, bot: &str) -> Vec<String> {
    let c = botfleet::client::Client::new(url, token).unwrap();
    let mem = c.get(&format!("/v1/bots/{bot}/memory")).await.unwrap();
    let mut out = Vec::new();
    for scope in mem["scopes"].as_array().unwrap() {
        for layer in ["profile", "log", "notes"] {
            for item in scope[layer]["items"].as_array().unwrap() {
                out.push(item["text"].as_str().unwrap().to_owned());
            }
        }
    }
    out
}

#[tokio::test]
async fn an_extraction_owed_before_an_owner_change_is_dropped_and_one_without_runs_again() {
    let answer = Arc::new(AtomicBool::new(false));
    let shared = Arc::clone(&answer);
    let server = OpenAiServer::builder()
        .responder(move |b| model(b, &shared))
        .start()
        .await;
    let fleet = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = true\n")
        .bot("ann", "main", TOOLS)
        .bot("a1", "main", TOOLS);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();

    let host = HostProcess::start(&path, port, &log).await;
    // ann's first: the restart runs the owed ones oldest first, one at a
    // time, so once a1's fact is in, ann's was decided
    tell(&host.url, "ann", PIN_SAID).await;
    tell(&host.url, "a1", BIKE_SAID).await;
    // both extractions asked and held: neither can finish before the kill
    wait_extractions(&server, 2).await;
    assert_eq!(pin_extractions(&server), 1);
    host.kill9().await;

    let fleet = fleet.without_bot("ann").bot_of("ann", "main", TOOLS, "bob");
    fleet.write();
    answer.store(true, Ordering::SeqCst);
    let mut host = HostProcess::start(&path, port, &log).await;
    let alices = poll(30, async || {
        let texts = memory_texts(&host.url, TOKEN, "a1").await;
        if texts.is_empty() {
            Err("a1's owed extraction never ran again".into())
        } else {
            Ok(texts)
        }
    })
    .await;
    assert_eq!(alices, [BIKE_FACT], "alice's memory, through a1");
    let bobs = memory_texts(&host.url, BOB_TOKEN, "ann").await;
    assert!(
        bobs.iter().all(|t| !t.contains(PIN)),
        "alice's PIN reached bob's memory through ann: {bobs:?}"
    );
    assert_eq!(
        pin_extractions(&server),
        1,
        "the extractor read alice's PIN again after ann went to bob"
    );
    host.wait_log("fact extraction dropped: the bot has another owner")
        .await;
    host.kill9().await;
    drop(fleet);
    server.shutdown().await;
}
