//! A host killed during a turn's first model call, again and again. A
//! turn is stored with its first step, so such a crash left no turn
//! counting its starts: the message came back as a new turn at each
//! restart, forever, and nobody was told (a tester's SIGKILL ×3 during
//! the first call: the attempts never grew). Now each start of a turn
//! over the inputs read back after a restart is counted on them
//! (`Mutation::CountStart`): past `runtime.max_turn_attempts` the turn
//! fails at once with its retryable `turn_failed` notice, and a retry
//! runs the message again with its count started over. A clean stop is
//! not a crash and does not count.

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use super::crash::entries;
use super::crash::send;
use super::crash::turn_ended;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

/// The model: requests `1..=held` never answer (their gates stay shut
/// while the test runs); any later one answers SendMessage "answered",
/// then "done" after its result.
async fn held_model(held: usize) -> (OpenAiServer, Vec<watch::Sender<bool>>) {
    let (gates, shut): (Vec<_>, Vec<_>) = (0..held).map(|_| watch::channel(false)).unzip();
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let server = OpenAiServer::builder()
        .responder(move |request| {
            let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let reply = if last_message(request).is_some_and(|m| m["role"] == "tool") {
                Reply::text("done")
            } else {
                Reply::tool_call(
                    &format!("send-{}", n + 1),
                    "SendMessage",
                    json!({ "text": "answered" }).to_string(),
                )
            };
            match shut.get(n) {
                Some(gate) => reply.hold_until(gate.clone()),
                None => reply,
            }
        })
        .start()
        .await;
    (server, gates)
}

/// Bot `r` on `server`'s model, as a host process restarted on the same
/// data, port and log, with `runtime.max_turn_attempts` = `max`.
struct Restarted {
    /// Holds the fleet's directory.
    _fleet: TestFleet,
    path: std::path::PathBuf,
    log: std::path::PathBuf,
    port: u16,
}

impl Restarted {
    fn new(server: &OpenAiServer, max: i64) -> Self {
        Self::of(Self::fleet(server, max))
    }

    /// The same, `r` with the webhook `gh` of `resume_order`.
    fn with_hook(server: &OpenAiServer, max: i64) -> Self {
        Self::of(Self::fleet(server, max).bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{}\"\n",
            super::resume_order::SECRET
        )))
    }

    fn fleet(server: &OpenAiServer, max: i64) -> TestFleet {
        TestFleet::new()
            .runtime(&format!(
                "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\nmax_turn_attempts = {max}\n"
            ))
            .openai("main", &server.base_url(), "max_retries = 0")
            .bot("r", "main", &["SendMessage"])
    }

    fn of(fleet: TestFleet) -> Self {
        let path = fleet.write();
        let log = fleet.path().join("host.log");
        Self {
            _fleet: fleet,
            path,
            log,
            port: free_port(),
        }
    }

    async fn start(&self) -> HostProcess {
        HostProcess::start(&self.path, self.port, &self.log).await
    }
}

/// Waits (bounded) until the model got `n` requests.
async fn requests(server: &OpenAiServer, n: usize) {
    let got = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        server.wait_for_requests(n),
    )
    .await;
    assert!(
        got.is_ok(),
        "the model got {} requests, not {n}",
        server.request_count()
    );
}

/// The session's entries once the turn over `seq` ended, or once the
/// model got more than `requests` requests (the host took the message up
/// again instead), whichever comes first.
async fn end_or_more_requests(
    url: &str,
    session: &str,
    seq: i64,
    server: &OpenAiServer,
    requests: usize,
) -> Vec<Value> {
    poll(30, async || {
        let es = entries(url, session).await;
        if turn_ended(seq)(&es) || server.request_count() > requests {
            Ok(es)
        } else {
            Err(format!(
                "the turn over seq {seq} has not ended; model requests: {}",
                server.request_count()
            ))
        }
    })
    .await
}

/// The tester's case: `max_turn_attempts` = 2, the host SIGKILLed during
/// the first model call twice (the message woke its bot, which read it
/// back from the inbox: its first start counts too). The third start
/// makes no model request: the message ends failed, with a retryable
/// notice, and a retry answers it. (Before, the third start asked the
/// model again, as every start after would: the crash loop never ended.)
#[tokio::test]
async fn a_host_killed_in_each_first_model_call_fails_the_message_visibly() {
    let (server, _gates) = held_model(2).await;
    let fleet = Restarted::new(&server, 2);
    let mut host = fleet.start().await;
    let sent = send(&host.url, "r", "crash me").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    for kill in 1..=2 {
        // this start's first model call is out (and never answers)
        requests(&server, kill).await;
        host.kill9().await;
        host = fleet.start().await;
    }
    let es = end_or_more_requests(&host.url, &session, seq, &server, 2).await;
    assert_eq!(
        server.request_count(),
        2,
        "after 2 kills in the first model call (max_turn_attempts = 2) the host took the \
         message up again; entries: {es:#?}"
    );
    let end = es.iter().find(|e| e["kind"] == "turn_end").unwrap();
    assert_eq!(end["status"], "failed", "{es:#?}");
    let notice = es
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("no turn_failed notice: {es:#?}"));
    let turn = notice["retry_turn"].as_str().unwrap().to_owned();
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .contains("crashed at least 2 times in a row before its first step"),
        "{notice}"
    );
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let record = client.get(&format!("/v1/turns/{turn}")).await.unwrap()["turn"].clone();
    assert_eq!(record["status"], "failed", "{record}");

    // a retry runs it again, its count started over: answered once (once
    // its bot has seen the turn end: a retry in between is not queued,
    // see the report of this change)
    until_its_bot_saw_the_end(&client).await;
    let retried = client
        .post_ok(&format!("/v1/turns/{turn}/retry"), &json!({}))
        .await
        .unwrap();
    assert_eq!(retried["requeued"], 1, "{retried}");
    let es = poll(30, async || {
        let es = entries(&host.url, &session).await;
        let answered = deliveries(&es);
        if answered.is_empty() {
            let bots = client.get("/v1/bots").await.unwrap();
            Err(format!(
                "no answer yet (model requests: {}): {es:#?}\nbots: {bots}\nlog:\n{}",
                server.request_count(),
                std::fs::read_to_string(&fleet.log).unwrap_or_default()
            ))
        } else {
            Ok(es)
        }
    })
    .await;
    assert_eq!(deliveries(&es), vec!["answered".to_owned()], "{es:#?}");
    host.kill9().await;
}

