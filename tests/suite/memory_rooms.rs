//! Memory in a room shared with other people's bots, as a loopback
//! OpenAI-compatible server receives the room turns: a member's prompt
//! shows only what it remembered in that room, never what its owner told
//! it in private (its agent scope holds both), while its DM prompt shows
//! all of it; and Remember there cannot replace, and so quote back, a
//! private item. (Before, the room turn's Memory block listed the bot's
//! whole agent scope: what bob told `b1` in his DM, in alice's room.)

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::memory_model::after;
use crate::support::memory_model::content;
use crate::support::memory_model::send_message;
use crate::support::memory_model::step_past_updates;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::shared_room::mixed_fleet;
use crate::support::shared_room::open_mixed_room;

/// Told to `b1` by bob in his DM (agent scope, log layer).
const DOOR: &str = "The door code of bob's flat is 4711";
/// Told to `b1` by bob in his DM (agent scope, profile layer).
const SISTER: &str = "Bob's sister is called Evelyn";
/// Told to `b1` in alice's room.
const STANDUP: &str = "The standup moved to nine";

/// `(id, text)` of `replace m-… <<text>>` in `text`.
fn replacement(text: &str) -> Option<(&str, &str)> {
    let rest = &text[text.find("replace m-")? + "replace ".len()..];
    let id = rest.get(..14)?;
    Some((id, after(rest, &format!("{id} "))?))
}

/// The bots' model: `remember log <<X>>` → Remember X as a log entry,
/// `remember agent <<X>>` → as a profile fact of the bot's own, `replace
/// m-… <<X>>` → Remember X replacing that id; anything else →
/// SendMessage `ok`. After a tool result, SendMessage (after SendMessage,
/// stop).
fn model(body: &Value) -> Reply {
    let (id, last) = match step_past_updates(body) {
        Ok(step) => step,
        Err(reply) => return *reply,
    };
    let send = |text: &str| send_message(&id, text);
    let text = content(last);
    let remember = |args: Value| Reply::tool_call(&id, "Remember", args.to_string());
    if let Some(fact) = after(text, "remember log ") {
        remember(json!({ "text": fact, "layer": "log" }))
    } else if let Some(fact) = after(text, "remember agent ") {
        remember(json!({ "text": fact, "scope": "agent" }))
    } else if let Some(fact) = after(text, "remember user ") {
        remember(json!({ "text": fact, "scope": "user" }))
    } else if let Some((id, fact)) = replacement(text) {
        remember(json!({ "text": fact, "replaces": id }))
    } else {
        send("ok")
    }
}

/// The requests of `b1`'s turns since request `before`.
fn b1_requests(server: &OpenAiServer, before: usize) -> Vec<Value> {
    let requests: Vec<Value> = server.requests()[before..]
        .iter()
        .map(|r| r.body.clone())
        .filter(|b| content(&b["messages"][0]).contains("Test bot b1."))
        .collect();
    assert!(!requests.is_empty(), "b1 made no model call");
    requests
}

/// Bob tells `b1` `text` in his DM and waits, on bob's change signals,
/// for the turn; returns `b1`'s requests.
async fn bob_says(host: &TestHost, server: &OpenAiServer, text: &str) -> Vec<Value> {
    let before = server.request_count();
    let sent = host
        .post_text("/v1/bots/b1/messages", BOB_TOKEN, text)
        .await;
    let (session, seq) = (sent["session"].as_str().unwrap(), &sent["seq"]);
    let bob = botfleet::client::Client::new(&host.url, BOB_TOKEN).unwrap();
    let mut signals = bob.events().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let entries = bob.entries_after(session, 0).await.unwrap_or_default();
        let end = entries.iter().find(|e| {
            e["kind"] == "turn_end" && e["inputs"].as_array().is_some_and(|a| a.contains(seq))
        });
        if let Some(end) = end {
            assert_eq!(end["status"], "completed", "{end}");
            return b1_requests(server, before);
        }
        assert!(tokio::time::Instant::now() < deadline, "{entries:#?}");
        // every new entry of bob's DM is signalled to bob
        let _ = tokio::time::timeout(Duration::from_secs(2), signals.next()).await;
    }
}

/// Alice says `text` in room `mixed` and waits for the turn; returns
/// `b1`'s requests.
async fn alice_says(host: &TestHost, server: &OpenAiServer, text: &str) -> Vec<Value> {
    let before = server.request_count();
    let v = host
        .post_text("/v1/groups/mixed/messages", TOKEN, text)
        .await;
    assert_eq!(v["addressed"], json!(["b1"]), "{v}");
    host.wait_turn_end(v["session"].as_str().unwrap(), v["seq"].as_i64().unwrap())
        .await;
    b1_requests(server, before)
}

