//! What a room's private era leaves behind once it is shared (fixer G1):
//! alice's room of her own bots gets bob's bot while a member's turn
//! still runs on alice's private surface, or after a member remembered
//! something there. Neither the turn's reply nor the private-era memory
//! reaches the shared room; what comes after the sharing does.

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::memory_model::after;
use crate::support::memory_model::content;
use crate::support::memory_model::send_message;
use crate::support::memory_model::step_past_updates;
use crate::support::memory_model::without_updates;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::shared_room::mixed_fleet;
use crate::support::shared_room::own_room;
use crate::support::shared_room::share_with_bob;
use crate::support::shared_room::system;

/// In alice's message that starts a1's turn while the room is hers.
const ASK: &str = "tell the room the door code";
/// In a1's reply to it, written after bob's bot joined.
const SECRET: &str = "DOORCODE4417";

/// a1's turn on alice's message starts while the room is hers (its
/// model call waits on `gate`); bob's b1 joins; then the model answers
/// with a SendMessage of [`SECRET`]. The reply is not published: not on
/// bob's page of the timeline, not on alice's; a notice says why, and
/// the model is told at call time. (Before, the reply was published
/// after the change's notice, where bob reads.)
#[tokio::test]
async fn a_reply_of_a_turn_begun_before_the_room_was_shared_is_not_published() {
    let (open, gate) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |body| {
            let messages = without_updates(body);
            let id = format!("call_{}", messages.len());
            let Some(last) = messages.last() else {
                return Reply::text("");
            };
            if last["role"] == "tool" {
                return Reply::text("");
            }
            if system(body).contains("Test bot a1.") && content(last).contains(ASK) {
                return send_message(&id, &format!("the code is {SECRET}"))
                    .hold_until(gate.clone());
            }
            send_message(&id, "hello")
        })
        .start()
        .await;
    let host = mixed_fleet(&server.base_url(), &["SendMessage"], &["SendMessage"])
        .bot("a2", "main", &["SendMessage"])
        .start()
        .await;
    own_room(&host).await;

    let before = server.request_count();
    let posted = host
        .post_text("/v1/groups/own/messages", TOKEN, &format!("@a1 {ASK}"))
        .await;
    let seq = posted["seq"].as_i64().unwrap();
    let timeline = posted["session"].as_str().unwrap().to_owned();
    // a1's turn has begun, on the private surface, and waits on its model
    server.wait_for_requests(before + 1).await;
    assert!(
        system(&server.requests()[before].body).contains("Test bot a1."),
        "the first request is a1's turn"
    );
    share_with_bob(&host).await;
    open.send(true).unwrap();
    host.wait_turn_end(&timeline, seq).await;

    // bob reads nothing of it
    let (status, page) = host.get("/v1/groups/own/entries", BOB_TOKEN).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        !page.to_string().contains(SECRET),
        "a reply made on alice's private surface reached bob: {page}"
    );
    // nor alice: not published at all; a notice says why, without the text
    let (_, hers) = host.get("/v1/groups/own/entries", TOKEN).await;
    assert!(!hers.to_string().contains(SECRET), "{hers}");
    let notice = hers["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["code"] == json!("room_message_before_sharing"))
        .cloned()
        .unwrap_or_else(|| panic!("a notice says why a1 said nothing: {hers}"));
    let text = notice["text"].as_str().unwrap_or("");
    assert!(
        text.contains("@a1") && text.contains(&format!("#{seq}")) && text.contains("alice"),
        "{notice}"
    );
    // the model was told its message was not published
    let told = server.requests()[before..]
        .iter()
        .filter(|r| system(&r.body).contains("Test bot a1."))
        .flat_map(|r| {
            without_updates(&r.body)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        })
        .filter(|m| m["role"] == "tool")
        .map(|m| content(&m).to_owned())
        .collect::<Vec<_>>();
    assert!(
        told.iter().any(|t| t.starts_with("not published")),
        "a1 was told: {told:?}"
    );

    // the room goes on: bob's message is answered and published
    let (_, run) = host.discuss(BOB_TOKEN, "own", "@b1 hi there").await;
    assert!(
        run.iter()
            .any(|e| e["author"] == json!("b1") && e["text"] == json!("hello")),
        "{run:?}"
    );
    // and a1's next turn, in the shared room, is not sent what its private
    // turn did after the change (QA: the held draft with the code stood
    // in its context, below no cut, and a model asked "what were you about
    // to say?" repeated it to bob)
    let before = server.request_count();
    host.discuss(BOB_TOKEN, "own", "@a1 what were you about to say?")
        .await;
    let asked: Vec<String> = server.requests()[before..]
        .iter()
        .filter(|r| system(&r.body).contains("Test bot a1."))
        .map(|r| r.body.to_string())
        .collect();
    assert!(!asked.is_empty(), "a1 made no model call");
    for request in &asked {
        assert!(
            !request.contains(SECRET),
            "a1 was sent its private draft: {request}"
        );
    }
    server.shutdown().await;
}

