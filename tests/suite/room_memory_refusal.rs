//! Remember's answers in a room shared with other people's bots, as a
//! loopback OpenAI-compatible server receives the room turns: they tell
//! the room nothing of what the bot holds in private. (Before, when the
//! bot's own profile was full, the refusal suggested replacing its oldest
//! facts, quoted: what its owner told it in a DM, which the model posted
//! to the room's timeline, started by another user's message; and every
//! profile write there said how many facts and characters the profile
//! holds, private ones counted.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TestHost;
use crate::support::memory_model::after;
use crate::support::memory_model::content;
use crate::support::memory_model::send_message;
use crate::support::memory_model::step_past_updates;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::shared_room::mixed_fleet;
use crate::support::shared_room::open_mixed_room;

/// Starts every fact alice tells `a1` in her DM.
const PRIVATE: &str = "PRIVATEDM";
/// A fact `a1` remembers in the room.
const STANDUP: &str = "ROOM: the standup moved to nine";

/// The bots' model: `remember <<X>>` → Remember X as a profile fact of
/// the bot's own; anything else → SendMessage `ok`. After a tool result,
/// SendMessage `done: <the result>` (after SendMessage, stop): the model
/// passes on what the tool answered, as the tester's did.
fn model(body: &Value) -> Reply {
    let (id, last) = match step_past_updates(body) {
        Ok(step) => step,
        Err(reply) => return *reply,
    };
    let send = |text: &str| send_message(&id, text);
    match after(content(last), "remember ") {
        Some(fact) => Reply::tool_call(
            &id,
            "Remember",
            json!({ "text": fact, "scope": "agent" }).to_string(),
        ),
        None => send("ok"),
    }
}

/// A fact of about 470 characters: `PRIVATEDM <n> secret …`.
fn private_fact(n: usize) -> String {
    let fact = format!("{PRIVATE} {n} ");
    format!("{fact}{}", "secret ".repeat(66))
}

/// Alice tells `a1` to remember `fact` in her DM; the turn completes.
async fn alice_tells(host: &TestHost, fact: &str) {
    let (_, end) = host.end_turn("a1", &format!("remember <<{fact}>>")).await;
    assert_eq!(end["status"], "completed", "{end}");
}

/// Bob says `text` in room `mixed`; returns `a1`'s requests of the
/// discussion and its entries as bob reads them.
async fn bob_says(host: &TestHost, server: &OpenAiServer, text: &str) -> (Vec<Value>, Vec<Value>) {
    let before = server.request_count();
    let (answer, run) = host.discuss(BOB_TOKEN, "mixed", text).await;
    assert_eq!(answer["addressed"], json!(["a1"]), "{answer}");
    let requests: Vec<Value> = server.requests()[before..]
        .iter()
        .map(|r| r.body.clone())
        .filter(|b| content(&b["messages"][0]).contains("Test bot a1."))
        .collect();
    assert!(!requests.is_empty(), "a1 made no model call");
    (requests, run)
}

/// The results of Remember calls in `requests` (the tool messages).
fn results(requests: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for body in requests {
        for m in body["messages"].as_array().unwrap() {
            let text = content(m);
            if m["role"] == "tool" && !out.iter().any(|r| r == text) {
                out.push(text.to_owned());
            }
        }
    }
    out
}

/// Nothing private, and no count of the profile, in what `a1` read in
/// the room or what bob reads of the discussion.
fn assert_private_kept(requests: &[Value], run: &[Value]) {
    for (what, text) in [
        ("a1's request", Value::from(requests.to_vec()).to_string()),
        ("bob's timeline", Value::from(run.to_vec()).to_string()),
    ] {
        for private in [PRIVATE, "/100 facts", "/4000 characters"] {
            assert!(!text.contains(private), "{private:?} in {what}: {text}");
        }
    }
}

/// The tester's case: alice's `a1` fills its own profile in her DM; in a
/// room with bob's `b1`, bob's messages make `a1` remember facts there
/// (the answer says no counts), then one more that does not fit: the
/// refusal offers only the room's facts, never a private one, and only
/// those long enough to make room when replaced (QA, 2026-12-05: a short
/// one was offered, and replacing it was refused again); with none, it
/// says the owner can make room.
#[tokio::test]
async fn a_full_profile_in_a_shared_room_quotes_nothing_private() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = mixed_fleet(
        &server.base_url(),
        &["SendMessage", "Remember"],
        &["SendMessage"],
    )
    .start()
    .await;
    for n in 1..=6 {
        alice_tells(&host, &private_fact(n)).await;
    }
    open_mixed_room(&host).await;

    // facts that fit: remembered, with no count of the profile
    let long = format!("ROOM: {}", "plans ".repeat(42));
    let mut ids = Vec::new();
    for fact in [STANDUP, long.as_str()] {
        let (requests, run) = bob_says(&host, &server, &format!("@a1 remember <<{fact}>>")).await;
        assert_private_kept(&requests, &run);
        let added = results(&requests);
        // (the room's earlier results are in the context too: the newest)
        let id = added
            .iter()
            .rev()
            .find_map(|r| r.strip_prefix("Remembered as "))
            .and_then(|r| r.get(..14))
            .unwrap_or_else(|| panic!("{added:#?}"))
            .to_owned();
        ids.push(id);
    }
    let (standup, long_id) = (ids[0].clone(), ids[1].clone());

    // 7 × 470 characters of private facts and the room's 31 + 258 leave
    // 421 free: 490 more lack 69, which replacing the long room fact
    // frees, and the short one does not
    alice_tells(&host, &private_fact(7)).await;
    let big = format!("ROOM: {}", "agenda ".repeat(69));
    assert_eq!(big.chars().count(), 489);
    let (requests, run) = bob_says(&host, &server, &format!("@a1 remember <<{big}>>")).await;
    assert_private_kept(&requests, &run);
    let refused = results(&requests);
    let refusal = refused
        .iter()
        .find(|r| r.starts_with("error: "))
        .unwrap_or_else(|| panic!("no refusal: {refused:#?}"));
    assert!(
        refusal.contains("no room for this in the profile of your own memory")
            && refusal.contains(&long_id)
            && !refusal.contains(&standup),
        "{refusal}"
    );

    // a private fact more: no room fact is long enough
    let shorter = format!("{PRIVATE} 8 {}", "secret ".repeat(41));
    alice_tells(&host, &shorter).await;
    let (requests, run) = bob_says(&host, &server, &format!("@a1 remember <<{big}>>")).await;
    assert_private_kept(&requests, &run);
    let refused = results(&requests);
    let refusal = refused
        .iter()
        .rev()
        .find(|r| r.starts_with("error: "))
        .unwrap_or_else(|| panic!("no refusal: {refused:#?}"));
    assert!(
        refusal.contains("you remembered nothing in this room's profile that could make room")
            && !refusal.contains(&long_id)
            && !refusal.contains(&standup),
        "{refusal}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
