//! The API as docs/api.md describes it, where a client written from the
//! docs alone found it otherwise: a search in the caller's own DM that
//! nobody has written in yet answers no hits (as its entries answer an
//! empty page), and the routes that take no body refuse one.

use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

async fn start() -> TestHost {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await
}

/// Regression: `GET /v1/search?session=S` on the caller's own DM with no
/// entries yet answered `404 no session`, while `GET
/// /v1/sessions/S/entries` answered it as an empty page.
#[tokio::test]
async fn search_in_an_unwritten_own_dm_finds_nothing_rather_than_404() {
    let host = start().await;
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    let (status, page) = host
        .get(&format!("/v1/sessions/{session}/entries"), TOKEN)
        .await;
    assert_eq!(status, 200, "{page}");
    for query in [
        format!("/v1/search?q=hello&session={session}"),
        format!("/v1/search?q=hello&session={session}&bot=r"),
    ] {
        let (status, v) = host.get(&query, TOKEN).await;
        assert_eq!(status, 200, "{query}: {v}");
        assert_eq!(v["total"], 0, "{v}");
        assert_eq!(v["hits"], Value::Array(Vec::new()), "{v}");
    }
    // what is not the caller's (or not the bot's) stays 404
    for (query, token) in [
        (format!("/v1/search?q=hello&session={session}"), BOB_TOKEN),
        (format!("/v1/search?q=hello&session={session}&bot=b"), TOKEN),
    ] {
        let (status, v) = host.get(&query, token).await;
        assert_eq!(status, 404, "{query}: {v}");
    }
    host.shutdown().await;
}

/// What `method path` with `body` answers.
async fn call(host: &TestHost, method: reqwest::Method, path: &str, body: &str) -> (u16, Value) {
    let resp = host
        .http
        .request(method, format!("{}{path}", host.url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Regression: the routes that take no body (a cancel, a retry, the
/// DELETEs) ignored whatever body came, while an unknown query parameter
/// was refused: a body is refused, `{}` and nothing pass.
#[tokio::test]
async fn routes_without_a_body_refuse_one() {
    use reqwest::Method;
    let host = start().await;
    let (_, end) = host.end_turn("r", "hello").await;
    let turn = end["turn"].as_str().unwrap().to_owned();
    let (status, v) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            r#"{"name": "pair", "members": ["r", "b"]}"#,
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let refused = [
        (Method::POST, "/v1/bots/r/cancel".to_owned()),
        (Method::POST, format!("/v1/turns/{turn}/retry")),
        (Method::DELETE, "/v1/groups/pair".to_owned()),
        (Method::DELETE, "/v1/memory/m-nothing".to_owned()),
        (Method::DELETE, "/v1/secrets/NOTHING".to_owned()),
        (Method::GET, "/v1/bots".to_owned()),
    ];
    for (method, path) in &refused {
        for body in [r#"{"force": true}"#, "garbage", "[]"] {
            let (status, v) = call(&host, method.clone(), path, body).await;
            assert_eq!(status, 400, "{method} {path} {body}: {v}");
            let message = v["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(&format!("{method} {path} takes no body")),
                "{message}"
            );
        }
    }
    // nothing, or an empty object, passes to the route
    let (status, v) = call(&host, Method::POST, "/v1/bots/r/cancel", "").await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = call(&host, Method::POST, "/v1/bots/r/cancel", " { } ").await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = call(&host, Method::DELETE, "/v1/groups/pair", "{}").await;
    assert_eq!(status, 200, "{v}");
    assert!(!v["closed_at"].is_null(), "{v}");
    host.shutdown().await;
}
