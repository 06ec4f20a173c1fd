//! A profile full by its characters (not its count of facts): Remember's
//! answer must say how to make room in a way that works. The bot (a
//! model on a loopback OpenAI-compatible server) follows the answer's
//! advice literally, once, and tries again.
//!
//! Before, the answer was "replace one of these ids …, or Forget one
//! first" with a 15-character fact first: replacing it with a
//! 100-character fact was refused again (and forgetting it would not have
//! made room either), so the fact was never remembered. And when the
//! five facts offered were too short together, forgetting them all still
//! left no room.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::memory_model::content;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// The short fact, least important: the store suggests it first.
const SHORT: &str = "Name is Yolanda";

/// The fact that does not fit: 100 characters.
fn long_fact() -> String {
    format!("Keeps the spare keys {}", "k".repeat(79))
}

/// A fact of 497 characters.
fn filler(i: usize) -> String {
    format!("{i}{}", "x".repeat(496))
}

/// A trivia fact of 10 characters.
fn trivia(i: usize) -> String {
    format!("Trivia #{i:02}")
}

/// The tool calls of the assistant message before the newest tool
/// results, and the results since the newest user message.
fn last_calls(messages: &[Value]) -> (Vec<&Value>, Vec<&Value>) {
    let since_user: Vec<&Value> = messages
        .iter()
        .rev()
        .take_while(|m| m["role"] != "user")
        .collect();
    let calls = since_user
        .iter()
        .find(|m| m["role"] == "assistant")
        .and_then(|m| m["tool_calls"].as_array())
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let results = since_user
        .iter()
        .filter(|m| m["role"] == "tool")
        .copied()
        .collect();
    (calls, results)
}

/// Remember calls made since the newest user message.
fn remembers(messages: &[Value]) -> usize {
    messages
        .iter()
        .rev()
        .take_while(|m| m["role"] != "user")
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .filter(|c| c["function"]["name"] == "Remember")
        .count()
}

/// The calls that follow `hint` (Remember's advice after "Next step:").
fn follow(hint: &str, id: &str) -> Reply {
    let long = long_fact();
    // the advice before: replace the first suggested fact
    if let Some((_, list)) = hint.split_once("Forget one first: ") {
        let first = list.split(' ').next().unwrap();
        let args = json!({ "replaces": first, "text": long });
        return Reply::tool_call(id, "Remember", args.to_string());
    }
    // free at least N characters: forget suggested facts until they add up
    let rest = hint
        .split_once("free at least ")
        .unwrap_or_else(|| panic!("no advice to follow: {hint}"))
        .1;
    let need: usize = rest.split(' ').next().unwrap().parse().unwrap();
    let list = rest.split_once("changed: ").unwrap().1;
    let mut freed = 0;
    let mut reply: Option<Reply> = None;
    for (i, fact) in list.split("; ").enumerate() {
        if freed >= need {
            break;
        }
        let fact_id = fact.split(' ').next().unwrap();
        let len = fact.rsplit_once('(').unwrap().1;
        freed += len.split(' ').next().unwrap().parse::<usize>().unwrap();
        let args = json!({ "id": fact_id }).to_string();
        let call_id = format!("{id}_{i}");
        reply = Some(match reply {
            None => Reply::tool_call(&call_id, "Forget", args),
            Some(r) => r.and_tool_call(&call_id, "Forget", args),
        });
    }
    reply.expect("facts to forget")
}

/// "fill": Remember the short fact (importance 1) and eight long ones;
/// "fill trivia": six trivia facts (importance 1) and long ones.
/// "keys": Remember the long fact; when refused, follow the advice once
/// and Remember it again (a replace is that second Remember); then
/// SendMessage "remembered" or "still full".
fn model(body: &Value) -> Reply {
    let messages = body["messages"].as_array().unwrap();
    let id = format!("call_{}", messages.len());
    let last = messages.last().unwrap();
    if last["role"] == "user" {
        let agent = |text: &str, importance: u8| {
            json!({ "text": text, "scope": "agent", "importance": importance }).to_string()
        };
        if content(last).starts_with("fill trivia") {
            // six trivia facts of 10 characters, then 3,935 characters
            let mut reply = Reply::tool_call(&format!("{id}_t"), "Remember", agent(&trivia(0), 1));
            for i in 1..6 {
                let call = format!("{id}_t{i}");
                reply = reply.and_tool_call(&call, "Remember", agent(&trivia(i), 1));
            }
            for i in 0..7 {
                reply = reply.and_tool_call(&format!("{id}_{i}"), "Remember", agent(&filler(i), 3));
            }
            let rest = format!("7{}", "x".repeat(455));
            return reply.and_tool_call(&format!("{id}_7"), "Remember", agent(&rest, 3));
        }
        if content(last).starts_with("fill") {
            let mut reply = Reply::tool_call(&format!("{id}_s"), "Remember", agent(SHORT, 1));
            for i in 0..8 {
                reply = reply.and_tool_call(&format!("{id}_{i}"), "Remember", agent(&filler(i), 3));
            }
            return reply;
        }
        return Reply::tool_call(&id, "Remember", agent(&long_fact(), 3));
    }
    let (calls, results) = last_calls(messages);
    let name = calls.first().map(|c| c["function"]["name"].clone());
    let answer =
        |text: &str| Reply::tool_call(&id, "SendMessage", json!({ "text": text }).to_string());
    match name.as_ref().and_then(Value::as_str) {
        Some("SendMessage") | None => Reply::text(""),
        Some("Forget") => Reply::tool_call(
            &id,
            "Remember",
            json!({ "text": long_fact(), "scope": "agent" }).to_string(),
        ),
        Some(_) => {
            let result = content(results[0]);
            if !result.starts_with("error") {
                answer("remembered")
            } else if remembers(messages) >= 2 {
                answer(&format!("still full: {result}"))
            } else {
                let hint = result.split_once("Next step: ").map_or(result, |(_, h)| h);
                follow(hint, &id)
            }
        }
    }
}

fn texts(memory: &Value) -> Vec<String> {
    memory["scopes"][0]["profile"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_owned())
        .collect()
}

/// Fills a1's profile with what `fill` asks for (`chars` characters in
/// all), asks it to remember the long fact, and checks that following
/// the advice once made room for it.
async fn follows_the_advice(fill: &str, chars: usize) {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\n")
        .bot("a1", "main", &["SendMessage", "Remember", "Forget"])
        .start()
        .await;

    host.complete_turn("a1", fill).await;
    let (_, memory) = host.get("/v1/bots/a1/memory", TOKEN).await;
    assert_eq!(memory["scopes"][0]["profile"]["chars"], chars, "{memory}");

    let session = host
        .complete_turn("a1", "keys: remember where I keep them")
        .await;
    let said = deliveries(&host.entries(&session).await);
    assert_eq!(
        said.last().map(String::as_str),
        Some("remembered"),
        "the advice did not make room: {said:#?}"
    );
    let (_, memory) = host.get("/v1/bots/a1/memory", TOKEN).await;
    assert!(texts(&memory).contains(&long_fact()), "{memory}");

    host.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_profile_full_by_its_characters_says_how_much_to_free() {
    follows_the_advice("fill my profile", 15 + 8 * 497).await;
}

/// The five least important facts are too short to free enough together:
/// the suggestion goes on until its facts add up to what is missing.
#[tokio::test]
async fn the_suggested_facts_add_up_to_what_is_missing() {
    follows_the_advice("fill trivia", 6 * 10 + 7 * 497 + 456).await;
}
