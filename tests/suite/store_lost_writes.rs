//! A database behind what it had committed, with no restore made: the
//! search index and the JSONL mirror hold entries it lost (its WAL lost or
//! damaged after a crash, a power loss, or `fleet.db` put back from a copy
//! without raising `fleet.db.generation`). The start says so in its banner
//! and `/healthz` answers `degraded` naming it and where the lost
//! transcripts went (QA: a WARN line that blamed a restore, and `ok`).
//! Through the binary.

use std::time::Duration;

use super::backup_restore::WombatHost;
use super::backup_restore::vacuum_into;
use super::backup_restore::wombat_host;
use super::mirror_repair::send;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::HostProcess;
use crate::support::process::wait_found;

#[tokio::test]
async fn a_database_that_lost_committed_entries_is_reported() {
    let Lost {
        fleet: _fleet,
        path,
        data,
        log,
        port,
        copy,
        platypus_key,
    } = lost_the_platypus().await;

    // what a lost WAL leaves: the database without the platypus
    std::fs::copy(&copy, data.join("fleet.db")).unwrap();
    for side in ["fleet.db-wal", "fleet.db-shm"] {
        let _ = std::fs::remove_file(data.join(side));
    }
    let mut host = HostProcess::start(&path, port, &log).await;
    host.wait_log("WARNING: store: found at").await;
    host.wait_log("the database lost entries it had committed")
        .await;
    let health = reqwest::get(format!("{}/healthz", host.url)).await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let text = health.text().await.unwrap();
    assert!(
        text.starts_with("degraded\n")
            && text.contains("the database lost entries it had committed")
            && text.contains("transcripts.stale-")
            && text.contains("fleet.db-wal"),
        "{text}"
    );
    // the lost transcript is kept where the report says
    let aside = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("transcripts.stale-"))
        })
        .expect("the mirror moved aside");
    let kept: String = walk(&aside)
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    assert!(kept.contains("platypus"), "{kept}");
    // its sender, sending it again with its key, is told the host cannot
    // vouch for it, as after a restore, rather than have it taken twice
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let (status, body) = client
        .send_message("r", "a platypus was accepted", &platypus_key)
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 409, "{body}");
    assert_eq!(body["status"], "unknown", "{body}");
    // the database is sound: the host goes on taking and finding messages
    wait_found(&client, "wombat", 1).await;
    send(&client, "an echidna after the loss", "k-2").await;
    wait_found(&client, "echidna", 1).await;
    host.stop(&log).await;
}

/// A database whose tables disagree (its entries lost, its inbox rows
/// for them kept; quick_check finds nothing): the next entry's number is
/// taken, and the write is refused as a damaged database's, `503
/// storage_error` and `/healthz` failing (QA: `500 internal`, "UNIQUE
/// constraint failed: inbox.gid", on every message).
#[tokio::test]
async fn tables_that_disagree_refuse_writes_as_damaged() {
    let Lost {
        fleet: _fleet,
        path,
        data,
        log,
        port,
        copy,
        ..
    } = lost_the_platypus().await;
    let kept: i64 = rusqlite::Connection::open(&copy)
        .unwrap()
        .query_row("SELECT MAX(gid) FROM entries", [], |r| r.get(0))
        .unwrap();
    rusqlite::Connection::open(data.join("fleet.db"))
        .unwrap()
        .execute("DELETE FROM entries WHERE gid > ?1", [kept])
        .unwrap();
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let (status, body) = client
        .send_message("r", "an echidna into disagreeing tables", "k-2")
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 503, "{body}");
    assert_eq!(body["error"]["code"], "storage_error", "{body}");
    let health = reqwest::get(format!("{}/healthz", host.url)).await.unwrap();
    assert_eq!(health.status().as_u16(), 503);
    let text = health.text().await.unwrap();
    assert!(
        text.starts_with("failing\n") && text.contains("its tables disagree"),
        "{text}"
    );
    host.kill9().await;
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The same, with the database damaged too (`PRAGMA quick_check` fails):
/// nothing is rebuilt from it — the mirror, perhaps the only whole copy,
/// stays where it is — and the start is refused, naming the damage and
/// what to do (QA: it started, `/healthz` said `ok`, each message got
/// `500 internal` with a UNIQUE constraint's words, and the mirror was
/// moved aside).
#[tokio::test]
async fn a_damaged_database_behind_its_mirror_is_refused_and_the_mirror_kept() {
    let Lost {
        fleet: _fleet,
        path,
        data,
        port,
        copy,
        ..
    } = lost_the_platypus().await;

    // the copy, with the root page of an index the start does not read
    // overwritten
    let (page, size): (i64, i64) = {
        let conn = rusqlite::Connection::open(&copy).unwrap();
        let page = conn
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'entries_summary'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let size = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        (page, size)
    };
    let mut bytes = std::fs::read(&copy).unwrap();
    let at = usize::try_from((page - 1) * size).unwrap();
    bytes[at..at + 64].fill(0x5a);
    std::fs::write(data.join("fleet.db"), bytes).unwrap();
    for side in ["fleet.db-wal", "fleet.db-shm"] {
        let _ = std::fs::remove_file(data.join(side));
    }
    // the start is refused, saying why and what to do
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(crate::support::process::BIN)
            .args(["run", "--fleet"])
            .arg(&path)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "off")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the start is refused, not served")
    .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the store cannot be used")
            && err.contains("damaged")
            && err.contains("quick_check")
            && err.contains("keep transcripts/ and restore fleet.db from a backup"),
        "{err}"
    );
    // the mirror with the platypus is where it was
    let kept: String = walk(&data.join("transcripts"))
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    assert!(kept.contains("platypus"), "{kept}");
}

/// A stopped host of bot `r` whose database, put back from `copy`, would
/// lack what came after the wombat: the platypus, accepted with a UUIDv7
/// key and indexed and mirrored before the stop.
struct Lost {
    /// Owns the temporary directory.
    fleet: TestFleet,
    path: std::path::PathBuf,
    data: std::path::PathBuf,
    log: std::path::PathBuf,
    port: u16,
    /// The database after the wombat, taken in the host's life (the same
    /// generation as the data directory).
    copy: std::path::PathBuf,
    platypus_key: String,
}

async fn lost_the_platypus() -> Lost {
    let WombatHost {
        fleet,
        path,
        data,
        log,
        port,
        host,
        client,
    } = wombat_host().await;
    // a copy of the database as it is now, taken in this host's life:
    // the same generation as the data directory
    let copy = fleet.path().join("copy.db");
    vacuum_into(data.join("fleet.db"), copy.clone())
        .await
        .unwrap();
    // a key with its time (a UUIDv7), as the CLI and the page make them
    let platypus_key = uuid::Uuid::now_v7().to_string();
    send(&client, "a platypus was accepted", &platypus_key).await;
    wait_found(&client, "platypus", 1).await;
    host.stop(&log).await;
    Lost {
        fleet,
        path,
        data,
        log,
        port,
        copy,
        platypus_key,
    }
}
