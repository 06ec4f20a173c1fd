//! Request bodies the API cannot take, each answered with what is wrong
//! (QA, round 34's contract sweep):
//! - a JSON body sent with a `Content-Encoding` is `415
//!   unsupported_encoding` on every route that takes one (a gzipped message
//!   was "not valid JSON … at line 1 column 1", and one labelled `br` but
//!   sent plain was stored);
//! - a field whose value is of the wrong kind for a choice of words
//!   (`"catch_up": null`) names the field (it was "not valid JSON … at
//!   line 1 column 62").

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

#[tokio::test]
async fn compressed_bodies_and_wrong_kinds_of_value_are_named() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let http = reqwest::Client::new();
    let send = |method: reqwest::Method, path: &str, coding: Option<&str>, body: Value| {
        let mut req = http
            .request(method, format!("{}{path}", host.url))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(c) = coding {
            req = req.header("content-encoding", c);
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let accept = resp
                .headers()
                .get("accept-encoding")
                .map(|v| v.to_str().unwrap().to_owned());
            (
                status,
                accept,
                resp.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let message = json!({"text": "plain"});
    for coding in ["gzip", "br", "identity, gzip"] {
        let (status, accept, body) = send(
            reqwest::Method::POST,
            "/v1/bots/r/messages",
            Some(coding),
            message.clone(),
        )
        .await;
        assert_eq!(status, 415, "{coding}: {body}");
        assert_eq!(body["error"]["code"], "unsupported_encoding", "{body}");
        assert_eq!(accept.as_deref(), Some("identity"));
        let text = body["error"]["message"].as_str().unwrap();
        assert!(text.contains("uncompressed"), "{text}");
    }
    let routine = json!({"cron": "0 9 * * *", "timezone": "UTC", "prompt": "p"});
    let (status, _, body) = send(
        reqwest::Method::PUT,
        "/v1/bots/r/routines/r1",
        Some("gzip"),
        routine.clone(),
    )
    .await;
    assert_eq!(status, 415, "{body}");
    let (status, _, body) = send(
        reqwest::Method::POST,
        "/v1/groups",
        Some("deflate"),
        json!({"name": "room", "members": ["r", "q"]}),
    )
    .await;
    assert_eq!(status, 415, "{body}");
    // `identity` is no compression; and the refused ones saved nothing
    let (status, _, body) = send(
        reqwest::Method::POST,
        "/v1/bots/r/messages",
        Some("identity"),
        message,
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let entries = host.entries(body["session"].as_str().unwrap()).await;
    let said: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "user_message")
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");

    for value in [Value::Null, json!(1), json!([]), json!({})] {
        let mut r = routine.clone();
        r["catch_up"] = value.clone();
        let (status, _, body) = send(reqwest::Method::PUT, "/v1/bots/r/routines/r1", None, r).await;
        assert_eq!(status, 400, "{value}: {body}");
        let text = body["error"]["message"].as_str().unwrap();
        assert!(
            text.starts_with("the body is JSON, but not a routine: `catch_up`: ")
                && !text.contains("not valid JSON"),
            "{value}: {text}"
        );
    }

    // bytes that are not UTF-8 inside a string: said so, with where (QA:
    // "not a value this field takes"), and nothing is stored
    let resp = http
        .post(format!("{}/v1/bots/q/messages", host.url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(b"{\"text\":\"\xff\xfe\"}".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let body: Value = resp.json().await.unwrap();
    let text = body["error"]["message"].as_str().unwrap();
    assert!(
        text.contains("the bytes at line 1 column 10 are not UTF-8"),
        "{text}"
    );
    let (status, dm) = host.get("/v1/bots/q/session", TOKEN).await;
    assert_eq!((status, &dm["last_seq"]), (200, &json!(0)), "{dm}");
    host.shutdown().await;
}

/// A UUID path parameter is read in any form the uuid crate reads (with
/// braces, `urn:uuid:`, no dashes, upper case); a refusal names no length
/// that those forms do not have (QA: "expected a UUID (36 characters)").
#[tokio::test]
async fn a_uuid_parameter_is_refused_without_a_length_it_does_not_need() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (status, body) = host.get("/v1/turns/not-a-turn", TOKEN).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("expected a UUID such as") && !message.contains("36 characters"),
        "{message}"
    );
    for form in [
        "urn:uuid:0192f0c4-8f7a-7cc3-9a55-6f1b3c2d4e5f",
        "{0192f0c4-8f7a-7cc3-9a55-6f1b3c2d4e5f}",
        "0192F0C48F7A7CC39A556F1B3C2D4E5F",
    ] {
        let (status, body) = host.get(&format!("/v1/turns/{form}"), TOKEN).await;
        assert_eq!(status, 404, "{form}: {body}");
    }
    host.shutdown().await;
}

/// A query string serde could not read is said in words, naming the
/// parameter where serde does (QA: "Failed to deserialize query string:
/// invalid digit found in string").
#[tokio::test]
async fn query_strings_that_cannot_be_read_say_what_is_wrong() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    for (path, said) in [
        (
            "/v1/approvals?status=".to_owned(),
            "`status` does not take \"\" (it takes",
        ),
        (
            format!("/v1/sessions/{session}/entries?after=abc"),
            "`after` takes a whole number; use ?after=SEQ (0 for the first page)&limit=N (1 to 1000)",
        ),
        // a number past any the parameter takes: the range, not only "out
        // of range" (QA)
        (
            format!("/v1/sessions/{session}/entries?after=99999999999999999999"),
            "`after` is out of range: it is larger than any value it takes; use \
             ?after=SEQ (0 for the first page)&limit=N (1 to 1000)",
        ),
        (
            "/v1/bots/r/turns?limit=-99999999999999999999".to_owned(),
            "`limit` is out of range: it is smaller than any value it takes; use ?limit=N (1 to \
             100)",
        ),
        (
            "/v1/bots/r/turns?limit=".to_owned(),
            "`limit` is empty, and it takes a whole number",
        ),
        ("/v1/groups?open=1".to_owned(), "`open` takes true or false"),
        (
            "/v1/events?x=1".to_owned(),
            "`x` is not a parameter of this route; /v1/events takes no query parameters",
        ),
    ] {
        let (status, v) = host.get(&path, TOKEN).await;
        assert_eq!(status, 400, "{path}: {v}");
        let got = v["error"]["message"].as_str().unwrap();
        assert!(
            got.starts_with(said) && !got.contains("Failed to deserialize"),
            "{path}: {got}"
        );
    }
    host.shutdown().await;
}

/// Sends `request` as it is on a new connection and returns the answer's
/// status line and body.
async fn raw(host: &crate::support::fleet::TestHost, request: String) -> (String, String) {
    use tokio::io::AsyncReadExt;
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(host.url.trim_start_matches("http://"))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    tokio::time::timeout(std::time::Duration::from_secs(20), read)
        .await
        .expect("an answer")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

const HOOK_SECRET: &str = "a-hook-secret-of-some-length";

/// A transfer coding other than `chunked` is refused, not ignored (QA:
/// `gzip, chunked` with a plain body was stored as if the label were not
/// there), and broken chunks are named as such (they read "error reading
/// a body from connection").
#[tokio::test]
async fn an_unknown_transfer_coding_and_broken_chunks_are_named() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{HOOK_SECRET}\"\n"
        ))
        .start()
        .await;
    let body = r#"{"text": "labelled gzip"}"#;
    let request = format!(
        "POST /v1/bots/r/messages HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\
         Connection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let (status, answer) = raw(&host, request).await;
    assert!(status.contains(" 501 "), "{status} {answer}");
    assert!(
        answer.contains("unsupported_transfer_coding") && answer.contains("gzip"),
        "{answer}"
    );
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap();
    let (_, page) = host
        .get(&format!("/v1/sessions/{session}/entries"), TOKEN)
        .await;
    assert!(!page.to_string().contains("labelled gzip"), "{page}");

    let request = format!(
        "POST /v1/bots/r/messages HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\nzz\r\n{body}\r\n0\r\n\r\n"
    );
    let (status, answer) = raw(&host, request).await;
    assert!(status.contains(" 400 "), "{status} {answer}");
    assert!(answer.contains("chunked framing is broken"), "{answer}");

    // a webhook's payload too (QA: it was stored, the label ignored),
    // signed as its hook wants, and the host closes the connection after
    // the answer (the client asked to keep it)
    let payload = r#"{"text": "hooked gzip"}"#;
    let signature = botfleet::api::sign_hook(HOOK_SECRET.as_bytes(), payload.as_bytes());
    let request = format!(
        "POST /v1/hooks/r/gh HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
         X-Botfleet-Delivery: d-te\r\nX-Botfleet-Signature: {signature}\r\n\
         Transfer-Encoding: gzip, chunked\r\n\r\n{:x}\r\n{payload}\r\n0\r\n\r\n",
        payload.len()
    );
    let (status, answer) = raw(&host, request).await;
    assert!(status.contains(" 501 "), "{status} {answer}");
    assert!(answer.contains("unsupported_transfer_coding"), "{answer}");
    // nothing was admitted: the same delivery, sent plainly, is new
    let (status, answer) = host
        .post_hook("/v1/hooks/r/gh", Some("d-te"), Some(&signature), payload)
        .await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["status"], "accepted", "{answer}");
    host.shutdown().await;
}
