//! The store failing under a running host (tester H1, round 21), each
//! with a real host process on a data directory the test damages:
//!
//! - a database found damaged once takes no more writes (before, the
//!   writes that missed the damaged pages were still accepted, `202`, and
//!   the restore from a backup then lost them), and `/healthz` says
//!   `failing` (it said `ok` whatever the store's state);
//! - `transcripts/` deleted: one ERROR line, search indexing goes on (it
//!   stopped for everything, with a WARN line three times a second);
//! - one mirror file deleted: written again whole from the store at the
//!   next write of its session, running or after a restart (before, the
//!   host appended to the unlinked file, or started a file with only the
//!   new entries);
//! - a file-size limit: one ERROR line, not four a second;
//! - a database damaged while the host was stopped, in pages its start
//!   does not read: found by the start's background `quick_check`, not
//!   by the first write that meets it after `/healthz` said `ok`.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

const SCRIPT: &str = r#"
[[rule]]
steps = [
  { tool = "SendMessage", args = { text = "got: {{inputs}}" } },
]
"#;

/// Bots `a1` and `a2` answering every message.
fn fleet() -> TestFleet {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("a1", "s", &["SendMessage"])
        .bot("a2", "s", &["SendMessage"])
}

/// A host process on `fleet`, its log in `host.log`.
async fn start(fleet: &TestFleet) -> (HostProcess, PathBuf) {
    let config = fleet.write();
    let log = fleet.path().join("host.log");
    let host = HostProcess::start(&config, free_port(), &log).await;
    (host, log)
}

/// `POST /v1/bots/{bot}/messages` as alice, with `key`.
async fn send(url: &str, bot: &str, text: &str, key: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/bots/{bot}/messages"))
        .bearer_auth(TOKEN)
        .header("Idempotency-Key", key)
        .json(&json!({ "text": text }))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// `GET /healthz`: status and body.
async fn health(url: &str) -> (u16, String) {
    let resp = reqwest::get(format!("{url}/healthz")).await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

/// How many entries searching `q` finds.
async fn found(url: &str, q: &str) -> u64 {
    let client = botfleet::client::Client::new(url, TOKEN).unwrap();
    let v = client.get_query("/v1/search", &[("q", q)]).await.unwrap();
    v["total"].as_u64().unwrap_or(0)
}

/// Waits until a file's text contains every one of `texts`.
async fn wait_file_has(path: &Path, texts: &[&str]) -> String {
    poll(30, async || {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if texts.iter().all(|t| text.contains(t)) {
            Ok(text)
        } else {
            Err(format!("{} never held {texts:?}: {text}", path.display()))
        }
    })
    .await
}

/// Checks that a mirror file holds its session's entries once each, in
/// order, from the first (seq 1, 2, 3, …).
fn assert_whole(text: &str) {
    let seqs: Vec<i64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_i64()
                .unwrap()
        })
        .collect();
    let expected: Vec<i64> = (1..=seqs.len() as i64).collect();
    assert_eq!(seqs, expected, "{text}");
}

/// Lines of the log file at `log` that contain `text`.
fn lines_with(log: &Path, text: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(text))
        .count()
}

/// Damages the root pages of table `table` (and its indexes) in the database file under the
/// running host: checkpoints the WAL into the file (so the page is read
/// from there), overwrites the page, and writes another table's row (so
/// the host's connections drop the pages they cached).
async fn damage_table(db: &Path, table: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    let page_size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    // the table's b-tree and its indexes'
    let roots: Vec<i64> = conn
        .prepare("SELECT rootpage FROM sqlite_schema WHERE tbl_name = ?1 AND rootpage > 1")
        .unwrap()
        .query_map([table], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!roots.is_empty(), "no table {table}");
    poll(30, async || {
        let busy: i64 = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        (busy == 0)
            .then_some(())
            .ok_or_else(|| "the WAL was never checkpointed".to_owned())
    })
    .await;
    {
        use std::io::Seek;
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new().write(true).open(db).unwrap();
        for root in roots {
            file.seek(std::io::SeekFrom::Start(((root - 1) * page_size) as u64))
                .unwrap();
            file.write_all(&vec![0xA5; page_size as usize]).unwrap();
        }
        file.sync_all().unwrap();
    }
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('store_health_test', '1')",
        [],
    )
    .unwrap();
}

