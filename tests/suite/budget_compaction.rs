//! The daily token budget where it was not checked: between the chunks of
//! a compaction, and against a fact extraction still in flight.
//!
//! Before, a compaction of several chunks was checked once, before it
//! began, and asked the summariser for every chunk however far past the
//! budget the first took the bot; and an extraction's usage counted only
//! once written, so the bot's next turn started its model request while
//! the extraction in flight had spent the budget.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use super::crash::turn_ended;
use super::crash::wait_until;
use super::memory_restart::answers_once;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::memory_model::is_extraction;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_user_text;
use crate::support::openai_server::noted_turn;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

/// The compaction threshold of the compaction test's provider.
const THRESHOLD: u64 = 3000;
/// What the summariser answers once it is back.
const SUMMARY: &str = "SUMMARY: the person keeps sending notes.";
/// The tokens one summariser call reports: far past the budget.
const SUMMARY_TOKENS: u64 = 1_000_000;
/// What a held extraction reports: with the turn's, past the budget.
const EXTRACTION_TOKENS: u64 = 5_000;
/// What the host logs when a model request waits for an extraction.
const WAITS: &str = "a model request waits for the bot's fact extractions in flight";

fn is_compaction(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You summarise"))
}

/// A turn: SendMessage, then the end; each request reports 2 tokens.
fn turn_reply(request: &Value) -> Reply {
    noted_turn(request).usage(1, 1)
}

/// Sends `n` notes of about 600 characters from `from` on, each after the
/// last turn completed; the session and the seq of the last.
async fn chat(host: &TestHost, from: usize, n: usize) -> (String, i64) {
    let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(11);
    let mut last = (String::new(), 0);
    for i in from..from + n {
        let (_, sent) = host.send("r", &format!("note {i}: {filler}"), None).await;
        let session = sent["session"].as_str().unwrap().to_owned();
        let seq = sent["seq"].as_i64().unwrap();
        let end = host.wait_turn_end(&session, seq).await;
        assert_eq!(end["status"], "completed", "{end}");
        last = (session, seq);
    }
    last
}

