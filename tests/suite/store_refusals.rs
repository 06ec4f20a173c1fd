//! A store that refuses writes for a while (a full disk, an I/O error, a
//! database another process holds locked): the turn it refused keeps its
//! inputs, which show as queued, and runs again with backoff; once the
//! store takes writes the inputs are answered, older ones first, with no
//! restart. A cancel meanwhile fails the waiting turn with a notice that
//! names the store's error, and the turn can be retried.
//!
//! Two refusals, neither needing root (a full tmpfs does): a host process
//! whose file-size limit (RLIMIT_FSIZE, set and lifted with prlimit(1))
//! makes every write of its files fail as on a failing disk, and another
//! connection holding the database's write lock (the host's writer waits
//! its busy timeout, 5 s, and gets "database is locked"). (Before, the bot
//! gave the turn up after three runs within milliseconds: its inputs were
//! never answered, and newer ones were answered without them.)

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::free_port;
use crate::support::process::poll;

/// A bot whose "hold" message runs a Shell command that waits for the file
/// `go` in the workspace (it writes `held` first); any other message is
/// answered with the inputs.
const SCRIPT: &str = r#"
[[rule]]
match = "^hold"
steps = [
  { tool = "Shell", args = { command = "touch held; while [ ! -e go ]; do sleep 0.02; done; echo released", timeout_s = 120 } },
  { tool = "SendMessage", args = { text = "held: {{tool_result}}" } },
]

[[rule]]
match = "^slow"
steps = [
  { delay_ms = 1500, tool = "SendMessage", args = { text = "slow done: {{input}}" } },
]

[[rule]]
steps = [
  { tool = "SendMessage", args = { text = "got: {{inputs}}" } },
]
"#;

/// The test fleet: bot `a1` on the script, Shell without review.
fn fleet() -> TestFleet {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("a1", "s", &["SendMessage", "Shell"])
        .tables("[review]\nshell = \"off\"\n")
}

