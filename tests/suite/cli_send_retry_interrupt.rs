//! A new user's first hour with the CLI: `botfleet send
//! --nonce` after the turn that failed over the message was retried, and
//! Ctrl-C while `send` waits.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::process::BIN;
use crate::support::process::cli;
use crate::support::process::poll;
use crate::support::process::signal;

/// Regression: "Send again with the same --nonce and you get the same
/// answer" (README). After a failed turn was retried (`botfleet retry
/// TURN`) and the retry answered, `send --nonce KEY` printed the failed
/// turn (exit 3, with a `retry_command` the host now refuses), because it
/// reported the first `turn_end` listing the message. The newest turn
/// over the message is its answer: the retry's reply, exit 0.
#[tokio::test]
async fn send_with_its_nonce_after_a_retry_prints_the_retry_s_answer() {
    // the first model call fails for good; the retried turn replies
    let server = OpenAiServer::builder()
        .fail_next(1, Reply::error(400, "boom"))
        .reply(Reply::tool_call(
            "call_1",
            "SendMessage",
            json!({ "text": "answer after the retry" }).to_string(),
        ))
        .reply(Reply::text("done"))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("o", &server.base_url(), "max_retries = 0")
        .bot("r", "o", &["SendMessage"])
        .start()
        .await;
    let key = "r25-nonce-after-retry";
    let (code, out, err) = cli(
        &["send", "r", "what is new?", "--nonce", key, "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 3, "{out}{err}");
    let failed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(failed["status"], "failed", "{failed}");
    let turn = failed["retry_turn"].as_str().unwrap().to_owned();
    let session = failed["session"].as_str().unwrap().to_owned();

    let (code, out, err) = cli(&["retry", &turn], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{out}{err}");
    // and where to see the answer (it said only "requeued", QA)
    assert!(
        err.contains("the bot answers them in its conversation: `botfleet transcript "),
        "{err}"
    );
    host.wait_for(&session, |es| {
        es.iter()
            .find(|e| e["kind"] == "turn_end" && e["status"] == "completed")
            .cloned()
    })
    .await;

    // the same message again, with its key: the retry's answer
    let (code, out, err) = cli(
        &["send", "r", "what is new?", "--nonce", key, "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let answered: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answered["status"], "completed", "{answered}");
    assert_ne!(answered["turn"], json!(turn), "{answered}");
    assert_eq!(
        answered["deliveries"][0]["text"], "answer after the retry",
        "{answered}"
    );
    assert!(answered.get("retry_command").is_none(), "{answered}");
    // and as text
    let (code, out, err) = cli(
        &["send", "r", "what is new?", "--nonce", key],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!((code, out.trim()), (0, "answer after the retry"), "{err}");
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: `send --nonce KEY` while the retry of the turn that failed
/// over the message still ran printed the old failure at once (exit 3,
/// with a `retry_command` the host refuses: its inputs were retried). It
/// waits for the retry, as for a new message: no answer within
/// `--timeout` is 5, and once the retry answered, its reply (0).
#[tokio::test]
async fn send_with_its_nonce_waits_for_a_running_retry() {
    let (open, gate) = tokio::sync::watch::channel(false);
    let server = OpenAiServer::builder()
        .fail_next(1, Reply::error(400, "boom"))
        .reply(
            Reply::tool_call(
                "call_1",
                "SendMessage",
                json!({ "text": "held answer" }).to_string(),
            )
            .hold_until(gate),
        )
        .reply(Reply::text("done"))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("o", &server.base_url(), "max_retries = 0")
        .bot("r", "o", &["SendMessage"])
        .start()
        .await;
    let key = "r25-nonce-while-retrying";
    let args = ["send", "r", "still there?", "--nonce", key, "--json"];
    let (code, out, err) = cli(&args, &host.url, TOKEN).await;
    assert_eq!(code, 3, "{out}{err}");
    let failed: Value = serde_json::from_str(&out).unwrap();
    let turn = failed["retry_turn"].as_str().unwrap().to_owned();
    let (code, out, err) = cli(&["retry", &turn], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{out}{err}");
    // the retry holds its model call: it runs
    host.wait_running("r").await;
    let (code, out, err) = cli(
        &[
            "send",
            "r",
            "still there?",
            "--nonce",
            key,
            "--json",
            "--timeout",
            "2",
        ],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 5, "{out}{err}");
    let waited: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&waited["status"], &waited["nonce"]),
        (&json!("timeout"), &json!(key)),
        "{out}"
    );
    open.send(true).unwrap();
    let (code, out, err) = cli(&args, &host.url, TOKEN).await;
    assert_eq!(code, 0, "{out}{err}");
    let answered: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        answered["deliveries"][0]["text"], "held answer",
        "{answered}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// Whether process `pid` catches SIGINT (its `SigCgt` mask in /proc).
fn catches_sigint(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (2 - 1)) != 0)
}

/// `botfleet ARGS` against the host at `url`, its output piped.
fn spawn_cli(url: &str, args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(BIN)
        .args(args)
        .env("BOTFLEET_HOST", url)
        .env("BOTFLEET_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Ctrl-C (SIGINT) to `child` once it catches it (it waits for an
/// answer); its output.
async fn interrupt_when_waiting(child: tokio::process::Child) -> std::process::Output {
    let pid = child.id().unwrap();
    // another process's state: polled (bounded), as the suite does
    poll(30, async || {
        if catches_sigint(pid) {
            Ok(())
        } else {
            Err("the command never waited for the answer".to_owned())
        }
    })
    .await;
    signal(pid, "INT");
    tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap()
        .unwrap()
}

/// Regression: Ctrl-C while `send` waited for the answer ended it with no
/// word (130): a new user could not tell whether the message went
/// through, nor how to see its answer (the key, made up by the CLI, was
/// never shown). It says the message is saved, and how to read or wait
/// for the answer with its key; the bot answers it all the same.
#[tokio::test]
async fn ctrl_c_while_send_waits_says_the_message_is_saved_and_its_key() {
    let (open, gate) = tokio::sync::watch::channel(false);
    let server = OpenAiServer::builder()
        .reply(
            Reply::tool_call(
                "call_1",
                "SendMessage",
                json!({ "text": "late answer" }).to_string(),
            )
            .hold_until(gate),
        )
        .reply(Reply::text("done"))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("o", &server.base_url(), "max_retries = 0")
        .bot("r", "o", &["SendMessage"])
        .start()
        .await;
    let child = spawn_cli(&host.url, &["send", "r", "are you there?"]);
    // the message is saved and its turn runs; the CLI waits for it
    host.wait_running("r").await;
    let out = interrupt_when_waiting(child).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    assert!(
        err.contains("interrupted: your message is saved (seq 1)")
            && err.contains("`botfleet transcript r`"),
        "{err}"
    );
    let key = err
        .split("--nonce ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no key in {err}"))
        .to_owned();
    // the bot answers all the same; the key waits for that answer
    open.send(true).unwrap();
    let (code, out, err) = cli(
        &["send", "r", "are you there?", "--nonce", &key],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!((code, out.trim()), (0, "late answer"), "{err}");
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: `--host https://…` at a running host (which serves plain
/// HTTP) said "cannot reach the host … (error sending request for url
/// …); is `botfleet run` running?": it runs, and the cause (a TLS
/// handshake with a plain-HTTP server) was left out, as every cause
/// under reqwest's message was (a refused connection, a name that does
/// not resolve). The causes are shown, and a TLS failure says to use
/// http://.
#[tokio::test]
async fn an_https_host_address_at_a_plain_http_host_says_to_use_http() {
    let host = TestFleet::new()
        .script("s", "[[rule]]\nsteps = []\n")
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let plain = host.url.strip_prefix("http://").unwrap().to_owned();
    let (code, out, err) = cli(&["bots"], &format!("https://{plain}"), TOKEN).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!("use http://{plain} "))
            && !err.contains("is `botfleet run` running?"),
        "{err}"
    );
    host.shutdown().await;
    // nothing listens there now: the refused connection is named
    let (code, _, err) = cli(&["bots"], &format!("http://{plain}"), TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Connection refused") && err.contains("is `botfleet run` running?"),
        "{err}"
    );
}

/// `group send` as `send`: Ctrl-C while it waits for the discussion says
/// the message is saved, and its key.
#[tokio::test]
async fn ctrl_c_while_group_send_waits_says_the_message_is_saved() {
    const SLOW: &str = r#"
[[rule]]
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "late" } } ]
"#;
    let host = TestFleet::new()
        .script("s", SLOW)
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    let (code, out, err) = cli(
        &["group", "create", "slow", "--members", "a,b"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let child = spawn_cli(
        &host.url,
        &["group", "send", "slow", "hi all", "--nonce", "r25-room-key"],
    );
    host.wait_running("a").await;
    let out = interrupt_when_waiting(child).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted: your message is saved (#1)")
            && err.contains("`botfleet group transcript slow`")
            && err.contains("--nonce r25-room-key`"),
        "{err}"
    );
    host.shutdown().await;
}
