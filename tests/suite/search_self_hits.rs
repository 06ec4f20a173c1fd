//! A bot's own searches do not fill its later searches: the results of
//! SearchTranscript and ReadTranscript quote entries the index holds, so
//! they are not indexed (docs/search.md), while the JSONL mirror keeps
//! them.

use serde_json::Value;
use serde_json::json;

use super::recall::CHAT;
use super::recall::RECALL_TOOLS;
use super::recall::chat;
use super::recall::flush;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

/// `look it up` searches for the walrus; a message that is a session id
/// reads that session's first entry.
const LOOK_UP: &str = r#"
[[rule]]
name = "look up"
match = "^look it up$"
steps = [
  { tool = "SearchTranscript", args = { query = "walrus" } },
  { tool = "SendMessage", args = { text = "Looked." } },
]

[[rule]]
name = "read"
match = "^[0-9a-f]{8}-[0-9a-f-]+$"
steps = [
  { tool = "ReadTranscript", args = { session = "{{input}}", seq = 1 } },
  { tool = "SendMessage", args = { text = "Read." } },
]
"#;

/// The contents of `tool`'s results in `session`, oldest first.
async fn results_of(host: &TestHost, session: &str, tool: &str) -> Vec<String> {
    botfleet::client::Client::new(&host.url, TOKEN)
        .unwrap()
        .entries_after(session, 0)
        .await
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == tool)
        .map(|e| e["content"].as_str().unwrap().to_owned())
        .collect()
}

/// `(session, seq)` of the hits in a SearchTranscript result.
fn hits(out: &str) -> Vec<(String, i64)> {
    out.lines()
        .filter(|l| l.starts_with('['))
        .map(|l| {
            let v: Value =
                serde_json::from_str(&l[l.find('{').unwrap()..=l.find('}').unwrap()]).unwrap();
            (
                v["session"].as_str().unwrap().to_owned(),
                v["seq"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Regression: each search's result was indexed, so the second search for
/// `walrus` found the fact, the first search's quote of it and
/// ReadTranscript's, and `GET /v1/search` showed all three.
#[tokio::test]
async fn a_second_search_finds_the_fact_once_and_no_earlier_search() {
    let host = TestFleet::new()
        .script("s", &format!("{LOOK_UP}{CHAT}"))
        .bot("r", "s", RECALL_TOOLS)
        .start()
        .await;
    let (session, said) = chat(&host, TOKEN, "r", "the walrus code is 4411").await;
    // each step is indexed before the next, as a live host would have it
    // by the next search
    flush(&host).await;
    chat(&host, TOKEN, "r", "look it up").await;
    flush(&host).await;
    chat(&host, TOKEN, "r", &session).await;
    flush(&host).await;
    chat(&host, TOKEN, "r", "look it up").await;
    flush(&host).await;

    let searches = results_of(&host, &session, "SearchTranscript").await;
    assert_eq!(searches.len(), 2, "{searches:?}");
    let read = results_of(&host, &session, "ReadTranscript").await;
    assert!(read[0].contains("the walrus code is 4411"), "{read:?}");
    for out in &searches {
        assert_eq!(hits(out), vec![(session.clone(), said)], "{out}");
        assert!(out.starts_with("1 of 1 matching entries"), "{out}");
        assert_eq!(out.matches("4411").count(), 1, "{out}");
    }

    for q in ["walrus", "4411"] {
        let (status, v) = host.get(&format!("/v1/search?q={q}"), TOKEN).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["total"], 1, "{q}: {v}");
        assert_eq!(v["hits"][0]["seq"], json!(said), "{q}: {v}");
        assert_eq!(v["hits"][0]["kind"], "user_message", "{q}: {v}");
    }

    // the mirror is the whole transcript: the quotes are there
    let mirror = host
        .fleet
        .path()
        .join("data")
        .join("transcripts")
        .join("r")
        .join(format!("{session}.jsonl"));
    let names: Vec<String> = std::fs::read_to_string(&mirror)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .filter(|n| n != "SendMessage")
        .collect();
    assert_eq!(
        names,
        ["SearchTranscript", "ReadTranscript", "SearchTranscript"]
    );
    host.shutdown().await;
}
