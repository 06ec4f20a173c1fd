//! A member a message addressed, taken out of the room before that
//! message's discussion began, takes no turn in it, and the discussion's
//! end says so: its `turn_end` lists it `no_turn`, and the end notice
//! names it. (It was left out without a word: the person was not told
//! that the member would not answer, QA 2026-12-05.)

use serde_json::json;
use tokio::sync::watch;

use super::room_backlog::model;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;

#[tokio::test]
async fn a_member_taken_out_before_the_discussion_is_named_as_taking_no_turn() {
    let (open, gate) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |body| model(body, &gate))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("a1", "main", &["SendMessage"])
        .bot("a2", "main", &["SendMessage"])
        .bot("a3", "main", &["SendMessage"])
        .start()
        .await;
    let (status, room) = host.create_room(TOKEN, "rr", &["a1", "a2", "a3"]).await;
    assert_eq!(status, 201, "{room}");
    host.post_text("/v1/groups/rr/messages", TOKEN, "@a1 first topic")
        .await;
    server.wait_for_requests(1).await;
    let second = host
        .post_text("/v1/groups/rr/messages", TOKEN, "@a2 @a3 second topic")
        .await;
    assert_eq!(second["addressed"], json!(["a2", "a3"]), "{second}");
    let (status, changed) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/rr/members",
            TOKEN,
            Some(json!({ "members": ["a1", "a3"] })),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    open.send_replace(true);

    let seq = second["seq"].as_i64().unwrap();
    host.wait_turn_end(second["session"].as_str().unwrap(), seq)
        .await;
    let (status, page) = host
        .get(&format!("/v1/groups/rr/entries?after={seq}"), TOKEN)
        .await;
    assert_eq!(status, 200, "{page}");
    let run = page["entries"].as_array().unwrap();
    let end = run
        .iter()
        .find(|e| e["kind"] == "turn_end" && e["inputs"] == json!([seq]))
        .unwrap_or_else(|| panic!("no end: {page:#}"));
    assert_eq!(
        end["members"],
        // in the order the message addressed them (a2 came last: QA)
        json!([{"id": "a2", "outcome": "no_turn"}, {"id": "a3", "outcome": "spoke"}]),
        "{end}"
    );
    let notice = run
        .iter()
        .find(|e| {
            e["kind"] == "notice"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(&format!("message #{seq} ended")))
        })
        .unwrap_or_else(|| panic!("no end notice: {page:#}"));
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .contains("@a2 (taken out of the room after the message was posted) took no turn"),
        "{notice}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