/// `GET url/path` as alice.
async fn get(url: &str, path: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .get(format!("{url}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// `POST url/path` with `body` as alice.
async fn post(url: &str, path: &str, body: Value, key: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .bearer_auth(TOKEN)
        .json(&body);
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// What `GET /v1/bots` says of bot `a1`.
async fn bot_a1(url: &str) -> Value {
    let (status, body) = get(url, "/v1/bots").await;
    assert_eq!(status, 200, "{body}");
    body["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "a1")
        .cloned()
        .unwrap()
}

/// The entries of `session`.
async fn entries(url: &str, session: &str) -> Vec<Value> {
    botfleet::client::Client::new(url, TOKEN)
        .unwrap()
        .entries_after(session, 0)
        .await
        .unwrap()
}

/// Sends "hold" to `a1`, and "one" and "two" while its Shell call runs;
/// returns the session and the seqs of the three messages. The Shell call
/// ends when `refuse` has made the store refuse writes.
async fn held_turn(url: &str, data: &Path, refuse: impl FnOnce()) -> (String, Vec<i64>) {
    let mut seqs = Vec::new();
    let (status, sent) = post(
        url,
        "/v1/bots/a1/messages",
        json!({"text": "hold"}),
        Some("k0"),
    )
    .await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    seqs.push(sent["seq"].as_i64().unwrap());
    let held = data.join("workspace/alice/held");
    poll(30, async || {
        held.exists()
            .then_some(Value::Null)
            .ok_or_else(|| "the Shell call never began".into())
    })
    .await;
    for (text, key) in [("one", "k1"), ("two", "k2")] {
        let (status, sent) = post(
            url,
            "/v1/bots/a1/messages",
            json!({"text": text}),
            Some(key),
        )
        .await;
        assert_eq!(status, 202, "{sent}");
        seqs.push(sent["seq"].as_i64().unwrap());
    }
    refuse();
    std::fs::write(data.join("workspace/alice/go"), "").unwrap();
    (session, seqs)
}

/// Waits until the bot waits for its store: no running turn, and the
/// refused turn's input queued with the two behind it.
async fn wait_store_wait(url: &str) {
    poll(40, async || {
        let bot = bot_a1(url).await;
        (bot["running_turn"].is_null() && bot["queued"] == 3)
            .then_some(Value::Null)
            .ok_or_else(|| format!("the bot never waited with its three inputs queued: {bot:#}"))
    })
    .await;
}

/// Waits until the refused turn's inputs were answered, all by one turn
/// (the refused one ran again, the newer messages interrupted it, and the
/// next turn took them all, oldest first), and checks that no turn
/// answered a newer message before, that the refused runs were not
/// counted as crashes, and that nothing waits any more.
async fn check_answered_in_order(url: &str, session: &str, seqs: &[i64]) {
    let entries = poll(40, async || {
        let entries = entries(url, session).await;
        let done = entries.iter().any(|e| {
            e["kind"] == "turn_end"
                && e["status"] == "completed"
                && e["inputs"]
                    .as_array()
                    .is_some_and(|a| seqs.iter().all(|s| a.contains(&Value::from(*s))))
        });
        done.then(|| Value::from(entries.clone()))
            .ok_or_else(|| format!("entries: {entries:#?}"))
    })
    .await;
    let entries = entries.as_array().unwrap();
    let completed = entries
        .iter()
        .filter(|e| e["kind"] == "turn_end" && e["status"] == "completed")
        .count();
    assert_eq!(completed, 1, "{entries:#?}");
    let delivered = entries.iter().filter(|e| e["kind"] == "delivery").count();
    assert_eq!(delivered, 1, "{entries:#?}");
    let refused = entries
        .iter()
        .find(|e| e["kind"] == "turn_end" && e["status"] == "interrupted")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    let turn = refused["turn"].as_str().unwrap();
    let (status, record) = get(url, &format!("/v1/turns/{turn}")).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["turn"]["attempts"], 1, "{record:#}");
    let bot = bot_a1(url).await;
    assert_eq!(bot["queued"], 0, "{bot:#}");
    assert!(bot["running_turn"].is_null(), "{bot:#}");
}

/// Waits for the `turn_end` that failed the turn over the input `seq` in
/// `session`, and returns it.
async fn failed_end(url: &str, session: &str, seq: i64) -> Value {
    poll(40, async || {
        let entries = entries(url, session).await;
        entries
            .iter()
            .find(|e| {
                e["kind"] == "turn_end"
                    && e["status"] == "failed"
                    && e["inputs"]
                        .as_array()
                        .is_some_and(|a| a.contains(&Value::from(seq)))
            })
            .cloned()
            .ok_or_else(|| format!("entries: {entries:#?}"))
    })
    .await
}

/// Checks that no Shell result in `session` tells the model of a restart:
/// none happened (audit: a cancel's failure, written after the store's
/// wait, said "the host restarted while `Shell` was running").
async fn no_restart_told(url: &str, session: &str) {
    let entries = entries(url, session).await;
    let told: Vec<&str> = entries
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
        .filter_map(|e| e["content"].as_str())
        .filter(|c| c.contains("the host restarted"))
        .collect();
    assert!(told.is_empty(), "{told:#?}");
}

/// `POST /v1/bots/a1/cancel`, sent now, answered when the task ends.
fn spawn_cancel(url: &str) -> tokio::task::JoinHandle<(u16, Value)> {
    let url = url.to_owned();
    tokio::spawn(async move { post(&url, "/v1/bots/a1/cancel", json!({}), None).await })
}

/// Opens the store's database and takes its write lock.
/// A host whose bot `a1` holds a turn while another connection holds the
/// store's write lock, and waits for the store with its inputs queued;
/// returns the host, the lock (drop it to let writes in), the DM's
/// session and the inputs' seqs.
async fn waiting_on_a_locked_store() -> (
    crate::support::fleet::TestHost,
    rusqlite::Connection,
    String,
    Vec<i64>,
) {
    let fleet = fleet();
    let data = fleet.path().join("data");
    let host = fleet.start().await;
    let mut lock = None;
    let (session, seqs) = held_turn(&host.url, &data, || {
        lock = Some(lock_store(&data.join("fleet.db")))
    })
    .await;
    wait_store_wait(&host.url).await;
    let lock = lock.expect("held_turn locked the store");
    (host, lock, session, seqs)
}

fn lock_store(db: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

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

/// Starts a host process on `config` whose file-size limit can be set
/// ([`limit_file_size`]), its log going to `stderr`; waits until it
/// answers. Returns the process, its pid and its URL. SIGXFSZ is ignored
/// (kept across exec): a write past the limit fails with EFBIG, as a
/// failing disk's, instead of killing the host.
async fn start_limitable(config: &Path, stderr: Stdio) -> (tokio::process::Child, u32, String) {
    let url = format!("http://127.0.0.1:{}", free_port());
    let listen = url.trim_start_matches("http://").to_owned();
    let host = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; exec "$0" run --fleet "$1" --listen "$2""#)
        .arg(BIN)
        .arg(config)
        .arg(&listen)
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = host.id().unwrap();
    poll(30, async || {
        let up = reqwest::get(format!("{url}/healthz"))
            .await
            .is_ok_and(|r| r.status().is_success());
        up.then_some(Value::Null)
            .ok_or_else(|| "the host did not start".into())
    })
    .await;
    (host, pid, url)
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn messages_accepted_before_the_disk_fails_writes_are_answered_once_it_works() {
    let fleet = fleet();
    let config = fleet.write();
    let data = fleet.path().join("data");
    let (mut host, pid, url) = start_limitable(&config, Stdio::piped()).await;
    // its log, read by a task (a full pipe would stop the host)
    let mut stderr = host.stderr.take().unwrap();
    let log = tokio::spawn(async move {
        let mut text = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await;
        text
    });
    let (session, seqs) = held_turn(&url, &data, || limit_file_size(pid, "1")).await;
    wait_store_wait(&url).await;
    // the disk works again; the host is not restarted
    limit_file_size(pid, "unlimited");
    check_answered_in_order(&url, &session, &seqs).await;
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let exited = tokio::time::timeout(Duration::from_secs(20), host.wait()).await;
    let log = log.await.unwrap();
    assert!(
        exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
        "the host did not stop cleanly; log:\n{log}"
    );
    assert!(log.contains("the store refused the turn's writes"), "{log}");
    assert!(!log.contains("giving up on turn"), "{log}");
}

#[tokio::test]
async fn messages_accepted_while_the_store_is_locked_are_answered_in_order() {
    let (host, lock, session, seqs) = waiting_on_a_locked_store().await;
    let url = host.url.clone();
    // the store takes writes again; the host is not restarted
    drop(lock);
    check_answered_in_order(&url, &session, &seqs).await;
    // the Shell call whose result the store refused is told to the model
    // as that, not as a restart (audit: "the host restarted while `Shell`
    // was running", with no restart)
    let entries = entries(&url, &session).await;
    let results: Vec<&str> = entries
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert!(
        matches!(&results[..], [r] if r.starts_with("outcome unknown: `Shell` ran, but the store refused to record its result")),
        "{results:#?}"
    );
    host.shutdown().await;
}

/// The cancel is not said to be done while the store cannot record it
/// (audit: it was answered `{"cancelled": true}` at once, its failure was
/// never written, and the next start resumed the turn and did the work the
/// person had cancelled): `503` saying so and what to do. The failure is
/// recorded once the store takes writes, with no restart.
#[tokio::test]
async fn a_cancel_while_the_store_refuses_writes_fails_the_waiting_turn_with_its_error() {
    let (host, lock, session, seqs) = waiting_on_a_locked_store().await;
    let url = host.url.clone();
    let (status, cancelled) = post(&url, "/v1/bots/a1/cancel", json!({}), None).await;
    assert_eq!(status, 503, "{cancelled}");
    let message = cancelled["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the store refused to record its cancel")
            && message.contains("database is locked")
            && message.contains("a restart before then resumes it"),
        "{message}"
    );
    drop(lock);
    let hold = seqs[0];
    let end = failed_end(&url, &session, hold).await;
    no_restart_told(&url, &session).await;
    let entries = entries(&url, &session).await;
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("no failure notice: {entries:#?}"));
    let text = notice["text"].as_str().unwrap();
    assert!(text.contains("database is locked"), "{text}");
    assert!(!text.contains("crashed"), "{text}");
    let turn = notice["retry_turn"].as_str().unwrap().to_owned();
    assert_eq!(end["turn"].as_str(), Some(turn.as_str()), "{end:#}");
    // the turn's record says failed, with the store's error, and its
    // refused runs are not counted as starts after a crash
    let (status, record) = get(&url, &format!("/v1/turns/{turn}")).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["turn"]["status"], "failed", "{record:#}");
    let error = record["turn"]["error"].as_str().unwrap();
    assert!(error.contains("database is locked"), "{error}");
    assert_eq!(record["turn"]["attempts"], 1, "{record:#}");
    // the messages queued behind it were answered by a later turn, with
    // its input before the model: a retry would answer it twice
    let later = poll(40, async || {
        let now = self::entries(&url, &session).await;
        now.iter()
            .find(|e| {
                e["kind"] == "turn_end"
                    && e["status"] == "completed"
                    && e["inputs"]
                        .as_array()
                        .is_some_and(|a| a.contains(&Value::from(seqs[1])))
            })
            .cloned()
            .ok_or_else(|| format!("entries: {now:#?}"))
    })
    .await;
    let (status, retried) = post(&url, &format!("/v1/turns/{turn}/retry"), json!({}), None).await;
    assert_eq!(status, 409, "{retried}");
    let message = retried["error"]["message"].as_str().unwrap();
    assert!(message.contains("already answered"), "{message}");
    assert!(
        message.contains(later["turn"].as_str().unwrap()),
        "{message} does not name {later:#}"
    );
    host.shutdown().await;
}

/// Regression: with the host's log redirected to a file on the disk that
/// failed (`botfleet run 2>host.log`, the data directory beside it), the
/// store's writer logged the refused write, the log line could not be
/// written, the log subscriber reported that with `eprintln!`, which
/// panics when stderr fails, and the writer thread died: the message got
/// no answer at all (the connection dropped), and once the disk worked
/// again every write failed with "the store writer has stopped; restart
/// the host". A log line that cannot be written is now dropped.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_log_file_on_the_failing_disk_does_not_stop_the_store() {
    let fleet = fleet();
    let config = fleet.write();
    let log_path = fleet.path().join("host.log");
    let log_file = std::fs::File::create(&log_path).unwrap();
    let (mut host, pid, url) = start_limitable(&config, Stdio::from(log_file)).await;
    let path = "/v1/bots/a1/messages";
    let (status, v) = post(&url, path, json!({"text": "before"}), Some("k0")).await;
    assert_eq!(status, 202, "{v}");
    // the log file has grown past 1 byte: every write of the host fails
    limit_file_size(pid, "1");
    let resp = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .bearer_auth(TOKEN)
        .header("Idempotency-Key", "k1")
        .json(&json!({"text": "during"}))
        .send()
        .await
        .expect("the host answers while its disk fails");
    assert_eq!(resp.status().as_u16(), 503, "{:?}", resp.text().await);
    limit_file_size(pid, "unlimited");
    let (status, v) = post(&url, path, json!({"text": "after"}), Some("k1")).await;
    assert_eq!(status, 202, "the store takes writes again: {v}");
    let session = v["session"].as_str().unwrap().to_owned();
    poll(30, async || {
        let es = entries(&url, &session).await;
        es.iter()
            .find(|e| {
                e["kind"] == "delivery" && e["text"].as_str().is_some_and(|t| t.contains("after"))
            })
            .cloned()
            .ok_or_else(|| format!("no answer to \"after\" yet: {es:?}"))
    })
    .await;
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let exited = tokio::time::timeout(Duration::from_secs(20), host.wait()).await;
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(
        exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
        "the host did not stop cleanly; log:\n{log}"
    );
    assert!(!log.contains("panicked at"), "{log}");
}

/// The store refuses a new turn's first write (its start goes with its
/// first step): the turn runs again once the store takes writes, and the
/// model is asked with the message it answers. (QA: the run again loaded
/// no input, so the model was asked with the system prompt alone, and its
/// answer to nothing, "got: ", was stored as the reply to the message.)
#[tokio::test]
async fn a_turn_whose_first_write_was_refused_runs_again_with_its_message() {
    let fleet = fleet();
    let data = fleet.path().join("data");
    let host = fleet.start().await;
    let url = host.url.clone();
    let (status, sent) = post(
        &url,
        "/v1/bots/a1/messages",
        json!({"text": "slow please"}),
        None,
    )
    .await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    // its model call waits 1.5 s: the store is locked meanwhile
    poll(30, async || {
        let bot = bot_a1(&url).await;
        (!bot["running_turn"].is_null())
            .then_some(Value::Null)
            .ok_or_else(|| format!("the turn never began: {bot:#}"))
    })
    .await;
    let lock = lock_store(&data.join("fleet.db"));
    poll(40, async || {
        let bot = bot_a1(&url).await;
        (bot["running_turn"].is_null() && bot["queued"] == 1)
            .then_some(Value::Null)
            .ok_or_else(|| format!("the bot never waited for its store: {bot:#}"))
    })
    .await;
    drop(lock);
    let entries = poll(40, async || {
        let entries = entries(&url, &session).await;
        entries
            .iter()
            .any(|e| e["kind"] == "turn_end" && e["status"] == "completed")
            .then(|| Value::from(entries.clone()))
            .ok_or_else(|| format!("entries: {entries:#?}"))
    })
    .await;
    let said: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "delivery")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(said, ["slow done: slow please"], "{entries:#}");
    host.shutdown().await;
}

/// A cancel of a turn waiting for its store is answered `cancelled: true`
/// once its failure is committed: here the store takes writes again while
/// that write waits for the lock.
#[tokio::test]
async fn a_cancel_of_a_waiting_turn_is_done_once_its_failure_is_written() {
    let (host, lock, session, seqs) = waiting_on_a_locked_store().await;
    let url = host.url.clone();
    let cancel = spawn_cancel(&url);
    // the failure's write waits up to the store's busy timeout (5 s) for
    // the lock, which goes now
    drop(lock);
    let (status, cancelled) = cancel.await.unwrap();
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["cancelled"], true, "{cancelled}");
    // recorded: the turn over "hold" is failed, in the store
    let hold = seqs[0];
    let entries = entries(&url, &session).await;
    assert!(
        entries.iter().any(|e| e["kind"] == "turn_end"
            && e["status"] == "failed"
            && e["inputs"]
                .as_array()
                .is_some_and(|a| a.contains(&Value::from(hold)))),
        "{entries:#?}"
    );
    host.shutdown().await;
}