#[tokio::test]
async fn a_damaged_store_refuses_every_write_and_healthz_says_failing() {
    let fleet = fleet();
    let (host, log) = start(&fleet).await;
    let url = host.url.clone();
    assert_eq!(health(&url).await, (200, "ok".to_owned()));
    let (status, sent) = send(&url, "a1", "before the damage", "k1").await;
    assert_eq!(status, 202, "{sent}");
    damage_table(&fleet.path().join("data/fleet.db"), "user_secrets").await;
    // a write that touches the damaged page finds the damage
    let resp = reqwest::Client::new()
        .put(format!("{url}/v1/secrets/API_TOKEN"))
        .bearer_auth(TOKEN)
        .json(&json!({ "value": "s3cret" }))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "storage_error", "{body}");
    // every later write is refused, though its pages are intact: a restore
    // from a backup would lose it, and the client keeps its key
    for (bot, key) in [("a2", "k2"), ("a1", "k3")] {
        let (status, body) = send(&url, bot, "after the damage", key).await;
        assert_eq!(status, 503, "{bot}: {body}");
        assert_eq!(body["error"]["code"], "storage_error", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("damaged"), "{message}");
        assert!(message.contains("Backups and restore"), "{message}");
    }
    let (status, text) = health(&url).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.starts_with("failing\nstore: damaged since "), "{text}");
    assert!(text.contains("restore fleet.db from a backup"), "{text}");
    host.kill9().await;
    assert_eq!(
        lines_with(&log, "every write is refused from now on"),
        1,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[tokio::test]
async fn deleting_transcripts_under_a_running_host_stops_only_the_mirror() {
    let fleet = fleet();
    let (host, log) = start(&fleet).await;
    let url = host.url.clone();
    let data = fleet.path().join("data");
    let (status, sent) = send(&url, "a1", "alphaword first", "k1").await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let file = data.join(format!("transcripts/a1/{session}.jsonl"));
    wait_file_has(&file, &["got: alphaword first"]).await;
    // the rest of the turn may write into it meanwhile (its resume marker):
    // a removal that met a file made after it listed the directory is
    // tried again, as a person would
    let transcripts = data.join("transcripts");
    poll(20, async || match std::fs::remove_dir_all(&transcripts) {
        Ok(()) => Ok(()),
        Err(e) => Err(format!("rm -rf {}: {e}", transcripts.display())),
    })
    .await;
    let (status, sent) = send(&url, "a1", "bravoword second", "k2").await;
    assert_eq!(status, 202, "{sent}");
    // new entries are still indexed: the question and its answer
    poll(30, async || {
        let n = found(&url, "bravoword").await;
        (n >= 1)
            .then_some(())
            .ok_or_else(|| format!("search found {n} entries of the second message"))
    })
    .await;
    let (status, text) = health(&url).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with("degraded\n"), "{text}");
    assert!(text.contains("JSONL mirror: stopped at "), "{text}");
    let (status, sent) = send(&url, "a2", "charlieword third", "k3").await;
    assert_eq!(status, 202, "{sent}");
    poll(30, async || {
        let n = found(&url, "charlieword").await;
        (n >= 1)
            .then_some(())
            .ok_or_else(|| format!("search found {n} entries of the third message"))
    })
    .await;
    host.stop(&log).await;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        lines_with(&log, "the JSONL mirror's directory"),
        1,
        "{logged}"
    );
    assert_eq!(lines_with(&log, "indexer error"), 0, "{logged}");
    // the restart writes the mirror again from the store
    let (host, log) = start(&fleet).await;
    wait_file_has(
        &file,
        &[
            "alphaword first",
            "bravoword second",
            "got: bravoword second",
        ],
    )
    .await;
    host.stop(&log).await;
}

/// A mirror file the host cannot write (here a directory in its place;
/// for the QA, a file left root's by a `sudo botfleet reindex`) stops the
/// mirror, said once and in `/healthz`, and search indexing goes on for
/// every bot. (It stopped indexing for all of them, retried at every
/// commit, and `/healthz` said `ok`.)
#[tokio::test]
async fn a_mirror_file_the_host_cannot_write_stops_only_the_mirror() {
    let fleet = fleet();
    let (host, log) = start(&fleet).await;
    let data = fleet.path().join("data");
    let (status, sent) = send(&host.url, "a1", "dugongword first", "k1").await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let file = data.join(format!("transcripts/a1/{session}.jsonl"));
    wait_file_has(&file, &["got: dugongword first"]).await;
    host.stop(&log).await;
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();

    let (host, log) = start(&fleet).await;
    let url = host.url.clone();
    for (bot, text, key) in [
        ("a1", "manateeword second", "k2"),
        ("a2", "axolotlword third", "k3"),
    ] {
        let (status, sent) = send(&url, bot, text, key).await;
        assert_eq!(status, 202, "{sent}");
    }
    for word in ["manateeword", "axolotlword"] {
        poll(30, async || {
            let n = found(&url, word).await;
            (n >= 1)
                .then_some(())
                .ok_or_else(|| format!("search found {n} entries of {word}"))
        })
        .await;
    }
    let (status, text) = health(&url).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with("degraded\n"), "{text}");
    assert!(text.contains("JSONL mirror: stopped at "), "{text}");
    host.stop(&log).await;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        lines_with(&log, "the JSONL mirror cannot write a file"),
        1,
        "{logged}"
    );
    assert_eq!(lines_with(&log, "indexer error"), 0, "{logged}");
}

