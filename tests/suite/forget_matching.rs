//! Forget by text as the person and the model see it, through a model on
//! a loopback OpenAI-compatible server scripted by the person's message:
//! the answer quotes what went (a broad text took the current fact with
//! the old one, unseen), a text match leaves out the facts other people's
//! bots wrote in a shared project (forget by id still reaches them), and
//! a replaced fact's old text leaves the system message at the next
//! request instead of staying beside its new text for the epoch.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::memory_model::content;
use crate::support::memory_model::send_message;
use crate::support::memory_model::step_past_updates;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

const TOOLS: &[&str] = &["SendMessage", "Remember", "Forget"];

/// A bot's model: `remember: X` → Remember {text: X} (the owner's
/// profile), `remember project: X` → Remember {text: X} in
/// `project:apollo`, `replace <id>: X` → Remember {text: X, replaces:
/// id}, `forget: X` → Forget {matching: X}, `forget id: X` → Forget {id:
/// X}, anything else SendMessage "ok"; after a tool result, SendMessage
/// `done: <the result>` (then stop).
fn model(body: &Value) -> Reply {
    let (id, last) = match step_past_updates(body) {
        Ok(step) => step,
        Err(reply) => return *reply,
    };
    // the input's last line (the person's message: a line before it may
    // say the time), without a memory update joined to it
    let text = content(last)
        .split("\n\n[memory update]")
        .next()
        .and_then(|input| input.lines().last())
        .unwrap_or("");
    let call = |tool: &str, args: Value| Reply::tool_call(&id, tool, args.to_string());
    if let Some(fact) = text.strip_prefix("remember project: ") {
        call(
            "Remember",
            json!({ "text": fact, "scope": "project:apollo" }),
        )
    } else if let Some(fact) = text.strip_prefix("remember: ") {
        call("Remember", json!({ "text": fact }))
    } else if let Some(rest) = text.strip_prefix("replace ") {
        let (replaces, fact) = rest.split_once(": ").unwrap();
        call("Remember", json!({ "text": fact, "replaces": replaces }))
    } else if text == "remember 30 log entries" {
        // 30 important log entries in one step: a full log block
        let mut reply = Reply::text("");
        for i in 0..30 {
            let args =
                json!({ "text": format!("Museum visit {i}"), "layer": "log", "importance": 5 });
            reply = reply.and_tool_call(&format!("{id}_{i}"), "Remember", args.to_string());
        }
        reply
    } else if let Some(entry) = text.strip_prefix("remember trivia: ") {
        let args = json!({ "text": entry, "layer": "log", "importance": 1 });
        call("Remember", args)
    } else if text == "forget the city" {
        // the input shares no word with what it forgets: recall ranks
        // the log by importance alone
        call("Forget", json!({ "matching": "Lyon" }))
    } else if let Some(memory_id) = text.strip_prefix("forget id: ") {
        call("Forget", json!({ "id": memory_id }))
    } else if let Some(what) = text.strip_prefix("forget: ") {
        call("Forget", json!({ "matching": what }))
    } else {
        send_message(&id, "ok")
    }
}

/// alice's `a1` and `a2` (`a1` in project apollo) and bob's `b1` (in
/// project apollo), without fact extraction.
async fn start(server: &OpenAiServer) -> TestHost {
    TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("a1", "main", TOOLS)
        .bot_lines("projects = [\"apollo\"]")
        .bot("a2", "main", TOOLS)
        .bot_of("b1", "main", TOOLS, "bob")
        .bot_lines("projects = [\"apollo\"]")
        .start()
        .await
}

/// Sends `text` to `bot` as the user of `token`, waits for the turn to
/// complete, and returns what the bot said last.
async fn said(host: &TestHost, bot: &str, token: &str, text: &str) -> String {
    let (end, entries) = host.end_turn_as(bot, token, text).await;
    assert_eq!(end["status"], "completed", "{end}");
    deliveries(&entries).pop().unwrap_or_default()
}

/// The id in a Remember's answer, "done: Remembered as m-… in …".
fn remembered_id(answer: &str) -> String {
    let rest = answer
        .split_once("Remembered as ")
        .unwrap_or_else(|| panic!("not remembered: {answer}"))
        .1;
    rest.split_whitespace().next().unwrap().to_owned()
}

/// The texts of every item `bot` reaches, as the user of `token` reads
/// them (`GET /v1/bots/{bot}/memory`).
async fn memory_texts(host: &TestHost, bot: &str, token: &str) -> Vec<String> {
    let (status, mem) = host.get(&format!("/v1/bots/{bot}/memory"), token).await;
    assert_eq!(status, 200, "{mem}");
    let mut texts = Vec::new();
    for scope in mem["scopes"].as_array().unwrap() {
        for layer in ["profile", "log", "notes"] {
            for item in scope[layer]["items"].as_array().into_iter().flatten() {
                texts.push(item["text"].as_str().unwrap().to_owned());
            }
        }
    }
    texts
}

