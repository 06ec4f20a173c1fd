//! The host process killed with SIGKILL mid-turn, then restarted: the turn
//! resumes from its checkpoint, side effects are not repeated, the reply is
//! delivered exactly once.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use serde_json::json;
use tokio::time::Instant;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::process::HostProcess;
use crate::support::process::alive;
use crate::support::process::free_port;

pub(super) async fn entries(url: &str, session: &str) -> Vec<Value> {
    botfleet::client::Client::new(url, TOKEN)
        .unwrap()
        .entries_after(session, 0)
        .await
        .unwrap()
}

/// Waits (on the host's change signals, with a deadline) until `pick`
/// accepts the session's entries.
pub(super) async fn wait_until(
    url: &str,
    session: &str,
    pick: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let c = botfleet::client::Client::new(url, TOKEN).unwrap();
    let mut events = c.events().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let es = entries(url, session).await;
        if pick(&es) {
            return es;
        }
        // every new entry is signalled; the timeout only bounds the wait
        if !next_signal(&mut events, deadline, Duration::from_secs(2)).await {
            panic!("condition not reached; entries: {es:#?}");
        }
    }
}

/// Waits for the next change signal, at most `cap` and never past
/// `deadline`; false once the deadline has passed.
async fn next_signal(
    events: &mut (impl futures::Stream + Unpin),
    deadline: Instant,
    cap: Duration,
) -> bool {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return false;
    }
    let _ = tokio::time::timeout(left.min(cap), events.next()).await;
    true
}

/// Whether the host has nothing left to do: every turn of every bot
/// (subagents included) ended, no bot running or holding queued inputs.
async fn is_quiet(c: &botfleet::client::Client) -> bool {
    let bots = c.get("/v1/bots").await.unwrap();
    for b in bots["bots"].as_array().unwrap() {
        let id = b["id"].as_str().unwrap();
        let turns = c.get(&format!("/v1/bots/{id}/turns")).await.unwrap();
        let open = turns["turns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["status"] == "running");
        if open || b["running_turn"].is_string() || b["queued"].as_u64() != Some(0) {
            return false;
        }
    }
    true
}

/// Waits until the restarted host is quiet ([`is_quiet`]). A turn the kill
/// cut off stays `running` in the store until recovery has finished it,
/// and only an unfinished turn can repeat a side effect, so a host that
/// reports quiet has nothing left to redo. Re-checked at each change
/// signal; a bot lets go of its turn just after the turn's last entry is
/// signalled, so a short timeout re-checks once more.
async fn wait_quiet(url: &str) {
    let c = botfleet::client::Client::new(url, TOKEN).unwrap();
    let mut events = c.events().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_quiet(&c).await {
        let waited = next_signal(&mut events, deadline, Duration::from_millis(250)).await;
        assert!(waited, "the host never became quiet");
    }
}

pub(super) async fn send(url: &str, bot: &str, text: &str) -> Value {
    let c = botfleet::client::Client::new(url, TOKEN).unwrap();
    let (status, body) = c.send_message(bot, text, "crash-key-1").await.unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");
    body
}

pub(super) fn turn_ended(seq: i64) -> impl Fn(&[Value]) -> bool {
    move |es: &[Value]| {
        es.iter().any(|e| {
            e["kind"] == "turn_end"
                && e["status"] != "interrupted"
                && e["inputs"]
                    .as_array()
                    .is_some_and(|a| a.contains(&json!(seq)))
        })
    }
}

/// Starts a host on fleet file `path`, sends `text` to bot `r`, kills it
/// (SIGKILL) once the turn's Shell step is stored and the model is
/// "thinking", and starts it again: the host, the session and its entries
/// once the resumed turn has ended.
pub(super) async fn killed_after_a_shell_step(
    path: &std::path::Path,
    port: u16,
    log: &std::path::Path,
    text: &str,
) -> (HostProcess, String, Vec<Value>) {
    killed_when(path, port, log, text, |es| {
        es.iter()
            .any(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
    })
    .await
}

/// The same, killed once `pick` accepts the session's entries.
pub(super) async fn killed_when(
    path: &std::path::Path,
    port: u16,
    log: &std::path::Path,
    text: &str,
    pick: impl Fn(&[Value]) -> bool,
) -> (HostProcess, String, Vec<Value>) {
    let host = HostProcess::start(path, port, log).await;
    let sent = send(&host.url, "r", text).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    wait_until(&host.url, &session, pick).await;
    host.kill9().await;
    let host = HostProcess::start(path, port, log).await;
    let es = wait_until(&host.url, &session, turn_ended(seq)).await;
    (host, session, es)
}

#[tokio::test]
async fn sigkill_after_a_shell_step_resumes_without_repeating_it() {
    let script = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "echo ran >> side-effect.txt" } },
  { delay_ms = 1500, tool = "SendMessage", args = { text = "done: {{tool_result}}" } },
]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Shell"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let (host, session, es) = killed_after_a_shell_step(&path, port, &log, "do it").await;
    let url = host.url.clone();
    let side =
        std::fs::read_to_string(fleet.path().join("data/workspace/alice/side-effect.txt")).unwrap();
    assert_eq!(side, "ran\n", "the shell command ran exactly once");
    let delivered = deliveries(&es);
    assert_eq!(delivered.len(), 1, "delivered exactly once: {delivered:?}");
    assert!(
        delivered[0].starts_with("done: exit code: 0"),
        "{delivered:?}"
    );
    let end = es.iter().find(|e| e["kind"] == "turn_end").unwrap();
    assert_eq!(end["status"], "completed");
    let turn = end["turn"].as_str().unwrap();
    let c = botfleet::client::Client::new(&url, TOKEN).unwrap();
    let record = c.get(&format!("/v1/turns/{turn}")).await.unwrap();
    // resumed once (2), then the resumed start finished a step (back to 1)
    assert_eq!(record["turn"]["attempts"], 1, "{record}");

    // a later restart does not deliver again
    host.kill9().await;
    let host = HostProcess::start(&path, port, &log).await;
    let again = entries(&host.url, &session).await;
    assert_eq!(deliveries(&again).len(), 1);
    host.kill9().await;
}

