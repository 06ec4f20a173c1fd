//! The daily token budget checked before every model request of a turn,
//! not only as the turn begins: a turn of several steps stops at the
//! checkpoint after the request that spent the budget.
//!
//! (Before, a bot with a 50-token budget ran a turn of four model requests
//! to its end and spent some 500 tokens.)

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

/// Two notes, then the answer: four model requests (the last one ends the
/// turn), each of them far more than 50 tokens.
const STEPS: &str = r#"
[[rule]]
steps = [
  { tool = "Remember", args = { text = "note one", layer = "log" } },
  { tool = "Remember", args = { text = "note two", layer = "log" } },
  { tool = "SendMessage", args = { text = "answer" } },
]
"#;

/// The answer first, then two notes.
const ANSWER_FIRST: &str = r#"
[[rule]]
steps = [
  { tool = "SendMessage", args = { text = "answer" } },
  { tool = "Remember", args = { text = "note one", layer = "log" } },
  { tool = "Remember", args = { text = "note two", layer = "log" } },
]
"#;

/// An answer, and a fact extraction after the turn that would learn one
/// (another for bot `q`).
const WITH_EXTRACTION: &str = r#"
[[rule]]
purpose = "extract"
bot = "q"
steps = [ { text = '{"add": [{"text": "Alice keeps wasps"}]}' } ]

[[rule]]
purpose = "extract"
steps = [ { text = '{"add": [{"text": "Alice keeps bees"}]}' } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "answer" } } ]
"#;

/// Bot `id` in `GET /v1/bots`.
async fn bot(host: &TestHost, id: &str) -> Value {
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    bots["bots"]
        .as_array()
        .and_then(|bs| bs.iter().find(|b| b["id"] == id))
        .cloned()
        .unwrap_or_else(|| panic!("no bot {id}: {bots:#}"))
}

/// A host whose bot `r` (SendMessage, Remember) follows `script` with a
/// daily budget of 50 tokens.
async fn with_budget_of_50(script: &str) -> TestHost {
    TestFleet::new()
        .midday()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Remember"])
        .bot_lines("daily_token_budget = 50")
        .start()
        .await
}

/// Sends `text` to `id` and waits for the first `turn_end` after it (of
/// any status); the session's entries then.
async fn first_turn(host: &TestHost, id: &str, text: &str) -> (String, Vec<Value>) {
    let (status, sent) = host.send(id, text, None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    host.wait_for(&session, |es| {
        es.iter()
            .find(|e| e["kind"] == "turn_end" && e["seq"].as_i64() > Some(seq))
            .cloned()
    })
    .await;
    let entries = host.entries(&session).await;
    (session, entries)
}

#[tokio::test]
async fn a_turn_stops_at_the_step_that_spent_the_budget() {
    let host = with_budget_of_50(STEPS).await;
    let (_, entries) = first_turn(&host, "r", "hello").await;

    // the first request spent the budget: its step ran, and the turn
    // stopped before the next request, its input kept for after the pause
    let ends: Vec<&Value> = entries.iter().filter(|e| e["kind"] == "turn_end").collect();
    assert_eq!(ends.len(), 1, "{entries:#?}");
    assert_eq!(ends[0]["status"], "interrupted", "{entries:#?}");
    let results = entries
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .count();
    assert_eq!(results, 1, "one step ran: {entries:#?}");
    assert!(deliveries(&entries).is_empty(), "{entries:#?}");
    // the person is told, in the turn-start check's words
    let notices: Vec<&str> = entries
        .iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == "budget_exhausted")
        .map(|e| e["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(notices.len(), 1, "{entries:#?}");
    assert!(
        notices[0].starts_with("r-name (r) has used its daily token budget (")
            && notices[0].contains("Your messages are kept and will be answered then"),
        "{notices:?}"
    );

    // one model request's usage is all it spent past the budget
    let r = bot(&host, "r").await;
    let today = &r["usage"]["today"];
    assert_eq!(today["calls"], 1, "{r:#}");
    let used =
        today["prompt_tokens"].as_u64().unwrap() + today["completion_tokens"].as_u64().unwrap();
    assert!(used >= 50, "{r:#}");
    let until = r["paused_until"]
        .as_i64()
        .unwrap_or_else(|| panic!("paused as the turn stopped: {r:#}"));

    // the next message waits for the pause to end, and is told so
    let (status, again) = host.send("r", "still there?", None).await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(again["paused_until"], until, "{again}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_turn_that_answered_before_the_budget_ran_out_ends_completed() {
    let host = with_budget_of_50(ANSWER_FIRST).await;
    let (_, entries) = first_turn(&host, "r", "hello").await;

    // its reply is out: the turn did its job and ends there, with no
    // notice promising a later answer
    assert_eq!(deliveries(&entries), vec!["answer".to_owned()]);
    let end = entries
        .iter()
        .find(|e| e["kind"] == "turn_end")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    assert_eq!(end["status"], "completed", "{entries:#?}");
    assert_eq!(end["usage"]["calls"], 1, "{end:#}");
    assert!(
        !entries.iter().any(|e| e["code"] == "budget_exhausted"),
        "{entries:#?}"
    );
    let r = bot(&host, "r").await;
    assert_eq!(r["usage"]["today"]["calls"], 1, "{r:#}");
    assert!(
        r["paused_until"].is_i64(),
        "paused as the turn ended: {r:#}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn no_fact_extraction_runs_after_the_turn_that_spent_the_budget() {
    let host = TestFleet::new()
        .midday()
        .script("s", WITH_EXTRACTION)
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = true\n")
        .bot("r", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 50")
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let (_, entries) = first_turn(&host, "r", "I keep bees").await;
    assert_eq!(deliveries(&entries), vec!["answer".to_owned()]);
    // q, without a budget, answers next and its extraction learns a fact:
    // by then r's, started earlier, would have run too
    first_turn(&host, "q", "I keep wasps").await;
    host.wait_get("/v1/bots/q/memory", |m| {
        m.to_string().contains("wasps").then(|| m.clone())
    })
    .await;
    // r's turn's one request is all it used today, and it learned nothing
    let r = bot(&host, "r").await;
    assert_eq!(r["usage"]["today"]["calls"], 1, "{r:#}");
    let (status, memory) = host.get("/v1/bots/r/memory", TOKEN).await;
    assert_eq!(status, 200, "{memory}");
    assert!(!memory.to_string().contains("bees"), "{memory:#}");
    host.shutdown().await;
}

/// `botfleet send` to a bot whose budget runs out in the turn over the
/// message, before any reply: it ends at once with the host's notice (exit
/// 5, `"status": "paused"`), as for a message to a bot paused already. (It
/// read the notice and waited out `--timeout`, then said "no reply".) The
/// next message, to the paused bot, prints the pause too.
#[tokio::test]
async fn send_ends_at_once_when_the_budget_runs_out_over_its_message() {
    let host = with_budget_of_50(STEPS).await;
    let (code, out, err) = crate::support::process::cli(
        &["send", "r", "hello", "--timeout", "30", "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 5, "{out}{err}");
    let answer: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("{out}"));
    assert_eq!(answer["status"], "paused", "{answer}");
    assert!(answer["paused_until"].is_i64(), "{answer}");
    assert!(
        answer["notice"]
            .as_str()
            .is_some_and(|n| n.starts_with("r-name (r) has used its daily token budget")),
        "{answer}"
    );
    let (code, _, err) =
        crate::support::process::cli(&["send", "r", "and now?"], &host.url, TOKEN).await;
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("paused until"), "{err}");
    host.shutdown().await;
}
