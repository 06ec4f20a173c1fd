//! A room's owner changes its members or closes it, through the API and
//! the CLI. (Before, a room could never change: no route changed its
//! members, and none closed it.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::process::cli;

use super::groups::TALKER;

/// A turn whose input says "slow" takes a while; every member says one
/// thing each turn.
const SLOW: &str = r#"
[[rule]]
match = "slow"
steps = [ { delay_ms = 600, tool = "SendMessage", args = { text = "{{bot}} speaks" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} speaks" } } ]
"#;

/// a, b, c: alice's; d: bob's, shareable; e: bob's, not shareable.
async fn admin_host(script: &str) -> TestHost {
    TestFleet::new()
        .script("s", script)
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .bot("c", "s", &["SendMessage"])
        .bot_of("d", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true")
        .bot_of("e", "s", &["SendMessage"], "bob")
        .start()
        .await
}

async fn create(host: &TestHost, id: &str, members: &[&str]) -> Value {
    let (status, room) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": id, "members": members}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    room
}

async fn put_members(host: &TestHost, token: &str, room: &str, members: &[&str]) -> (u16, Value) {
    host.call(
        reqwest::Method::PUT,
        &format!("/v1/groups/{room}/members"),
        token,
        Some(json!({ "members": members })),
    )
    .await
}

async fn close(host: &TestHost, token: &str, room: &str) -> (u16, Value) {
    host.call(
        reqwest::Method::DELETE,
        &format!("/v1/groups/{room}"),
        token,
        None,
    )
    .await
}

fn member_ids(room: &Value) -> Vec<String> {
    room["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

fn authors(run: &[Value]) -> Vec<String> {
    run.iter()
        .filter(|e| e["kind"] == "delivery")
        .map(|e| e["author"].as_str().unwrap().to_owned())
        .collect()
}

fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The room's whole timeline as alice reads it.
async fn timeline(host: &TestHost, room: &str) -> Vec<Value> {
    let (status, page) = host
        .get(&format!("/v1/groups/{room}/entries?limit=1000"), TOKEN)
        .await;
    assert_eq!(status, 200, "{page}");
    page["entries"].as_array().unwrap().clone()
}

fn notices<'a>(entries: &'a [Value], code: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == code)
        .collect()
}

#[tokio::test]
async fn changed_members_answer_the_next_discussion() {
    let host = admin_host(TALKER).await;
    create(&host, "team", &["a", "b"]).await;
    let (_, run) = host.discuss(TOKEN, "team", "hello").await;
    assert_eq!(authors(&run), ["a", "b", "a", "b", "a", "b"], "{run:#?}");

    let (status, room) = put_members(&host, TOKEN, "team", &["c", "a"]).await;
    assert_eq!(status, 200, "{room}");
    assert_eq!(member_ids(&room), ["c", "a"]);
    assert_eq!(room["shared"], false, "{room}");
    assert_eq!(room["closed_at"], Value::Null, "{room}");
    assert_eq!(room["changed"], true, "{room}");
    // the room as GET shows it, with `changed` besides
    let (_, got) = host.get("/v1/groups/team", TOKEN).await;
    let mut room = room;
    room.as_object_mut().map(|o| o.remove("changed"));
    assert_eq!(got, room);

    let entries = timeline(&host, "team").await;
    let changed = notices(&entries, "members_changed");
    assert_eq!(changed.len(), 1, "{entries:#?}");
    let text = changed[0]["text"].as_str().unwrap();
    assert!(
        text.contains("joined: c-name (@c)")
            && text.contains("left: b-name (@b)")
            && text.contains("in speaking order: c-name (@c), a-name (@a)"),
        "{text}"
    );

    // the next discussion has the new members, in their order
    let (_, run) = host.discuss(TOKEN, "team", "hello again").await;
    assert_eq!(authors(&run), ["c", "a", "c", "a", "c", "a"], "{run:#?}");

    // the same list again: 200, and no second notice
    let (status, again) = put_members(&host, TOKEN, "team", &["c", "a"]).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(member_ids(&again), ["c", "a"]);
    let entries = timeline(&host, "team").await;
    assert_eq!(notices(&entries, "members_changed").len(), 1);

    // a shareable bot of bob's makes it shared; bob reads it then
    let (status, room) = put_members(&host, TOKEN, "team", &["a", "d"]).await;
    assert_eq!(status, 200, "{room}");
    assert_eq!(room["shared"], true, "{room}");
    let (status, _) = host.get("/v1/groups/team", BOB_TOKEN).await;
    assert_eq!(status, 200);
    // b's session of the room is kept: alice still reads what b said there
    let b_session = super::groups::member_session("b", "team");
    assert!(
        host.entries(&b_session)
            .await
            .iter()
            .any(|e| e["kind"] == "delivery"),
        "b's room session is gone"
    );
    host.shutdown().await;
}

/// A member asked to SEARCHME searches the transcripts and says what it
/// found (or why it could not).
const SEARCHER: &str = r#"
[[rule]]
match = "SEARCHME"
steps = [
  { tool = "SearchTranscript", args = { query = "anything" } },
  { tool = "SendMessage", args = { text = "found: {{tool_result}}" } },
]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// Adding another user's bot makes the room shared for the very next
/// discussion: its members' turns get the shared-room surface (no
/// SearchTranscript), though the room's coordinator stayed active.
#[tokio::test]
async fn a_member_change_that_shares_the_room_shares_its_next_turns() {
    let tools = &["SendMessage", "SearchTranscript"];
    let host = TestFleet::new()
        .script("s", SEARCHER)
        .bot("a", "s", tools)
        .bot("b", "s", tools)
        .bot_of("d", "s", tools, "bob")
        .bot_lines("shareable = true")
        .start()
        .await;
    create(&host, "team", &["a", "b"]).await;
    let refused = "found: error: the tool SearchTranscript is not available in a shared room's";
    let said = |run: &[Value]| -> Vec<String> {
        run.iter()
            .filter(|e| e["kind"] == "delivery")
            .map(|e| e["text"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, run) = host.discuss(TOKEN, "team", "@a SEARCHME").await;
    let before = said(&run);
    assert!(
        before.len() == 1 && !before[0].starts_with(refused),
        "{run:#?}"
    );
    let (status, room) = put_members(&host, TOKEN, "team", &["a", "d"]).await;
    assert_eq!((status, &room["shared"]), (200, &json!(true)), "{room}");
    let (_, run) = host.discuss(TOKEN, "team", "@a SEARCHME").await;
    let after = said(&run);
    assert!(
        after.len() == 1 && after[0].starts_with(refused),
        "{run:#?}"
    );
    host.shutdown().await;
}

/// A host whose room `team` of a and b has a discussion under way (a's
/// turn is slow) when its members change to c and b; the post's answer.
async fn changed_during_a_discussion() -> (TestHost, Value) {
    let host = admin_host(SLOW).await;
    create(&host, "team", &["a", "b"]).await;
    let posted = host
        .post_text("/v1/groups/team/messages", TOKEN, "slow start")
        .await;
    host.wait_running("a").await;
    let (status, room) = put_members(&host, TOKEN, "team", &["c", "b"]).await;
    assert_eq!(status, 200, "{room}");
    (host, posted)
}

#[tokio::test]
async fn a_running_discussion_finishes_with_the_members_it_had() {
    let (host, posted) = changed_during_a_discussion().await;
    let session = posted["session"].as_str().unwrap();
    let seq = posted["seq"].as_i64().unwrap();
    let end = host.wait_turn_end(session, seq).await;
    let end_seq = end["seq"].as_i64().unwrap();
    let run: Vec<Value> = timeline(&host, "team")
        .await
        .into_iter()
        .filter(|e| e["seq"].as_i64().unwrap() > seq && e["seq"].as_i64().unwrap() <= end_seq)
        .collect();
    // the members it started with, a and b, and nobody else
    let run_authors = authors(&run);
    assert_eq!(run_authors.first().map(String::as_str), Some("a"));
    assert!(run_authors.contains(&"b".to_owned()), "{run:#?}");
    assert!(!run_authors.contains(&"c".to_owned()), "{run:#?}");
    // the next one has the new members
    let (_, next) = host.discuss(TOKEN, "team", "next").await;
    assert_eq!(authors(&next), ["c", "b", "c", "b", "c", "b"], "{next:#?}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_discussion_cut_off_by_a_restart_resumes_with_the_members_it_had() {
    let (host, posted) = changed_during_a_discussion().await;
    // the host stops with the discussion under way; the next start
    // resumes it from its checkpoint
    let host = restart(host.shutdown().await).await;
    let session = posted["session"].as_str().unwrap();
    let seq = posted["seq"].as_i64().unwrap();
    host.wait_turn_end(session, seq).await;
    let run_authors = authors(&timeline(&host, "team").await);
    assert!(run_authors.contains(&"a".to_owned()), "{run_authors:?}");
    assert!(!run_authors.contains(&"c".to_owned()), "{run_authors:?}");
    let c_session = super::groups::member_session("c", "team");
    let c_inputs = host.client().entries_after(&c_session, 0).await;
    assert!(
        c_inputs.is_err() || c_inputs.as_ref().is_ok_and(Vec::is_empty),
        "c had a turn in a discussion it was not in: {c_inputs:?}"
    );
    let (_, next) = host.discuss(TOKEN, "team", "next").await;
    assert_eq!(authors(&next), ["c", "b", "c", "b", "c", "b"], "{next:#?}");
    host.shutdown().await;
}

#[tokio::test]
async fn only_the_owner_changes_or_closes_a_room() {
    let host = admin_host(TALKER).await;
    // bob reads the shared room (his d is a member), not alice's own room
    create(&host, "mixed", &["a", "d"]).await;
    create(&host, "mine", &["a", "b"]).await;
    let (status, body) = put_members(&host, BOB_TOKEN, "mixed", &["a", "d", "b"]).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "forbidden");
    assert!(
        message(&body).contains("only the room's owner (alice)"),
        "{body}"
    );
    let (status, body) = close(&host, BOB_TOKEN, "mixed").await;
    assert_eq!(status, 403, "{body}");
    for (status, body) in [
        put_members(&host, BOB_TOKEN, "mine", &["a", "c"]).await,
        close(&host, BOB_TOKEN, "mine").await,
        put_members(&host, TOKEN, "nosuch", &["a", "c"]).await,
    ] {
        assert_eq!(status, 404, "{body}");
        assert!(message(&body).contains("no room"), "{body}");
    }
    // nothing changed
    for (room, members) in [("mixed", ["a", "d"]), ("mine", ["a", "b"])] {
        let (_, got) = host.get(&format!("/v1/groups/{room}"), TOKEN).await;
        assert_eq!(member_ids(&got), members);
        assert_eq!(got["closed_at"], Value::Null);
    }
    host.shutdown().await;
}

#[tokio::test]
async fn bad_member_lists_get_the_errors_of_creation() {
    let host = admin_host(TALKER).await;
    create(&host, "team", &["a", "b"]).await;
    let lists: [&[&str]; 6] = [
        &["a"],
        &["a", "b", "c", "d", "x1", "x2", "x3"],
        &["a", "nosuch"],
        &["a", "e"],
        &["a", "a"],
        &["a", "not an id"],
    ];
    for list in lists {
        let (created, refusal) = host
            .post_raw(
                "/v1/groups",
                Some(TOKEN),
                None,
                json!({"name": "other", "members": list}).to_string(),
            )
            .await;
        let (status, body) = put_members(&host, TOKEN, "team", list).await;
        assert!(status >= 400, "{list:?}: {body}");
        assert_eq!(
            (status, message(&body)),
            (created, message(&refusal)),
            "{list:?}"
        );
    }
    let (status, body) = put_members(&host, TOKEN, "team", &["a"]).await;
    assert_eq!(status, 400);
    assert!(message(&body).contains("at least 2 members"), "{body}");
    let (status, body) = put_members(&host, TOKEN, "team", &["a", "e"]).await;
    assert_eq!(status, 404);
    assert!(message(&body).contains("shareable = true"), "{body}");
    // a body that is no member list
    let (status, body) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/team/members",
            TOKEN,
            Some(json!({"members": ["a", "b"], "extra": 1})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (_, got) = host.get("/v1/groups/team", TOKEN).await;
    assert_eq!(member_ids(&got), ["a", "b"]);
    assert!(notices(&timeline(&host, "team").await, "members_changed").is_empty());
    host.shutdown().await;
}

#[tokio::test]
async fn a_closed_room_refuses_messages_but_keeps_its_timeline() {
    let host = admin_host(TALKER).await;
    create(&host, "team", &["a", "b"]).await;
    create(&host, "other", &["a", "c"]).await;
    host.discuss(TOKEN, "team", "remember the zebracorn").await;
    let post_keyed = async |key: &str, text: &str| {
        host.post_raw(
            "/v1/groups/team/messages",
            Some(TOKEN),
            Some(key),
            json!({ "text": text }).to_string(),
        )
        .await
    };
    let (status, before) = post_keyed("before-close", "one more").await;
    assert_eq!(status, 202, "{before}");

    let (status, room) = close(&host, TOKEN, "team").await;
    assert_eq!(status, 200, "{room}");
    let closed_at = room["closed_at"].as_i64().expect("closed_at");
    assert_eq!(member_ids(&room), ["a", "b"]);
    // twice: 200, unchanged
    let (status, again) = close(&host, TOKEN, "team").await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["closed_at"].as_i64(), Some(closed_at));
    let (status, got) = host.get("/v1/groups/team", TOKEN).await;
    assert_eq!((status, got["closed_at"].as_i64()), (200, Some(closed_at)));

    // no more messages, nor member changes
    let (status, body) = post_keyed("after-close", "anyone?").await;
    assert_eq!(status, 409, "{body}");
    let msg = message(&body);
    assert!(
        msg.contains("the room is closed") && msg.contains("create a new room"),
        "{msg}"
    );
    // a key the ledger cannot judge (a UUIDv7 older than its window) is
    // refused as the room's, not `unknown` with "send with a new key",
    // which is refused the same way (QA, 2026-12-06)
    let (status, body) = post_keyed("01800000-0000-7000-8000-000000000000", "anyone?").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["status"].is_null() && message(&body).contains("the room is closed"),
        "{body}"
    );
    // a retry of a message sent before the close is still its duplicate
    let (status, again) = post_keyed("before-close", "one more").await;
    assert_eq!((status, &again["seq"]), (200, &before["seq"]), "{again}");
    assert_eq!(again["status"], "duplicate", "{again}");
    let (status, body) = put_members(&host, TOKEN, "team", &["a", "c"]).await;
    assert_eq!(status, 409, "{body}");
    assert!(message(&body).contains("the room is closed"), "{body}");

    // the timeline is all there, with the close, and searchable
    let entries = timeline(&host, "team").await;
    assert!(
        entries
            .iter()
            .any(|e| e["text"] == "remember the zebracorn"),
        "{entries:#?}"
    );
    assert!(!entries.iter().any(|e| e["text"] == "anyone?"));
    let closed = notices(&entries, "room_closed");
    assert_eq!(closed.len(), 1, "{entries:#?}");
    // it says what still runs: every discussion of a message posted
    // before it, not only a running one (QA)
    assert!(
        closed[0]["text"]
            .as_str()
            .unwrap()
            .contains("the discussions of messages posted before the close still run"),
        "{closed:#?}"
    );
    let hit = host
        .wait_get("/v1/search?q=zebracorn", |v| {
            v["hits"]
                .as_array()?
                .iter()
                .find(|h| h["bot"] == "team")
                .cloned()
        })
        .await;
    assert_eq!(hit["session_kind"], "room", "{hit}");

    // listed with its close time; `open=true` leaves it out
    let (_, list) = host.get("/v1/groups", TOKEN).await;
    let listed: Vec<(String, Value)> = list["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["id"].as_str().unwrap().to_owned(), g["closed_at"].clone()))
        .collect();
    assert_eq!(
        listed,
        [
            ("other".to_owned(), Value::Null),
            ("team".to_owned(), json!(closed_at))
        ]
    );
    let (status, open) = host.get("/v1/groups?open=true", TOKEN).await;
    assert_eq!(status, 200, "{open}");
    let ids: Vec<&str> = open["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["other"]);
    host.shutdown().await;
}

#[tokio::test]
async fn a_discussion_running_at_the_close_finishes() {
    let host = admin_host(SLOW).await;
    create(&host, "team", &["a", "b"]).await;
    let posted = host
        .post_text("/v1/groups/team/messages", TOKEN, "slow start")
        .await;
    host.wait_running("a").await;
    let (status, room) = close(&host, TOKEN, "team").await;
    assert_eq!(status, 200, "{room}");
    let end = host
        .wait_turn_end(
            posted["session"].as_str().unwrap(),
            posted["seq"].as_i64().unwrap(),
        )
        .await;
    assert!(end["deliveries"].as_i64() > Some(0), "{end}");
    let entries = timeline(&host, "team").await;
    let run_authors = authors(&entries);
    assert!(
        run_authors.contains(&"a".to_owned()) && run_authors.contains(&"b".to_owned()),
        "{entries:#?}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn closed_rooms_and_changed_members_survive_a_restart() {
    let host = admin_host(TALKER).await;
    create(&host, "team", &["a", "b"]).await;
    create(&host, "old", &["a", "b"]).await;
    // the coordinator of `team` is active with a and b when they change
    host.discuss(TOKEN, "team", "before").await;
    let (status, _) = put_members(&host, TOKEN, "team", &["b", "c"]).await;
    assert_eq!(status, 200);
    let (status, closed) = close(&host, TOKEN, "old").await;
    assert_eq!(status, 200);
    let fleet = host.shutdown().await;

    let host = restart(fleet).await;
    let (_, team) = host.get("/v1/groups/team", TOKEN).await;
    assert_eq!(member_ids(&team), ["b", "c"]);
    let (_, old) = host.get("/v1/groups/old", TOKEN).await;
    assert_eq!(old["closed_at"], closed["closed_at"]);
    let (status, body) = host
        .post_raw(
            "/v1/groups/old/messages",
            Some(TOKEN),
            None,
            json!({"text": "hi"}).to_string(),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let (_, run) = host.discuss(TOKEN, "team", "after").await;
    assert_eq!(authors(&run), ["b", "c", "b", "c", "b", "c"], "{run:#?}");
    assert_eq!(
        notices(&timeline(&host, "team").await, "members_changed").len(),
        1
    );
    host.shutdown().await;
}

#[tokio::test]
async fn cli_group_members_and_close() {
    let host = admin_host(TALKER).await;
    create(&host, "team", &["a", "b"]).await;
    let (code, out, err) = cli(&["group", "members", "team", "a,c"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "room team now has a, c (not shared)");
    // the same list again changes nothing, and says so (QA)
    let (code, out, err) = cli(&["group", "members", "team", "a,c"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        "room team already has a, c (not shared): nothing changed"
    );
    let (code, out, err) = cli(
        &["group", "members", "team", "a,d", "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (member_ids(&v), &v["shared"]),
        (vec!["a".into(), "d".into()], &json!(true))
    );
    // the host's refusals, as for `group create`
    let (code, _, err) = cli(&["group", "members", "team", "a"], &host.url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("at least 2 members"), "{err}");
    let (code, _, err) = cli(&["group", "close", "team"], &host.url, BOB_TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("only the room's owner (alice)"), "{err}");

    let (code, out, err) = cli(&["group", "close", "team"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("room team is closed"), "{out}");
    let (code, out, err) = cli(&["group", "close", "team", "--json"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["closed_at"].is_i64(), "{v}");
    let (code, _, err) = cli(&["group", "send", "team", "hi"], &host.url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("the room is closed") && err.contains("create a new room"),
        "{err}"
    );
    host.shutdown().await;
}
