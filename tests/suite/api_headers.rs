//! Headers sent twice: an `Authorization`, an `Idempotency-Key` or a
//! webhook's delivery id or signature that comes twice makes the request
//! ambiguous (which one counts?). It is refused with a `400` naming the
//! header, and admits nothing; using the first would silently drop what
//! the client meant by the other.

use botfleet::api::sign_hook;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SECRET: &str = "a-hook-secret-of-some-length";

const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

async fn host() -> TestHost {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("q", "s", &["SendMessage"])
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\n"
        ))
        .start()
        .await
}

/// POSTs `body` to `path` with `headers`, each sent as given (a name may
/// come twice).
async fn post(host: &TestHost, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut req = host
        .http
        .post(format!("{}{path}", host.url))
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn assert_refused(answer: (u16, Value), header: &str) {
    let (status, body) = answer;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_request", "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with(&format!("the {header} header is sent 2 times")),
        "{msg}"
    );
}

#[tokio::test]
async fn a_header_sent_twice_is_refused_naming_it() {
    let host = host().await;
    let alice = format!("Bearer {TOKEN}");
    let bob = format!("Bearer {BOB_TOKEN}");
    let text = r#"{"text": "hello"}"#;

    // two tokens: whose request is it?
    let resp = host
        .http
        .get(format!("{}/v1/bots", host.url))
        .header("Authorization", &alice)
        .header("Authorization", &bob)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert_refused((status, resp.json().await.unwrap()), "Authorization");
    for tokens in [[&alice, &bob], [&alice, &alice]] {
        let headers = [
            ("Authorization", tokens[0].as_str()),
            ("authorization", tokens[1]),
        ];
        assert_refused(
            post(&host, "/v1/bots/r/messages", &headers, text).await,
            "Authorization",
        );
    }

    // two keys: a retry under either would not be recognised
    let keys = [
        ("Authorization", alice.as_str()),
        ("Idempotency-Key", "k-1"),
        ("Idempotency-Key", "k-2"),
    ];
    assert_refused(
        post(&host, "/v1/bots/r/messages", &keys, text).await,
        "Idempotency-Key",
    );
    let (status, room) = post(
        &host,
        "/v1/groups",
        &keys[..1],
        &json!({"name": "pair", "members": ["r", "q"]}).to_string(),
    )
    .await;
    assert_eq!(status, 201, "{room}");
    assert_refused(
        post(&host, "/v1/groups/pair/messages", &keys, text).await,
        "Idempotency-Key",
    );
    // nothing was admitted: the DM session does not exist yet
    let (status, session) = host.get("/v1/bots/r/session", TOKEN).await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["last_seq"], 0, "{session}");
    let (status, entries) = host.get("/v1/groups/pair/entries", TOKEN).await;
    assert_eq!(status, 200, "{entries}");
    assert_eq!(entries["entries"], json!([]), "{entries}");

    // a webhook's delivery id or signature, twice
    let payload = r#"{"action": "opened"}"#;
    let signature = sign_hook(SECRET.as_bytes(), payload.as_bytes());
    let twice_delivery = [
        ("X-Botfleet-Delivery", "d-1"),
        ("X-Botfleet-Delivery", "d-2"),
        ("X-Botfleet-Signature", signature.as_str()),
    ];
    assert_refused(
        post(&host, "/v1/hooks/r/gh", &twice_delivery, payload).await,
        // as the docs spell it (QA: it was named in lower case)
        "X-Botfleet-Delivery",
    );
    let twice_signature = [
        ("X-Botfleet-Delivery", "d-1"),
        ("X-Botfleet-Signature", signature.as_str()),
        ("X-Botfleet-Signature", "sha256=00"),
    ];
    assert_refused(
        post(&host, "/v1/hooks/r/gh", &twice_signature, payload).await,
        "X-Botfleet-Signature",
    );

    // once each, the same requests work
    let once = [
        ("Authorization", alice.as_str()),
        ("Idempotency-Key", "k-1"),
    ];
    let (status, body) = post(&host, "/v1/bots/r/messages", &once, text).await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = post(&host, "/v1/hooks/r/gh", &twice_signature[..2], payload).await;
    assert_eq!(status, 202, "{body}");
    host.shutdown().await;
}

/// Regression (round 19): the API's JSON answers carried neither
/// `Cache-Control: no-store` nor `X-Content-Type-Options: nosniff` (the
/// page's own files did), so a cache that ignores `Authorization` could
/// keep transcripts and secret names. Every `/v1` answer carries both,
/// refusals included; the page and the event stream keep their own cache
/// rule.
#[tokio::test]
async fn api_answers_are_not_stored_nor_sniffed() {
    let host = host().await;
    let alice = format!("Bearer {TOKEN}");
    let get = |path: &str, token: Option<&str>| {
        let mut req = host.http.get(format!("{}{path}", host.url));
        if let Some(token) = token {
            req = req.header("Authorization", token);
        }
        req.send()
    };
    let header = |resp: &reqwest::Response, name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let answers = [
        ("/v1/bots", Some(alice.as_str()), 200),
        ("/v1/secrets", Some(alice.as_str()), 200),
        ("/v1/bots", None, 401),
        ("/v1/bots/nobody", Some(alice.as_str()), 404),
        ("/v1/no-such-route", Some(alice.as_str()), 404),
    ];
    for (path, token, status) in answers {
        let resp = get(path, token).await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{path}");
        assert_eq!(header(&resp, "cache-control"), "no-store", "{path}");
        assert_eq!(header(&resp, "x-content-type-options"), "nosniff", "{path}");
        assert!(
            header(&resp, "content-type").starts_with("application/json"),
            "{path}"
        );
    }
    // a method the route does not take: refused by the router itself
    let resp = host
        .http
        .delete(format!("{}/v1/bots", host.url))
        .header("Authorization", &alice)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(header(&resp, "cache-control"), "no-store");
    assert_eq!(header(&resp, "x-content-type-options"), "nosniff");
    // the page revalidates its files; the event stream keeps its own rule
    let resp = get("/", None).await.unwrap();
    assert_eq!(header(&resp, "cache-control"), "no-cache");
    assert_eq!(header(&resp, "x-content-type-options"), "nosniff");
    let resp = get("/v1/events", Some(alice.as_str())).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(
        header(&resp, "content-type").starts_with("text/event-stream"),
        "{:?}",
        resp.headers()
    );
    assert_eq!(header(&resp, "cache-control"), "no-cache");
    drop(resp);
    host.shutdown().await;
}