#[tokio::test]
async fn a_deleted_mirror_file_is_written_again_whole_at_its_next_write() {
    let fleet = fleet();
    let (host, log) = start(&fleet).await;
    let url = host.url.clone();
    let data = fleet.path().join("data");
    let (status, sent) = send(&url, "a1", "one", "k1").await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let file = data.join(format!("transcripts/a1/{session}.jsonl"));
    wait_file_has(&file, &["got: one"]).await;
    // deleted while the host runs (it holds the file open)
    std::fs::remove_file(&file).unwrap();
    let (status, sent) = send(&url, "a1", "two", "k2").await;
    assert_eq!(status, 202, "{sent}");
    let text = wait_file_has(&file, &["got: one", "got: two"]).await;
    assert_whole(&text);
    host.stop(&log).await;
    assert_eq!(
        lines_with(&log, "was deleted while the host ran: wrote it again"),
        1,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // deleted while the host is stopped
    std::fs::remove_file(&file).unwrap();
    let (host, log) = start(&fleet).await;
    let (status, sent) = send(&host.url, "a1", "three", "k3").await;
    assert_eq!(status, 202, "{sent}");
    let text = wait_file_has(&file, &["got: one", "got: two", "got: three"]).await;
    assert_whole(&text);
    host.stop(&log).await;
}

/// Sets the soft file-size limit of process `pid` (bytes, or
/// "unlimited") with prlimit(1).
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

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_file_size_limit_is_logged_once_not_at_every_write() {
    let fleet = fleet();
    let (host, log) = start(&fleet).await;
    let url = host.url.clone();
    let pid = host.child.id().unwrap();
    limit_file_size(pid, "1");
    for i in 0..5 {
        let (status, body) = send(&url, "a1", "past the limit", &format!("k{i}")).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "storage_error", "{body}");
    }
    let (status, text) = health(&url).await;
    assert_eq!(status, 503, "{text}");
    assert!(
        text.starts_with("failing\nstore: the last write failed at "),
        "{text}"
    );
    assert!(text.contains("disk_io"), "{text}");
    // the host logged the limit at least once by now
    poll(20, async || {
        (lines_with(&log, "file-size limit (RLIMIT_FSIZE") >= 1)
            .then_some(())
            .ok_or_else(|| "the limit was never logged".to_owned())
    })
    .await;
    limit_file_size(pid, "unlimited");
    let (status, sent) = send(&url, "a1", "within the limit", "k9").await;
    assert_eq!(status, 202, "{sent}");
    let (status, text) = health(&url).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.starts_with("degraded\nstore: a write failed at "),
        "{text}"
    );
    host.stop(&log).await;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        lines_with(&log, "file-size limit (RLIMIT_FSIZE"),
        1,
        "{logged}"
    );
    assert!(lines_with(&log, "store group failed") <= 2, "{logged}");
    assert_eq!(lines_with(&log, "API error"), 1, "{logged}");
}

#[tokio::test]
async fn damage_the_start_does_not_read_is_found_by_its_background_check() {
    let fleet = fleet();
    let (host, log) = start(&fleet).await;
    let url = host.url.clone();
    let (status, sent) = send(&url, "a1", "before the damage", "k1").await;
    assert_eq!(status, 202, "{sent}");
    let client = botfleet::client::Client::new(&url, TOKEN).unwrap();
    crate::support::process::wait_found(&client, "damage", 2).await;
    host.stop(&log).await;
    // a table no start reads, damaged while the host is down
    damage_table(&fleet.path().join("data/fleet.db"), "user_secrets").await;
    let config = fleet.path().join("fleet.toml");
    let mut host = HostProcess::start_answering(&config, free_port(), &log).await;
    let url = host.url.clone();
    host.wait_log("the database is damaged: PRAGMA quick_check")
        .await;
    let (status, text) = health(&url).await;
    assert_eq!(status, 503, "{text}");
    assert!(
        text.starts_with("failing\nstore: damaged since ") && text.contains("quick_check"),
        "{text}"
    );
    // no message is taken into the damaged file, though its pages are
    // intact: the sender keeps its key for after the restore
    let (status, body) = send(&url, "a2", "after the damage", "k2").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "storage_error", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("restore fleet.db from a backup"),
        "{message}"
    );
    // what was taken before is still there to find
    assert_eq!(found(&url, "damage").await, 2);
    host.kill9().await;
}
