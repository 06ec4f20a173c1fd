//! A message that named a member who left the room before its discussion
//! began addresses nobody; the room's notice names the member with why it
//! took no turn, and who the members are now, so the person knows whom
//! to ask (it said only "nobody was addressed", found by QA; then "nobody
//! was addressed" beside "@c … took no turn").

use serde_json::json;

use super::groups::create;
use super::groups::post;
use super::groups::room_host;
use crate::support::fleet::TOKEN;

/// Members take their time with the first message (its discussion is
/// still on when the next message and the member change come), and talk
/// at once otherwise.
const SLOW_FIRST: &str = r#"
[[rule]]
match = "SLOW first"
steps = [ { delay_ms = 1500, tool = "SendMessage", args = { text = "{{bot}} done" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} speaks" } } ]
"#;

#[tokio::test]
async fn a_message_to_a_member_who_left_names_the_members_now() {
    let host = room_host(SLOW_FIRST).await;
    let (status, room) = create(
        &host,
        TOKEN,
        json!({"name": "mc", "members": ["a", "b", "c"]}),
    )
    .await;
    assert_eq!(status, 201, "{room}");
    let (status, first) = post(&host, "mc", "SLOW first", "k1").await;
    assert_eq!(status, 202, "{first}");
    let (status, queued) = post(&host, "mc", "@c queued question", "k2").await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["addressed"], json!(["c"]), "{queued}");
    let (status, v) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/mc/members",
            TOKEN,
            Some(json!({"members": ["a", "b"]})),
        )
        .await;
    assert_eq!(status, 200, "{v}");

    let session = queued["session"].as_str().unwrap().to_owned();
    let seq = queued["seq"].as_i64().unwrap();
    host.wait_turn_end(&session, seq).await;
    let (status, page) = host
        .get(&format!("/v1/groups/mc/entries?after={seq}"), TOKEN)
        .await;
    assert_eq!(status, 200, "{page}");
    let ended = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["code"] == "room_run_no_members")
        .unwrap_or_else(|| panic!("no room_run_no_members notice: {page:#}"))
        .clone();
    let text = ended["text"].as_str().unwrap();
    // the member it addressed is named with why it took no turn, not
    // "nobody was addressed"
    assert!(
        text.contains(&format!(
            "Discussion of message #{seq} ended: no member addressed could take a turn; \
             @c (taken out of the room after the message was posted) took no turn; \
             the room's members now: @a (a-name), @b (b-name)"
        )),
        "{text}"
    );
    host.shutdown().await;
}