/// `max_turn_attempts` = 1: two clean stops (SIGTERM) during the first
/// model call do not count, the third start asks the model again; a kill
/// then does count, and the start after it fails the message.
#[tokio::test]
async fn clean_stops_in_the_first_model_call_do_not_count() {
    let (server, _gates) = held_model(3).await;
    let fleet = Restarted::new(&server, 1);
    let mut host = fleet.start().await;
    let sent = send(&host.url, "r", "stop me").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    for stop in 1..=2 {
        requests(&server, stop).await;
        host.stop(&fleet.log).await;
        host = fleet.start().await;
    }
    // not failed for the stops: its third start asks the model
    requests(&server, 3).await;
    host.kill9().await;
    let host = fleet.start().await;
    let es = end_or_more_requests(&host.url, &session, seq, &server, 3).await;
    assert_eq!(
        server.request_count(),
        3,
        "a kill after two clean stops (max_turn_attempts = 1): the host took the message up \
         again; entries: {es:#?}"
    );
    let end = es.iter().find(|e| e["kind"] == "turn_end").unwrap();
    assert_eq!(end["status"], "failed", "{es:#?}");
    assert!(
        es.iter()
            .any(|e| e["kind"] == "notice" && e["code"] == "turn_failed"),
        "{es:#?}"
    );
    host.kill9().await;
}

/// Waits until the fleet's one bot no longer lists a running turn: it has
/// seen its failed turn end, and a retry is queued (a retry before that
/// is not).
pub(super) async fn until_its_bot_saw_the_end(client: &botfleet::client::Client) {
    poll(20, async || {
        let bots = client.get("/v1/bots").await.unwrap();
        if bots["bots"][0]["running_turn"].is_null() {
            Ok(())
        } else {
            Err(format!("the failed turn still runs for its bot: {bots}"))
        }
    })
    .await;
}

/// Regression (QA, 2026-12-06): webhook deliveries that came during a
/// crash loop joined the turn over the one that crashed the host, and
/// failed with it at the limit, never shown to the model, though they had
/// been started fewer times. Only the inputs past the limit fail; the
/// others run in a turn of their own.
#[tokio::test]
async fn only_the_inputs_past_the_crash_limit_fail() {
    use super::resume_order::hook;
    let (server, _gates) = held_model(2).await;
    let fleet = Restarted::with_hook(&server, 2);
    let session = super::resume_order::hook_session();
    let mut host = fleet.start().await;
    // a's first start (read back: it woke its bot) asks the model, which
    // never answers; b waits behind it (a delivery interrupts nothing)
    let qa = hook(&host.url, "d-a", "qa").await;
    requests(&server, 1).await;
    let qb = hook(&host.url, "d-b", "qb").await;
    host.kill9().await;
    // one turn over both: a's second start, b's first
    host = fleet.start().await;
    requests(&server, 2).await;
    host.kill9().await;
    // a's third start is past the limit (2), b's second is not
    host = fleet.start().await;
    let es = poll(30, async || {
        let es = entries(&host.url, &session).await;
        if turn_ended(qb)(&es) {
            Ok(es)
        } else {
            Err(format!(
                "b's turn has not ended (model requests: {}): {es:#?}",
                server.request_count()
            ))
        }
    })
    .await;
    let ends: Vec<&Value> = es.iter().filter(|e| e["kind"] == "turn_end").collect();
    assert_eq!(ends.len(), 2, "{es:#?}");
    assert_eq!(ends[0]["status"], "failed", "{es:#?}");
    assert_eq!(ends[0]["inputs"], json!([qa]), "{es:#?}");
    assert_eq!(ends[1]["status"], "completed", "{es:#?}");
    assert_eq!(ends[1]["inputs"], json!([qb]), "{es:#?}");
    // b's turn asked the model about b, and sent its answer (to alice's
    // DM, as a webhook turn's messages go)
    let asked = server.requests()[2].messages().to_vec();
    let last_user = asked.iter().rev().find(|m| m["role"] == "user").unwrap();
    assert!(
        last_user["content"].as_str().unwrap().contains("qb-marker"),
        "{asked:#?}"
    );
    let sent = es
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "SendMessage")
        .count();
    assert_eq!(sent, 1, "{es:#?}");
    host.kill9().await;
}