/// A cancel of a running turn whose end the store refuses to write is not
/// said to be done either (audit: answered `true` as the run stopped, and
/// a stop and start resumed it): `503`; the failure is recorded once the
/// store takes writes.
#[tokio::test]
async fn a_cancel_of_a_running_turn_the_store_cannot_end_is_not_said_done() {
    let fleet = fleet();
    let data = fleet.path().join("data");
    let host = fleet.start().await;
    let url = host.url.clone();
    let (status, sent) = post(
        &url,
        "/v1/bots/a1/messages",
        json!({"text": "hold"}),
        Some("k0"),
    )
    .await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let hold = sent["seq"].as_i64().unwrap();
    let held = data.join("workspace/alice/held");
    poll(30, async || {
        held.exists()
            .then_some(Value::Null)
            .ok_or_else(|| "the Shell call never began".into())
    })
    .await;
    let lock = lock_store(&data.join("fleet.db"));
    let (status, cancelled) = post(&url, "/v1/bots/a1/cancel", json!({}), None).await;
    assert_eq!(status, 503, "{cancelled}");
    let message = cancelled["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the store refused to record its cancel"),
        "{message}"
    );
    drop(lock);
    failed_end(&url, &session, hold).await;
    no_restart_told(&url, &session).await;
    host.shutdown().await;
}

/// A second cancel while the first one's failure is being written answers
/// `false` (being cancelled already), and the first is answered once the
/// failure is written (review: the second took over the run's answer, and
/// the first waited out its 10 s).
#[tokio::test]
async fn a_second_cancel_while_the_failure_is_written_answers_false() {
    let (host, lock, _session, _seqs) = waiting_on_a_locked_store().await;
    let url = host.url.clone();
    let first = spawn_cancel(&url);
    // the failure's run has started: it waits for the lock (up to 5 s)
    poll(40, async || {
        let bot = bot_a1(&url).await;
        (!bot["running_turn"].is_null())
            .then_some(Value::Null)
            .ok_or_else(|| format!("the failure's run never started: {bot:#}"))
    })
    .await;
    let (status, second) = post(&url, "/v1/bots/a1/cancel", json!({}), None).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["cancelled"], false, "{second}");
    drop(lock);
    let (status, cancelled) = first.await.unwrap();
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["cancelled"], true, "{cancelled}");
    host.shutdown().await;
}
