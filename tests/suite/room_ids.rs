//! Room ids through the API: one namespace for the whole fleet, ignoring
//! case. (Before, a user creating a room whose id another user's room held
//! was told that room's exact spelling, confirming a guessed name; and a
//! room made as `bobOnly` was not found as `bobonly` by its own owner,
//! though creation treats the two as the same id.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

use super::groups::SILENT;
use super::groups::create;

/// alice's bots `a`, `b`; bob's `x`, `y`, `z`.
async fn two_users() -> TestHost {
    TestFleet::new()
        .script("s", SILENT)
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .bot_of("x", "s", &["SendMessage"], "bob")
        .bot_of("y", "s", &["SendMessage"], "bob")
        .bot_of("z", "s", &["SendMessage"], "bob")
        .start()
        .await
}

fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_clash_with_another_users_room_does_not_tell_its_spelling_or_owner() {
    let host = two_users().await;
    let (status, body) = create(
        &host,
        BOB_TOKEN,
        json!({"name": "layoffs", "id": "bobOnly", "members": ["x", "y"]}),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // alice cannot read it …
    let (status, body) = host.get("/v1/groups/bobonly", TOKEN).await;
    assert_eq!(status, 404, "{body}");
    // … and a clash with it names only the id she asked for
    for (id, wanted) in [
        (json!("BOBONLY"), "BOBONLY"),
        (json!("bobonly"), "bobonly"),
        (json!("bobOnly"), "bobOnly"),
    ] {
        let (status, answer) = create(
            &host,
            TOKEN,
            json!({"name": "mine", "id": id, "members": ["a", "b"]}),
        )
        .await;
        assert_eq!(status, 409, "{id}: {answer}");
        let msg = message(&answer);
        assert_eq!(
            msg,
            format!(
                "the room id \"{wanted}\" is taken: room ids are shared by all users of the \
                 fleet and ignore case; choose another name or id"
            ),
            "{id}"
        );
    }
    // by a name that serves as the id, too
    let (status, answer) = create(
        &host,
        TOKEN,
        json!({"name": "BOBONLY", "members": ["a", "b"]}),
    )
    .await;
    assert_eq!(status, 409, "{answer}");
    let msg = message(&answer);
    assert!(
        !msg.contains("bobOnly") && !msg.contains("layoffs") && msg.contains("\"BOBONLY\""),
        "{msg}"
    );

    // its owner is told which room holds the id
    let (status, answer) = create(
        &host,
        BOB_TOKEN,
        json!({"name": "again", "id": "BOBONLY", "members": ["x", "z"]}),
    )
    .await;
    assert_eq!(status, 409, "{answer}");
    let msg = message(&answer);
    assert!(
        msg.contains("a room \"bobOnly\" already exists") && msg.contains("ignore case"),
        "{msg}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn every_room_route_finds_a_room_in_any_case() {
    let host = two_users().await;
    let (status, body) = create(
        &host,
        BOB_TOKEN,
        json!({"name": "Mix", "members": ["x", "y"]}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["id"], "Mix", "{body}");

    let (status, body) = host.get("/v1/groups/mix", BOB_TOKEN).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], "Mix", "{body}");
    let (status, body) = host.get("/v1/groups/MIX/entries", BOB_TOKEN).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["room"], "Mix", "{body}");
    let (status, body) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/mIx/members",
            BOB_TOKEN,
            Some(json!({"members": ["x", "y", "z"]})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["members"].as_array().map(Vec::len), Some(3), "{body}");
    let (status, body) = host
        .post_raw(
            "/v1/groups/mix/messages",
            Some(BOB_TOKEN),
            Some("k-1"),
            json!({"text": "hello all"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["room"], "Mix", "{body}");

    // another user still finds nothing, in any case
    for path in ["/v1/groups/mix", "/v1/groups/Mix", "/v1/groups/MIX/entries"] {
        let (status, body) = host.get(path, TOKEN).await;
        assert_eq!(status, 404, "{path}: {body}");
    }

    let (status, body) = host
        .call(reqwest::Method::DELETE, "/v1/groups/MIX", BOB_TOKEN, None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["closed_at"].is_i64(), "{body}");
    host.shutdown().await;
}