#[tokio::test]
async fn sigkill_during_a_shell_call_reports_outcome_unknown() {
    let script = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "echo started >> started.txt; sleep 1; echo finished >> finished.txt" } },
  { tool = "SendMessage", args = { text = "result was: {{tool_result}}" } },
]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Shell"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let sent = send(&host.url, "r", "go").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    let started = fleet.path().join("data/workspace/alice/started.txt");
    for _ in 0..200 {
        if started.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(started.exists(), "the shell command started");
    let url = host.url.clone();
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let es = wait_until(&url, &session, turn_ended(seq)).await;
    let delivered = deliveries(&es);
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(delivered[0].contains("outcome unknown"), "{delivered:?}");
    // a crash, not a stop of the host's
    assert!(
        delivered[0].contains("the host restarted while `Shell` was running"),
        "{delivered:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&started).unwrap(),
        "started\n",
        "not run again"
    );
    host.kill9().await;
}

#[tokio::test]
async fn a_subagent_killed_mid_task_finishes_after_restart_and_reports_once() {
    let script = r#"
[[rule]]
bot = "p"
match = "^research"
steps = [
  { tool = "Task", args = { description = "slow job", prompt = "do the slow job" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "got the report: {{input}}" } } ]

[[rule]]
match = "do the slow job"
steps = [
  { tool = "Shell", args = { command = "echo step >> sub.txt" } },
  { delay_ms = 1500, tool = "SendMessage", args = { text = "slow job finished" } },
]
"#;
    let fleet =
        TestFleet::new()
            .script("s", script)
            .bot("p", "s", &["SendMessage", "Task", "Shell"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let sent = send(&host.url, "p", "research this").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let marker = fleet.path().join("data/workspace/alice/sub.txt");
    for _ in 0..300 {
        if marker.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(marker.exists(), "the subagent started working");
    let url = host.url.clone();
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let es = wait_until(&url, &session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d.starts_with("got the report"))
    })
    .await;
    let reports: Vec<&Value> = es.iter().filter(|e| e["kind"] == "agent_message").collect();
    assert_eq!(reports.len(), 1, "the report wakes the parent once");
    assert!(
        reports[0]["text"]
            .as_str()
            .unwrap()
            .contains("slow job finished")
    );
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "step\n",
        "the subagent's side effect ran once"
    );
    // a later restart does not report again
    host.kill9().await;
    let host = HostProcess::start(&path, port, &log).await;
    wait_quiet(&host.url).await;
    let again = entries(&host.url, &session).await;
    assert_eq!(
        again
            .iter()
            .filter(|e| e["kind"] == "agent_message")
            .count(),
        1
    );
    host.kill9().await;
}

