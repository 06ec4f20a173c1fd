//! Over-long ids and names given to the API and to the CLI: each is
//! refused with a short message that names the argument and its limit and
//! shows at most a short prefix of the value (testers saw a 65,000
//! character id echoed back whole, or a message about something else).

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

/// Longest message an over-long value may get: a sentence or two.
const SHORT: usize = 400;

/// Fails unless `message` is short, names `names`, and shows no more of
/// `long` than a prefix of 24 characters.
fn assert_short(what: &str, message: &str, names: &str, long: &str) {
    assert!(
        message.len() <= SHORT,
        "{what}: {} bytes: {message:.600}",
        message.len()
    );
    assert!(
        message.contains(names),
        "{what}: does not name {names:?}: {message}"
    );
    assert!(
        !message.contains(&long[..25]),
        "{what}: echoes the value: {message}"
    );
}

/// Regression: every route of the API that takes an id or a name in its
/// path, query or body answered a 65,000 character one by quoting it
/// whole (a secret's name, a webhook's, a room's members too).
#[tokio::test]
async fn the_api_refuses_an_over_long_id_briefly() {
    let host = TestFleet::new()
        .script("s", "[[rule]]\nsteps = [ { text = \"ok\" } ]\n")
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let long = "x".repeat(65_000);
    let name = "X".repeat(65_000);
    let text = json!({"text": "hi"}).to_string();
    let routine = json!({"cron": "0 8 * * *", "timezone": "UTC", "prompt": "hi"}).to_string();
    let routes: Vec<(&str, String, String, &str)> = vec![
        ("GET", format!("/v1/bots/{long}"), String::new(), "bot id"),
        (
            "POST",
            format!("/v1/bots/{long}/messages"),
            text.clone(),
            "bot id",
        ),
        (
            "GET",
            format!("/v1/bots/{long}/session"),
            String::new(),
            "bot id",
        ),
        (
            "POST",
            format!("/v1/bots/{long}/cancel"),
            String::new(),
            "bot id",
        ),
        (
            "GET",
            format!("/v1/bots/{long}/turns"),
            String::new(),
            "bot id",
        ),
        (
            "GET",
            format!("/v1/bots/{long}/memory"),
            String::new(),
            "bot id",
        ),
        (
            "GET",
            format!("/v1/bots/{long}/reviews"),
            String::new(),
            "bot id",
        ),
        (
            "GET",
            format!("/v1/bots/{long}/routines"),
            String::new(),
            "bot id",
        ),
        (
            "PUT",
            format!("/v1/bots/r/routines/{long}"),
            routine,
            "routine",
        ),
        (
            "DELETE",
            format!("/v1/bots/r/routines/{long}"),
            String::new(),
            "routine",
        ),
        (
            "POST",
            format!("/v1/hooks/{long}/gh"),
            "{}".into(),
            "webhook",
        ),
        (
            "POST",
            format!("/v1/hooks/r/{long}"),
            "{}".into(),
            "webhook",
        ),
        (
            "GET",
            format!("/v1/sessions/{long}/entries"),
            String::new(),
            "session id",
        ),
        ("GET", format!("/v1/turns/{long}"), String::new(), "turn id"),
        (
            "POST",
            format!("/v1/turns/{long}/retry"),
            String::new(),
            "turn id",
        ),
        (
            "GET",
            format!("/v1/approvals/{long}"),
            String::new(),
            "approval id",
        ),
        (
            "POST",
            format!("/v1/approvals/{long}"),
            json!({"decision": "approve"}).to_string(),
            "approval id",
        ),
        ("GET", format!("/v1/groups/{long}"), String::new(), "room"),
        ("POST", format!("/v1/groups/{long}/messages"), text, "room"),
        (
            "GET",
            format!("/v1/groups/{long}/entries"),
            String::new(),
            "room",
        ),
        (
            "POST",
            "/v1/groups".into(),
            json!({"id": long, "name": "Room", "members": ["r"]}).to_string(),
            "room id",
        ),
        (
            "POST",
            "/v1/groups".into(),
            json!({"id": "room", "name": "Room", "members": ["r", long]}).to_string(),
            "bot id",
        ),
        (
            "GET",
            format!("/v1/search?q=hi&session={long}"),
            String::new(),
            "session",
        ),
        (
            "GET",
            format!("/v1/search?q=hi&bot={long}"),
            String::new(),
            "bot",
        ),
        (
            "DELETE",
            format!("/v1/memory/{long}"),
            String::new(),
            "memory id",
        ),
        (
            "PUT",
            format!("/v1/secrets/{name}"),
            json!({"value": "v"}).to_string(),
            "secret name",
        ),
        (
            "DELETE",
            format!("/v1/secrets/{name}"),
            String::new(),
            "secret name",
        ),
    ];
    for (method, path, body, names) in routes {
        let what = format!("{method} {:.60}", path);
        let resp = host
            .http
            .request(method.parse().unwrap(), format!("{}{path}", host.url))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        assert!((400..500).contains(&status), "{what}: {status} {v:.300}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert_short(&what, message, names, &long);
        assert!(
            message.contains("xxxxxxxx") || message.contains("XXXXXXXX"),
            "{what}: {message}"
        );
    }
    host.shutdown().await;
}

/// Regression: the CLI said of a 65,000 character id that it was too long
/// for a URL (and sent one of 60,000 to the host, which echoed it whole);
/// it names the argument and what it must be, with a short prefix.
#[tokio::test]
async fn the_cli_refuses_an_over_long_id_briefly() {
    let host = TestFleet::new()
        .script("s", "[[rule]]\nsteps = [ { text = \"ok\" } ]\n")
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    for n in [65_000, 60_000, 65] {
        let long = "x".repeat(n);
        for (args, what, limit) in [
            (vec!["send", &long, "hi"], "bot id", "1 to 64 characters"),
            (vec!["transcript", &long], "bot id", "1 to 64 characters"),
            (vec!["cancel", &long], "bot id", "1 to 64 characters"),
            (vec!["memory", &long], "bot id", "1 to 64 characters"),
            (vec!["retry", &long], "turn id", "a UUID of 36 characters"),
            (
                vec!["approve", &long],
                "approval id",
                "a UUID of 36 characters",
            ),
            (
                vec!["deny", &long],
                "approval id",
                "a UUID of 36 characters",
            ),
            (vec!["forget", &long], "memory item id", "m- and 12"),
            (
                vec!["group", "send", &long, "hi"],
                "room id",
                "1 to 64 characters",
            ),
            (
                vec!["group", "transcript", &long],
                "room id",
                "1 to 64 characters",
            ),
            (
                vec!["search", "hi", "--session", &long],
                "session id",
                "a UUID of 36",
            ),
            (
                vec!["search", "hi", "--bot", &long],
                "bot id",
                "1 to 64 characters",
            ),
        ] {
            let (code, out, err) = cli(&args, &host.url, TOKEN).await;
            let shown = format!("{:?} ({n})", &args[0]);
            assert!(code == 1 || code == 2, "{shown}: {code} {out:.200}");
            assert_short(&shown, err.trim(), what, &long);
            assert!(err.contains(limit), "{shown}: {err}");
            assert!(err.contains("xxxxxxxx"), "{shown}: {err}");
        }
    }
    host.shutdown().await;
}