fn system(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or("")
}

/// Regression (tester H4): "Forget that I lived in Paris" (`matching`
/// "Paris") also took "Alice lives in Berlin (moved from Paris)", the
/// fact true now, and the answer gave only ids, so neither the model nor
/// the person learned what went.
#[tokio::test]
async fn forget_by_text_answers_with_the_texts_it_forgot() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = start(&server).await;
    const OLD: &str = "Alice lives in Paris";
    const NOW: &str = "Alice lives in Berlin (moved from Paris)";
    said(&host, "a1", TOKEN, &format!("remember: {OLD}")).await;
    said(&host, "a1", TOKEN, &format!("remember: {NOW}")).await;
    said(&host, "a1", TOKEN, "remember: Alice likes jazz").await;

    let answer = said(&host, "a1", TOKEN, "forget: Paris").await;
    assert!(answer.contains("Forgot 2 item(s)"), "{answer}");
    for text in [OLD, NOW] {
        assert!(
            answer.contains(&format!("(user:alice profile) \"{text}\"")),
            "the answer quotes {text:?}: {answer}"
        );
    }
    assert!(
        answer.contains("that your Memory section showed"),
        "{answer}"
    );
    assert_eq!(memory_texts(&host, "a1", TOKEN).await, ["Alice likes jazz"]);
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (tester H4): alice's bot, told "forget the Apollo thing"
/// (`matching` "Apollo"), deleted the fact bob's bot wrote in their
/// shared project, and bob was not told. A text match now leaves it out
/// and says so; forgetting it by id (a project's facts are any of its
/// users' to forget, docs/api.md) still works.
#[tokio::test]
async fn forget_by_text_leaves_out_other_peoples_project_facts() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = start(&server).await;
    const BOBS: &str = "Apollo budget approved by Bob: 40k EUR";
    const ALICES: &str = "Apollo launch is on 2027-03-14";
    let bobs =
        remembered_id(&said(&host, "b1", BOB_TOKEN, &format!("remember project: {BOBS}")).await);
    said(&host, "a1", TOKEN, &format!("remember project: {ALICES}")).await;

    let answer = said(&host, "a1", TOKEN, "forget: Apollo").await;
    assert!(answer.contains("Forgot 1 item(s)"), "{answer}");
    assert!(answer.contains(ALICES), "{answer}");
    assert!(
        answer.contains(&format!(
            "{bobs} (project:apollo profile, written by bob's bot b1) \"{BOBS}\""
        )),
        "the answer names what it left out: {answer}"
    );
    assert!(
        answer.contains("1 item(s) containing \"Apollo\" were left out"),
        "{answer}"
    );
    assert!(answer.contains("Forget it by id"), "{answer}");
    assert_eq!(
        memory_texts(&host, "b1", BOB_TOKEN).await,
        [BOBS],
        "bob's project fact is kept"
    );

    // matching only bob's: nothing is forgotten, and the answer says why
    let answer = said(&host, "a1", TOKEN, "forget: budget approved").await;
    assert!(answer.contains("nothing was forgotten"), "{answer}");
    assert!(answer.contains(&bobs), "{answer}");
    assert_eq!(memory_texts(&host, "b1", BOB_TOKEN).await, [BOBS]);

    // the model was told that project facts are everyone's in the project
    let tools = server.requests().last().unwrap().body["tools"].to_string();
    for told in [
        "every user with a bot in that project reads its facts (and may forget them)",
        "a text match leaves out the ones other people's bots wrote",
    ] {
        assert!(tools.contains(told), "{told:?} not in {tools}");
    }

    // by id, the fact the person means, it goes
    let answer = said(&host, "a1", TOKEN, &format!("forget id: {bobs}")).await;
    assert!(answer.contains(&format!("Forgot {bobs}")), "{answer}");
    assert!(memory_texts(&host, "b1", BOB_TOKEN).await.is_empty());
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (tester H4): after Remember replaced a fact the frozen
/// memory block showed, the next request still had the old text in its
/// system message (the new one only in the update, same id, two texts)
/// until the session compacted: a replace used to scrub a detail kept it
/// in every request of the epoch.
#[tokio::test]
async fn a_replaced_fact_leaves_the_system_message_at_the_next_request() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = start(&server).await;
    const OLD: &str = "Alice works at Initech";
    const NEW: &str = "Alice works at Globex";
    let id = remembered_id(&said(&host, "a1", TOKEN, &format!("remember: {OLD}")).await);
    // a2's context begins with the fact in its frozen block
    let a2_requests = |from: usize| -> Vec<Value> {
        server.requests()[from..]
            .iter()
            .map(|r| r.body.clone())
            .filter(|b| system(b).contains("Test bot a2."))
            .collect()
    };
    let before = server.request_count();
    said(&host, "a2", TOKEN, "hello").await;
    let first = a2_requests(before);
    assert!(system(&first[0]).contains(OLD), "{}", system(&first[0]));

    let answer = said(&host, "a1", TOKEN, &format!("replace {id}: {NEW}")).await;
    assert!(answer.contains("Replaced"), "{answer}");

    let before = server.request_count();
    said(&host, "a2", TOKEN, "where do I work?").await;
    let requests = a2_requests(before);
    assert!(!requests.is_empty());
    for body in &requests {
        assert!(
            !body.to_string().contains(OLD),
            "the replaced text is nowhere in a2's request: {}",
            system(body)
        );
        assert!(system(body).contains(NEW), "{}", system(body));
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (round 22): recall folds accents (`Zurich` ranks "Zürich"),
/// but Forget by text compared them: "forget that I live in Zurich" found
/// nothing, and "Lives in Zürich" stayed.
#[tokio::test]
async fn forget_by_text_ignores_accents_as_recall_does() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = start(&server).await;
    said(&host, "a1", TOKEN, "remember: Alice lives in Zürich").await;
    said(&host, "a1", TOKEN, "remember: Alice's cabin is near Tromso").await;
    said(&host, "a1", TOKEN, "remember: Alice likes jazz").await;

    let answer = said(&host, "a1", TOKEN, "forget: lives in Zurich").await;
    assert!(answer.contains("Forgot 1 item(s)"), "{answer}");
    assert!(answer.contains("\"Alice lives in Zürich\""), "{answer}");
    let answer = said(&host, "a1", TOKEN, "forget: TROMSØ").await;
    assert!(answer.contains("Forgot 1 item(s)"), "{answer}");
    assert_eq!(memory_texts(&host, "a1", TOKEN).await, ["Alice likes jazz"]);
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (round 22): Forget by text removed every matching item,
/// also the ones the prompt did not show, which the bot cannot have
/// meant, and its answer could not say which it had shown. It now
/// forgets only the shown ones and lists the others, kept, with how to
/// forget one by id.
#[tokio::test]
async fn forget_by_text_forgets_only_what_the_prompt_showed() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = start(&server).await;
    const SHOWN: &str = "Alice flew to Lyon in May";
    const HIDDEN: &str = "Lyon hotel had a blue door";
    said(&host, "a1", TOKEN, &format!("remember: {SHOWN}")).await;
    said(&host, "a1", TOKEN, "remember 30 log entries").await;
    let hidden =
        remembered_id(&said(&host, "a1", TOKEN, &format!("remember trivia: {HIDDEN}")).await);
    // the log block holds 30 entries: the trivial one is left out
    let (status, mem) = host
        .get("/v1/bots/a1/memory?input=forget%20the%20city", TOKEN)
        .await;
    assert_eq!(status, 200, "{mem}");
    let shown = mem["prompt"]["shown"].to_string();
    assert!(!shown.contains(&hidden), "{hidden} is shown: {shown}");

    let answer = said(&host, "a1", TOKEN, "forget the city").await;
    assert!(
        answer.contains("Forgot 1 item(s) containing \"Lyon\" that your Memory section showed"),
        "{answer}"
    );
    assert!(answer.contains(&format!("\"{SHOWN}\"")), "{answer}");
    assert!(
        answer.contains(
            "1 more item(s) containing \"Lyon\" were kept: your Memory section did not show them"
        ),
        "{answer}"
    );
    assert!(answer.contains(&format!("- {hidden} (")), "{answer}");
    assert!(answer.contains("Forget it by id"), "{answer}");
    let left = memory_texts(&host, "a1", TOKEN).await;
    assert!(!left.iter().any(|t| t == SHOWN), "{left:?}");
    assert!(
        left.iter().any(|t| t == HIDDEN),
        "the unshown entry is kept: {left:?}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (QA): a text matching more than 20 of the shown items was
/// refused as "30 items contain …" when more held it: the count is of
/// the shown items, which the answer now says, with how many others hold
/// it (a more specific text does not reach them either).
#[tokio::test]
async fn too_many_matches_are_counted_as_the_shown_items() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = start(&server).await;
    said(&host, "a1", TOKEN, "remember 30 log entries").await;
    said(&host, "a1", TOKEN, "remember trivia: Museum gift shop").await;
    let answer = said(&host, "a1", TOKEN, "forget: Museum").await;
    assert!(
        answer.contains(
            "30 of the items your Memory section shows contain \"Museum\", more than 20 at once \
             (1 more that it does not show are never forgotten by text)"
        ),
        "{answer}"
    );
    assert_eq!(memory_texts(&host, "a1", TOKEN).await.len(), 31);
    host.shutdown().await;
    server.shutdown().await;
}
