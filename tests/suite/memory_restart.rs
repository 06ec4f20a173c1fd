//! Fact extraction cut off by a restart runs again at the next start: a
//! real host (`botfleet run`) whose extractor, an OpenAI-compatible server
//! on loopback, answers slowly is killed with SIGKILL, or stopped with
//! SIGTERM, while the extraction waits; the restarted host asks again and
//! the fact is added, once. A clean stop waits a little for a running
//! extraction, so a short one is not asked again.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;

use super::crash::send;
use super::crash::turn_ended;
use super::crash::wait_until;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::memory_model::adds;
use crate::support::memory_model::is_extraction;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

const FACT: &str = "Alice owns a red bicycle";

/// The bot answers with SendMessage, then stops; the extractor adds
/// [`FACT`] after `delay_ms` (a shared, changeable delay).
fn model(body: &Value, delay_ms: &AtomicU64) -> Reply {
    if is_extraction(body) {
        let delay = Duration::from_millis(delay_ms.load(Ordering::SeqCst));
        return adds(FACT).delay_headers(delay);
    }
    answers_once(body, "Nice bike!")
}

/// A bot's turn that answers with SendMessage `text`, then stops.
pub(super) fn answers_once(body: &Value, text: &str) -> Reply {
    let messages = body["messages"].as_array().unwrap();
    if messages.last().is_some_and(|m| m["role"] == "tool") {
        return Reply::text("");
    }
    let id = format!("call_{}", messages.len());
    Reply::tool_call(&id, "SendMessage", json!({ "text": text }).to_string())
}

/// A fleet of bot `a1` (SendMessage) on the OpenAI-compatible server at
/// `base_url`, with fact extraction after turns on.
pub(super) fn extracting_fleet(base_url: &str) -> TestFleet {
    TestFleet::new()
        .openai("main", base_url, "max_retries = 0")
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = true\n")
        .bot("a1", "main", &["SendMessage"])
}

/// A loopback OpenAI-compatible server answering with `responder`, an
/// [`extracting_fleet`] on it written out, and the paths of its
/// fleet.toml and of the log a host process is to write.
pub(super) async fn extracting_setup(
    responder: impl Fn(&Value) -> Reply + Send + Sync + 'static,
) -> (OpenAiServer, TestFleet, PathBuf, PathBuf) {
    let server = OpenAiServer::builder().responder(responder).start().await;
    let fleet = extracting_fleet(&server.base_url());
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    (server, fleet, path, log)
}

struct Setup {
    server: OpenAiServer,
    delay_ms: Arc<AtomicU64>,
    fleet: TestFleet,
    path: PathBuf,
    log: PathBuf,
    port: u16,
}

async fn setup(delay_ms: u64) -> Setup {
    let delay = Arc::new(AtomicU64::new(delay_ms));
    let shared = Arc::clone(&delay);
    let (server, fleet, path, log) = extracting_setup(move |b| model(b, &shared)).await;
    Setup {
        server,
        delay_ms: delay,
        fleet,
        path,
        log,
        port: free_port(),
    }
}

fn extractions(server: &OpenAiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| is_extraction(&r.body))
        .count()
}

/// Waits until the extractor has been asked `n` times in all.
async fn wait_extractions(server: &OpenAiServer, n: usize) {
    let wait = async {
        while extractions(server) < n {
            server.wait_for_requests(server.request_count() + 1).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("the extractor was not asked {n} times"));
}

/// The profile texts of alice's user scope, as the memory API shows them.
pub(super) async fn profile(url: &str) -> Vec<String> {
    let c = botfleet::client::Client::new(url, TOKEN).unwrap();
    let mem = c.get("/v1/bots/a1/memory").await.unwrap();
    mem["scopes"][1]["profile"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_owned())
        .collect()
}

/// Polls (bounded) until alice's profile holds something.
async fn wait_profile(url: &str) -> Vec<String> {
    poll(30, async || {
        let p = profile(url).await;
        if p.is_empty() {
            Err("the fact was never added".into())
        } else {
            Ok(p)
        }
    })
    .await
}

/// Sets up with an extractor that answers after `delay_ms`, starts the
/// host, sends the message and waits until its turn ended and its
/// extraction reached the (slow) extractor.
async fn start_until_extraction(delay_ms: u64) -> (Setup, HostProcess) {
    let s = setup(delay_ms).await;
    let host = HostProcess::start(&s.path, s.port, &s.log).await;
    let sent = send(&host.url, "a1", "I bought a red bicycle").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    wait_until(&host.url, &session, turn_ended(seq)).await;
    wait_extractions(&s.server, 1).await;
    (s, host)
}

/// Makes the extractor answer at once and starts the host again.
async fn restart_with_fast_extractor(s: &Setup) -> HostProcess {
    s.delay_ms.store(0, Ordering::SeqCst);
    HostProcess::start(&s.path, s.port, &s.log).await
}

/// Checks that the cut-off extraction was asked again, once, and added
/// the fact; then ends the host and the server.
async fn expect_extracted_again(s: Setup, host: HostProcess) {
    assert_eq!(wait_profile(&host.url).await, [FACT]);
    assert_eq!(extractions(&s.server), 2, "asked again once");
    host.kill9().await;
    drop(s.fleet);
    s.server.shutdown().await;
}

#[tokio::test]
async fn an_extraction_cut_off_by_sigkill_runs_again_at_the_next_start() {
    let (s, host) = start_until_extraction(60_000).await;
    host.kill9().await;

    let mut host = restart_with_fast_extractor(&s).await;
    host.wait_log("running again the fact extractions").await;
    expect_extracted_again(s, host).await;
}

#[tokio::test]
async fn an_extraction_cut_off_by_a_clean_stop_runs_again_at_the_next_start() {
    let (s, host) = start_until_extraction(60_000).await;
    // the stop waits a little for the extraction, then cuts it off
    host.stop(&s.log).await;

    let host = restart_with_fast_extractor(&s).await;
    expect_extracted_again(s, host).await;
}

#[tokio::test]
async fn a_clean_stop_waits_for_a_short_extraction() {
    let (s, host) = start_until_extraction(1_000).await;
    host.stop(&s.log).await;

    let host = HostProcess::start(&s.path, s.port, &s.log).await;
    // added before the stop ended: there at once, and not asked again
    assert_eq!(profile(&host.url).await, [FACT]);
    host.stop(&s.log).await;
    assert_eq!(extractions(&s.server), 1, "not asked again");
    drop(s.fleet);
    s.server.shutdown().await;
}