/// Remembered by a1 in alice's room while it was hers alone (its own
/// memory, not the room's: a private room's Remember writes no room).
const EARLY: &str = "The spare key hides under the blue pot";
/// Remembered by a1 in the room while bob's bot is in it.
const MIDDLE: &str = "The budget review is in May";
/// Remembered by a1 in the room once carol's bot is in it too.
const LATE: &str = "The board meets on Thursdays";

const CAROL_TOKEN: &str = "carol-secret-token";

/// a1's model for the memory test: `remember <<X>>` → Remember X (a log
/// entry of its own); anything else → SendMessage `ok`; after a tool
/// result, SendMessage (after SendMessage, stop).
fn memory_model(body: &Value) -> Reply {
    let (id, last) = match step_past_updates(body) {
        Ok(step) => step,
        Err(reply) => return *reply,
    };
    match after(content(last), "remember ") {
        Some(fact) => Reply::tool_call(
            &id,
            "Remember",
            json!({ "text": fact, "layer": "log" }).to_string(),
        ),
        None => send_message(&id, "ok"),
    }
}

/// `token`'s user says `text` in room `own` and waits for the
/// discussion; returns a1's requests made meanwhile.
async fn says(host: &TestHost, server: &OpenAiServer, token: &str, text: &str) -> Vec<String> {
    let before = server.request_count();
    host.discuss(token, "own", text).await;
    let requests: Vec<String> = server.requests()[before..]
        .iter()
        .filter(|r| system(&r.body).contains("Test bot a1."))
        .map(|r| r.body.to_string())
        .collect();
    assert!(!requests.is_empty(), "a1 made no model call");
    requests
}

