//! A member whose message auto-review refused in a shared room, and that
//! published nothing: the end of the discussion says so. (QA: it said
//! "nobody had more to say (round 1 passed in silence)" and the member's
//! outcome was `passed`, as if it had chosen to say nothing.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::process::cli;

/// a1 answers "key" with a message holding a token auto-review asks
/// about (so refuses in a room), and says nothing to anything else.
const SCRIPT: &str = r#"
[[rule]]
bot = "a1"
match = "key"
steps = [ { tool = "SendMessage", args = { text = "the key is ghp_abcdefghijklmnopqrstuvwxyz0123456789" } } ]

[[rule]]
bot = "b1"
match = "kaboom"
steps = [ { fail = "b1's model is down" } ]

[[rule]]
steps = [ { text = "nothing to add" } ]
"#;

/// The end notice's text and the members of a discussion's `turn_end`.
pub(super) fn end_of(run: &[Value]) -> (String, Value) {
    let notice = run
        .iter()
        .find(|e| {
            e["kind"] == "notice"
                && e["code"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("room_run_"))
        })
        .unwrap_or_else(|| panic!("no end notice: {run:#?}"));
    let end = run
        .iter()
        .find(|e| e["kind"] == "turn_end")
        .unwrap_or_else(|| panic!("no turn_end: {run:#?}"));
    (
        notice["text"].as_str().unwrap().to_owned(),
        end["members"].clone(),
    )
}

/// A host where alice's a1 and bob's shareable b1 are in alice's room
/// `own`, shared with bob.
async fn shared_room() -> TestHost {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("a1", "s", &["SendMessage"])
        .bot_of("b1", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true")
        .start()
        .await;
    let (status, body) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({ "name": "own", "id": "own", "members": ["a1", "b1"] }).to_string(),
        )
        .await;
    assert_eq!((status, &body["shared"]), (201, &json!(true)), "{body}");
    host
}

#[tokio::test]
async fn a_member_whose_reply_review_refused_did_not_pass_in_silence() {
    let host = shared_room().await;

    let (_, run) = host.discuss(TOKEN, "own", "@a1 what is the key?").await;
    assert!(
        !run.iter().any(|e| e["kind"] == "delivery"),
        "published: {run:#?}"
    );
    assert!(!Value::from(run.clone()).to_string().contains("ghp_"));
    let (text, members) = end_of(&run);
    assert!(
        text.contains("auto-review refused what @a1 tried to say"),
        "{text}"
    );
    // said once: the round, then whose messages review refused
    assert!(
        text.contains("ended: nobody published in round 1; auto-review refused what @a1"),
        "{text}"
    );
    assert_eq!(text.matches("auto-review").count(), 1, "{text}");
    assert!(!text.contains("in silence"), "{text}");
    assert_eq!(members, json!([{ "id": "a1", "outcome": "held" }]));

    // a member that chooses to say nothing still passes
    let (_, run) = host.discuss(TOKEN, "own", "@a1 hello").await;
    let (text, members) = end_of(&run);
    assert!(text.contains("round 1 passed in silence"), "{text}");
    assert!(!text.contains("auto-review"), "{text}");
    assert_eq!(members, json!([{ "id": "a1", "outcome": "passed" }]));
    host.shutdown().await;
}

/// `group send` whose discussion had a member held by review and one that
/// failed: the held one took its turn and did not fail, so this is not
/// "every member that took a turn failed" (exit 3, as it was); all held
/// is 0, the end notice on stderr saying why.
#[tokio::test]
async fn group_send_counts_a_held_member_as_one_that_took_its_turn() {
    let host = shared_room().await;
    let (code, _, err) = cli(
        &["group", "send", "own", "@a1 @b1 the key, kaboom"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("auto-review refused what @a1 tried to say"),
        "{err}"
    );
    let (code, _, err) = cli(&["group", "send", "own", "@a1 the key?"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("auto-review refused what @a1 tried to say"),
        "{err}"
    );
    host.shutdown().await;
}
