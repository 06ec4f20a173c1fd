//! `botfleet send ROOM TEXT` names the room and the command that sends to
//! it, where it said only `no bot "team"` (found by QA): rooms and bots
//! are both addressed by id, and `send` is the command people try first.

use pretty_assertions::assert_eq;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::process::cli;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo from {{bot}}" } } ]
"#;

/// A host with alice's bots `a` and `b`, and her room `team` of both.
async fn with_team() -> TestHost {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    let (code, _, err) = cli(
        &["group", "create", "team", "--members", "a,b"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    host
}

#[tokio::test]
async fn send_to_a_room_names_group_send() {
    let host = with_team().await;

    let (code, out, err) = cli(&["send", "team", "hi"], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("no bot \"team\" for you: \"team\" is a room")
            && err.contains("`botfleet group send team TEXT`"),
        "{err}"
    );
    // over HTTP, the route
    let (status, body) = host
        .post_raw(
            "/v1/bots/team/messages",
            Some(TOKEN),
            None,
            r#"{"text": "hi"}"#,
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("send to it with POST /v1/groups/team/messages"),
        "{body}"
    );
    // nothing was sent to the room
    let (_, room) = host.get("/v1/groups/team", TOKEN).await;
    assert_eq!(room["last_seq"].as_i64().unwrap_or(0), 0, "{room}");
    // a key used in the room, then for a bot: the conflict names the room
    let (status, body) = host
        .post_raw(
            "/v1/groups/team/messages",
            Some(TOKEN),
            Some("k-room"),
            r#"{"text": "hello room"}"#,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = host
        .post_raw(
            "/v1/bots/a/messages",
            Some(TOKEN),
            Some("k-room"),
            r#"{"text": "hello room"}"#,
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("your message to team in another conversation"),
        "{body}"
    );
    // another user learns nothing of the room
    let (code, _, err) = cli(&["send", "team", "hi"], &host.url, BOB_TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no bot \"team\" for you") && !err.contains("room"),
        "{err}"
    );
    host.shutdown().await;
}

/// Every command that takes a bot names a room given in its place, with
/// the room's commands (QA, 2026-12-06: `cancel`, `routines`, `memory`,
/// `hooks` and `bots remove` said only `no bot "team"`).
#[tokio::test]
async fn a_room_where_a_bot_goes_is_named_by_every_command() {
    let host = with_team().await;
    for args in [
        &["cancel", "team"][..],
        &["routines", "team"],
        &["memory", "team"],
        &["hooks", "team"],
        &["bots", "remove", "team"],
    ] {
        let (code, _, err) = cli(args, &host.url, TOKEN).await;
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("no bot \"team\" for you: \"team\" is a room")
                && err.contains("`botfleet group send team TEXT`")
                && err.contains("`botfleet group transcript team`"),
            "{args:?}: {err}"
        );
    }
    // another user learns nothing of the room
    let (code, _, err) = cli(&["cancel", "team"], &host.url, BOB_TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("room"), "{err}");
    host.shutdown().await;
}
