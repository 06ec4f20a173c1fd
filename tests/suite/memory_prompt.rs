//! Memory in the prompt and fact extraction, as an OpenAI-compatible
//! server on loopback receives them: a remembered fact is in the system
//! message of the next context built, reaches a running context as an
//! update after the turn's input (the prefix stays byte-identical), leaves the prompt
//! once forgotten or, for a note, once expired (on a manual store clock);
//! extraction runs after a completed turn when `runtime.extract_memory` is
//! on, and not when it is off.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::memory_model::UPDATE;
use crate::support::memory_model::content;
use crate::support::memory_model::is_extraction;
use crate::support::memory_model::send_message;
use crate::support::memory_model::step_past_updates;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::shared_room::mixed_fleet;
use crate::support::shared_room::post_mixed_room;

/// A note's expiry on a manual store clock.
#[path = "memory_prompt_clock.rs"]
mod clock;

/// Fact extraction after turns.
#[path = "memory_prompt_extraction.rs"]
mod extraction;

fn system(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or("")
}

/// The memory update in a user message: alone, or joined to the turn's
/// input before it (requests alternate roles: user messages in a row go
/// as one, joined by a blank line).
fn update_in(m: &Value) -> Option<&str> {
    let text = content(m);
    if m["role"] != "user" {
        return None;
    }
    if text.starts_with(UPDATE) {
        return Some(text);
    }
    text.find(&format!("\n\n{UPDATE}")).map(|i| &text[i + 2..])
}

/// A bot's model: `remember: X` → Remember {text: X}, `note: X` →
/// Remember {text: X} as a note of the user's for an hour, `forget: X` →
/// Forget {matching: X}, anything else straight to SendMessage; after a
/// tool result, SendMessage (or, after SendMessage, stop). Extraction
/// requests go to `extractor`.
fn model(body: &Value, extractor: &dyn Fn(&Value) -> Reply) -> Reply {
    if is_extraction(body) {
        return extractor(body);
    }
    let (id, last) = match step_past_updates(body) {
        Ok(step) => step,
        Err(reply) => return *reply,
    };
    let send = |text: &str| send_message(&id, text);
    // the input, without a memory update joined to it
    let text = content(last)
        .split("\n\n[memory update]")
        .next()
        .unwrap_or("");
    if let Some(fact) = text.strip_prefix("remember: ") {
        Reply::tool_call(&id, "Remember", json!({ "text": fact }).to_string())
    } else if let Some(note) = text.strip_prefix("note: ") {
        let args =
            json!({ "text": note, "layer": "notes", "scope": "user", "expires_in_hours": 1 });
        Reply::tool_call(&id, "Remember", args.to_string())
    } else if let Some(what) = text.strip_prefix("forget: ") {
        Reply::tool_call(&id, "Forget", json!({ "matching": what }).to_string())
    } else if let Some(place) = text.strip_prefix("I moved to ") {
        send(&format!("Welcome to {place}"))
    } else {
        send("ok")
    }
}

fn no_extraction(body: &Value) -> Reply {
    panic!("unexpected extraction request: {body}")
}

async fn start(server: &OpenAiServer, extract: bool) -> TestHost {
    TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .runtime(&format!(
            "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = {extract}\n"
        ))
        .bot("a1", "main", &["SendMessage", "Remember", "Forget"])
        .bot("a2", "main", &["SendMessage", "Remember", "Forget"])
        .start()
        .await
}

/// Sends `text` to `bot`, waits for the turn, and answers the turn's
/// requests to the model (extraction requests left out).
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
        .filter(|b| !is_extraction(b) && system(b).contains(&role))
        .collect();
    assert!(!requests.is_empty(), "{bot} made no model call");
    requests
}