/// A backlog left by a summariser outage takes several chunks; the first
/// chunk's call spends the budget. Before, the compaction asked for the
/// rest too, each call past the budget; now it stops between chunks, the
/// chunk summarised stays, and no entry is lost.
#[tokio::test]
async fn a_compaction_stops_between_chunks_once_the_budget_is_spent() {
    let down = Arc::new(AtomicBool::new(true));
    let summarised = Arc::new(AtomicUsize::new(0));
    let server = OpenAiServer::builder()
        .responder({
            let (down, summarised) = (Arc::clone(&down), Arc::clone(&summarised));
            move |request| {
                if !is_compaction(request) {
                    return turn_reply(request);
                }
                if down.load(Ordering::SeqCst) {
                    return Reply::error(500, "the summariser is down");
                }
                summarised.fetch_add(1, Ordering::SeqCst);
                Reply::text(SUMMARY).usage(SUMMARY_TOKENS, 1)
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .midday()
        .openai(
            "main",
            &server.base_url(),
            &format!("max_retries = 0\ncompact_at_tokens = {THRESHOLD}"),
        )
        .bot("r", "main", &["SendMessage"])
        .bot_lines("daily_token_budget = 100000")
        .runtime("debounce_ms = 0\nextract_memory = false\ncontext_entries = 8")
        .start()
        .await;
    // a backlog of some 20 notes (several chunks of at most half the
    // threshold) while the summariser is down; the turns spend 4 tokens each
    let (session, _) = chat(&host, 0, 20).await;
    let tried = server
        .requests()
        .iter()
        .filter(|r| is_compaction(&r.body))
        .count();
    assert!(tried > 0, "no compaction was tried during the outage");

    // back: the next compaction's first chunk spends the budget
    down.store(false, Ordering::SeqCst);
    let (status, sent) = host.send("r", "one more note", None).await;
    assert_eq!(status, 202, "{sent}");
    // the bot pauses once the compaction's usage is counted (at the end of
    // the turn that compacted, or of the compaction in the background);
    // before, the summariser was asked for more chunks first
    host.wait_get("/v1/bots", |list| {
        let r = list["bots"].as_array()?.iter().find(|b| b["id"] == "r")?;
        (r["paused_until"].is_i64() || summarised.load(Ordering::SeqCst) > 1).then(|| r.clone())
    })
    .await;
    assert_eq!(
        summarised.load(Ordering::SeqCst),
        1,
        "the summariser was asked for more chunks after the first spent the budget"
    );
    let (_, list) = host.get("/v1/bots", TOKEN).await;
    assert!(list["bots"][0]["paused_until"].is_i64(), "{list:#}");
    let entries = host.entries(&session).await;
    // one summary, whole, covering the first chunk only
    let summaries: Vec<&Value> = entries.iter().filter(|e| e["kind"] == "summary").collect();
    assert_eq!(summaries.len(), 1, "{summaries:#?}");
    assert_eq!(summaries[0]["text"], SUMMARY, "{:#}", summaries[0]);
    let covers = summaries[0]["covers_to_seq"].as_i64().unwrap();
    // every message is still there, readable, the ones the summary does
    // not cover as well, and the last one waits for the pause to end
    let notes: Vec<&str> = entries
        .iter()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(notes.len(), 21, "{notes:#?}");
    for (i, note) in notes.iter().take(20).enumerate() {
        assert!(note.starts_with(&format!("note {i}: lorem")), "{note}");
    }
    assert_eq!(notes[20], "one more note");
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "user_message" && e["seq"].as_i64() > Some(covers)),
        "the summary covers the whole backlog: {covers}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// The first message, whose turn's extraction is held.
const FIRST: &str = "I keep bees";
/// The message sent while the extraction is in flight.
const SECOND: &str = "and wasps too";

/// Whether `body` is a turn's request answering [`SECOND`].
fn answers_second(body: &Value) -> bool {
    !is_extraction(body) && last_user_text(body).is_some_and(|t| t.contains(SECOND))
}

/// The turn's check before its model request counts a fact extraction in
/// flight: a real host whose extractor (the loopback server) holds the
/// first turn's extraction while the second message arrives. The
/// extraction reports enough to spend the budget: the second turn must
/// not start its model request, and is paused once the extraction's usage
/// is in. Before, it asked the model at once, as if the extraction's
/// tokens were not spent.
#[tokio::test]
async fn a_turn_waits_for_the_usage_of_an_extraction_in_flight() {
    let (release, gate) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |body| {
            if is_extraction(body) {
                return Reply::text("{}")
                    .usage(EXTRACTION_TOKENS, 1)
                    .hold_until(gate.clone());
            }
            answers_once(body, "noted").usage(10, 1)
        })
        .start()
        .await;
    let fleet = TestFleet::new()
        .midday()
        .openai("main", &server.base_url(), "max_retries = 0")
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = true\n")
        .bot("r", "main", &["SendMessage"])
        .bot_lines("daily_token_budget = 1000");
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let mut host = HostProcess::start(&path, free_port(), &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();

    // the first turn spends 22 tokens; its extraction is asked and held
    let (status, sent) = client.send_message("r", FIRST, "first").await.unwrap();
    assert_eq!(status.as_u16(), 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    wait_until(
        &host.url,
        &session,
        turn_ended(sent["seq"].as_i64().unwrap()),
    )
    .await;
    let asked = async {
        loop {
            // counted first: a request that comes after the look is waited for
            let n = server.request_count();
            if server.requests().iter().any(|r| is_extraction(&r.body)) {
                break;
            }
            server.wait_for_requests(n + 1).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), asked)
        .await
        .expect("the first turn's extraction was asked");

    // the second message arrives while it is in flight: its turn waits for
    // the extraction (it logs so) rather than asking the model
    let (status, second) = client.send_message("r", SECOND, "second").await.unwrap();
    assert_eq!(status.as_u16(), 202, "{second}");
    let asked_model = async {
        loop {
            // counted first: a request that comes after the look is waited for
            let n = server.request_count();
            if server.requests().iter().any(|r| answers_second(&r.body)) {
                break;
            }
            server.wait_for_requests(n + 1).await;
        }
    };
    tokio::select! {
        () = host.wait_log(WAITS) => {}
        () = asked_model => panic!(
            "the second turn asked the model while the extraction in flight was \
             spending its budget (reserved tokens not counted)"
        ),
    }
    release.send(true).unwrap();

    // the extraction's usage spends the budget: the turn stops before its
    // model request, the person is told, and the bot is paused
    let seq = second["seq"].as_i64().unwrap();
    let es = wait_until(&host.url, &session, |es| {
        es.iter().any(|e| {
            e["kind"] == "notice"
                && e["code"] == "budget_exhausted"
                && e["seq"].as_i64() > Some(seq)
        })
    })
    .await;
    assert!(
        !server.requests().iter().any(|r| answers_second(&r.body)),
        "the second turn asked the model after all"
    );
    assert!(
        !es.iter()
            .any(|e| e["kind"] == "turn_end" && e["inputs"] == json!([seq])),
        "{es:#?}"
    );
    let r = poll(20, async || {
        let bots = client.get("/v1/bots").await.unwrap();
        let r = bots["bots"][0].clone();
        if r["paused_until"].is_i64() {
            Ok(r)
        } else {
            Err(format!("r is not paused: {r:#}"))
        }
    })
    .await;
    let today = &r["usage"]["today"];
    let used =
        today["prompt_tokens"].as_u64().unwrap() + today["completion_tokens"].as_u64().unwrap();
    assert_eq!(used, 22 + EXTRACTION_TOKENS + 1, "{r:#}");
    host.kill9().await;
    drop(fleet);
    server.shutdown().await;
}
