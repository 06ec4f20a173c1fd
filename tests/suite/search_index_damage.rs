//! Damage the host only finds once it runs, through the binary: a segment
//! file overwritten on disk (the index still opens) is found by the
//! background checksum check, set aside and rebuilt without a restart, and
//! searches meanwhile answer a clear `503` instead of "busy" forever or no
//! answer at all; `transcripts/` replaced by a plain file stops the start
//! with a clear message, as `index/` does.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::recall::CHAT;
use super::recall::RECALL_TOOLS;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::wait_found;

/// Overwrites the middle half of the largest positions file (`.pos`) in
/// `index` with other bytes, keeping the file's end (its footer) intact:
/// the index still opens (of a small index, the `.idx` is read at open).
fn damage_largest_pos(index: &Path) {
    let largest = std::fs::read_dir(index)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pos"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("the index has a segment");
    let mut bytes = std::fs::read(&largest).unwrap();
    let len = bytes.len();
    let mut x: u32 = 0x9e37_79b9;
    for b in &mut bytes[len / 4..len * 3 / 4] {
        // xorshift: the same bytes every run
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x.to_le_bytes()[0];
    }
    std::fs::write(&largest, bytes).unwrap();
}

fn names_starting(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[tokio::test]
async fn a_segment_damaged_on_disk_is_found_after_start_and_rebuilt() {
    let fleet = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let texts: Vec<String> = (0..12)
        .map(|i| {
            // long texts: segment files much larger than their footers
            let words: Vec<String> = (0..300)
                .map(|j| format!("crate{}", (i * 7 + j) % 97))
                .collect();
            format!(
                "the wombat manifest number {i} is late again: {}",
                words.join(" ")
            )
        })
        .collect();
    for (i, text) in texts.iter().enumerate() {
        let (status, body) = client
            .send_message("r", text, &format!("k-{i}"))
            .await
            .unwrap();
        assert_eq!(status.as_u16(), 202, "{body}");
    }
    wait_found(&client, "wombat manifest", 12).await;
    host.stop(&log).await;

    let data = fleet.path().join("data");
    damage_largest_pos(&data.join("index"));
    let mut host = HostProcess::start(&path, port, &log).await;
    // searches never hang and never say "busy, retry shortly" about damage
    crate::support::process::poll(30, async || {
        let answer = tokio::time::timeout(
            Duration::from_secs(20),
            client.get_query("/v1/search", &[("q", "wombat manifest")]),
        )
        .await
        .expect("a search on the damaged index never answered");
        match answer {
            Ok(v) if v["total"] == json!(12) => Ok(()),
            Ok(v) => Err(format!("the damaged index was not rebuilt: {v}")),
            Err(e) => {
                let text = format!("{e:#}");
                assert!(
                    text.contains("503") && text.contains("being rebuilt"),
                    "{text}"
                );
                Err(text)
            }
        }
    })
    .await;
    host.wait_log("segment files fail their checksum").await;
    assert_eq!(names_starting(&data, "index.damaged-").len(), 1);
    host.stop(&log).await;
}

#[tokio::test]
async fn a_host_refuses_to_start_with_a_file_in_place_of_transcripts() {
    let fleet = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS);
    let path = fleet.write();
    let transcripts = fleet.path().join("data/transcripts");
    std::fs::create_dir_all(transcripts.parent().unwrap()).unwrap();
    std::fs::write(&transcripts, "not a directory").unwrap();
    let child = tokio::process::Command::new(BIN)
        .args(["run", "--fleet"])
        .arg(&path)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the host started with a file in place of transcripts/"))
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&transcripts.display().to_string())
            && err.contains("not a directory")
            && err.contains("move away"),
        "{err}"
    );
}
