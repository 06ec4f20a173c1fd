//! Transcript recall under faults: a host process killed right after a
//! transcript commit, and an indexer that cannot take the writer lock.

use std::time::Duration;
use std::time::Instant;

use botfleet::memory::IndexOptions;
use botfleet::memory::Indexer;
use botfleet::memory::TranscriptIndex;
use serde_json::json;

use super::recall::CHAT;
use super::recall::RECALL_TOOLS;
use super::recall::chat;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

#[tokio::test]
async fn sigkill_right_after_a_commit_is_searchable_after_restart() {
    // the bot thinks for a long time: the message is the only new entry
    let script = r#"
[[rule]]
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "late" } } ]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", RECALL_TOOLS);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let (status, body) = client
        .send_message("r", "the ocelot migration plan 迁移计划", "k-1")
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");
    // committed to the store; the index commits ~0.3 s later: kill now
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let started = Instant::now();
    let found = loop {
        let v = client
            .get_query("/v1/search", &[("q", "ocelot 迁移")])
            .await
            .unwrap();
        if v["total"] == json!(1) {
            break v;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not searchable after restart: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(found["hits"][0]["session"], body["session"]);
    assert_eq!(found["hits"][0]["seq"], body["seq"]);
    // the JSONL mirror caught up too
    let mirror = fleet.path().join(format!(
        "data/transcripts/r/{}.jsonl",
        body["session"].as_str().unwrap()
    ));
    let text = std::fs::read_to_string(&mirror).unwrap();
    assert!(text.contains("the ocelot migration plan"), "{text}");
    // the second start caught up from before the entry (the index had not
    // committed it when the process died)
    let log_text = std::fs::read_to_string(&log).unwrap();
    let starts: Vec<&str> = log_text
        .lines()
        .filter(|l| l.contains("indexer started"))
        .collect();
    let from_gid: i64 = starts
        .last()
        .and_then(|l| {
            let digits = l.len() - l.trim_end_matches(|c: char| c.is_ascii_digit()).len();
            l[l.len() - digits..].parse().ok()
        })
        .unwrap();
    assert!(
        starts.len() == 2 && from_gid < body["gid"].as_i64().unwrap(),
        "the restart should have caught up from before gid {}: {starts:#?}",
        body["gid"]
    );
    host.kill9().await;
}

#[tokio::test]
async fn the_indexer_is_restarted_until_it_can_take_the_writer_lock() {
    let fleet = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS);
    // another writer holds the index when the host starts
    let index = TranscriptIndex::open(fleet.path().join("data/index")).unwrap();
    let holder = Indexer::open(&index, IndexOptions::default()).unwrap();
    let host = fleet.start().await;
    chat(&host, TOKEN, "r", "the narwhal schedule").await;
    let rt = host.host.as_ref().unwrap().fleet.runtime().clone();
    assert!(rt.indexer().is_none(), "the indexer cannot have started");
    let (status, v) = host.get("/v1/search?q=narwhal", TOKEN).await;
    assert_eq!((status, v["total"].clone()), (200, json!(0)), "{v}");

    // the lock is released: the supervisor's next attempt starts the
    // indexer, which catches up from the store
    drop(holder);
    let released = Instant::now();
    loop {
        let (_, v) = host.get("/v1/search?q=narwhal", TOKEN).await;
        if v["total"] == json!(1) {
            break;
        }
        assert!(
            released.elapsed() < Duration::from_secs(15),
            "the indexer was not restarted: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(rt.indexer().is_some());
    host.shutdown().await;
}

/// A clean stop leaves the search index caught up: the indexer commits
/// what it has before the fleet's actors are stopped. (Before, ractor
/// killed the indexer with its supervisor, its own `post_stop` never ran,
/// and the entries of the last ~300 ms waited for the next start.)
#[tokio::test]
async fn a_clean_stop_leaves_the_index_caught_up() {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS)
        .start()
        .await;
    let (session, _) = chat(&host, TOKEN, "r", "the quokka itinerary").await;
    let entries = host.entries(&session).await;
    let newest = entries
        .iter()
        .filter_map(|e| e["gid"].as_i64())
        .max()
        .unwrap();
    let fleet = host.shutdown().await;
    let index = TranscriptIndex::open(fleet.path().join("data/index")).unwrap();
    assert!(
        index.committed_gid().unwrap() >= newest,
        "committed {} < newest entry {newest}",
        index.committed_gid().unwrap()
    );
}

/// A host stopped in-process has let go of the search index's writer lock
/// when `shutdown` returns, so that a host started again at once in the
/// same process (an embedding application, the test harness) runs with
/// its indexer. The fleet supervisor's children are killed, not stopped,
/// and a killed indexer let go of its writer only when its task next ran,
/// or after a batch it had in the blocking pool; the fleet now stops it
/// and waits for it. (Seen once as a full-suite flake, `owner_change`:
/// "the host runs an indexer" after an in-process restart; this test did
/// not reproduce it in 90 rounds on a 2-core machine, so it guards the
/// contract rather than replaying the race.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_host_has_let_go_of_the_search_index() {
    let mut fleet = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS);
    fleet.write();
    for round in 0..4 {
        let host = crate::support::fleet::restart(fleet).await;
        // entries committed right before the stop: the indexer has work
        for i in 0..5 {
            let (status, v) = host.send("r", &format!("note {round}.{i}"), None).await;
            assert_eq!(status, 202, "{v}");
        }
        fleet = host.shutdown().await;
        let index = TranscriptIndex::open(fleet.path().join("data/index")).unwrap();
        let writer = Indexer::open(&index, IndexOptions::default());
        assert!(
            writer.is_ok(),
            "round {round}: the stopped host still holds the index's writer lock: {:?}",
            writer.err()
        );
    }
}
