//! What a turn's requests hold stays well-formed and bounded, as an
//! OpenAI-compatible server receives them: a refused call's huge argument
//! is cut, a long turn's older tool results are cut to stubs (every call
//! keeps its result), roles alternate, and a turn that delivered its reply
//! before the step limit ends completed.

use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::openai_outcomes::host;
use super::openai_outcomes::turn;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::RecordedRequest;
use crate::support::openai_server::Reply;
use crate::support::openai_server::without_times;

const RUNTIME: &str = "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n";

/// Bytes of a request's body.
pub(super) fn size(request: &RecordedRequest) -> usize {
    request.body.to_string().len()
}

/// The number of tool messages in a request (its step in the turn, when
/// every step made one call).
fn tool_messages(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count())
}

/// Checks that every tool call of `request` is answered by a tool message
/// right after its assistant message (in the order of the calls), and that
/// every tool message answers such a call.
fn assert_paired(request: &RecordedRequest) {
    let messages = request.messages();
    let mut i = 0;
    while i < messages.len() {
        let calls = messages[i]["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            messages[i]["role"] != "tool",
            "an orphan result at {i}: {:#}",
            request.body
        );
        for (k, call) in calls.iter().enumerate() {
            let answer = &messages[i + 1 + k];
            assert_eq!(answer["role"], "tool", "{:#}", request.body);
            assert_eq!(answer["tool_call_id"], call["id"], "{:#}", request.body);
        }
        i += 1 + calls.len();
    }
}

/// Checks that a request's roles alternate: system first, then no two user
/// (or assistant) messages in a row and no assistant message with neither
/// text nor tool calls.
fn assert_alternating(request: &RecordedRequest) {
    let messages = request.messages();
    assert_eq!(messages[0]["role"], "system", "{:#}", request.body);
    assert!(
        messages[1..].iter().all(|m| m["role"] != "system"),
        "{:#}",
        request.body
    );
    for pair in messages.windows(2) {
        let roles = (pair[0]["role"].as_str(), pair[1]["role"].as_str());
        assert!(
            roles != (Some("user"), Some("user"))
                && roles != (Some("assistant"), Some("assistant")),
            "{roles:?} in a row: {:#}",
            request.body
        );
    }
    for m in messages.iter().filter(|m| m["role"] == "assistant") {
        let text = m["content"].as_str().unwrap_or("");
        let calls = m["tool_calls"].as_array().map_or(0, Vec::len);
        assert!(
            !text.is_empty() || calls > 0,
            "an empty assistant message: {:#}",
            request.body
        );
    }
}

/// Regression: the model called SendMessage with a 1 MB text, the tool
/// refused it for its size, and the 1 MB argument stayed in the history:
/// every later request carried it (at a real provider each failed as too
/// long, for ~4 turns). Later requests carry its first 500 characters and
/// a note; the transcript keeps the call whole.
#[tokio::test]
async fn a_refused_huge_argument_is_not_sent_again() {
    let huge = "x".repeat(1_048_576);
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call(
            "big",
            "SendMessage",
            json!({ "text": huge }).to_string(),
        ))
        .reply(Reply::tool_call(
            "small",
            "SendMessage",
            r#"{"text":"short"}"#,
        ))
        .reply(Reply::text(""))
        .reply(Reply::tool_call(
            "next",
            "SendMessage",
            r#"{"text":"again"}"#,
        ))
        .reply(Reply::text(""))
        .start()
        .await;
    let host = host(&server, false).await;
    let (entries, end) = turn(&host, "write me a novel").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (entries2, end) = turn(&host, "and now?").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries2), ["short", "again"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    for r in &requests[1..] {
        assert!(
            size(r) < 20_000,
            "a request of {} bytes: {:.2000}",
            size(r),
            r.body
        );
        assert_paired(r);
    }
    let call = &requests[4].messages()[2]["tool_calls"][0];
    assert_eq!(call["id"], "big", "{:#}", requests[4].body);
    let sent: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        sent["text"],
        format!("{}… [cut: 1,048,576 characters; refused]", "x".repeat(500))
    );
    // the model was told why, and the transcript has the call as it was made
    let refusal = entries
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["call_id"] == "big")
        .unwrap();
    assert!(
        refusal["content"]
            .as_str()
            .unwrap()
            .contains("the limit is 16000"),
        "{refusal}"
    );
    let made = entries.iter().find(|e| e["kind"] == "assistant").unwrap();
    let args: Value =
        serde_json::from_str(made["tool_calls"][0]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["text"].as_str().map(str::len), Some(1_048_576));
    host.shutdown().await;
    server.shutdown().await;
}

