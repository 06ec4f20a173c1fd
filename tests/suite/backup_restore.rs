//! The backup and restore of docs/operations.md, step by step, through the
//! binary: `VACUUM INTO` taken while the host writes (the sqlite3 shell's
//! `.backup`, documented before, never finished on a busy host), then the
//! host stopped, the copy put back, the generation raised, `reindex`, and
//! a start that shows what the backup held and nothing of what came after.

use std::time::Duration;

use super::mirror_repair::send;
use super::recall::CHAT;
use super::recall::RECALL_TOOLS;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::wait_found;

/// A host process of bot `r` (the recall script) that took and indexed
/// one message, the wombat's.
pub(super) struct WombatHost {
    /// Owns the temporary directory.
    pub fleet: TestFleet,
    pub path: std::path::PathBuf,
    pub data: std::path::PathBuf,
    pub log: std::path::PathBuf,
    pub port: u16,
    pub host: HostProcess,
    pub client: botfleet::client::Client,
}

pub(super) async fn wombat_host() -> WombatHost {
    let fleet = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS);
    let path = fleet.write();
    let data = fleet.path().join("data");
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    send(&client, "the wombat manifest is late", "k-0").await;
    wait_found(&client, "wombat", 1).await;
    WombatHost {
        fleet,
        path,
        data,
        log,
        port,
        host,
        client,
    }
}

/// The documented backup, `sqlite3 fleet.db "VACUUM INTO '…'"`, by the
/// same SQL through the bundled SQLite (no sqlite3 shell needed here), of
/// the database `db` into `target`.
pub(super) async fn vacuum_into(
    db: std::path::PathBuf,
    target: std::path::PathBuf,
) -> rusqlite::Result<usize> {
    tokio::task::spawn_blocking(move || {
        let conn =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.execute("VACUUM INTO ?1", [target.to_string_lossy()])
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_backup_taken_under_load_restores_as_documented() {
    let WombatHost {
        fleet,
        path,
        data,
        log,
        port,
        host,
        client,
    } = wombat_host().await;

    // the host keeps writing while the backup runs
    let stop = tokio_util::sync::CancellationToken::new();
    let load = tokio::spawn({
        let client = client.clone();
        let stop = stop.clone();
        async move {
            let mut sent = 0u32;
            while !stop.is_cancelled() {
                send(
                    &client,
                    &format!("busy message {sent}"),
                    &format!("b-{sent}"),
                )
                .await;
                sent += 1;
            }
            sent
        }
    });
    let copy = fleet.path().join("backup.db");
    tokio::time::timeout(
        Duration::from_secs(60),
        vacuum_into(data.join("fleet.db"), copy.clone()),
    )
    .await
    .expect("VACUUM INTO finishes while the host writes")
    .unwrap();
    stop.cancel();
    let sent = load.await.unwrap();
    assert!(sent > 0, "the host took messages during the backup");
    send(&client, "a platypus joined after the backup", "k-1").await;
    wait_found(&client, "platypus", 1).await;
    host.stop(&log).await;

    // restore, host stopped: steps 1–3 of the doc
    std::fs::copy(&copy, data.join("fleet.db")).unwrap();
    for side in ["fleet.db-wal", "fleet.db-shm"] {
        let _ = std::fs::remove_file(data.join(side));
    }
    let generation_file = data.join("fleet.db.generation");
    let generation: u64 = std::fs::read_to_string(&generation_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(&generation_file, format!("{}\n", generation + 1)).unwrap();
    let reindex = tokio::process::Command::new(BIN)
        .args(["reindex", "--fleet"])
        .arg(&path)
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&reindex.stderr);
    assert!(reindex.status.success(), "{err}");
    assert!(err.contains("older than this data directory"), "{err}");

    // step 4: what the backup held is there, what came after is not
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    wait_found(&client, "wombat", 1).await;
    wait_found(&client, "platypus", 0).await;
    send(&client, "an echidna after the restore", "k-2").await;
    wait_found(&client, "echidna", 1).await;
    host.stop(&log).await;
}
