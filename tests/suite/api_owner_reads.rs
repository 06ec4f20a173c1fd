//! The API's reads that once decoded every bot of the caller: the entries
//! of a DM nobody wrote in yet (`GET /v1/sessions/{id}/entries`) and a
//! turn whose record is not stored yet, running its first step
//! (`GET /v1/turns/{turn}`). They now read the owner's bot ids only, or
//! the bot running the turn; the answers stay the same, to the owner and
//! to anyone else.

use botfleet_memory::BotId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
match = "^long"
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "finally" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

fn fleet() -> TestFleet {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .bot_of("d", "s", &["SendMessage"], "bob")
}

fn error_text(body: &Value) -> String {
    body.to_string()
}

/// A turn still in its first step (no record stored): its owner reads it
/// as running, and cannot retry it; another user with bots of his own
/// gets the `404` of an unknown id, with the same text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_in_its_first_step_is_read_by_its_owner_only() {
    let host = fleet().start().await;
    let (status, _) = host.send("r", "long job", None).await;
    assert_eq!(status, 202);
    host.wait_running("r").await;
    let (status, turns) = host.get("/v1/bots/r/turns", TOKEN).await;
    assert_eq!(status, 200, "{turns:#}");
    let turn = turns["turns"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(turns["turns"][0]["status"], "running", "{turns:#}");

    let (status, record) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    assert_eq!(status, 200, "{record:#}");
    assert_eq!(record["turn"]["status"], "running", "{record:#}");
    assert_eq!(record["turn"]["bot"], "r", "{record:#}");
    assert_eq!(record["tool_calls"], serde_json::json!([]), "{record:#}");

    let (status, refused) = host
        .post_raw(&format!("/v1/turns/{turn}/retry"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 409, "{refused:#}");
    assert!(
        error_text(&refused).contains("still running"),
        "{refused:#}"
    );

    let (status, bobs) = host.get(&format!("/v1/turns/{turn}"), BOB_TOKEN).await;
    assert_eq!(status, 404, "{bobs:#}");
    let unknown = "0190a7c2-0000-7000-8000-000000000000";
    let (status, none) = host.get(&format!("/v1/turns/{unknown}"), TOKEN).await;
    assert_eq!(status, 404, "{none:#}");
    assert_eq!(
        error_text(&bobs).replace(&turn, "ID"),
        error_text(&none).replace(unknown, "ID")
    );
    host.shutdown().await;
}

/// The DM of a bot nobody wrote to yet reads as empty to its owner; to
/// another user it is missing, as is a DM of his bot with the owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritten_dm_is_read_by_its_owner_only() {
    let host = fleet().start().await;
    let (status, dm) = host.get("/v1/bots/q/session", TOKEN).await;
    assert_eq!(status, 200, "{dm:#}");
    let session = dm["session"].as_str().unwrap().to_owned();
    let path = format!("/v1/sessions/{session}/entries");
    let (status, page) = host.get(&path, TOKEN).await;
    assert_eq!(status, 200, "{page:#}");
    assert_eq!(
        (
            &page["bot"],
            &page["kind"],
            &page["last_seq"],
            &page["entries"]
        ),
        (
            &Value::from("q"),
            &Value::from("dm"),
            &Value::from(0),
            &serde_json::json!([])
        ),
        "{page:#}"
    );
    let (status, bobs) = host.get(&path, BOB_TOKEN).await;
    assert_eq!(status, 404, "{bobs:#}");
    assert!(
        error_text(&bobs).contains(&format!("no session {session} for you")),
        "{bobs:#}"
    );
    // bob's bot `d` with alice: not a DM of hers
    let theirs = SessionKey {
        bot: BotId::new("d").unwrap(),
        kind: SessionKind::Dm,
        peer: "alice".into(),
    }
    .id();
    let (status, page) = host
        .get(&format!("/v1/sessions/{theirs}/entries"), TOKEN)
        .await;
    assert_eq!(status, 404, "{page:#}");
    // and bob's own DM with `d`, unwritten too, reads as empty to him
    let (_, dm) = host.get("/v1/bots/d/session", BOB_TOKEN).await;
    let (status, page) = host
        .get(
            &format!("/v1/sessions/{}/entries", dm["session"].as_str().unwrap()),
            BOB_TOKEN,
        )
        .await;
    assert_eq!(status, 200, "{page:#}");
    assert_eq!(page["bot"], "d", "{page:#}");
    host.shutdown().await;
}
