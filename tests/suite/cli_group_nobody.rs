//! `botfleet group send` with a message that addresses nobody (only
//! `@names` no member has): the room says nobody will answer, and the
//! command's exit status says so too.

use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo from {{bot}}" } } ]
"#;

/// Regression: `group send ROOM "@Nobody hi"` exited 0, as a discussion
/// that was answered, with `"status": "completed"` in JSON: a script could
/// not tell that nobody was addressed (the room wrote "nobody will
/// answer"). It exits 4, the room's explanation (naming its members) on
/// stderr, `"status": "nobody_addressed"` with that `notice` in JSON; a
/// retry with the same `--nonce` says the same, and a message that also
/// names a member is answered (0) as before.
#[tokio::test]
async fn a_message_that_addresses_nobody_exits_non_zero() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    let (code, _, err) = cli(
        &["group", "create", "room", "--members", "a,b"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");

    let send = ["group", "send", "room", "@Nobody hi", "--nonce", "k-1"];
    for attempt in 0..2 {
        let (code, out, err) = cli(&send, &host.url, TOKEN).await;
        assert_eq!((code, out.as_str()), (4, ""), "{attempt}: {err}");
        assert!(
            err.contains("No member of this room is called @Nobody; nobody else was addressed, so nobody will answer. Members: @a")
                && err.contains("nobody was addressed"),
            "{err}"
        );
    }

    let (code, out, err) = cli(
        &["group", "send", "room", "@Ghost hello", "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!((code, err.as_str()), (4, ""), "{out}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (&v["status"], &v["unknown_mentions"], &v["replies"]),
        (
            &Value::from("nobody_addressed"),
            &serde_json::json!(["Ghost"]),
            &serde_json::json!([])
        ),
        "{v}"
    );
    let notice = v["notice"].as_str().unwrap();
    assert!(
        notice.contains("called @Ghost") && notice.contains("Members: @a"),
        "{notice}"
    );

    let (code, out, err) = cli(
        &["group", "send", "room", "@Nobody @a hi"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "a-name (bot a) ▸ echo from a", "{err}");
    assert!(err.contains("no member of room is called @Nobody"), "{err}");
    host.shutdown().await;
}
