//! Accents in transcript search and memory recall, end to end: a query
//! typed without accents (`Tromso`, `Zurich`) finds the text that has them
//! (`Tromsø`, `Zürich`) and the reverse, through `GET /v1/search`, a bot's
//! SearchTranscript and the log recall of `GET /v1/bots/{bot}/memory`; an
//! index of the format before (accented terms) is rebuilt at start.

use serde_json::Value;
use serde_json::json;

use super::recall::CHAT;
use super::recall::chat;
use super::recall::flush;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;

/// `log trip` and `log plumber` write a log entry each; `find tromso`
/// searches the transcript without the accent; anything else: `Noted.`
const SCRIPT: &str = r#"
[[rule]]
name = "log trip"
match = "^log trip$"
steps = [
  { tool = "Remember", args = { text = "Booked the hotel in Zürich for the Tromsø leg", layer = "log" } },
  { tool = "SendMessage", args = { text = "Noted." } },
]

[[rule]]
name = "log plumber"
match = "^log plumber$"
steps = [
  { tool = "Remember", args = { text = "Paid the plumber for the kitchen sink", layer = "log" } },
  { tool = "SendMessage", args = { text = "Noted." } },
]

[[rule]]
name = "find"
match = "^find tromso$"
steps = [
  { tool = "SearchTranscript", args = { query = "Tromso" } },
  { tool = "SendMessage", args = { text = "found it" } },
]
"#;

const TRIP: &str = "We fly to Zürich, then Tromsø on Friday";
const OFFICE: &str = "The Zurich office moved";

async fn start() -> TestHost {
    TestFleet::new()
        .script("s", &format!("{SCRIPT}{CHAT}"))
        .bot(
            "r",
            "s",
            &[
                "SendMessage",
                "SearchTranscript",
                "ReadTranscript",
                "Remember",
            ],
        )
        .start()
        .await
}

/// `GET /v1/search?q=...` (`query` already percent-encoded).
async fn search(host: &TestHost, query: &str) -> Value {
    let (status, v) = host.get(&format!("/v1/search?q={query}"), TOKEN).await;
    assert_eq!(status, 200, "{query}: {v}");
    v
}

/// The snippets of a search's hits, sorted.
fn snippets(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["snippet"].as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

/// Regression: `Tromso` found nothing when the text said `Tromsø`, and
/// `Zurich` did not find `Zürich`. Both sides are accent-folded now: the
/// plain query finds the accented text, the accented query the plain text,
/// phrases and exclusions work across accents, and the snippet marks the
/// words as written. A bot's SearchTranscript finds it the same way.
#[tokio::test]
async fn a_query_without_accents_finds_the_text_with_them() {
    let host = start().await;
    let (session, _) = chat(&host, TOKEN, "r", TRIP).await;
    chat(&host, TOKEN, "r", OFFICE).await;
    flush(&host).await;

    let v = search(&host, "Tromso").await;
    assert_eq!(
        snippets(&v),
        ["We fly to Zürich, then «Tromsø» on Friday"],
        "{v}"
    );
    let v = search(&host, "zurich").await;
    assert_eq!(
        snippets(&v),
        [
            "The «Zurich» office moved",
            "We fly to «Zürich», then Tromsø on Friday"
        ],
        "{v}"
    );
    // the accented query finds the plain text too
    assert_eq!(search(&host, "Z%C3%BCrich").await["total"], 2);
    // a phrase and an exclusion across accents
    let v = search(&host, "%22zurich%20then%20tromso%22").await;
    assert_eq!(v["total"], 1, "{v}");
    let v = search(&host, "zurich%20-tromso").await;
    assert_eq!(snippets(&v), ["The «Zurich» office moved"], "{v}");

    chat(&host, TOKEN, "r", "find tromso").await;
    let entries = botfleet::client::Client::new(&host.url, TOKEN)
        .unwrap()
        .entries_after(&session, 0)
        .await
        .unwrap();
    let result = entries
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "SearchTranscript")
        .expect("a SearchTranscript result");
    assert_eq!(result["is_error"], json!(false), "{result}");
    let content = result["content"].as_str().unwrap();
    assert!(content.contains("«Tromsø»"), "{content}");
    host.shutdown().await;
}

/// Regression: memory recall ranks the log with the same terms, so a log
/// entry about Zürich shared nothing with the input `Zurich` (relevance 0)
/// and was not recalled ahead of the others.
#[tokio::test]
async fn a_log_entry_about_zurich_is_recalled_for_zurich() {
    let host = start().await;
    chat(&host, TOKEN, "r", "log trip").await;
    chat(&host, TOKEN, "r", "log plumber").await;
    let (status, v) = host.get("/v1/bots/r/memory?input=Zurich", TOKEN).await;
    assert_eq!(status, 200, "{v}");
    let items: Vec<&Value> = v["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["log"]["items"].as_array().unwrap())
        .collect();
    let id_of = |text: &str| {
        items
            .iter()
            .find(|i| i["text"].as_str().unwrap().starts_with(text))
            .map(|i| i["id"].clone())
            .unwrap_or_else(|| panic!("no log entry {text:?}: {v}"))
    };
    let (trip, plumber) = (id_of("Booked the hotel"), id_of("Paid the plumber"));
    let recall = v["prompt"]["recall"].as_array().unwrap();
    assert_eq!(recall[0]["id"], trip, "the Zürich entry first: {v}");
    assert!(recall[0]["relevance"].as_f64().unwrap() > 0.0, "{v}");
    let other = recall.iter().find(|r| r["id"] == plumber).unwrap();
    assert_eq!(other["relevance"].as_f64(), Some(0.0), "{v}");
    host.shutdown().await;
}

/// An index of format 4 holds accented terms and claims every entry: the
/// host deletes it at start and fills it again from the store (the
/// segments are dropped here, so only a rebuild can find anything).
#[tokio::test]
async fn an_index_of_the_format_before_accent_folding_is_rebuilt_at_start() {
    let host = start().await;
    chat(&host, TOKEN, "r", TRIP).await;
    flush(&host).await;
    let fleet = host.shutdown().await;
    let meta_path = fleet.path().join("data/index/meta.json");
    let mut meta: Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    let payload: Value = serde_json::from_str(meta["payload"].as_str().unwrap()).unwrap();
    let last_gid = payload["last_gid"].as_i64().unwrap();
    assert!(last_gid > 0, "{payload}");
    meta["segments"] = json!([]);
    meta["payload"] = json!(format!("{{\"format\":4,\"last_gid\":{last_gid}}}"));
    std::fs::write(&meta_path, meta.to_string()).unwrap();

    let host = restart(fleet).await;
    flush(&host).await;
    // the text as written is found again, and without its accents
    assert_eq!(search(&host, "Z%C3%BCrich").await["total"], 1);
    let v = search(&host, "tromso").await;
    assert_eq!(
        snippets(&v),
        ["We fly to Zürich, then «Tromsø» on Friday"],
        "{v}"
    );
    host.shutdown().await;
}
