//! A stop under load is prompt and starts no new work. A real host
//! (`botfleet run`) whose bots are kept busy by a flood of messages, their
//! model a loopback OpenAI server that answers after a short delay, is
//! sent SIGTERM while a client's upload is still in flight: from the
//! signal on the model gets no request (before, turns kept starting and
//! calling it until the store closed, 20–30 s later under load), the
//! upload in flight is answered `503 unavailable` once the 5 s drain is
//! over (before, it was served on past the drain), no message sent during
//! the stop is admitted, and the host exits within the stop's bound.
//! After a restart every admitted message is answered exactly once: the
//! cut-off turns resume, the queued inputs run.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;
use crate::support::process::signal;

/// The bots the flood keeps busy.
const BOTS: [&str; 3] = ["b1", "b2", "b3"];

/// Messages each bot is sent at most.
const PER_BOT: usize = 40;

/// The stop's documented bound, signal to exit (docs/operations.md), and
/// the margin this test allows beyond it (a loaded test machine).
const STOP_BOUND: Duration = Duration::from_secs(15 + 10);

/// What the test allows between the host's "stopping…" line and the
/// model's server recording a request the host sent just before it (the
/// test's own scheduling): far less than the seconds turns ran on before.
const SLACK: Duration = Duration::from_millis(250);

/// How long the model takes to answer before the stop: longer than the
/// test takes to get there, so the flood's turns are still running.
const HUNG: Duration = Duration::from_secs(10);

/// How long it takes after the stop (the restart's turns).
const PROMPT: Duration = Duration::from_millis(50);

/// The question ids (`q-<bot>-<n>`) in `text`.
fn ids(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("q-"))
        .map(str::to_owned)
        .collect()
}

/// The model: a turn answers every question in its context that no
/// SendMessage of the conversation answered yet, with one SendMessage
/// naming them, and ends once none is left. (Not only the questions after
/// its last assistant message, nor only until its last message is a tool
/// result: a message admitted while a model call is out is stored before
/// the step that call makes, so the next turn, which has it among its
/// inputs, shows it before that step. A model that looked only past its
/// last assistant message never answered it: the previous attempt at this
/// test lost such messages, q-b1-8..12, for that reason, not for the
/// stop.) Every request's arrival is recorded. Until `released` the
/// model hangs (each answer waits [`HUNG`]), so at the signal every bot
/// has a turn running and inputs queued however fast the machine; after
/// it, it answers within [`PROMPT`].
fn model(body: &Value, arrivals: &Mutex<Vec<Instant>>, released: &AtomicBool) -> Reply {
    arrivals.lock().unwrap().push(Instant::now());
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let delay = if released.load(Ordering::SeqCst) {
        PROMPT
    } else {
        HUNG
    };
    let answered: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| ids(&m["tool_calls"].to_string()))
        .collect();
    let mut asked: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| ids(&m["content"].to_string()))
        .filter(|id| !answered.contains(id))
        .collect();
    asked.dedup();
    if asked.is_empty() {
        // all answered (the step after its SendMessage): the turn ends
        return Reply::text("").delay_headers(delay);
    }
    let text = format!("answered: {}", asked.join(" "));
    Reply::tool_call(
        &format!("call_{}", messages.len()),
        "SendMessage",
        json!({ "text": text }).to_string(),
    )
    .delay_headers(delay)
}

