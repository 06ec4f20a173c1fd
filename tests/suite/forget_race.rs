//! A person's Forget wins over a slower fact extraction of an earlier
//! turn: alice tells a1 her dog's name, the turn's extraction (an
//! OpenAI-compatible server on loopback) is held before it answers, alice
//! asks a1 to forget it (Forget {matching}, which finds nothing yet), then
//! the extraction is released with the fact: it must not reach memory.
//!
//! Before, the Forget answered "nothing you remember contains" and the
//! extraction added the fact afterwards, seen by every bot of alice's.

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::memory_model::bot_step;
use crate::support::memory_model::content;
use crate::support::memory_model::is_extraction;
use crate::support::memory_model::send_message;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// What alice says first.
const SAID: &str = "my dog is called Zed";
/// What the held extraction proposes.
const FACT: &str = "Alice's dog is called Zed";
/// Prompt tokens the held extraction reports: its usage in the bot's
/// counts says its outcome was applied (usage and outcome end it together).
const HELD_TOKENS: u64 = 5_000_000;

/// The bot: `forget: X` → Forget {matching: X}, anything else →
/// SendMessage; after a tool result, SendMessage quoting it (after
/// SendMessage, stop). The extraction of the turn where alice said
/// [`SAID`] proposes [`FACT`] once `gate` opens; other extractions
/// propose nothing.
fn model(body: &Value, gate: &watch::Receiver<bool>) -> Reply {
    if is_extraction(body) {
        if body.to_string().contains(SAID) {
            let added = json!({ "add": [{ "text": FACT }] });
            return Reply::text(added.to_string())
                .usage(HELD_TOKENS, 1)
                .hold_until(gate.clone());
        }
        return Reply::text("{}");
    }
    let messages: Vec<&Value> = body["messages"].as_array().unwrap().iter().collect();
    let (id, last) = match bot_step(&messages) {
        Ok(step) => step,
        Err(reply) => return *reply,
    };
    let send = |text: &str| send_message(&id, text);
    match content(last).strip_prefix("forget: ") {
        Some(what) => Reply::tool_call(&id, "Forget", json!({ "matching": what }).to_string()),
        None => send("noted"),
    }
}

/// Every remembered text in a1's reach, as the memory API shows it.
fn texts(memory: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for scope in memory["scopes"].as_array().into_iter().flatten() {
        for layer in ["profile", "log", "notes"] {
            for item in scope[layer]["items"].as_array().into_iter().flatten() {
                out.push(item["text"].as_str().unwrap_or("").to_owned());
            }
        }
    }
    out
}

#[tokio::test]
async fn a_forget_wins_over_a_slower_extraction_of_an_earlier_turn() {
    let (release, gate) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |b| model(b, &gate))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = true\n")
        .bot("a1", "main", &["SendMessage", "Forget"])
        .start()
        .await;

    // 1. the fact is said; the turn ends, its extraction is asked and held
    host.complete_turn("a1", SAID).await;
    loop {
        let asked = server
            .requests()
            .iter()
            .any(|r| is_extraction(&r.body) && r.body.to_string().contains(SAID));
        if asked {
            break;
        }
        server.wait_for_requests(server.request_count() + 1).await;
    }

    // 2. alice asks to forget it: nothing is remembered yet, and the
    // answer says the running extraction will not keep it
    let before = server.request_count();
    host.complete_turn("a1", "forget: Zed").await;
    let answer = server.requests()[before..]
        .iter()
        .filter(|r| !is_extraction(&r.body))
        .find_map(|r| {
            let last = r.messages().last()?;
            (last["role"] == "tool").then(|| content(last).to_owned())
        })
        .expect("the Forget's answer reached the model");
    assert!(
        !answer.contains("nothing you remember contains"),
        "the Forget answered as if final: {answer}"
    );
    assert!(answer.contains("will be remembered"), "{answer}");

    // 3. the earlier turn's extraction lands with the fact
    release.send(true).unwrap();
    host.wait_get("/v1/bots", |list| {
        let a1 = list["bots"].as_array()?.iter().find(|b| b["id"] == "a1")?;
        let prompt = a1["usage"]["total"]["prompt_tokens"].as_u64()?;
        (prompt >= HELD_TOKENS).then(|| a1.clone())
    })
    .await;
    let (status, memory) = host.get("/v1/bots/a1/memory", TOKEN).await;
    assert_eq!(status, 200, "{memory}");
    let remembered = texts(&memory);
    assert!(
        !remembered.iter().any(|t| t.contains("Zed")),
        "a forgotten fact came back: {remembered:?}"
    );

    host.shutdown().await;
    server.shutdown().await;
}
