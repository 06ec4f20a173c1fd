//! The memory block under a small `compact_at_tokens`, with Chinese
//! facts (about a token a character), as an OpenAI-compatible server on
//! loopback receives it: the items that fit are shown, profile facts
//! first, and once some do not fit the block, and the update inside an
//! epoch, say how many were left out.

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::memory_model::UPDATE;
use crate::support::memory_model::content;
use crate::support::memory_model::send_message;
use crate::support::memory_model::step_past_updates;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// How the left-out note (`prompts/memory_left_out.md`) reads.
const LEFT_OUT: &str = "more remembered items are not shown here";

fn system(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or("")
}

/// A bot's model: `REMEMBER {json}` → Remember with those arguments,
/// anything else straight to SendMessage; after a tool result,
/// SendMessage (or, after SendMessage, stop).
fn model(body: &Value) -> Reply {
    let (id, last) = match step_past_updates(body) {
        Ok(step) => step,
        Err(reply) => return *reply,
    };
    let text = content(last)
        .split("\n\n[memory update]")
        .next()
        .unwrap_or("");
    match text.strip_prefix("REMEMBER ") {
        Some(args) => Reply::tool_call(&id, "Remember", args.to_owned()),
        None => send_message(&id, "好的"),
    }
}

/// Sends `text` to `bot`, waits for the turn, and answers the turn's
/// requests to the model.
async fn turn(host: &TestHost, server: &OpenAiServer, bot: &str, text: &str) -> Vec<Value> {
    let before = server.request_count();
    let (status, sent) = host.send(bot, text, None).await;
    assert_eq!(status, 202, "{sent}");
    let end = host
        .wait_turn_end(
            sent["session"].as_str().unwrap(),
            sent["seq"].as_i64().unwrap(),
        )
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    let role = format!("Test bot {bot}.");
    let requests: Vec<Value> = server.requests()[before..]
        .iter()
        .map(|r| r.body.clone())
        .filter(|b| system(b).contains(&role))
        .collect();
    assert!(!requests.is_empty(), "{bot} made no model call");
    requests
}

/// A profile fact of 36 Chinese characters.
fn fact(i: usize) -> String {
    format!("第{i}条：小明每周去健身房锻炼身体，喜欢跑步和游泳，周末和朋友爬山。")
}

async fn remember(host: &TestHost, server: &OpenAiServer, text: &str, importance: u8) {
    let args = serde_json::json!({ "text": text, "layer": "profile", "importance": importance });
    turn(host, server, "a", &format!("REMEMBER {args}")).await;
}

/// Regression (round 20, H3): with `compact_at_tokens` under about 2,000
/// the memory block's headings and left-out note (about 240 tokens) were
/// charged to its 256-token floor, so once the items did not all fit,
/// none did: a bot's prompt showed "## Profile (none)" and that 3 items
/// were left out, for 3 short Chinese facts; and an update inside an
/// epoch forwarded only item lines, so the turn after a new fact got no
/// update at all. Now the items have the share to themselves, profile
/// facts first, and the update carries the left-out note.
#[tokio::test]
async fn a_small_budget_still_shows_chinese_facts_and_says_what_it_left_out() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = TestFleet::new()
        .openai("big", &server.base_url(), "max_retries = 0")
        .openai(
            "small",
            &server.base_url(),
            // an eighth is 250: the block's floor of 256 tokens
            "max_retries = 0\ncompact_at_tokens = 2000",
        )
        .bot("a", "big", &["SendMessage", "Remember"])
        .bot("c", "small", &["SendMessage"])
        .start()
        .await;

    // a remembers three facts about alice (user scope), which c reads
    for i in 1..=3 {
        remember(&host, &server, &fact(i), 3).await;
    }
    let first = turn(&host, &server, "c", "你好").await;
    let c_system = system(&first[0]).to_owned();
    for i in 1..=3 {
        assert!(c_system.contains(&fact(i)), "fact {i} missing: {c_system}");
    }
    assert!(!c_system.contains(LEFT_OUT), "{c_system}");

    // four more, the first of them important: they no longer all fit
    remember(&host, &server, &fact(4), 5).await;
    for i in 5..=7 {
        remember(&host, &server, &fact(i), 3).await;
    }
    let r = turn(&host, &server, "c", "还有吗？").await;
    assert_eq!(system(&r[0]), c_system, "the prefix stays byte-identical");
    let last = r[0]["messages"].as_array().unwrap().last().unwrap();
    let text = content(last);
    let update = &text[text
        .find(UPDATE)
        .unwrap_or_else(|| panic!("no memory update: {last}"))..];
    assert!(
        update.contains(&fact(4)),
        "the important fact goes in first: {update}"
    );
    assert!(update.contains(LEFT_OUT), "{update}");
    assert!(!update.contains(&fact(1)), "sent twice: {update}");
    host.shutdown().await;
}
