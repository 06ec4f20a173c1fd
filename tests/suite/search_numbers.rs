//! Version numbers in transcript search, end to end: `GET /v1/search` and
//! `botfleet search` find `v2.3.1` for the query `2.3.1`, and an index
//! written before numbers were indexed that way (format 1) is rebuilt by
//! the host itself when it starts.

use serde_json::Value;
use serde_json::json;

use super::recall::CHAT;
use super::recall::RECALL_TOOLS;
use super::recall::chat;
use super::recall::flush;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::process::cli;

/// The texts said to bot `r`, one per turn.
const SAID: [&str; 3] = [
    "release v2.3.1 is out",
    "the 2.3.1 notes are short",
    "v2.3.10 comes next",
];

/// A host whose bot `r` was told [`SAID`], all of it indexed.
async fn told() -> TestHost {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS)
        .start()
        .await;
    for text in SAID {
        chat(&host, TOKEN, "r", text).await;
    }
    flush(&host).await;
    host
}

/// The snippets of the hits of `GET /v1/search?q=...`, best first.
async fn snippets(host: &TestHost, query: &str) -> Vec<String> {
    let (status, v) = host.get(&format!("/v1/search?q={query}"), TOKEN).await;
    assert_eq!(status, 200, "{query}: {v}");
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["snippet"].as_str().unwrap().to_owned())
        .collect()
}

/// Regression: the query `2.3.1` did not find `release v2.3.1` (the index
/// held the word `v2`, the query asked for `2`).
#[tokio::test]
async fn a_version_number_finds_the_version_with_a_letter_prefix() {
    let host = told().await;
    let mut found = snippets(&host, "2.3.1").await;
    found.sort();
    assert_eq!(
        found,
        [
            "release «v2».«3».«1» is out",
            "the «2».«3».«1» notes are short"
        ]
    );
    // the prefixed word finds only itself
    assert_eq!(
        snippets(&host, "v2.3.1").await,
        ["release «v2».«3».«1» is out"]
    );

    let (code, out, err) = cli(&["search", "2.3.1"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("2 match(es), showing 2:"), "{out}");
    assert!(out.contains("release «v2».«3».«1» is out"), "{out}");
    host.shutdown().await;
}

/// An index of format 1 claims every entry while it lacks the numbers of
/// prefixed words: the host deletes it at start and fills it again from
/// the store, so old entries are found like new ones.
#[tokio::test]
async fn an_index_of_the_previous_format_is_rebuilt_when_the_host_starts() {
    let host = told().await;
    let fleet = host.shutdown().await;
    // What a format-1 host left: a marker of format 1 covering every
    // entry. The segments are dropped so that only a rebuild (not the old
    // documents) can find anything.
    let meta_path = fleet.path().join("data/index/meta.json");
    let mut meta: Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    let payload: Value = serde_json::from_str(meta["payload"].as_str().unwrap()).unwrap();
    let last_gid = payload["last_gid"].as_i64().unwrap();
    assert!(last_gid > 0, "{payload}");
    meta["segments"] = json!([]);
    meta["payload"] = json!(format!("{{\"format\":1,\"last_gid\":{last_gid}}}"));
    std::fs::write(&meta_path, meta.to_string()).unwrap();

    let host = restart(fleet).await;
    flush(&host).await;
    let (_, v) = host.get("/v1/search?q=2.3.1", TOKEN).await;
    assert_eq!(v["total"], 2, "{v}");
    let (_, v) = host.get("/v1/search?q=v2.3.10", TOKEN).await;
    assert_eq!(v["hits"][0]["snippet"], "«v2».«3».«10» comes next", "{v}");
    host.shutdown().await;
}
