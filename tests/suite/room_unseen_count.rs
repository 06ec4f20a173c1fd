//! A member addressed after a long stretch of a room's discussion is
//! told how many public messages it was not shown, all of them. (The
//! coordinator keeps the room's 200 newest public messages in memory and
//! counted only those: a member shown nothing since before them was told
//! "(180 earlier messages not shown)" of 201.)

use serde_json::json;

use super::groups::TALKER;
use super::groups::member_inputs;
use super::groups::post;
use super::groups::room_host;

/// Messages addressed to `a` alone before `b` is: each is a user message
/// and a's one reply, 220 public messages in all.
const ASKED_OF_A: usize = 110;

#[tokio::test]
async fn a_member_is_told_every_message_it_was_not_shown() {
    let host = room_host(TALKER).await;
    host.client()
        .post_ok(
            "/v1/groups",
            &json!({"name": "long", "members": ["a", "b"]}),
        )
        .await
        .unwrap();
    let mut last = json!(null);
    for i in 0..ASKED_OF_A {
        let (status, answer) =
            post(&host, "long", &format!("@a point {i}"), &format!("a-{i}")).await;
        assert_eq!(status, 202, "{answer}");
        last = answer;
    }
    // b is asked once a has answered them all
    host.wait_turn_end(
        last["session"].as_str().unwrap(),
        last["seq"].as_i64().unwrap(),
    )
    .await;
    let (status, asked) = post(&host, "long", "@b your view?", "b").await;
    assert_eq!(status, 202, "{asked}");
    let end = host
        .wait_turn_end(
            asked["session"].as_str().unwrap(),
            asked["seq"].as_i64().unwrap(),
        )
        .await;
    assert_eq!(end["deliveries"], 1, "{end:#}");

    let inputs = member_inputs(&host, "b", "long").await;
    assert_eq!(inputs.len(), 1, "{inputs:#?}");
    // 221 public messages are new to b (its own question included); the
    // 20 newest are shown
    let unseen = 2 * ASKED_OF_A + 1;
    assert!(
        inputs[0].contains(&format!("({} earlier messages not shown)", unseen - 20)),
        "{}",
        inputs[0]
    );
    assert!(inputs[0].contains("your view?"), "{}", inputs[0]);
    // a, shown each message as it came, is told of none it missed
    let a_inputs = member_inputs(&host, "a", "long").await;
    assert!(
        a_inputs.iter().all(|t| !t.contains("not shown")),
        "{a_inputs:#?}"
    );
    host.shutdown().await;
}
