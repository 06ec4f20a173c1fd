//! The JSONL mirror and the search index heal themselves, through the
//! binary: a mirror file torn by a failed write and a garbage resume marker
//! do not stop indexing (new messages are searchable, the file is written
//! again from the store), an index and mirror ahead of a replaced database
//! are rebuilt from it, and a full disk (a small tmpfs: root only, else
//! skipped saying why) answers `507 storage_full`, leaves no torn mirror
//! line and does not stop indexing once space is freed.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;

use super::recall::CHAT;
use super::recall::RECALL_TOOLS;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::wait_found;

/// Sends `text` to bot `r` and expects it accepted.
pub(super) async fn send(client: &botfleet::client::Client, text: &str, key: &str) {
    let (status, body) = client.send_message("r", text, key).await.unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");
}

/// A host process that indexed and mirrored a message about a wombat,
/// stopped cleanly; returns the fleet (keep it: it owns the temp dir), its
/// file, the log and the port.
async fn mirrored_then_stopped() -> (TestFleet, PathBuf, PathBuf, u16) {
    let fleet = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    send(&client, "the wombat manifest is late", "k-0").await;
    wait_found(&client, "wombat", 1).await;
    host.stop(&log).await;
    (fleet, path, log, port)
}

/// The mirror files of bot `r`.
fn mirror_files(data: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(data.join("transcripts/r"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect()
}

#[tokio::test]
async fn a_torn_mirror_file_and_a_garbage_marker_heal_and_indexing_goes_on() {
    let (fleet, path, log, port) = mirrored_then_stopped().await;
    let data = fleet.path().join("data");
    let files = mirror_files(&data);
    assert_eq!(files.len(), 1, "{files:?}");
    // A failed write retried after its partial bytes (what a full disk
    // left): the first part of a line, then the whole line again.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let last = text.lines().last().unwrap().to_owned();
    let torn = format!("{text}{}{last}\n", &last[..last.len() / 2]);
    std::fs::write(&files[0], &torn).unwrap();
    std::fs::write(data.join("transcripts/.mirrored_gid"), "zz").unwrap();

    let mut host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    send(&client, "a platypus joined the crate", "k-1").await;
    wait_found(&client, "platypus", 1).await;
    host.wait_log("JSONL mirror file was damaged").await;
    host.stop(&log).await;

    // the file was written again: every line an entry, the new one too
    let rebuilt = std::fs::read_to_string(&files[0]).unwrap();
    for line in rebuilt.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
    assert!(rebuilt.contains("platypus"), "{rebuilt}");
    assert!(rebuilt.contains("wombat"), "{rebuilt}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains("panicked"), "{logged}");
}

/// An emptied database is refused at the start (it was taken for a
/// restore and the host started an empty fleet over the old one); once the
/// user starts over on purpose (the generation file removed, as the error
/// says), the index and mirror ahead of the empty database are rebuilt.
#[tokio::test]
async fn an_index_ahead_of_an_emptied_database_is_rebuilt() {
    let (fleet, path, log, port) = mirrored_then_stopped().await;
    let data = fleet.path().join("data");
    // all history gone: the database file emptied
    std::fs::write(data.join("fleet.db"), "").unwrap();
    for side in ["fleet.db-wal", "fleet.db-shm"] {
        let _ = std::fs::remove_file(data.join(side));
    }
    let refused = std::process::Command::new(crate::support::process::BIN)
        .args(["run", "--fleet"])
        .arg(&path)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is empty (0 bytes), but this data directory has history")
            && err.contains("restore")
            && err.contains("fleet.db.generation"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(data.join("fleet.db")).unwrap().len(),
        0,
        "nothing was written over it"
    );
    // reindex on the database deleted says what the start says, through
    // the fleet file and --data alike (it said "no host has run yet":
    // QA, 2026-12-05)
    std::fs::remove_file(data.join("fleet.db")).unwrap();
    for given in [
        ["--fleet", path.to_str().unwrap()],
        ["--data", data.to_str().unwrap()],
    ] {
        let refused = std::process::Command::new(crate::support::process::BIN)
            .arg("reindex")
            .args(given)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{given:?}: {err}");
        assert!(
            err.contains("is missing, but this data directory has history")
                && err.contains("restore"),
            "{given:?}: {err}"
        );
    }
    assert!(!data.join("fleet.db").exists(), "reindex made a store");
    std::fs::write(data.join("fleet.db"), "").unwrap();
    std::fs::remove_file(data.join("fleet.db.generation")).unwrap();

    let mut host = HostProcess::start(&path, port, &log).await;
    host.wait_log("rebuilding both from the database").await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    send(&client, "a platypus joined the crate", "k-1").await;
    wait_found(&client, "platypus", 1).await;
    wait_found(&client, "wombat", 0).await;
    host.stop(&log).await;
    let stale = std::fs::read_dir(&data).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("transcripts.stale-")
    });
    assert!(stale, "the old mirror is kept aside");
}

/// A tmpfs mounted on a directory for a test, unmounted when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    /// Mounts a tmpfs of `size` on `dir`; `None` (saying why) where that
    /// is not allowed (not root, or a container without the capability).
    fn mount(dir: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Self(dir.to_path_buf())),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot mount a small tmpfs ({}); run the suite as root to test a full disk",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: no mount command ({e})");
                None
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Fills the disk of `dir` with `filler`, then frees `keep` bytes of it.
fn fill(filler: &Path, keep: u64) {
    use std::io::Write;
    let mut file = std::fs::File::create(filler).unwrap();
    let chunk = vec![7u8; 64 * 1024];
    let mut written = 0u64;
    loop {
        match file.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    file.set_len(written.saturating_sub(keep)).unwrap();
}

#[tokio::test]
async fn a_full_disk_answers_507_and_the_mirror_stays_whole() {
    let fleet = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS);
    let path = fleet.write();
    let data = fleet.path().join("data");
    let Some(_disk) = SmallDisk::mount(&data, "16m") else {
        return;
    };
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let big = "numbat ".repeat(3_000);
    send(&client, "before the wombat filled the disk", "k-0").await;
    send(&client, &big, "k-big").await;
    wait_found(&client, "wombat", 1).await;
    wait_found(&client, "numbat", 1).await;

    // Full to the last byte: the store's next write reuses its WAL's
    // space (the writer restarts the WAL after each checkpoint) and is
    // committed, while the mirror's line finds no room (a partial write).
    let filler = data.join("filler");
    fill(&filler, 0);
    let mut full = None;
    for i in 1..200 {
        let key = format!("k-{i}");
        let (status, body) = client.send_message("r", &big, &key).await.unwrap();
        match status.as_u16() {
            202 => continue,
            507 => {
                full = Some((key, body));
                break;
            }
            other => panic!("message {i}: {other} {body}"),
        }
    }
    let (key, body) = full.expect("the disk never filled up");
    assert_eq!(body["error"]["code"], "storage_full", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("free disk space"), "{message}");

    // space freed: the same key is accepted, and indexing goes on
    std::fs::remove_file(&filler).unwrap();
    let (status, body) = client.send_message("r", &big, &key).await.unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");
    send(&client, "after the platypus freed it", "k-last").await;
    wait_found(&client, "platypus", 1).await;
    host.stop(&log).await;
    for file in mirror_files(&data) {
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("{}: a torn line ({e})", file.display()));
        }
    }
}

/// `botfleet reindex` with a file where the mirror's directory goes is
/// refused before the index is emptied, naming the mirror and what to do
/// (QA: the index was emptied, then the rebuild failed on
/// `.mirrored_gid: Not a directory`).
#[tokio::test]
async fn reindex_refuses_an_unusable_mirror_before_emptying_the_index() {
    let (fleet, _path, _log, _port) = mirrored_then_stopped().await;
    let data = fleet.path().join("data");
    let index_files = || std::fs::read_dir(data.join("index")).unwrap().count();
    let before = index_files();
    assert!(before > 1, "an index with segments");
    std::fs::remove_dir_all(data.join("transcripts")).unwrap();
    std::fs::write(data.join("transcripts"), "x").unwrap();
    let refused = std::process::Command::new(crate::support::process::BIN)
        .arg("reindex")
        .args(["--data", data.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the JSONL mirror directory")
            && err.contains("cannot be used")
            && err.contains("move away whatever is there"),
        "{err}"
    );
    assert_eq!(index_files(), before, "the index was left as it was");
}
