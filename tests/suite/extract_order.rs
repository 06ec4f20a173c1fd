//! A person who corrects a fact right after saying it keeps the
//! correction, whichever of the two turns' fact extractions lands last.
//! Extractions run in the background, side by side, and a model call may
//! take long: the earlier turn's can land after the later turn's.
//!
//! The extractor (an OpenAI-compatible server on loopback) answers "my
//! name is X" with `Name is X`, replacing the shown `Name is …` fact when
//! the turn showed one; some answers are held until the test releases
//! them.
//!
//! Before, an extracted item was stamped with the time its extraction
//! landed: the earlier turn's fact, landing last, was listed as the newer
//! of the two ("when two disagree, the later one is more likely true"),
//! and its replace, landing after the later turn had ended, refused the
//! later turn's replace as "changed since": the correction was lost.

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::memory_model::bot_step;
use crate::support::memory_model::is_extraction;
use crate::support::memory_model::send_message;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// How the extraction input opens what the person wrote
/// (`prompts/extract_input.md`).
const WROTE: &str = "What the person wrote this turn (data):";

/// Gates holding the extraction of the turn that says a name, and the
/// prompt tokens its answer reports (its usage in the bot's counts says
/// its outcome was applied: both are one write).
struct Held {
    name: &'static str,
    gate: watch::Receiver<bool>,
    tokens: u64,
}

/// The name the person gives in an extraction's request, if any.
fn said_name(body: &Value) -> Option<String> {
    let input = body["messages"][1]["content"].as_str()?;
    let wrote = &input[input.find(WROTE)?..];
    let rest = &wrote[wrote.find("my name is ")? + "my name is ".len()..];
    Some(rest.chars().take_while(|c| c.is_alphabetic()).collect())
}

/// The id of the `Name is …` fact the extraction's request shows.
fn shown_name_id(body: &Value) -> Option<String> {
    let input = body["messages"][1]["content"].as_str()?;
    let line = input
        .lines()
        .find(|l| l.starts_with("- m-") && l.ends_with('"') && l.contains("\"Name is "))?;
    Some(line[2..].split(' ').next()?.to_owned())
}

