//! How the API reads a request's input, on every route: bodies must be
//! JSON objects within the body limit, path segments must be text, query
//! parameters must be ones the route takes, the Authorization scheme is
//! case-insensitive — and every refusal has the one JSON error shape.

use reqwest::Method;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

async fn host() -> TestHost {
    TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .host("max_body_bytes = 4096")
        .start()
        .await
}

/// An answer: status, content type, body (`Null` if not JSON).
struct Answer {
    status: u16,
    content_type: String,
    body: Value,
}

impl Answer {
    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

async fn call(
    host: &TestHost,
    method: Method,
    path: &str,
    auth: Option<&str>,
    body: Option<String>,
) -> Answer {
    let mut req = host.http.request(method, format!("{}{path}", host.url));
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    let text = resp.text().await.unwrap();
    Answer {
        status,
        content_type,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
    }
}

async fn as_alice(host: &TestHost, method: Method, path: &str, body: Option<String>) -> Answer {
    call(host, method, path, Some(&format!("Bearer {TOKEN}")), body).await
}

/// An approval id that names no approval.
const NO_APPROVAL: &str = "01930000-0000-7000-8000-000000000000";

/// Every route that takes a JSON body, with an existing target.
fn body_routes() -> Vec<(Method, String)> {
    vec![
        (Method::POST, "/v1/bots/r/messages".into()),
        (Method::POST, "/v1/groups".into()),
        (Method::POST, "/v1/groups/room/messages".into()),
        (Method::POST, format!("/v1/approvals/{NO_APPROVAL}")),
        (Method::PUT, "/v1/bots/r/routines/arr".into()),
        (Method::PUT, "/v1/secrets/ARR".into()),
    ]
}

async fn make_room(host: &TestHost) {
    let made = as_alice(
        host,
        Method::POST,
        "/v1/groups",
        Some(json!({"name": "room", "members": ["r", "q"]}).to_string()),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.body);
}

#[tokio::test]
async fn a_body_that_is_not_a_json_object_is_refused_everywhere() {
    let host = host().await;
    make_room(&host).await;
    // serde reads an array as a struct's fields in order: each of these
    // was a valid body for its route
    let arrays = [
        json!(["array form"]),
        json!(["arr", "arr", ["r", "q"]]),
        json!(["array form"]),
        json!(["deny"]),
        json!(["@daily", "UTC", "p"]),
        json!(["v"]),
    ];
    for ((method, path), array) in body_routes().into_iter().zip(arrays) {
        for body in [array.to_string(), "\"text\"".into(), "42".into()] {
            let a = as_alice(&host, method.clone(), &path, Some(body.clone())).await;
            assert_eq!(
                (a.status, a.code()),
                (400, "bad_request"),
                "{method} {path} {body}: {}",
                a.body
            );
            assert!(
                a.message().starts_with("the body must be a JSON object"),
                "{method} {path}: {}",
                a.message()
            );
        }
    }
    // nothing was made by the refused bodies
    let (_, groups) = host.get("/v1/groups", TOKEN).await;
    assert_eq!(
        groups["groups"].as_array().map(Vec::len),
        Some(1),
        "{groups}"
    );
    let (_, secrets) = host.get("/v1/secrets", TOKEN).await;
    assert_eq!(secrets["secrets"], json!([]));
    let (_, routines) = host.get("/v1/bots/r/routines", TOKEN).await;
    assert_eq!(routines["routines"], json!([]));
    let (_, session) = host.get("/v1/bots/r/session", TOKEN).await;
    assert_eq!(session["last_seq"], 0, "no message was admitted");
    // an object still works, whitespace first included
    let ok = as_alice(
        &host,
        Method::PUT,
        "/v1/secrets/ARR",
        Some(" \n{\"value\": \"v\"}".into()),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    host.shutdown().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_too_large_on_every_route() {
    let host = host().await;
    make_room(&host).await;
    let big = json!({ "value": "x".repeat(5000) }).to_string();
    for (method, path) in body_routes() {
        let a = as_alice(&host, method.clone(), &path, Some(big.clone())).await;
        assert_eq!(
            (a.status, a.code()),
            (413, "too_large"),
            "{method} {path}: {}",
            a.body
        );
        assert!(a.message().contains("larger than 4096"), "{}", a.message());
    }
    host.shutdown().await;
}

/// A value of only whitespace is refused as an empty one is (QA,
/// 2026-12-06: `"   "` was stored).
#[tokio::test]
async fn a_secret_value_of_only_whitespace_is_refused() {
    let host = host().await;
    let a = as_alice(
        &host,
        Method::PUT,
        "/v1/secrets/MYSECRET",
        Some(json!({ "value": " \t\n " }).to_string()),
    )
    .await;
    assert_eq!((a.status, a.code()), (400, "bad_request"), "{}", a.body);
    assert!(
        a.message().starts_with("the value is only whitespace"),
        "{}",
        a.message()
    );
    let (_, secrets) = host.get("/v1/secrets", TOKEN).await;
    assert_eq!(secrets["secrets"], json!([]), "nothing was stored");
    host.shutdown().await;
}

#[tokio::test]
async fn a_secret_value_with_a_nul_byte_is_refused() {
    let host = host().await;
    let a = as_alice(
        &host,
        Method::PUT,
        "/v1/secrets/MYSECRET",
        Some(json!({ "value": "ab\u{0}cd" }).to_string()),
    )
    .await;
    assert_eq!((a.status, a.code()), (400, "bad_request"), "{}", a.body);
    assert!(a.message().contains("NUL"), "{}", a.message());
    assert!(
        a.message().contains("environment variable"),
        "{}",
        a.message()
    );
    let (_, secrets) = host.get("/v1/secrets", TOKEN).await;
    assert_eq!(secrets["secrets"], json!([]), "nothing was stored");
    host.shutdown().await;
}

#[tokio::test]
async fn a_path_segment_that_is_not_utf8_gets_the_json_error() {
    let host = host().await;
    let cases = [
        (Method::GET, "/v1/bots/%FF"),
        (Method::GET, "/v1/bots/%FF/turns"),
        (Method::POST, "/v1/hooks/%FF/github"),
        (Method::POST, "/v1/hooks/r/%FF"),
        (Method::PUT, "/v1/bots/r/routines/%FF"),
        (Method::DELETE, "/v1/bots/r/routines/%FF"),
        (Method::POST, "/v1/groups/%C0%AF/messages"),
        (Method::GET, "/v1/groups/%FF/entries"),
        (Method::GET, "/v1/sessions/%FF/entries"),
        (Method::GET, "/v1/turns/%FF"),
        (Method::GET, "/v1/approvals/%FF"),
        (Method::DELETE, "/v1/memory/%FF"),
        (Method::DELETE, "/v1/secrets/%FF"),
        (Method::GET, "/ui/%FF"),
    ];
    for (method, path) in cases {
        let a = as_alice(&host, method.clone(), path, Some("{}".into())).await;
        assert_eq!(
            (a.status, a.code(), a.content_type.as_str()),
            (400, "bad_request", "application/json"),
            "{method} {path}: {}",
            a.body
        );
        assert!(a.message().contains("UTF-8"), "{}", a.message());
    }
    host.shutdown().await;
}

#[tokio::test]
async fn the_authorization_scheme_is_case_insensitive() {
    let host = host().await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let a = call(
            &host,
            Method::GET,
            "/v1/bots",
            Some(&format!("{scheme} {TOKEN}")),
            None,
        )
        .await;
        assert_eq!(a.status, 200, "{scheme}: {}", a.body);
    }
    for wrong in [format!("Basic {TOKEN}"), TOKEN.to_owned(), "Bearer ".into()] {
        let a = call(&host, Method::GET, "/v1/bots", Some(&wrong), None).await;
        assert_eq!((a.status, a.code()), (401, "unauthorized"), "{wrong}");
    }
    host.shutdown().await;
}

#[tokio::test]
async fn unknown_query_parameters_are_refused() {
    let host = host().await;
    make_room(&host).await;
    let (_, sent) = host.send("r", "hi", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    let turn = end["turn"].as_str().unwrap().to_owned();
    let none = [
        (Method::GET, "/v1/bots/r".to_owned()),
        (Method::GET, "/v1/bots/r/session".into()),
        (Method::GET, "/v1/bots/r/routines".into()),
        (Method::GET, "/v1/groups/room".into()),
        (Method::GET, "/v1/secrets".into()),
        (Method::GET, format!("/v1/turns/{turn}")),
        (Method::GET, format!("/v1/approvals/{NO_APPROVAL}")),
        (Method::GET, "/v1/events".into()),
        (Method::POST, "/v1/bots/r/cancel".into()),
        (Method::DELETE, "/v1/secrets/NONE".into()),
    ];
    for (method, path) in none {
        let a = as_alice(&host, method.clone(), &format!("{path}?limit=5"), None).await;
        assert_eq!(
            (a.status, a.code()),
            (400, "bad_request"),
            "{method} {path}: {}",
            a.body
        );
        assert!(
            a.message().contains("takes no query parameters"),
            "{method} {path}: {}",
            a.message()
        );
        // without the parameter the route answers
        if method == Method::GET && path != "/v1/events" {
            let (status, body) = host.get(&path, TOKEN).await;
            assert!(status == 200 || status == 404, "{path}: {status} {body}");
        }
    }
    let a = as_alice(&host, Method::GET, "/v1/bots/r/turns?limt=5", None).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.message().contains("?limit=N"), "{}", a.message());
    // a parameter with no name, or one not UTF-8 once decoded: said in
    // words, not serde's "unknown field ``" or "`�`" (QA)
    for (path, says) in [
        ("/v1/bots/r/turns?=5", "a parameter has no name"),
        ("/v1/bots?%FF=1", "a parameter's name is not UTF-8 text"),
        ("/v1/bots/r?%FF=1", "a parameter's name is not UTF-8 text"),
    ] {
        let a = as_alice(&host, Method::GET, path, None).await;
        assert_eq!(a.status, 400, "{path}: {}", a.body);
        assert!(
            a.message().contains(says) && !a.message().contains('\u{fffd}'),
            "{path}: {}",
            a.message()
        );
    }
    // the bot list takes `subagents` and nothing else
    let a = as_alice(&host, Method::GET, "/v1/bots?limit=5", None).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(
        a.message().contains("?subagents=recent or all"),
        "{}",
        a.message()
    );
    // the room list takes `open` and nothing else
    let a = as_alice(&host, Method::GET, "/v1/groups?limit=5", None).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.message().contains("?open=true"), "{}", a.message());
    host.shutdown().await;
}

#[tokio::test]
async fn the_turns_list_takes_a_limit() {
    let host = host().await;
    let mut turns = Vec::new();
    for text in ["one", "two", "three"] {
        let (_, sent) = host.send("r", text, None).await;
        let session = sent["session"].as_str().unwrap().to_owned();
        let end = host
            .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
        turns.push(end["turn"].clone());
    }
    turns.reverse();
    let ids = |v: &Value| -> Vec<Value> {
        v["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].clone())
            .collect()
    };
    let (status, all) = host.get("/v1/bots/r/turns", TOKEN).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(ids(&all), turns, "newest first, all of them by default");
    let (status, two) = host.get("/v1/bots/r/turns?limit=2", TOKEN).await;
    assert_eq!(status, 200, "{two}");
    assert_eq!(ids(&two), turns[..2].to_vec(), "the two newest");
    for bad in ["0", "101", "-1", "x"] {
        let (status, answer) = host
            .get(&format!("/v1/bots/r/turns?limit={bad}"), TOKEN)
            .await;
        assert_eq!(status, 400, "limit={bad}: {answer}");
    }
    // an out-of-range limit names the value, the range and the default on
    // each list (QA: "`limit` must be 1-100" named neither)
    for (path, said) in [
        (
            "/v1/bots/r/turns?limit=101",
            "`limit` 101 is out of range: give 1 to 100 turns (default 100)",
        ),
        (
            "/v1/approvals?limit=0",
            "`limit` 0 is out of range: give 1 to 500 approvals (default 100)",
        ),
        (
            "/v1/bots/r/reviews?limit=501",
            "`limit` 501 is out of range: give 1 to 500 reviews (default 100)",
        ),
    ] {
        let (status, answer) = host.get(path, TOKEN).await;
        assert_eq!(status, 400, "{path}: {answer}");
        assert_eq!(answer["error"]["message"], said, "{path}");
    }
    host.shutdown().await;
}

/// Refusals that quote what they were sent are bounded: a query value, an
/// unknown field's name, a routine's time zone of tens of kilobytes came
/// back whole (an unknown field's name twice: 120 KB). The message keeps
/// its start and its end, where the advice is.
#[tokio::test]
async fn a_refusal_quoting_a_huge_input_is_bounded() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let huge = "z".repeat(30_000);
    let cases = [
        (Method::GET, format!("/v1/bots?subagents={huge}"), None),
        (Method::GET, format!("/v1/bots?{huge}=1"), None),
        (
            Method::POST,
            "/v1/bots/r/messages".to_owned(),
            Some(json!({ huge.clone(): 1 }).to_string()),
        ),
        (
            Method::PUT,
            "/v1/bots/r/routines/daily".to_owned(),
            Some(
                json!({"cron": "0 8 * * *", "timezone": huge.clone(), "prompt": "report"})
                    .to_string(),
            ),
        ),
    ];
    // a field's name of 5,000 characters: the words around it kept (QA:
    // the cut fell between its two quotes, "unknown field" lost)
    let a = as_alice(
        &host,
        Method::POST,
        "/v1/bots/r/messages",
        Some(json!({"text": "hi", "a".repeat(5000): 1}).to_string()),
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(
        a.message().contains("unknown field `aaa") && a.message().contains("(5000 characters)"),
        "{}",
        a.message()
    );
    for (method, path, body) in cases {
        let a = as_alice(&host, method.clone(), &path, body).await;
        assert_eq!(a.status, 400, "{method} {}: {}", &path[..40], a.code());
        let message = a.message();
        assert!(
            message.chars().count() < 2_100
                && (message.contains("characters left out") || message.contains(" characters)")),
            "{method} {}: {} characters",
            &path[..40],
            message.chars().count()
        );
    }
    host.shutdown().await;
}
