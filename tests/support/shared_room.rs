//! A room that alice shares with bob's bot, as the suites on memory in
//! shared rooms set it up.

use serde_json::Value;
use serde_json::json;

use super::memory_model::content;
use super::memory_model::send_message;
use super::memory_model::without_updates;
use super::openai_server::OpenAiServer;
use super::openai_server::Reply;
use super::process::wait_found;

use super::fleet::TOKEN;
use super::fleet::TestFleet;
use super::fleet::TestHost;

/// A fleet of alice's `a1` and bob's shareable `b1` (with these tools)
/// on the OpenAI-compatible server at `base_url`, without fact
/// extraction.
pub fn mixed_fleet(base_url: &str, a1_tools: &[&str], b1_tools: &[&str]) -> TestFleet {
    TestFleet::new()
        .openai("main", base_url, "max_retries = 0")
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n")
        .bot("a1", "main", a1_tools)
        .bot_of("b1", "main", b1_tools, "bob")
        .bot_lines("shareable = true")
}

/// Alice asks to open room `mixed` of `a1` and `b1`; returns the HTTP
/// status and the answer.
pub async fn post_mixed_room(host: &TestHost) -> (u16, Value) {
    host.post_raw(
        "/v1/groups",
        Some(TOKEN),
        None,
        json!({"name": "mixed", "members": ["a1", "b1"]}).to_string(),
    )
    .await
}

/// Alice opens room `mixed` of `a1` and `b1`; it is shared (another
/// user's bot is in it).
pub async fn open_mixed_room(host: &TestHost) {
    let (status, v) = post_mixed_room(host).await;
    assert_eq!((status, v["shared"].clone()), (201, json!(true)), "{v}");
}

/// A member's model of the shared-room suites: `look up the cabin` → SearchTranscript "cabin",
/// then a reply that does not quote what it found; anything else →
/// SendMessage "hello"; after SendMessage, stop.
pub fn cabin_model(body: &Value) -> Reply {
    let messages = without_updates(body);
    let id = format!("call_{}", messages.len());
    let Some(last) = messages.last() else {
        return Reply::text("");
    };
    if last["role"] == "tool" {
        let asked = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "assistant")
            .map(|m| m["tool_calls"][0]["function"]["name"].clone())
            .unwrap_or(Value::Null);
        return if asked == "SendMessage" {
            Reply::text("")
        } else {
            send_message(&id, "found it, not posting it here")
        };
    }
    if content(last).contains("look up the cabin") {
        return Reply::tool_call(
            &id,
            "SearchTranscript",
            json!({ "query": "cabin" }).to_string(),
        );
    }
    send_message(&id, "hello")
}

/// The system prompt of a request body.
pub fn system(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or("")
}

/// The request bodies from index `from` on of bot `bot`'s turns.
pub fn requests_of(server: &OpenAiServer, from: usize, bot: &str) -> Vec<Value> {
    let role = format!("Test bot {bot}.");
    server.requests()[from..]
        .iter()
        .map(|r| r.body.clone())
        .filter(|b| system(b).contains(&role))
        .collect()
}

/// Alice's room `own` of her a1 and a2 (private).
pub async fn own_room(host: &TestHost) {
    let (status, v) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "own", "members": ["a1", "a2"]}).to_string(),
        )
        .await;
    assert_eq!((status, v["shared"].clone()), (201, json!(false)), "{v}");
}

/// Bob's b1 joins `own`: the room is shared from the change's notice on.
/// The change's answer.
pub async fn share_with_bob(host: &TestHost) -> Value {
    let (status, v) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/own/members",
            TOKEN,
            Some(json!({"members": ["a1", "a2", "b1"]})),
        )
        .await;
    assert_eq!((status, v["shared"].clone()), (200, json!(true)), "{v}");
    v
}

/// Alice tells a1 `cabin` in her DM, opens `own` (a1, a2), and asks a1
/// there to look up the cabin with `early` in her message: a1's private
/// turn (on [`cabin_model`]) searches her DM and sees `cabin`.
pub async fn cabin_searched_in_own_room(
    host: &TestHost,
    server: &OpenAiServer,
    cabin: &str,
    early: &str,
) {
    host.complete_turn("a1", &format!("the cabin address is {cabin}"))
        .await;
    wait_found(&host.client(), cabin, 1).await;
    own_room(host).await;
    let before = server.request_count();
    host.discuss(TOKEN, "own", &format!("@a1 look up the cabin {early}"))
        .await;
    // the private turn did see the DM: what must not reach the new readers
    let private = requests_of(server, before, "a1");
    assert!(
        private.iter().any(|b| b.to_string().contains(cabin)),
        "a1's private turn searched alice's DM: {private:?}"
    );
}
