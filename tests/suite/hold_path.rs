//! The hold path on a real host (`HOLD_AFTER_UNSTEPPED`, actors/src/bot.rs):
//! after two runs in a row were interrupted by a person's message before
//! their first model step, the third run does not yield to the next
//! message M until its first step is committed. M, admitted while that
//! run's model call was out, is stored before the step; it interrupts the
//! run after the step, and the next request shows it after the step (the
//! order a tail kept in memory holds, and the one a context rebuilt from
//! the store after a SIGKILL holds too: `ContextBound::order`). M is
//! answered once, and nothing is lost or answered twice.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use super::crash::entries;
use super::crash::turn_ended;
use super::crash::wait_until;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;
use crate::support::openai_server::without_times;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

/// The person's four messages: three that start runs, then M.
const TEXTS: [&str; 4] = ["one", "two", "three", "four"];

/// What each model request `n` (1-based) is held on until the test opens
/// it: requests `1..=held` answer only then.
pub(super) struct Gates(pub(super) Vec<watch::Sender<bool>>);

impl Gates {
    /// Lets request `n` (1-based) answer.
    pub(super) fn open(&self, n: usize) {
        let _ = self.0[n - 1].send(true);
    }

    /// Lets every held request answer (to a host long gone, at the end).
    pub(super) fn open_all(&self) {
        for gate in &self.0 {
            let _ = gate.send(true);
        }
    }
}

/// The model: a request whose last message is a tool result ends the
/// turn with a text; any other is answered with SendMessage "re: <the
/// last line of the last user message>", call id `send-<n>` for the
/// `n`th request. Requests `1..=held` wait for their gate.
async fn gated_model(held: usize) -> (OpenAiServer, Gates) {
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..held).map(|_| watch::channel(false)).unzip();
    let seen = Arc::new(AtomicUsize::new(0));
    let server = OpenAiServer::builder()
        .responder(move |request| {
            let n = seen.fetch_add(1, SeqCst);
            let reply = if last_message(request).is_some_and(|m| m["role"] == "tool") {
                Reply::text("done")
            } else {
                let said = last_user_text(request)
                    .and_then(|t| t.lines().last())
                    .unwrap_or("");
                Reply::tool_call(
                    &format!("send-{}", n + 1),
                    "SendMessage",
                    json!({ "text": format!("re: {said}") }).to_string(),
                )
            };
            match receivers.get(n) {
                Some(gate) => reply.hold_until(gate.clone()),
                None => reply,
            }
        })
        .start()
        .await;
    (server, Gates(senders))
}

/// Bot `r` on `server`'s model (no retries, no debounce, no extraction:
/// the fleet's defaults).
fn fleet(server: &OpenAiServer) -> TestFleet {
    TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
}

/// Sends `text` to `r` as alice; (session, seq).
pub(super) async fn send(url: &str, text: &str) -> (String, i64) {
    let client = botfleet::client::Client::new(url, TOKEN).unwrap();
    let (status, body) = client
        .send_message("r", text, &format!("k-{text}"))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");
    (
        body["session"].as_str().unwrap().to_owned(),
        body["seq"].as_i64().unwrap(),
    )
}

/// Bot `r` as `GET /v1/bots` shows it.
pub(super) async fn bot_r(url: &str) -> Value {
    let client = botfleet::client::Client::new(url, TOKEN).unwrap();
    let bots = client.get("/v1/bots").await.unwrap();
    bots["bots"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["id"] == "r")
        .cloned()
        .unwrap_or_else(|| panic!("no bot r: {bots}"))
}

/// Drives `r` to the hold: "one", "two" and "three" each come while the
/// run before is at its first model call (held by its gate), so two runs
/// in a row end interrupted before a step; the third run's call is out
/// when M ("four") comes, and `r` holds M (queued, the run still on).
/// Returns the session and the four seqs; the third call is still held.
async fn drive_to_hold(url: &str, server: &OpenAiServer) -> (String, [i64; 4]) {
    let mut seqs = [0; 4];
    let mut session = String::new();
    for (i, text) in TEXTS.iter().enumerate().take(3) {
        (session, seqs[i]) = send(url, text).await;
        // the run over this message (and those before) has its call out
        server.wait_for_requests(i + 1).await;
    }
    let running = bot_r(url).await["running_turn"].clone();
    assert!(running.is_string(), "{running}");
    (_, seqs[3]) = send(url, TEXTS[3]).await;
    // the bot handled M (its status is published after each message): M
    // waits in the queue while the third run goes on
    poll(20, async || {
        let r = bot_r(url).await;
        if r["queued"] == 1 && r["running_turn"] == running {
            Ok(())
        } else {
            Err(format!("M not queued behind the third run: {r}"))
        }
    })
    .await;
    assert_eq!(
        server.request_count(),
        3,
        "M interrupted the third run before its first step: {:#?}",
        shapes(server)
    );
    (session, seqs)
}

/// A request's messages after the system message, one line each: `user:
/// <text>`, `assistant: <text> [<tool>#<id>…]`, `tool: <call id>`.
fn shape(messages: &[Value]) -> Vec<String> {
    let text = |m: &Value| match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    messages
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| match m["role"].as_str().unwrap_or("") {
            "assistant" => {
                let calls: Vec<String> = m["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let name = c["function"]["name"].as_str().unwrap_or("");
                        format!("{name}#{}", c["id"].as_str().unwrap_or(""))
                    })
                    .collect();
                format!("assistant: {} [{}]", text(m), calls.join(", "))
            }
            "tool" => format!("tool: {}", m["tool_call_id"].as_str().unwrap_or("")),
            role => format!("{role}: {}", without_times(&text(m))),
        })
        .collect()
}