/// English-like text of about `chars` characters, different for each `seed`.
pub(super) fn prose(seed: usize, chars: usize) -> String {
    let words = [
        "alpha", "river", "stone", "garden", "window", "market", "silver", "engine",
    ];
    let mut out = String::with_capacity(chars + 16);
    let mut k = seed;
    while out.len() < chars {
        out.push_str(words[k % words.len()]);
        out.push_str(&(k % 97).to_string());
        out.push(' ');
        k = k.wrapping_mul(31).wrapping_add(7);
    }
    out
}

/// What a reading bot answers at step `n` of a turn (after `n` tool
/// results): Read `f{n}.txt` while `n < reads`, then SendMessage "read
/// them all", then stop.
pub(super) fn reading_step(n: usize, reads: usize) -> Reply {
    match n {
        n if n < reads => Reply::tool_call(
            &format!("r{n}"),
            "Read",
            json!({ "path": format!("f{n}.txt") }).to_string(),
        ),
        n if n == reads => Reply::tool_call("send", "SendMessage", r#"{"text":"read them all"}"#),
        _ => Reply::text(""),
    }
}

/// A fleet with bot `r` (SendMessage, Read) on the OpenAI-compatible
/// server at `base_url`, compacting at 40,000 tokens, and `files` prose
/// files `f0.txt`… of ~10,000 characters (~2,500 tokens) each in alice's
/// workspace.
pub(super) fn reading_fleet(base_url: &str, files: usize) -> TestFleet {
    let fleet = TestFleet::new()
        .openai(
            "main",
            base_url,
            "max_retries = 0\ncompact_at_tokens = 40000",
        )
        .bot("r", "main", &["SendMessage", "Read"]);
    std::fs::create_dir_all(fleet.path().join("data/workspace/alice")).unwrap();
    for n in 0..files {
        std::fs::write(
            fleet.path().join(format!("data/workspace/alice/f{n}.txt")),
            prose(n, 10_000),
        )
        .unwrap();
    }
    fleet
}

/// Regression: within one turn tool results piled up without bound: ten
/// reads of 32 KB grew each request by ~33 KB (to ~1.3 MB with the
/// default 40 steps), and a compaction keeps the running turn. Past half
/// of `compact_at_tokens` the turn's older results go as stubs naming the
/// call, the newest stays whole, and every call keeps its result message.
#[tokio::test]
async fn a_long_turns_older_tool_results_are_cut_to_stubs() {
    const READS: usize = 10;
    let server = OpenAiServer::builder()
        .responder(|request| reading_step(tool_messages(request), READS))
        .start()
        .await;
    // a budget of 20,000 tokens for the turn; ten reads of ~2,500 tokens
    // pass it without reaching the compaction mark
    let host = reading_fleet(&server.base_url(), READS).start().await;
    let (entries, end) = turn(&host, "read f0.txt to f9.txt").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["read them all"]);
    let requests = server.requests();
    assert_eq!(requests.len(), READS + 2);
    let last = &requests[READS];
    assert_paired(last);
    let results: Vec<&Value> = last
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), READS);
    let cut: Vec<usize> = (0..READS)
        .filter(|&n| {
            results[n]["content"]
                .as_str()
                .unwrap()
                .starts_with(&format!(
                    "[result of Read call #{} cut to save context: ",
                    n + 1
                ))
        })
        .collect();
    assert!(cut.len() >= 4 && cut.len() < READS, "cut: {cut:?}");
    // oldest first, the newest whole
    assert_eq!(cut, (0..cut.len()).collect::<Vec<_>>());
    let newest = results[READS - 1]["content"].as_str().unwrap();
    assert!(newest.len() >= 10_000, "{newest:.200}");
    // the turn's requests stop growing with each read
    let full: usize = entries
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| e["content"].as_str().unwrap().len())
        .sum();
    assert!(
        size(last) < full * 3 / 4,
        "{} bytes, results {full}",
        size(last)
    );
    // the transcript keeps every result whole
    assert!(full >= READS * 10_000, "{full}");
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: two user messages in a row (a failed turn's message and
/// the next) and the empty assistant message every finished turn leaves
/// went out as they were; Mistral's and Gemma's chat templates under vLLM
/// refuse roles that do not alternate. They go as one user message (each
/// keeping its text), and empty assistant messages are left out.
#[tokio::test]
async fn roles_alternate_in_every_request() {
    let server = OpenAiServer::builder()
        .fail_next(1, Reply::error(400, "scripted failure"))
        .responder(|request| {
            let last = request["messages"]
                .as_array()
                .and_then(|m| m.last())
                .cloned();
            match last.as_ref().and_then(|m| m["role"].as_str()) {
                Some("user") => Reply::tool_call(
                    &format!("s{}", tool_messages(request)),
                    "SendMessage",
                    r#"{"text":"noted"}"#,
                ),
                _ => Reply::text(""),
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (_, end) = turn(&host, "first").await;
    assert_eq!(end["status"], "failed", "{end}");
    let (_, end) = turn(&host, "second").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (_, end) = turn(&host, "third").await;
    assert_eq!(end["status"], "completed", "{end}");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    for r in &requests[1..] {
        assert_alternating(r);
        assert_paired(r);
    }
    // both messages are there, in order (each after its time line)
    let joined = requests[1].messages()[1]["content"].as_str().unwrap();
    assert_eq!(without_times(joined), "first\n\nsecond");
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: with `max_steps = 4`, a turn that read twice, ended without
/// a reply, was reminded and sent it at its 4th step was then refused its
/// closing step: the person got the reply and a `turn_failed` notice
/// advising a retry (which would answer again), and the turn failed. A
/// turn that delivered when it reaches the limit ends completed.
#[tokio::test]
async fn a_turn_that_delivered_ends_completed_at_the_step_limit() {
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call("a", "Read", r#"{"path":"a.txt"}"#))
        .reply(Reply::tool_call("b", "Read", r#"{"path":"b.txt"}"#))
        .reply(Reply::text(""))
        .reply(Reply::tool_call(
            "s",
            "SendMessage",
            r#"{"text":"here it is"}"#,
        ))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let fleet = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage", "Read"])
        .runtime(&format!("{RUNTIME}max_steps = 4\n"));
    std::fs::create_dir_all(fleet.path().join("data/workspace/alice")).unwrap();
    for f in ["a.txt", "b.txt"] {
        std::fs::write(fleet.path().join("data/workspace/alice").join(f), "text").unwrap();
    }
    let host = fleet.start().await;
    let (entries, end) = turn(&host, "read a and b, then tell me").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["deliveries"], 1, "{end}");
    assert_eq!(deliveries(&entries), ["here it is"]);
    let notices: Vec<&Value> = entries.iter().filter(|e| e["kind"] == "notice").collect();
    assert!(notices.is_empty(), "{notices:#?}");
    assert_eq!(server.request_count(), 4);
    // the turn's record says so too
    let turn = end["turn"].as_str().unwrap();
    let (status, record) = host
        .get(&format!("/v1/turns/{turn}"), crate::support::fleet::TOKEN)
        .await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["turn"]["status"], "completed", "{record}");
    assert!(record["turn"]["error"].is_null(), "{record}");
    host.shutdown().await;
    server.shutdown().await;
}

/// A turn that reaches the step limit without a reply fails naming the
/// limit's key, and says a retry meets it again (QA: "the turn took more
/// than 40 model steps" named neither).
#[tokio::test]
async fn a_turn_failed_at_the_step_limit_names_it() {
    let server = OpenAiServer::builder()
        .responder(|body| {
            let n = body["messages"].as_array().map_or(0, Vec::len);
            Reply::tool_call(
                &format!("c{n}"),
                "Read",
                format!(r#"{{"path":"f{n}.txt"}}"#),
            )
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage", "Read"])
        .runtime(&format!("{RUNTIME}max_steps = 3\n"))
        .start()
        .await;
    let (entries, end) = turn(&host, "read everything").await;
    assert_eq!(end["status"], "failed", "{end}");
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains("more than 3 model steps, the most runtime.max_steps allows")
            && text.contains("a retry runs under the same limit"),
        "{text}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
