//! Compaction stays within bounds derived from `compact_at_tokens`: a
//! backlog the summariser could not take while it was down is summarised
//! in chunks, each request within the bound, and the summary advances; a
//! summary longer than its bound is cut, and the calls ask for no more.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::openai_server::Endless;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;
use crate::support::openai_server::noted_turn;

/// The compaction threshold of these tests' provider.
const THRESHOLD: u64 = 3000;
/// The largest request the summariser takes once it is back.
const LIMIT_BYTES: usize = 20_000;

fn is_compaction(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You summarise"))
}

fn size(request: &Value) -> usize {
    request.to_string().len()
}

async fn fleet(server: &OpenAiServer, window: Option<usize>) -> TestHost {
    let window = window.map_or(String::new(), |w| format!("\ncontext_entries = {w}"));
    TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            &format!("max_retries = 0\ncompact_at_tokens = {THRESHOLD}"),
        )
        .bot("r", "main", &["SendMessage"])
        .runtime(&format!("debounce_ms = 0\nextract_memory = false{window}"))
        .start()
        .await
}

/// Sends `n` notes of about 600 characters, each after the last turn
/// ended; returns the session and the seq of the last note.
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

fn summaries(entries: &[Value]) -> Vec<&Value> {
    entries.iter().filter(|e| e["kind"] == "summary").collect()
}

/// Fails unless `entries` hold a summary, and each is the summariser's
/// verbose answer ("The person sent another note …") cut at its bound
/// and marked.
fn assert_summaries_cut(entries: &[Value]) {
    let written = summaries(entries);
    assert!(!written.is_empty(), "no summary");
    for summary in &written {
        let text = summary["text"].as_str().unwrap();
        // 600 tokens of English are about 3 KB
        assert!(text.len() < 6_000, "a summary of {} bytes", text.len());
        assert!(text.starts_with("The person sent another note"), "{text}");
        assert!(
            text.contains("The summary was cut off here"),
            "no marker: {text}"
        );
    }
}