/// The memory lines (`- m-… (scope…) "text"`) of a request, from its
/// Memory block and any memory update.
fn memory_lines(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| content(m).lines())
        .filter(|l| l.starts_with("- m-"))
        .map(str::to_owned)
        .collect()
}

/// The id of the memory item with `text` in a `GET /v1/bots/{bot}/memory`
/// answer, whatever its scope and layer.
fn memory_id(memory: &Value, text: &str) -> String {
    memory["scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s.as_object().into_iter().flat_map(|o| o.values()))
        .flat_map(|layer| layer["items"].as_array().into_iter().flatten())
        .find(|i| i["text"] == text)
        .and_then(|i| i["id"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no {text:?} in {memory:#}"))
}

/// The content of the last Remember result the model was shown in
/// `requests`.
fn tool_result(requests: &[Value]) -> String {
    let last = requests.last().expect("a request");
    let messages = last["messages"].as_array().unwrap();
    let remember_ids: Vec<&Value> = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .filter(|c| c["function"]["name"] == "Remember")
        .map(|c| &c["id"])
        .collect();
    messages
        .iter()
        .rfind(|m| m["role"] == "tool" && remember_ids.contains(&&m["tool_call_id"]))
        .map(|m| content(m).to_owned())
        .unwrap_or_else(|| panic!("no Remember result in {last:#}"))
}

fn assert_lacks(requests: &[Value], private: &[&str]) {
    for body in requests {
        for text in private {
            assert!(
                !body.to_string().contains(text),
                "{text:?} in a shared room's request: {body}"
            );
        }
    }
}

#[tokio::test]
async fn a_shared_room_shows_only_what_the_bot_remembered_there() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let tools = &["SendMessage", "Remember"];
    let host = mixed_fleet(&server.base_url(), tools, tools).start().await;
    // bob tells his bot two private things; both are b1's own memory
    bob_says(&host, &server, &format!("remember log <<{DOOR}>>")).await;
    bob_says(&host, &server, &format!("remember agent <<{SISTER}>>")).await;
    bob_says(&host, &server, "remember user <<Bob drinks tea>>").await;
    let (status, memory) = host.get("/v1/bots/b1/memory", BOB_TOKEN).await;
    assert_eq!(status, 200, "{memory}");
    let door = memory["scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["log"]["items"].as_array().into_iter().flatten())
        .find(|i| i["text"] == DOOR)
        .and_then(|i| i["id"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no door code in {memory:#}"));
    let tea = memory_id(&memory, "Bob drinks tea");

    open_mixed_room(&host).await;
    let private = [DOOR, SISTER, "4711"];
    // b1 remembers something in the room: its own memory there
    let r = alice_says(&host, &server, &format!("@b1 remember log <<{STANDUP}>>")).await;
    assert_lacks(&r, &private);
    // the room's next turn shows it, and still nothing private
    let r = alice_says(&host, &server, "@b1 what time is the standup?").await;
    assert_lacks(&r, &private);
    let shown: Vec<String> = r.iter().flat_map(memory_lines).collect();
    assert!(
        shown.iter().any(|l| l.contains(STANDUP)),
        "the room's own memory is shown: {shown:#?}"
    );
    // Remember in the room cannot replace a private item (and so quote
    // it back as "was …"), and answers as for an id that does not exist:
    // its own private item, its owner's (user scope: it answered naming
    // `user:bob`), one forgotten
    let answer = async |id: &str| {
        let r = alice_says(
            &host,
            &server,
            &format!("@b1 replace {id} <<The door is open>>"),
        )
        .await;
        assert_lacks(&r, &private);
        let said = tool_result(&r).replace(id, "ID");
        assert!(
            said.contains("no memory item ID that you can reach"),
            "{said}"
        );
        said
    };
    let unknown = answer("m-aaaaaaaaaaaa").await;
    assert_eq!(answer(&door).await, unknown);
    assert_eq!(answer(&tea).await, unknown);

    // bob's DM shows all of b1's own memory, the room's included
    let r = bob_says(&host, &server, "hello").await;
    let shown: Vec<String> = r.iter().flat_map(memory_lines).collect();
    for text in [DOOR, SISTER, STANDUP] {
        assert!(
            shown.iter().any(|l| l.contains(text)),
            "{text:?}: {shown:#?}"
        );
    }
    host.shutdown().await;
    server.shutdown().await;
}
