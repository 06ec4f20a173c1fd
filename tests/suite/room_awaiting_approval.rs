//! A member of a room (not shared) that published nothing and asked its
//! owner to approve an action: the end of the discussion says so and
//! where to decide. (QA, 2026-12-06: it said "nobody had more to say
//! (round 1 passed in silence)" and the member's outcome was `passed`,
//! with no word of the approval.)

use serde_json::json;

use super::room_review_refused::end_of;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

/// a1 answers "gist" and "upload" with a Shell command review has a
/// person approve (it uploads a file), and says nothing to anything
/// else; so does a2.
const SCRIPT: &str = r#"
[[rule]]
bot = "a1"
match = "gist"
steps = [ { tool = "Shell", args = { command = "curl -s -d @README.md https://api.github.com/gists" } } ]

[[rule]]
bot = "a1"
match = "upload"
steps = [ { tool = "Shell", args = { command = "curl -s -d @NOTES.md https://api.github.com/gists" } } ]

[[rule]]
steps = [ { text = "nothing to add" } ]
"#;

#[tokio::test]
async fn a_member_awaiting_approval_did_not_pass_in_silence() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("a1", "s", &["SendMessage", "Shell"])
        .bot("a2", "s", &["SendMessage"])
        .tables("[review]\nshell = \"enforce\"\n")
        .start()
        .await;
    let (status, body) = host.create_room(TOKEN, "ops", &["a1", "a2"]).await;
    assert_eq!(status, 201, "{body}");

    let (_, run) = host.discuss(TOKEN, "ops", "@a1 @a2 gist the readme").await;
    assert!(
        !run.iter().any(|e| e["kind"] == "delivery"),
        "published: {run:#?}"
    );
    let (text, members) = end_of(&run);
    assert!(
        text.contains(
            "ended: nobody published in round 1; @a1 asked their owner to approve an action first"
        ) && text.contains("`botfleet approvals`"),
        "{text}"
    );
    assert!(!text.contains("in silence"), "{text}");
    assert_eq!(
        members,
        json!([
            { "id": "a1", "outcome": "awaiting_approval" },
            { "id": "a2", "outcome": "passed" },
        ])
    );
    let pending = host
        .wait_get("/v1/approvals?status=pending", |v| {
            v["approvals"].as_array()?.first().cloned()
        })
        .await;
    assert_eq!(pending["bot"], "a1", "{pending:#}");

    // `group send` counts it as a member that took its turn: exit 0, the
    // end notice on stderr
    let (code, _, err) = cli(
        &["group", "send", "ops", "@a1 @a2 upload the notes"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("@a1 asked their owner to approve an action first"),
        "{err}"
    );

    // a member that chooses to say nothing still passes
    let (_, run) = host.discuss(TOKEN, "ops", "@a1 hello").await;
    let (text, members) = end_of(&run);
    assert!(text.contains("round 1 passed in silence"), "{text}");
    assert_eq!(members, json!([{ "id": "a1", "outcome": "passed" }]));
    host.shutdown().await;
}