/// Regression (finding 1): while the summariser failed, the entries since
/// the last summary piled up, and every compaction sent all of them in
/// one request — 55 KB after 25 failing turns and growing — so once the
/// summariser was back but took no request over 20 KB, every attempt was
/// refused and the summary never advanced again. Now the backlog goes in
/// chunks of at most half the threshold (with the summary so far), no
/// request passes the bound, and the summary catches up with the chat.
#[tokio::test]
async fn a_backlog_after_a_summariser_outage_is_summarised_in_bounded_chunks() {
    let down = Arc::new(AtomicBool::new(true));
    let refused = Arc::new(Mutex::new(Vec::<usize>::new()));
    let server = OpenAiServer::builder()
        .responder({
            let (down, refused) = (Arc::clone(&down), Arc::clone(&refused));
            move |request| {
                if !is_compaction(request) {
                    return noted_turn(request);
                }
                if down.load(Ordering::SeqCst) {
                    return Reply::error(500, "the summariser is down");
                }
                if size(request) > LIMIT_BYTES {
                    refused.lock().unwrap().push(size(request));
                    return Reply::error(
                        400,
                        "context_length_exceeded: this model's maximum context length is exceeded",
                    );
                }
                Reply::text("SUMMARY: the person keeps sending notes.")
            }
        })
        .start()
        .await;
    let host = fleet(&server, Some(8)).await;
    let (session, outage_end) = chat(&host, 0, 25).await;
    let tried = server
        .requests()
        .iter()
        .filter(|r| is_compaction(&r.body))
        .count();
    assert!(tried > 0, "no compaction was tried during the outage");
    assert!(summaries(&host.entries(&session).await).is_empty());

    down.store(false, Ordering::SeqCst);
    let (_, last) = chat(&host, 25, 20).await;
    let entries = host.entries(&session).await;
    let written = summaries(&entries);
    let newest = written
        .last()
        .unwrap_or_else(|| panic!("no summary after the outage; refused: {refused:?}"));
    let covers = newest["covers_to_seq"].as_i64().unwrap();
    // the whole outage's backlog is summarised, and the chat after it
    assert!(covers > outage_end, "{covers} <= {outage_end}: {newest}");
    assert!(covers >= last - 16, "the summary lags: {covers} for {last}");
    // in chunks: several summaries, their ends increasing
    let ends: Vec<i64> = written
        .iter()
        .map(|s| s["covers_to_seq"].as_i64().unwrap())
        .collect();
    assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
    assert!(refused.lock().unwrap().is_empty(), "refused: {refused:?}");
    for request in server.requests().iter().filter(|r| is_compaction(&r.body)) {
        assert!(
            size(&request.body) <= LIMIT_BYTES,
            "{}",
            size(&request.body)
        );
        assert_eq!(request.body["max_tokens"], THRESHOLD / 5);
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (finding 2): a summary had no size limit and compaction
/// calls no `max_tokens`: a summariser answering 300 KB had it stored
/// and sent with every later turn (~310 KB against a 3000-token
/// threshold), and compaction ran again every turn. Now the call asks for
/// at most a fifth of the threshold, a longer answer is cut there with a
/// marker, and the turns' requests stay small.
#[tokio::test]
async fn a_summary_longer_than_its_bound_is_cut_and_marked() {
    let verbose = "The person sent another note about lorem ipsum. ".repeat(6_500);
    assert!(verbose.len() > 290_000);
    let server = OpenAiServer::builder()
        .responder(move |request| {
            if is_compaction(request) {
                Reply::text(verbose.clone())
            } else {
                noted_turn(request)
            }
        })
        .start()
        .await;
    let host = fleet(&server, None).await;
    let (session, _) = chat(&host, 0, 20).await;
    assert_summaries_cut(&host.entries(&session).await);
    let requests = server.requests();
    let compactions: Vec<_> = requests.iter().filter(|r| is_compaction(&r.body)).collect();
    for c in &compactions {
        assert_eq!(c.body["max_tokens"], THRESHOLD / 5);
    }
    // after the first summary, no turn request carries a huge one
    let first = requests
        .iter()
        .position(|r| is_compaction(&r.body))
        .unwrap();
    let turns: Vec<usize> = requests[first..]
        .iter()
        .filter(|r| !is_compaction(&r.body))
        .map(|r| size(&r.body))
        .collect();
    assert!(
        turns.iter().all(|&n| n < 40_000),
        "turn requests of {turns:?} bytes"
    );
    // and compaction does not run at every turn
    assert!(
        compactions.len() * 2 <= 20,
        "{} compactions for 20 turns",
        compactions.len()
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: a summariser that ignores `max_tokens` kept the compaction
/// reading its answer to the end (or to `max_response_bytes`), all of it
/// then cut to the bound: a 290 KB summary held the person's turn for
/// over 30 s, and one that never ends failed the compaction. Now the
/// stream is stopped once the summary passes its bound, and what was read
/// is the summary, cut off and marked.
#[tokio::test]
async fn a_summary_that_never_ends_is_stopped_at_its_bound() {
    let server = OpenAiServer::builder()
        .responder(|request| {
            if is_compaction(request) {
                Reply::endless(Endless::Words, Duration::ZERO)
            } else {
                noted_turn(request)
            }
        })
        .start()
        .await;
    let host = fleet(&server, None).await;
    let (session, _) = chat(&host, 0, 20).await;
    assert_summaries_cut(&host.entries(&session).await);
    // the stopped call counts what it sent and read (its ~10 KB of text
    // alone; the turns' SendMessage calls are a few tokens each)
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let r = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "r")
        .unwrap();
    let completion = r["usage"]["total"]["completion_tokens"].as_u64().unwrap();
    assert!(completion > 1_000, "{}", r["usage"]);
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: OpenAI's reasoning models refuse `max_tokens`, so
/// compaction always failed on them. With `max_tokens_field =
/// "max_completion_tokens"` in fleet.toml the compaction's limit goes
/// under that name, and no request carries `max_tokens` (the key was read
/// and checked, but once not handed from the config to the model client).
#[tokio::test]
async fn the_token_limit_goes_under_the_field_fleet_toml_names() {
    let server = OpenAiServer::builder()
        .responder(|request| {
            if is_compaction(request) {
                Reply::text("SUMMARY: the person keeps sending notes.")
            } else {
                noted_turn(request)
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            &format!(
                "max_retries = 0\ncompact_at_tokens = {THRESHOLD}\nmax_tokens_field = \"max_completion_tokens\""
            ),
        )
        .bot("r", "main", &["SendMessage"])
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let (session, _) = chat(&host, 0, 20).await;
    assert!(
        !summaries(&host.entries(&session).await).is_empty(),
        "no summary"
    );
    let requests = server.requests();
    let compactions: Vec<_> = requests.iter().filter(|r| is_compaction(&r.body)).collect();
    assert!(!compactions.is_empty());
    for c in &compactions {
        assert_eq!(c.body["max_completion_tokens"], THRESHOLD / 5, "{}", c.body);
    }
    assert!(
        requests.iter().all(|r| r.body.get("max_tokens").is_none()),
        "a request sent max_tokens"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// A thinking model's reasoning goes back with its calls in every later
/// request, and counts: a session whose steps carry long reasoning
/// compacts, and the newest request does not hold every step's reasoning
/// since the start. (QA, 2026-12-05, saw such a session never compact;
/// what a clipped message was counted to send left its reasoning out —
/// `entry_clip_tests`, `a_clipped_assistant_message_counts_its_reasoning`
/// — though this test passes without that fix too.)
#[tokio::test]
async fn a_session_of_long_reasoning_compacts() {
    // about 2,000 tokens a step: over an entry's share of the 6,000
    let thought: String = (0..450).map(|j| format!("RSN7w{j} ")).collect();
    let server = OpenAiServer::builder()
        .responder(move |request| {
            if is_compaction(request) {
                return Reply::text("SUMMARY: the person keeps asking short questions.");
            }
            if crate::support::openai_server::last_message(request)
                .is_some_and(|m| m["role"] == "tool")
            {
                return Reply::text("");
            }
            Reply::tool_call("call_1", "SendMessage", r#"{"text": "noted"}"#)
                .reasoning(thought.clone())
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            "max_retries = 0\ncompact_at_tokens = 6000",
        )
        .bot("r", "main", &["SendMessage"])
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let mut session = String::new();
    for i in 0..12 {
        let (_, sent) = host.send("r", &format!("question {i}"), None).await;
        session = sent["session"].as_str().unwrap().to_owned();
        let end = host
            .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
        assert_eq!(end["status"], "completed", "{end}");
    }
    let requests = server.requests();
    assert!(
        requests.iter().any(|r| is_compaction(&r.body)),
        "never compacted"
    );
    assert!(!summaries(&host.entries(&session).await).is_empty());
    // the last turn's request holds a summary and the newest steps, not
    // every step's reasoning since the start
    let last = requests
        .iter()
        .rev()
        .find(|r| !is_compaction(&r.body))
        .unwrap();
    let reasonings = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m.get("reasoning_content").is_some())
        .count();
    assert!(
        reasonings < 12,
        "{reasonings} reasoning messages in the last request"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (QA, 2026-12-05): a compaction within a turn of many calls
/// found nothing to summarise (all after the summary was the running
/// turn's own) and held every check off for a quarter window of entries,
/// past the turn's end: the turn's calls and results went unsummarised
/// into the requests of the next eight turns, each about four times
/// `compact_at_tokens`. The hold now ends with the turn: the next turn
/// compacts before its first request (the finished turn's entries can be
/// summarised then), which is within the mark.
#[tokio::test]
async fn a_turn_of_many_calls_is_summarised_once_it_ends() {
    let server = OpenAiServer::builder()
        .responder(|request| {
            if is_compaction(request) {
                return Reply::text("SUMMARY: r read the twenty parts of notes.txt");
            }
            let last = last_message(request).cloned().unwrap_or(Value::Null);
            let asked = last_user_text(request).unwrap_or("").to_owned();
            if last["role"] == "tool" {
                let read = last["tool_call_id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("read_"));
                return if read {
                    Reply::tool_call("done", "SendMessage", r#"{"text":"read them"}"#)
                } else {
                    Reply::text("")
                };
            }
            if last["role"] == "user" && asked.contains("read all of it") {
                let mut reply = Reply::text("");
                for i in 1..=20 {
                    let args = format!(r#"{{"path":"notes.txt","offset":{i},"limit":1}}"#);
                    reply = reply.and_tool_call(&format!("read_{i}"), "Read", args);
                }
                return reply;
            }
            Reply::tool_call("ok", "SendMessage", r#"{"text":"ok"}"#)
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            "max_retries = 0\ncompact_at_tokens = 1000",
        )
        .bot("r", "main", &["SendMessage", "Read"])
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let line = "the quick brown fox jumps over the lazy dog; ".repeat(8);
    let notes: String = (1..=20).map(|i| format!("{i}: {line}\n")).collect();
    let workspace = host.fleet.path().join("data/workspace/alice");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), notes).unwrap();
    let (_, end) = host.end_turn("r", "read all of it").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (_, end) = host.end_turn("r", "and now?").await;
    assert_eq!(end["status"], "completed", "{end}");
    let requests = server.requests();
    let next = requests
        .iter()
        .find(|r| !is_compaction(&r.body) && r.body.to_string().contains("and now?"))
        .unwrap();
    let results = next
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(
        results, 0,
        "the twenty results went into the next turn: {}",
        next.body
    );
    assert!(
        next.body
            .to_string()
            .contains("SUMMARY: r read the twenty parts"),
        "{}",
        next.body
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// A summariser on a server that reports no usage: each summary's tokens
/// are counted (the request as sent, the summary as made), so they reach
/// the bot's usage and its daily budget. Regression: a compaction whose
/// answer came without `usage` counted no token at all (only one stopped
/// at its bound was counted), while a turn's call was counted.
#[tokio::test]
async fn a_summary_from_a_server_without_usage_counts_its_tokens() {
    // some 300 tokens of summary, under the 600-token bound
    let summary: String = (0..120).map(|i| format!("w{i} ")).collect();
    let server = OpenAiServer::builder()
        .responder(move |request| {
            if is_compaction(request) {
                Reply::text(format!("SUMMARY: {summary}"))
            } else {
                // the turns report their usage: 1 completion token a call
                noted_turn(request).usage(1, 1)
            }
        })
        .start()
        .await;
    let host = fleet(&server, None).await;
    let (session, _) = chat(&host, 0, 20).await;
    assert!(!summaries(&host.entries(&session).await).is_empty());
    let calls = server.request_count() as u64;
    let usage = host
        .wait_get("/v1/bots", |bots| {
            let r = bots["bots"].as_array()?.iter().find(|b| b["id"] == "r")?;
            let completion = r["usage"]["total"]["completion_tokens"].as_u64()?;
            (completion > calls + 200).then(|| r["usage"].clone())
        })
        .await;
    assert!(
        usage["total"]["prompt_tokens"].as_u64().unwrap() > calls,
        "{usage}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