/// A Shell command outlived the host killed in the middle of it and ran on
/// unsupervised, after the restart too. The host started next kills what
/// the dead one left running (the group of the listed command, its
/// background children included, and a process that left the group with
/// `setsid` but kept the command's output open: QA, 2026-12-04, it ran on
/// and did its work after the call was reported `outcome unknown`) before
/// the turn resumes.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_shell_command_left_running_by_a_killed_host_is_killed_at_restart() {
    let script = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "setsid sh -c 'echo $$ > escapee.pid; exec sleep 60' & echo $$ > shell.pid; sleep 60 & echo $! > sleep.pid; wait", timeout_s = 120 } },
  { tool = "SendMessage", args = { text = "after: {{tool_result}}" } },
]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Shell"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let sent = send(&host.url, "r", "run it").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    let workspace = fleet.path().join("data/workspace/alice");
    let read_pid = |name: &str| -> Option<i32> {
        std::fs::read_to_string(workspace.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    // files and processes signal nothing: these two waits poll, bounded
    let deadline = Instant::now() + Duration::from_secs(30);
    let (shell, sleep, escapee) = loop {
        if let (Some(a), Some(b), Some(c)) = (
            read_pid("shell.pid"),
            read_pid("sleep.pid"),
            read_pid("escapee.pid"),
        ) {
            break (a, b, c);
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let url = host.url.clone();
    host.kill9().await;
    assert!(
        alive(shell) && alive(sleep) && alive(escapee),
        "the command outlives the killed host"
    );

    let host = HostProcess::start(&path, port, &log).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(shell) || alive(sleep) || alive(escapee) {
        assert!(
            Instant::now() < deadline,
            "the left-over command still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // the turn resumes and says the call's outcome is unknown
    let es = wait_until(&url, &session, turn_ended(seq)).await;
    let delivered = deliveries(&es);
    assert!(
        delivered.len() == 1 && delivered[0].contains("outcome unknown"),
        "{delivered:?}"
    );
    host.kill9().await;
}

/// A turn resumed after a crash keeps where its input came from: its
/// answer to another bot goes back to the session that bot asked from,
/// one hop further. (Before, a resumed turn started over at hop 0 with no
/// reply target: the answer landed in the bots' default session at hop 1.)
#[tokio::test]
async fn a_resumed_turn_answers_another_bot_where_it_asked_one_hop_on() {
    let script = r#"
[[rule]]
bot = "a"
match = "^ask"
steps = [ { tool = "SendToAgent", args = { agent = "b", text = "what is two plus two" } } ]

[[rule]]
bot = "b"
steps = [
  { tool = "Shell", args = { command = "true" } },
  { delay_ms = 1500, tool = "SendToAgent", args = { agent = "a", text = "four" } },
]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("a", "s", &["SendMessage", "SendToAgent"])
        .bot("b", "s", &["SendMessage", "SendToAgent", "Shell"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let sent = send(&host.url, "a", "ask b").await;
    let asked_from = sent["session"].as_str().unwrap().to_owned();
    // b's turn has run its Shell step and is "thinking" about the answer
    let b_session = wait_for_session_of(&host.url, "b").await;
    wait_until(&host.url, &b_session, |es| {
        es.iter()
            .any(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
    })
    .await;
    let url = host.url.clone();
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let es = wait_until(&url, &asked_from, |es| {
        es.iter().any(|e| e["kind"] == "agent_message")
    })
    .await;
    let answer = es.iter().find(|e| e["kind"] == "agent_message").unwrap();
    assert_eq!(answer["text"], "four", "{answer}");
    assert_eq!(answer["hop"], 2, "{answer}");
    host.kill9().await;
}

/// The session of `bot`'s first turn, once it has one.
async fn wait_for_session_of(url: &str, bot: &str) -> String {
    let c = botfleet::client::Client::new(url, TOKEN).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let v = c.get(&format!("/v1/bots/{bot}/turns")).await.unwrap();
        if let Some(s) = v["turns"][0]["session"].as_str() {
            return s.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "{bot} never ran: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// After a crash, an input waiting behind the resumed turn reaches the
/// model of the turn that takes it. (Before, inputs read back from the
/// inbox carried no entry, and a turn whose tail was already loaded by the
/// resumed one never added them: the model answered nothing new while the
/// turn listed the input as answered.)
#[tokio::test]
async fn an_input_queued_behind_a_resumed_turn_reaches_its_model() {
    const HOOK_SECRET: &str = "a-hook-secret-of-some-length";
    let script = r#"
[[rule]]
match = "slow one"
steps = [
  { tool = "Shell", args = { command = "true" } },
  { delay_ms = 1500, tool = "SendMessage", args = { text = "done slow" } },
]

[[rule]]
match = "second question"
steps = [ { tool = "SendMessage", args = { text = "answering the second question" } } ]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Shell"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{HOOK_SECRET}\"\n"
        ));
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let http = reqwest::Client::new();
    let deliver = |id: &'static str, body: &'static str| {
        let req = http
            .post(format!("{}/v1/hooks/r/gh", host.url))
            .header("X-Botfleet-Delivery", id)
            .header(
                "X-Botfleet-Signature",
                botfleet::api::sign_hook(HOOK_SECRET.as_bytes(), body.as_bytes()),
            )
            .body(body);
        async move {
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 202);
            resp.json::<Value>().await.unwrap()
        }
    };
    // webhook events are background inputs: the second waits, it does
    // not interrupt the first
    let first = deliver("d-1", "slow one").await;
    let session = first["session"].as_str().unwrap().to_owned();
    wait_until(&host.url, &session, |es| {
        es.iter()
            .any(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
    })
    .await;
    let second = deliver("d-2", "second question").await;
    let seq = second["seq"].as_i64().unwrap();
    let url = host.url.clone();
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let es = wait_until(&url, &session, turn_ended(seq)).await;
    let end = es
        .iter()
        .find(|e| {
            e["kind"] == "turn_end"
                && e["inputs"]
                    .as_array()
                    .is_some_and(|a| a.contains(&json!(seq)))
        })
        .unwrap();
    // the model saw the second question: its rule answered it (a hook
    // turn's SendMessage goes to the owner's DM)
    assert_eq!(end["deliveries"], 1, "{es:#?}");
    let answered = es.iter().any(|e| {
        e["kind"] == "assistant"
            && e["turn"] == end["turn"]
            && e["tool_calls"]
                .to_string()
                .contains("answering the second question")
    });
    assert!(answered, "{es:#?}");
    host.kill9().await;
}

/// A turn that wrote more entries than `runtime.context_entries`, killed in
/// the middle, resumes with the person's message in its context. (The
/// resumed context was the newest window of entries only — six tool
/// results, cut to none — so the model no longer saw what it was asked,
/// and the turn ended undelivered or answered nonsense.)
#[tokio::test]
async fn a_turn_longer_than_the_context_window_resumes_with_its_input() {
    let script = r#"
[[rule]]
match = "^long job"
steps = [
  { calls = [
      { tool = "Remember", args = { text = "fact one", layer = "log" } },
      { tool = "Remember", args = { text = "fact two", layer = "log" } },
      { tool = "Remember", args = { text = "fact three", layer = "log" } },
      { tool = "Remember", args = { text = "fact four", layer = "log" } },
      { tool = "Remember", args = { text = "fact five", layer = "log" } },
      { tool = "Remember", args = { text = "fact six", layer = "log" } },
  ] },
  { delay_ms = 1500, tool = "SendMessage", args = { text = "answered: {{input}}" } },
]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Remember"])
        .runtime("debounce_ms = 0\nextract_memory = false\ncontext_entries = 4");
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let sent = send(&host.url, "r", "long job, please").await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    // killed while the second step's model call waits
    wait_until(&host.url, &session, |es| {
        es.iter().filter(|e| e["kind"] == "tool_result").count() == 6
    })
    .await;
    let url = host.url.clone();
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let es = wait_until(&url, &session, turn_ended(seq)).await;
    assert_eq!(deliveries(&es), ["answered: long job, please"], "{es:#?}");
    host.kill9().await;
}
