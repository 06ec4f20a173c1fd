//! A second SIGTERM while a real host (`botfleet run`) stops slowly (it
//! waits for a fact extraction whose model answers in a minute) exits at
//! once with status 130, as docs/operations.md says; the wait is watched
//! from a thread of the exit's own (src/cli_run.rs), which also bounds the
//! exit after the stop when blocking work outlives it.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::memory_restart::answers_once;
use super::memory_restart::extracting_setup;
use crate::support::fleet::TOKEN;
use crate::support::memory_model::adds;
use crate::support::memory_model::is_extraction;
use crate::support::openai_server::Reply;
use crate::support::process::HostProcess;
use crate::support::process::RunProcess;
use crate::support::process::free_port;
use crate::support::process::poll;
use crate::support::process::signal;

/// The bot answers; the extractor answers a minute later.
fn slow_extractor(body: &Value) -> Reply {
    if is_extraction(body) {
        return adds("Alice keeps bees").delay_headers(Duration::from_secs(60));
    }
    answers_once(body, "Noted.")
}

#[tokio::test]
async fn a_second_sigterm_while_the_stop_waits_for_an_extraction_exits_at_once() {
    let (server, _fleet, path, log) = extracting_setup(slow_extractor).await;
    let mut host = HostProcess::start(&path, free_port(), &log).await;
    let c = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let (status, body) = c
        .send_message("a1", "I keep bees", "stop-twice-1")
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");
    // the extraction runs (its answer is a minute away)
    let wait = async {
        while !server.requests().iter().any(|r| is_extraction(&r.body)) {
            server.wait_for_requests(server.request_count() + 1).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("the extractor was never asked");

    let pid = host.child.id().unwrap();
    signal(pid, "TERM");
    // the first signal is taken once the API stops answering: the stop
    // then waits (up to 5 s) for the extraction
    let http = reqwest::Client::new();
    poll(20, async || {
        match http
            .get(format!("{}/healthz", host.url))
            .timeout(Duration::from_secs(1))
            .send()
            .await
        {
            Ok(_) => Err("the API still answers".to_owned()),
            Err(_) => Ok(()),
        }
    })
    .await;
    let started = Instant::now();
    signal(pid, "TERM");
    let status = tokio::time::timeout(Duration::from_secs(20), host.child.wait())
        .await
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(
        status.code(),
        Some(130),
        "log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    host.wait_log("stopped at once").await;
}

/// Replies to every message.
const REPLY: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]
"#;

/// A SIGTERM that comes while `botfleet run` is starting (here once its
/// store is made, found in its log) stops the host once it is up, with
/// success. Before, the start served HTTP before the stop signals were
/// listened for: a SIGTERM in between (a service manager's stop right
/// after a start; the open-file test's stop on a loaded machine, which
/// CI-like runs hit) killed the process by the signal's default action.
#[tokio::test]
async fn a_sigterm_during_the_start_stops_the_host_once_it_is_up() {
    let fleet = crate::support::fleet::TestFleet::new()
        .script("s", REPLY)
        .bot("r", "s", &["SendMessage"]);
    let path = fleet.write();
    let host = RunProcess::spawn(&path, &fleet.path().join("host.log"), None);
    // the store is made inside the start, well before it serves
    poll(30, async || {
        let text = host.logged();
        if text.contains("created a new store") {
            Ok(())
        } else {
            Err(format!("the start never made its store; log:\n{text}"))
        }
    })
    .await;
    let (stopped, logged) = host.stop(30).await;
    assert!(
        stopped,
        "the host did not stop cleanly within 30 s; log:\n{logged}"
    );
    assert!(logged.contains("stopping…"), "{logged}");
}