/// a1 remembers [`MIDDLE`] in alice's room while bob's b1 is in it;
/// then carol's c1 joins. When carol asks a1 there, its request holds
/// none of what a1 remembered there before she could read the room (the
/// shared room's block shows what a1 remembered there since its latest
/// audience change), and what it remembers there afterwards shows.
/// (Before, the block showed every item a1 ever remembered in the room,
/// whoever could read it then.)
#[tokio::test]
async fn what_a_member_remembered_in_the_room_before_its_audience_changed_is_not_shown_there() {
    let server = OpenAiServer::builder()
        .responder(memory_model)
        .start()
        .await;
    let tools = &["SendMessage", "Remember"];
    let host = mixed_fleet(&server.base_url(), tools, &["SendMessage"])
        .bot("a2", "main", &["SendMessage"])
        .bot_of("c1", "main", &["SendMessage"], "carol")
        .bot_lines("shareable = true")
        .tables(&format!(
            "[[users]]\nid = \"carol\"\ntoken = \"{CAROL_TOKEN}\"\n"
        ))
        .start()
        .await;
    own_room(&host).await;
    says(&host, &server, TOKEN, &format!("@a1 remember <<{EARLY}>>")).await;
    let private = says(&host, &server, TOKEN, "@a1 what do you know").await;
    assert!(private[0].contains(EARLY), "{}", private[0]);

    share_with_bob(&host).await;
    says(
        &host,
        &server,
        BOB_TOKEN,
        &format!("@a1 remember <<{MIDDLE}>>"),
    )
    .await;
    let bobs = says(&host, &server, BOB_TOKEN, "@a1 what do you know").await;
    assert!(bobs[0].contains(MIDDLE), "{}", bobs[0]);
    assert!(!bobs[0].contains(EARLY), "{}", bobs[0]);

    let (status, v) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/own/members",
            TOKEN,
            Some(json!({"members": ["a1", "a2", "b1", "c1"]})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let carols = says(&host, &server, CAROL_TOKEN, "@a1 what do you know").await;
    for request in &carols {
        assert!(
            !request.contains(MIDDLE) && !request.contains(EARLY),
            "a memory of the room from before carol could read it reached her: {request}"
        );
    }
    // what a1 remembers there from now on shows
    says(
        &host,
        &server,
        CAROL_TOKEN,
        &format!("@a1 remember <<{LATE}>>"),
    )
    .await;
    let later = says(&host, &server, CAROL_TOKEN, "@a1 and now").await;
    assert!(later[0].contains(LATE), "{}", later[0]);
    assert!(!later[0].contains(MIDDLE), "{}", later[0]);
    server.shutdown().await;
}

/// In alice's message to the room while carol's bot was in it.
const CAROLS_ERA: &str = "PEARCAROLERA";

/// Alice's room of her a1 and carol's c1 is shared; she posts
/// [`CAROLS_ERA`]; a start whose fleet.toml gives c1 to bob gives bob the
/// room: he reads it from that start's notice on, not what was said
/// before. (Before, the room was shared already, so the start changed
/// nothing and bob read the whole timeline.)
#[tokio::test]
async fn a_shared_room_a_user_gains_through_the_config_is_read_from_then_on() {
    let server = OpenAiServer::builder()
        .responder(|body| {
            let id = format!("call_{}", without_updates(body).len());
            match without_updates(body).last() {
                Some(last) if last["role"] != "tool" => send_message(&id, "hello"),
                _ => Reply::text(""),
            }
        })
        .start()
        .await;
    let carol = |fleet: crate::support::fleet::TestFleet, owner: &str| {
        fleet
            .bot_of("c1", "main", &["SendMessage"], owner)
            .bot_lines("shareable = true")
    };
    let users = format!("[[users]]\nid = \"carol\"\ntoken = \"{CAROL_TOKEN}\"\n");
    let host = carol(
        mixed_fleet(&server.base_url(), &["SendMessage"], &["SendMessage"]),
        "carol",
    )
    .tables(&users)
    .start()
    .await;
    let (status, v) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "own", "members": ["a1", "c1"]}).to_string(),
        )
        .await;
    assert_eq!((status, v["shared"].clone()), (201, json!(true)), "{v}");
    host.discuss(TOKEN, "own", &format!("@a1 hello {CAROLS_ERA}"))
        .await;
    let fleet = carol(host.shutdown().await.without_bot("c1"), "bob");
    fleet.write();
    let host = crate::support::fleet::restart(fleet).await;

    let (status, page) = host.get("/v1/groups/own/entries", BOB_TOKEN).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page["visible_from"].as_i64().unwrap_or(0) > 1,
        "bob reads the room from the start's change: {page}"
    );
    assert!(!page.to_string().contains(CAROLS_ERA), "{page}");
    let first = &page["entries"][0];
    assert_eq!(first["code"], json!("members_changed"), "{page}");
    // the room was shared already: it reaches one more user, not "is
    // shared from here on" (the notice's first wording)
    let text = first["text"].as_str().unwrap_or("");
    assert!(text.contains("now reaches bob"), "{first}");
    assert!(!text.contains("shared from here on"), "{first}");
    // alice still reads everything
    let (_, hers) = host.get("/v1/groups/own/entries", TOKEN).await;
    assert!(hers.to_string().contains(CAROLS_ERA), "{hers}");
    server.shutdown().await;
}
