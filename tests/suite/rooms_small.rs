//! Small room bugs an exploratory tester found, through the API.
//!
//! (Before, a room named only with invisible characters was created; rooms
//! `r1` and `R1` could both exist, though mentions and bot ids ignore
//! case; a discussion in which the one member addressed spoke ended with
//! "round 2 passed in silence", though nobody was offered a turn in round
//! 2; and in a shared room, the notice of a member whose daily token
//! budget was spent showed every member's owner its token use and budget.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

use super::groups::SILENT;
use super::groups::TALKER;
use super::groups::room_host;

/// Creates a room as alice; returns the status and body.
async fn create(host: &TestHost, body: Value) -> (u16, Value) {
    host.post_raw("/v1/groups", Some(TOKEN), None, body.to_string())
        .await
}

fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The texts of the notices of `code` in `run`.
fn notice_texts(run: &[Value], code: &str) -> Vec<String> {
    run.iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == code)
        .map(|e| e["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_room_name_with_nothing_visible_is_refused() {
    let host = room_host(TALKER).await;
    for name in [
        "\u{200b}",
        "\u{200b}\u{200b}\u{200b}",
        "\u{feff}\u{2060}\u{200d}",
    ] {
        let (status, body) = create(
            &host,
            json!({"name": name, "id": "blank", "members": ["a", "b"]}),
        )
        .await;
        assert_eq!(status, 400, "{name:?}: {body}");
        let msg = message(&body);
        assert!(
            msg.contains("`name` has nothing visible")
                && msg.contains("give a name people can read"),
            "{name:?}: {msg}"
        );
    }
    // an invisible character among visible ones is refused too: `a\u{200b}b`
    // passes for `ab`
    let (status, body) = create(
        &host,
        json!({"name": "a\u{200b}b", "id": "ab", "members": ["a", "b"]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(message(&body).contains("U+200B"), "{body}");
    host.shutdown().await;
}

#[tokio::test]
async fn room_ids_that_differ_only_in_case_clash() {
    let host = room_host(TALKER).await;
    let (status, body) = create(
        &host,
        json!({"name": "first", "id": "r1", "members": ["a", "b"]}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // by `id`, and by a name that serves as the id
    for body in [
        json!({"name": "second", "id": "R1", "members": ["a", "c"]}),
        json!({"name": "R1", "members": ["b", "c"]}),
    ] {
        let (status, answer) = create(&host, body.clone()).await;
        assert_eq!(status, 409, "{body}: {answer}");
        let msg = message(&answer);
        assert!(
            msg.contains("a room \"r1\" already exists")
                && msg.contains("ignore case")
                && msg.contains("\"R1\""),
            "{msg}"
        );
    }
    // the same id in the same case is refused as before
    let (status, answer) = create(
        &host,
        json!({"name": "again", "id": "r1", "members": ["a", "b"]}),
    )
    .await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        message(&answer).contains("a room \"r1\" already exists"),
        "{answer}"
    );
    let (status, list) = host.get("/v1/groups", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    let ids: Vec<&str> = list["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["r1"], "{list:#}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_discussion_nobody_was_offered_a_turn_to_go_on_is_not_called_silent() {
    let host = room_host(TALKER).await;
    let (status, body) = create(&host, json!({"name": "room1", "members": ["a", "b", "c"]})).await;
    assert_eq!(status, 201, "{body}");
    // b speaks in round 1; in round 2 it has only its own message to read,
    // so nobody takes a turn: nobody passed
    let (_, run) = host.discuss(TOKEN, "room1", "@b what do you think?").await;
    let ended = notice_texts(&run, "room_run_silent_round");
    assert_eq!(ended.len(), 1, "{run:#?}");
    assert!(
        !ended[0].contains("silence")
            && ended[0].contains("no member had anything new to answer after round 1"),
        "{}",
        ended[0]
    );
    host.shutdown().await;

    // members who were offered a turn and all passed: that is a silence
    let host = room_host(SILENT).await;
    let (status, body) = create(&host, json!({"name": "quiet", "members": ["a", "b"]})).await;
    assert_eq!(status, 201, "{body}");
    let (_, run) = host.discuss(TOKEN, "quiet", "anyone?").await;
    let ended = notice_texts(&run, "room_run_silent_round");
    assert_eq!(ended.len(), 1, "{run:#?}");
    assert!(
        ended[0].contains("round 1 passed in silence"),
        "{}",
        ended[0]
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_paused_member_in_a_shared_room_shows_others_no_token_use() {
    // alice's `cheap` spends its budget in its first turn; bob's `d` is
    // shareable, so the room is shared and bob reads its timeline
    let host = TestFleet::new()
        .midday()
        .script("s", TALKER)
        .bot("cheap", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 1")
        .bot_of("d", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true")
        .start()
        .await;
    let (status, room) = create(&host, json!({"name": "shr", "members": ["cheap", "d"]})).await;
    assert_eq!(status, 201, "{room}");
    assert_eq!(room["shared"], true, "{room}");
    let mut paused = Vec::new();
    for text in ["first", "second"] {
        let (_, run) = host.discuss(BOB_TOKEN, "shr", text).await;
        paused.extend(notice_texts(&run, "room_run_member_failed"));
    }
    assert!(!paused.is_empty(), "cheap was never paused");
    for text in &paused {
        assert!(
            text.starts_with("cheap-name (@cheap) is paused until ")
                && text.contains("takes no more turns in this discussion")
                && text.contains("shown only to its owner (alice)"),
            "{text}"
        );
        for private in ["token", "budget", " of 1"] {
            assert!(!text.contains(private), "{private} shown to bob: {text}");
        }
    }
    host.shutdown().await;
}
