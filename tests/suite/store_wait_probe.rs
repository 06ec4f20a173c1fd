//! A turn waiting for a store that refuses writes (a full or failing
//! disk) asks the model nothing while it waits: after each wait its bot
//! probes the store with a tiny write of its own, and runs the turn again
//! only once that write commits (tester H1, round 21: each wait, 1, 2, 4 …
//! 60 s, ran the turn again, and each run sent the model the whole request
//! again, a full-price call a minute for as long as the disk stayed full,
//! its usage lost with the run's other writes and so not counted by the
//! daily budget).
//!
//! The refusal is a host process's file-size limit (RLIMIT_FSIZE, set and
//! lifted with prlimit(1), as in `store_refusals.rs`): every write of its
//! files fails as on a failing disk. Its log is read from a pipe, which
//! the limit does not touch.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::process::BIN;
use crate::support::process::free_port;
use crate::support::process::poll;

/// Sets the soft file-size limit of process `pid` (bytes, or "unlimited").
fn limit_file_size(pid: u32, soft: &str) {
    let status = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--fsize={soft}:")])
        .status()
        .expect("prlimit(1) (util-linux) runs");
    assert!(
        status.success(),
        "prlimit --pid {pid} --fsize={soft}: {status}"
    );
}

/// The model: request 1 answers once `gate` opens; every request answers
/// SendMessage "answered", then "done" after its result.
async fn model(gate: watch::Receiver<bool>) -> OpenAiServer {
    let seen = std::sync::atomic::AtomicUsize::new(0);
    OpenAiServer::builder()
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
            if n == 0 {
                reply.hold_until(gate.clone())
            } else {
                reply
            }
        })
        .start()
        .await
}

/// A host process on `config` whose file-size limit can be set, SIGXFSZ
/// ignored (a write past the limit fails with EFBIG, as a failing disk's,
/// instead of killing the host); its log is gathered in the answer's
/// string as it comes. Waits until the host answers.
async fn start(
    config: &std::path::Path,
) -> (tokio::process::Child, u32, String, Arc<Mutex<String>>) {
    let url = format!("http://127.0.0.1:{}", free_port());
    let listen = url.trim_start_matches("http://").to_owned();
    let mut host = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; exec "$0" run --fleet "$1" --listen "$2""#)
        .arg(BIN)
        .arg(config)
        .arg(&listen)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = host.id().unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let mut stderr = host.stderr.take().unwrap();
    let into = log.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        loop {
            match tokio::io::AsyncReadExt::read(&mut stderr, &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => into
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
    });
    poll(30, async || {
        let up = reqwest::get(format!("{url}/healthz"))
            .await
            .is_ok_and(|r| r.status().is_success());
        up.then_some(Value::Null)
            .ok_or_else(|| "the host did not start".into())
    })
    .await;
    (host, pid, url, log)
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_turn_waiting_for_the_store_makes_no_model_request_until_it_takes_writes() {
    let (open, gate) = watch::channel(false);
    let server = model(gate).await;
    let fleet = TestFleet::new()
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n")
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"]);
    let config = fleet.write();
    let (mut host, pid, url, log) = start(&config).await;
    let client = botfleet::client::Client::new(&url, TOKEN).unwrap();
    let sent = client
        .post_ok("/v1/bots/r/messages", &json!({ "text": "hello" }))
        .await
        .unwrap();
    let session = sent["session"].as_str().unwrap().to_owned();
    tokio::time::timeout(Duration::from_secs(30), server.wait_for_requests(1))
        .await
        .expect("the turn's first model request never came");

    // the disk fails while the model answers: the turn's first step is
    // refused, and the turn waits for the store
    limit_file_size(pid, "1");
    open.send(true).unwrap();
    // three refusals in a row: the run's, then two probes (after 1 s and
    // 2 s); before, each was a run of the turn with its model request
    let logged = |text: &str| log.lock().unwrap().contains(text);
    poll(40, async || {
        if logged("failures=3") {
            Ok(())
        } else {
            Err(format!(
                "the bot never counted three refusals; model requests: {}; log:\n{}",
                server.request_count(),
                log.lock().unwrap()
            ))
        }
    })
    .await;
    assert_eq!(
        server.request_count(),
        1,
        "the model was asked again while the store refused writes; log:\n{}",
        log.lock().unwrap()
    );
    assert!(
        logged("the store still refuses writes"),
        "{}",
        log.lock().unwrap()
    );

    // the disk works again; the host is not restarted: the next probe
    // commits and the turn runs once more, to its end, answered once
    limit_file_size(pid, "unlimited");
    let es = poll(40, async || {
        let es = client.entries_after(&session, 0).await.unwrap();
        if es
            .iter()
            .any(|e| e["kind"] == "turn_end" && e["status"] == "completed")
        {
            Ok(es)
        } else {
            Err(format!(
                "the turn never completed; model requests: {}; entries: {es:#?}",
                server.request_count()
            ))
        }
    })
    .await;
    assert_eq!(deliveries(&es), vec!["answered"], "{es:#?}");
    let ends = es.iter().filter(|e| e["kind"] == "turn_end").count();
    assert_eq!(ends, 1, "{es:#?}");
    // the run after the probe: its step, then its end after the result
    assert_eq!(server.request_count(), 3, "{es:#?}");

    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let exited = tokio::time::timeout(Duration::from_secs(20), host.wait()).await;
    assert!(
        exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
        "the host did not stop cleanly; log:\n{}",
        log.lock().unwrap()
    );
}
