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

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use super::crash::send;
use super::crash::turn_ended;
use super::crash::wait_until;
use super::memory_restart::answers_once;
use super::memory_restart::extracting_setup;
use super::memory_restart::profile;
use crate::support::fleet::TestFleet;
use crate::support::memory_model::adds;
use crate::support::memory_model::is_extraction;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

const FACT: &str = "Alice owns a green kayak";

/// The bot answers with SendMessage, then stops; the extractor adds
/// [`FACT`] once `answer` is set, and until then holds the request (its
/// headers come after a minute, long after the host is killed).
fn model(body: &Value, answer: &AtomicBool) -> Reply {
    if is_extraction(body) {
        let reply = adds(FACT);
        return if answer.load(Ordering::SeqCst) {
            reply
        } else {
            reply.delay_headers(Duration::from_secs(60))
        };
    }
    answers_once(body, "A fine boat!")
}

/// What a host killed by [`killed_as_its_turn_ends`] leaves.
struct Killed {
    server: OpenAiServer,
    fleet: TestFleet,
    path: PathBuf,
    log: PathBuf,
    port: u16,
}

/// A host whose extractor answers once `answer` is set, killed with
/// SIGKILL as soon as the API shows its one turn ended: whether or not
/// the extractor was asked yet, nothing answered it, so the turn's
/// extraction is owed.
async fn killed_as_its_turn_ends(answer: &Arc<AtomicBool>) -> Killed {
    let shared = Arc::clone(answer);
    let (server, fleet, path, log) = extracting_setup(move |b| model(b, &shared)).await;
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let sent = send(&host.url, "a1", "I bought a green kayak").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    wait_until(&host.url, &session, turn_ended(seq)).await;
    host.kill9().await;
    Killed {
        server,
        fleet,
        path,
        log,
        port,
    }
}

#[tokio::test]
async fn a_host_killed_as_its_turn_ends_runs_the_turns_extraction_after_restart() {
    let answer = Arc::new(AtomicBool::new(false));
    let Killed {
        server,
        fleet,
        path,
        log,
        port,
    } = killed_as_its_turn_ends(&answer).await;

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

/// An owed extraction is a model request that counts toward its bot's
/// daily token budget: a restarted host whose bot has spent it (here the
/// operator lowered the budget below what the turn used) puts the
/// extraction off, owed, instead of running it past the budget. (It ran
/// at every start, budget or not.)
#[tokio::test]
async fn an_owed_extraction_waits_while_its_bots_budget_is_spent() {
    let answer = Arc::new(AtomicBool::new(false));
    let Killed {
        server,
        fleet,
        path,
        log,
        port,
    } = killed_as_its_turn_ends(&answer).await;
    let asked_before = extraction_requests(&server);

    // the bot's table is the file's last: the key joins it
    let mut toml = std::fs::read_to_string(&path).unwrap();
    toml.push_str("\ndaily_token_budget = 10\n");
    std::fs::write(&path, toml).unwrap();
    answer.store(true, Ordering::SeqCst);
    let host = HostProcess::start(&path, port, &log).await;
    // whichever comes first: the extraction's request, or the host saying
    // it put the extraction off
    poll(30, async || {
        let asked = extraction_requests(&server);
        assert_eq!(
            asked, asked_before,
            "the owed extraction ran although the bot's budget was spent"
        );
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        if logged.contains("fact extraction put off: the bot's daily token budget is spent") {
            Ok(())
        } else {
            Err("the host neither ran nor put off the owed extraction".to_owned())
        }
    })
    .await;
    assert!(profile(&host.url).await.is_empty());
    host.kill9().await;
    drop(fleet);
    server.shutdown().await;
}

/// How many extraction requests `server` received.
fn extraction_requests(server: &OpenAiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| is_extraction(&r.body))
        .count()
}