/// What the flood had admitted: each message's id and session, and the
/// ids of those sent after the test saw the stop begin.
#[derive(Default)]
struct Sent {
    admitted: Vec<(String, String)>,
    admitted_during_stop: Vec<String>,
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_stop_under_load_starts_no_new_work_is_bounded_and_loses_nothing() {
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let released = Arc::new(AtomicBool::new(false));
    let (recorded, release) = (arrivals.clone(), released.clone());
    let server = OpenAiServer::builder()
        .responder(move |body| model(body, &recorded, &release))
        .start()
        .await;
    let mut fleet = TestFleet::new().openai("main", &server.base_url(), "max_retries = 0");
    for bot in BOTS {
        fleet = fleet.bot(bot, "main", &["SendMessage"]);
    }
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let mut host = HostProcess::start(&path, port, &log).await;

    // the flood: one sender per bot, each message sent once the last was
    // admitted, until its bot has had PER_BOT or the host stops
    let stopping = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(Mutex::new(Sent::default()));
    let mut senders = Vec::new();
    for bot in BOTS {
        let (url, stopping, sent) = (host.url.clone(), stopping.clone(), sent.clone());
        senders.push(tokio::spawn(async move {
            let c = botfleet::client::Client::new(&url, TOKEN).unwrap();
            for n in 0..PER_BOT {
                let id = format!("q-{bot}-{n}");
                let during_stop = stopping.load(Ordering::SeqCst);
                let answer = c
                    .send_message(bot, &format!("please answer {id}"), &format!("key-{id}"))
                    .await;
                let mut sent = sent.lock().unwrap();
                match answer {
                    Ok((status, body)) if status.as_u16() == 202 => {
                        if during_stop {
                            sent.admitted_during_stop.push(id.clone());
                        }
                        let session = body["session"].as_str().unwrap().to_owned();
                        sent.admitted.push((id, session));
                    }
                    // refused (503) or the connection closed: the host stops
                    Ok(_) | Err(_) => {
                        if during_stop {
                            return;
                        }
                    }
                }
            }
        }));
    }
    // the bots are busy and have messages queued
    poll(30, async || {
        let asked = arrivals.lock().unwrap().len();
        let admitted = sent.lock().unwrap().admitted.len();
        if asked >= BOTS.len() && admitted >= 30 {
            Ok(())
        } else {
            Err(format!(
                "the flood never got going: {asked} model requests, {admitted} messages admitted"
            ))
        }
    })
    .await;

    // an upload in flight at the signal: its head is in, its body is not
    let mut upload = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let body = json!({ "text": "please answer q-slow-0" }).to_string();
    let head = format!(
        "POST /v1/bots/b1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\nidempotency-key: key-q-slow-0\r\n\
         content-length: {}\r\n\r\n{}",
        body.len(),
        &body[..5]
    );
    upload.write_all(head.as_bytes()).await.unwrap();
    // a request on another connection, answered: the upload, connected
    // before it, is being served by then
    // and the bots still have work: a turn running, and inputs queued, or
    // the whole flood in (then the running turns hold it: a flood sent
    // before this look, all folded into one turn per bot, left nothing
    // queued, and those turns ended in the 30 s this waited — a full run
    // on a loaded machine, 2026-12-05)
    let c = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    poll(30, async || {
        let list = c.get("/v1/bots").await.unwrap();
        let bots = list["bots"].as_array().cloned().unwrap_or_default();
        let running = bots.iter().filter(|b| !b["running_turn"].is_null()).count();
        let queued: u64 = bots.iter().filter_map(|b| b["queued"].as_u64()).sum();
        let all_in = sent.lock().unwrap().admitted.len() == BOTS.len() * PER_BOT;
        if running > 0 && (queued >= 3 || all_in) {
            Ok(())
        } else {
            Err(format!("no work left to stop: {list}"))
        }
    })
    .await;

    released.store(true, Ordering::SeqCst);
    let signalled = Instant::now();
    signal(host.child.id().unwrap(), "TERM");
    host.wait_log("stopping…").await;
    let stop_seen = Instant::now();
    stopping.store(true, Ordering::SeqCst);

    // the upload in flight gets the drain, then a clear refusal
    let mut answer = Vec::new();
    let read = tokio::time::timeout(STOP_BOUND, upload.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(read.is_ok(), "the upload was never answered");
    assert!(
        answer.starts_with("HTTP/1.1 503")
            && answer.contains("\"unavailable\"")
            && answer.contains("host stopped"),
        "the upload in flight was not refused with 503 unavailable after the drain: {answer:?}"
    );

    let exited = tokio::time::timeout(STOP_BOUND, host.child.wait()).await;
    let took = signalled.elapsed();
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
        "the host did not stop cleanly within {STOP_BOUND:?}; log:\n{}",
        log_text()
    );
    assert!(took < STOP_BOUND, "the stop took {took:?}");
    for s in senders {
        s.await.unwrap();
    }

    // no model request from the signal on
    let late: Vec<Duration> = arrivals
        .lock()
        .unwrap()
        .iter()
        .filter(|t| **t > stop_seen + SLACK)
        .map(|t| t.duration_since(stop_seen))
        .collect();
    assert!(
        late.is_empty(),
        "{} model request(s) came after the stop began, at {late:?} after it; log:\n{}",
        late.len(),
        log_text()
    );
    // the stop came while turns ran: what follows checks their resume
    assert!(
        log_text().contains("turn cut off by the host's stop"),
        "no turn was running at the stop; log:\n{}",
        log_text()
    );
    let (admitted, during_stop) = {
        let sent = sent.lock().unwrap();
        (sent.admitted.clone(), sent.admitted_during_stop.clone())
    };
    assert!(
        during_stop.is_empty(),
        "messages sent during the stop were admitted: {during_stop:?}"
    );

    // the next start answers every admitted message, once
    let host = HostProcess::start(&path, free_port(), &log).await;
    let mut by_session: HashMap<String, Vec<String>> = HashMap::new();
    for (id, session) in &admitted {
        by_session
            .entry(session.clone())
            .or_default()
            .push(id.clone());
    }
    let c = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    for (session, expected) in &by_session {
        let entries = poll(60, async || {
            let entries = c.entries_after(session, 0).await.unwrap();
            let answered: Vec<String> = deliveries(&entries).iter().flat_map(|d| ids(d)).collect();
            let missing: Vec<&String> = expected
                .iter()
                .filter(|id| !answered.contains(id))
                .collect();
            if missing.is_empty() {
                Ok(entries)
            } else {
                Err(format!(
                    "not answered after the restart: {missing:?}; session:\n{}",
                    transcript(&entries)
                ))
            }
        })
        .await;
        let mut counts: HashMap<String, usize> = HashMap::new();
        for id in deliveries(&entries).iter().flat_map(|d| ids(d)) {
            *counts.entry(id).or_default() += 1;
        }
        let twice: Vec<(&String, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "answered more than once: {twice:?}");
        // the upload cut off by the stop was not admitted
        assert!(
            !counts.contains_key("q-slow-0"),
            "the cut-off upload was admitted"
        );
    }
    host.stop(&log).await;
    server.shutdown().await;
}

/// A session's entries, one line each, for a failure's message.
fn transcript(entries: &[Value]) -> String {
    entries
        .iter()
        .map(|e| {
            let text = e["text"].as_str().unwrap_or("");
            format!(
                "{} {} turn={} {} {}",
                e["seq"], e["kind"], e["turn"], e["status"], text
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