/// The shape of every request the server received, in order.
fn shapes(server: &OpenAiServer) -> Vec<Vec<String>> {
    server
        .requests()
        .iter()
        .map(|r| shape(r.messages()))
        .collect()
}

/// The shape of the third run's request (the one held while M came: the
/// first three, one user message as requests alternate roles) and of a
/// request of M's turn: M after the third run's step and its result.
fn want_shapes() -> (Vec<String>, Vec<String>) {
    let held = vec![format!("user: {}", TEXTS[..3].join("\n\n"))];
    let mut next = held.clone();
    next.push("assistant:  [SendMessage#send-3]".into());
    next.push("tool: send-3".into());
    next.push("user: four".into());
    (held, next)
}

/// What the session's entries must show once M's turn ended: the third
/// run's step committed after M was stored, that run ended interrupted
/// over the first three, one completed turn over all four, and each
/// message answered once ("re: three" from the interrupted run, "re:
/// four" from M's turn).
fn check_entries(entries: &[Value], seqs: [i64; 4]) {
    let all = format!("{entries:#?}");
    let step = entries
        .iter()
        .find(|e| e["kind"] == "assistant")
        .unwrap_or_else(|| panic!("no step: {all}"));
    assert_eq!(step["tool_calls"][0]["id"], "send-3", "{all}");
    assert!(
        step["seq"].as_i64().unwrap() > seqs[3],
        "M was stored before the step it waited for: {all}"
    );
    let ends: Vec<(&Value, &Value)> = entries
        .iter()
        .filter(|e| e["kind"] == "turn_end")
        .map(|e| (&e["status"], &e["inputs"]))
        .collect();
    let (first3, all4) = (json!(seqs[..3]), json!(seqs));
    assert_eq!(
        ends,
        [
            (&json!("interrupted"), &first3),
            (&json!("completed"), &all4)
        ],
        "the runs interrupted before a step wrote nothing; the held run \
         ended interrupted after its step; M's turn answered all: {all}"
    );
    let end_of_held = entries
        .iter()
        .position(|e| e["kind"] == "turn_end")
        .unwrap_or(0);
    let steps: Vec<&Value> = entries[..end_of_held]
        .iter()
        .filter(|e| e["kind"] == "assistant")
        .collect();
    assert_eq!(steps.len(), 1, "the held run stopped after its step: {all}");
    assert_eq!(
        deliveries(entries),
        ["re: three", "re: four"],
        "M answered once, nothing twice: {all}"
    );
}

/// In one host: the third run holds M, its SendMessage step commits, M
/// interrupts it then, and M's turn shows M after that step.
#[tokio::test]
async fn a_held_message_interrupts_after_the_first_step_and_follows_it() {
    let (server, gates) = gated_model(3).await;
    let host = fleet(&server).start().await;
    let url = host.url.clone();
    let (session, seqs) = drive_to_hold(&url, &server).await;

    gates.open(3);
    let ended = wait_until(&url, &session, turn_ended(seqs[3])).await;
    let got = shapes(&server);
    let (held, next) = want_shapes();
    assert_eq!(got.len(), 5, "three first calls, M's turn's two: {got:#?}");
    assert_eq!(got[2], held, "the held call did not show M: {got:#?}");
    assert_eq!(got[3], next, "M after the step it waited for: {got:#?}");
    check_entries(&ended, seqs);
    host.shutdown().await;
    gates.open_all();
    server.shutdown().await;
}

/// The same, with the host SIGKILLed once the held run's step is
/// committed and it ended, while M's turn's first call is out (its turn
/// has no step, so nothing of it is stored): the turn over all four is
/// rebuilt from the store after the restart and shows the same order.
#[tokio::test]
async fn a_held_message_follows_the_step_it_waited_for_after_a_sigkill() {
    let (server, gates) = gated_model(4).await;
    let (fleet, port) = (fleet(&server), free_port());
    let (path, log) = (fleet.write(), fleet.path().join("host.log"));
    let mut host =
        HostProcess::start_with_log_level(&path, port, &log, "info,botfleet_actors::bot=debug")
            .await;
    let url = host.url.clone();
    let (session, seqs) = drive_to_hold(&url, &server).await;
    host.wait_log("user message waits: the running turn interrupts after its first model step")
        .await;

    gates.open(3);
    // M's turn's first call is out: the held run's step and its end are
    // committed, M's turn has written nothing
    server.wait_for_requests(4).await;
    let before = entries(&url, &session).await;
    assert!(
        before
            .iter()
            .any(|e| e["kind"] == "turn_end" && e["status"] == "interrupted"),
        "{before:#?}"
    );
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let ended = wait_until(&url, &session, turn_ended(seqs[3])).await;
    let got = shapes(&server);
    let (held, next) = want_shapes();
    assert_eq!(
        got.len(),
        6,
        "three first calls, M's turn's killed call, its two after the restart: {got:#?}; log at {}",
        log.display()
    );
    assert_eq!(got[2], held, "the held call did not show M: {got:#?}");
    assert_eq!(got[3], next, "M after the step, in memory: {got:#?}");
    assert_eq!(
        got[4], got[3],
        "after the restart, the same order as before it: {got:#?}"
    );
    check_entries(&ended, seqs);
    host.kill9().await;
    gates.open_all();
    server.shutdown().await;
}