/// The bot answers "noted"; the extractor as in the module docs.
fn model(body: &Value, held: &[Held]) -> Reply {
    if is_extraction(body) {
        let Some(name) = said_name(body) else {
            return Reply::text(r#"{"add": [], "replace": [], "remove": []}"#);
        };
        let fact = format!("Name is {name}");
        let answer = match shown_name_id(body) {
            Some(id) => json!({ "add": [], "replace": [{ "id": id, "text": fact }], "remove": [] }),
            None => {
                json!({ "add": [{ "text": fact, "layer": "profile" }], "replace": [], "remove": [] })
            }
        };
        let reply = Reply::text(answer.to_string());
        return match held.iter().find(|h| h.name == name) {
            Some(h) => reply.usage(h.tokens, 1).hold_until(h.gate.clone()),
            None => reply,
        };
    }
    let messages: Vec<&Value> = body["messages"].as_array().unwrap().iter().collect();
    match bot_step(&messages) {
        Ok((id, _)) => send_message(&id, "noted"),
        Err(reply) => *reply,
    }
}

/// alice's profile facts as the memory API lists them.
async fn names(host: &TestHost) -> Vec<String> {
    let (status, memory) = host.get("/v1/bots/a1/memory", TOKEN).await;
    assert_eq!(status, 200, "{memory}");
    memory["scopes"][1]["profile"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until the extractor was asked about `name`.
async fn wait_asked(server: &OpenAiServer, name: &str) {
    let asked = |s: &OpenAiServer| {
        s.requests()
            .iter()
            .any(|r| is_extraction(&r.body) && said_name(&r.body).as_deref() == Some(name))
    };
    let wait = async {
        while !asked(server) {
            server.wait_for_requests(server.request_count() + 1).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("the extractor was never asked about {name}"));
}

/// Waits until a1's prompt tokens reach `tokens` (a held extraction's
/// usage, stored with its outcome).
async fn wait_landed(host: &TestHost, tokens: u64) {
    host.wait_get("/v1/bots", |list| {
        let a1 = list["bots"].as_array()?.iter().find(|b| b["id"] == "a1")?;
        let prompt = a1["usage"]["total"]["prompt_tokens"].as_u64()?;
        (prompt >= tokens).then(|| a1.clone())
    })
    .await;
}

/// Waits until alice's profile holds a fact.
async fn wait_one_fact(host: &TestHost) {
    host.wait_get("/v1/bots/a1/memory", |m| {
        let count = &m["scopes"][1]["profile"]["count"];
        (count == 1).then(|| count.clone())
    })
    .await;
}

async fn start(held: Vec<Held>) -> (OpenAiServer, TestHost) {
    let server = OpenAiServer::builder()
        .responder(move |b| model(b, &held))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = true\n")
        .bot("a1", "main", &["SendMessage"])
        .start()
        .await;
    (server, host)
}

#[tokio::test]
async fn a_correction_survives_the_earlier_turns_replace_landing_after_it() {
    let (release_x, gate_x) = watch::channel(false);
    let (release_y, gate_y) = watch::channel(false);
    let held = vec![
        Held {
            name: "Xerxes",
            gate: gate_x,
            tokens: 1_000_000,
        },
        Held {
            name: "Yolanda",
            gate: gate_y,
            tokens: 10_000_000,
        },
    ];
    let (server, host) = start(held).await;

    // a fact to correct, extracted at once
    host.complete_turn("a1", "hi, my name is Quimby").await;
    wait_one_fact(&host).await;
    // "Xerxes": its turn ends, its extraction (replace Quimby) is held
    host.complete_turn("a1", "my name is Xerxes").await;
    wait_asked(&server, "Xerxes").await;
    // the correction: its turn ends too, its extraction (replace Quimby) held
    host.complete_turn("a1", "sorry, typo: my name is Yolanda")
        .await;
    wait_asked(&server, "Yolanda").await;

    // the earlier turn's extraction lands first, after the later turn ended
    release_x.send(true).unwrap();
    wait_landed(&host, 1_000_000).await;
    assert_eq!(names(&host).await, ["Name is Xerxes"]);
    // then the correction's
    release_y.send(true).unwrap();
    wait_landed(&host, 11_000_000).await;
    assert_eq!(
        names(&host).await,
        ["Name is Yolanda"],
        "the later turn's correction was lost"
    );

    host.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_fact_extracted_late_is_listed_as_of_its_turn() {
    let (release_x, gate_x) = watch::channel(false);
    let held = vec![Held {
        name: "Xerxes",
        gate: gate_x,
        tokens: 1_000_000,
    }];
    let (server, host) = start(held).await;

    // "Xerxes": the turn ends, its extraction (add) is held
    host.complete_turn("a1", "hi, my name is Xerxes").await;
    wait_asked(&server, "Xerxes").await;
    // the correction is extracted at once (nothing shown: an add)
    host.complete_turn("a1", "sorry, typo: my name is Yolanda")
        .await;
    wait_one_fact(&host).await;
    // then the earlier turn's lands
    release_x.send(true).unwrap();
    wait_landed(&host, 1_000_000).await;

    // facts are listed in the order they were set, and the later is
    // taken as true: the correction must come last
    let before = server.request_count();
    host.complete_turn("a1", "what is my name?").await;
    let request = server.requests()[before..]
        .iter()
        .find(|r| !is_extraction(&r.body))
        .expect("the turn asked the model")
        .body
        .to_string();
    let (x, y) = (
        request.find("\\\"Name is Xerxes\\\""),
        request.find("\\\"Name is Yolanda\\\""),
    );
    assert!(
        x.is_some() && y.is_some(),
        "both facts are shown: {request}"
    );
    assert!(
        x < y,
        "the earlier turn's fact is listed after the correction: {request}"
    );
    // and the memory API lists them as set in that order
    let (_, memory) = host.get("/v1/bots/a1/memory", TOKEN).await;
    let items = memory["scopes"][1]["profile"]["items"].as_array().unwrap();
    let set = |name: &str| {
        items
            .iter()
            .find(|i| i["text"] == format!("Name is {name}"))
            .and_then(|i| i["updated_at"].as_i64())
            .unwrap()
    };
    assert!(set("Xerxes") < set("Yolanda"), "{memory}");

    host.shutdown().await;
    server.shutdown().await;
}