#[tokio::test]
async fn remembered_facts_reach_the_prompt_and_forgotten_ones_leave_it() {
    let server = OpenAiServer::builder()
        .responder(|b| model(b, &no_extraction))
        .start()
        .await;
    let host = start(&server, false).await;
    const TEA: &str = "Prefers tea over coffee";
    const BERLIN: &str = "Lives in Berlin";

    // a1 remembers a preference of alice's (user scope by default)
    let first = turn(&host, &server, "a1", &format!("remember: {TEA}")).await;
    assert!(!system(&first[0]).contains(TEA));
    let a1_system = system(&first[0]).to_owned();

    // a new context, here a2's first, has it in its system message
    let r = turn(&host, &server, "a2", "hello").await;
    assert!(system(&r[0]).contains(TEA), "{}", system(&r[0]));
    assert!(system(&r[0]).contains("(user:alice, set "));
    let a2_system = system(&r[0]).to_owned();

    // a1's running context keeps its prefix and gets the fact as an update
    let r = turn(&host, &server, "a1", "what do I drink?").await;
    assert_eq!(system(&r[0]), a1_system, "the prefix stays byte-identical");
    let last = r[0]["messages"].as_array().unwrap().last().unwrap();
    assert!(update_in(last).is_some_and(|u| u.contains(TEA)), "{last}");
    // ...which stays right after the turn's input in its later requests,
    // so the model's steps follow it and the request ends with their last
    // tool result, not with what reads as a new message
    assert!(r.len() >= 2, "{r:?}");
    for body in &r[1..] {
        let messages = body["messages"].as_array().unwrap();
        let at = messages
            .iter()
            .position(|m| update_in(m).is_some())
            .unwrap();
        assert!(
            content(&messages[at]).starts_with("what do I drink?\n\n[memory update]"),
            "{body}"
        );
        assert_eq!(messages.last().unwrap()["role"], "tool", "{body}");
    }

    // only an addition: a2's prefix stays too, the new fact comes as an update
    turn(&host, &server, "a1", &format!("remember: {BERLIN}")).await;
    let r = turn(&host, &server, "a2", "anything new?").await;
    assert_eq!(system(&r[0]), a2_system);
    let last = r[0]["messages"].as_array().unwrap().last().unwrap();
    assert!(
        update_in(last).is_some_and(|u| u.contains(BERLIN)),
        "{last}"
    );

    // forgotten by a1: a2's system message is rebuilt without it, at once
    turn(&host, &server, "a1", "forget: tea").await;
    let r = turn(&host, &server, "a2", "and now?").await;
    for body in &r {
        assert_ne!(system(body), a2_system, "the system message was refreshed");
        assert!(system(body).contains(BERLIN), "{}", system(body));
        assert!(
            !body.to_string().contains(TEA),
            "a forgotten fact is nowhere in a2's request: {body}"
        );
    }
    // ...and out of a1's memory in its later requests (its transcript still
    // holds what alice said: the archive is the record of what happened)
    let r = turn(&host, &server, "a1", "anything else?").await;
    for body in &r {
        assert!(!system(body).contains(TEA));
        let updates: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(update_in)
            .collect();
        assert_eq!(updates.len(), 1, "{body}");
        assert!(updates[0].contains(BERLIN) && !updates[0].contains(TEA));
    }
    host.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_room_shared_with_other_peoples_bots_does_not_see_the_owners_memory() {
    let server = OpenAiServer::builder()
        .responder(|b| model(b, &no_extraction))
        .start()
        .await;
    let tools = &["SendMessage", "Remember", "Forget"];
    let host = mixed_fleet(&server.base_url(), tools, tools).start().await;
    const TEA: &str = "Prefers tea over coffee";
    // a fact of alice's (user scope), in every private prompt of her bots
    turn(&host, &server, "a1", &format!("remember: {TEA}")).await;
    let r = turn(&host, &server, "a1", "hello").await;
    assert!(r[0].to_string().contains(TEA), "{}", r[0]);

    let (status, v) = post_mixed_room(&host).await;
    assert_eq!(status, 201, "{v}");
    let before = server.request_count();
    let (status, v) = host
        .post_raw(
            "/v1/groups/mixed/messages",
            Some(TOKEN),
            Some("k1"),
            json!({"text": "@a1 hello"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    host.wait_turn_end(v["session"].as_str().unwrap(), v["seq"].as_i64().unwrap())
        .await;
    let room: Vec<Value> = server.requests()[before..]
        .iter()
        .map(|r| r.body.clone())
        .filter(|b| system(b).contains("Test bot a1."))
        .collect();
    assert!(!room.is_empty(), "a1 spoke in the room");
    for body in &room {
        assert!(
            !body.to_string().contains(TEA),
            "the owner's profile is not in a shared room's request: {body}"
        );
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// A room of alice's own bots that later takes in bob's bot: a1's state
/// block was frozen with alice's memory while the room was hers alone, and
/// it left the prompt at the first turn after the room became shared.
/// (Before, the frozen block stayed until the room session compacted: bob's
/// messages reached a prompt holding alice's profile.)
#[tokio::test]
async fn a_room_that_becomes_shared_drops_the_owners_memory_from_the_prompt() {
    let server = OpenAiServer::builder()
        .responder(|b| model(b, &no_extraction))
        .start()
        .await;
    let tools = &["SendMessage", "Remember", "Forget"];
    let host = mixed_fleet(&server.base_url(), tools, tools)
        .bot("a2", "main", tools)
        .start()
        .await;
    const TEA: &str = "Prefers tea over coffee";
    turn(&host, &server, "a1", &format!("remember: {TEA}")).await;

    let room_turn = |text: &'static str, key: &'static str| {
        let host = &host;
        let server = &server;
        async move {
            let before = server.request_count();
            let (status, v) = host
                .post_raw(
                    "/v1/groups/own/messages",
                    Some(TOKEN),
                    Some(key),
                    json!({ "text": text }).to_string(),
                )
                .await;
            assert_eq!(status, 202, "{v}");
            host.wait_turn_end(v["session"].as_str().unwrap(), v["seq"].as_i64().unwrap())
                .await;
            let requests: Vec<Value> = server.requests()[before..]
                .iter()
                .map(|r| r.body.clone())
                .filter(|b| system(b).contains("Test bot a1."))
                .collect();
            assert!(!requests.is_empty(), "a1 spoke in the room");
            requests
        }
    };
    let (status, v) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "own", "members": ["a1", "a2"]}).to_string(),
        )
        .await;
    assert_eq!((status, v["shared"].clone()), (201, json!(false)), "{v}");
    // alice's own room: a1's prompt shows her memory
    let private = room_turn("@a1 hello", "k1").await;
    assert!(system(&private[0]).contains(TEA), "{}", private[0]);

    let (status, v) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/own/members",
            TOKEN,
            Some(json!({"members": ["a1", "a2", "b1"]})),
        )
        .await;
    assert_eq!((status, v["shared"].clone()), (200, json!(true)), "{v}");
    for body in room_turn("@a1 what do you know about alice?", "k2").await {
        assert!(
            !system(&body).contains(TEA),
            "the owner's profile left the prompt once the room was shared: {body}"
        );
    }
    host.shutdown().await;
    server.shutdown().await;
}
