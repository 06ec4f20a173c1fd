//! Details of what the API shows and how its client reads it: a thinking
//! model's reasoning is never shown to people; the client never takes an
//! answer that is not an entries page for "no entries" and reads every
//! page; `headers_env` sends a provider header read from the environment;
//! the answers hyper gives to a request it cannot read (414, 431, 400)
//! have the API's JSON error shape.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::time::Duration;

use axum::Router;
use axum::extract::Query;
use axum::response::Html;
use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::net::TcpStream;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

/// Longest any wait below may take.
const BOUND: Duration = Duration::from_secs(20);

/// An SSE body of these chunk deltas, then the finish reason and `[DONE]`.
fn sse(deltas: &[Value], finish: &str) -> Reply {
    let mut body = String::new();
    let chunk = |delta: &Value, finish: Option<&str>| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    for delta in deltas {
        body.push_str(&format!("data: {}\n\n", chunk(delta, None)));
    }
    body.push_str(&format!("data: {}\n\n", chunk(&json!({}), Some(finish))));
    body.push_str("data: [DONE]\n\n");
    Reply::raw(200, "text/event-stream", body)
}

/// Regression: the entries of `GET /v1/sessions/{session}/entries` showed
/// the `reasoning` a thinking model (DeepSeek's `reasoning_content`) gave
/// with its tool calls, which people must never see. It is kept for the
/// model: the turn's next request still carries it.
#[tokio::test]
async fn a_thinking_models_reasoning_is_never_shown_in_the_entries() {
    let thought = "The user greets me; secretly plotting a quokka parade.";
    let call = json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
        "function": {"name": "SendMessage", "arguments": json!({"text": "hello"}).to_string()}}]});
    let server = OpenAiServer::builder()
        .replies([
            sse(
                &[
                    json!({"role": "assistant", "reasoning_content": thought}),
                    call,
                ],
                "tool_calls",
            ),
            Reply::text(""),
        ])
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "hi").await;
    assert_eq!(end["status"], "completed", "{end}");
    // kept for the model's own use
    let requests = server.requests();
    let assistant = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "assistant")
        .cloned()
        .unwrap();
    assert_eq!(assistant["reasoning_content"], thought, "{assistant}");
    // never shown to people
    let (status, page) = host
        .get(&format!("/v1/sessions/{session}/entries"), TOKEN)
        .await;
    assert_eq!(status, 200, "{page}");
    let entries = page["entries"].as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["kind"] == "assistant"),
        "{entries:#?}"
    );
    for entry in entries {
        assert!(entry.get("reasoning").is_none(), "reasoning shown: {entry}");
    }
    assert!(!page.to_string().contains("quokka"), "{page}");
    assert_eq!(deliveries(entries), ["hello"]);
    // nor found by a search (the delivery is, once indexed)
    host.wait_get("/v1/search?q=hello", |v| {
        (v["total"].as_u64() >= Some(1)).then(|| v.clone())
    })
    .await;
    let (status, found) = host.get("/v1/search?q=quokka", TOKEN).await;
    assert_eq!((status, &found["total"]), (200, &json!(0)), "{found}");
    host.shutdown().await;
    server.shutdown().await;
}

/// Serves `app` on a loopback port; its base URL.
async fn serve(app: Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// Regression: an answer that is not an entries page (a proxy's sign-in
/// page in front of the host, answered 200) was read as "no entries":
/// `botfleet transcript` printed nothing and `botfleet send` waited for
/// a reply that could never be seen.
#[tokio::test]
async fn the_client_takes_no_foreign_answer_for_no_entries() {
    let base = serve(Router::new().fallback(async || Html("<html>sign in</html>"))).await;
    let client = botfleet::client::Client::new(&base, TOKEN).unwrap();
    let e = client.entries_after("s", 0).await.unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("text/html, not the API's JSON") && e.contains("not a botfleet host"),
        "{e}"
    );
    // a JSON answer that is no entries page says what it lacks
    let base = serve(Router::new().fallback(async || axum::Json(json!({ "ok": true })))).await;
    let client = botfleet::client::Client::new(&base, TOKEN).unwrap();
    let e = format!("{:#}", client.entries_after("s", 0).await.unwrap_err());
    assert!(
        e.contains("without an `entries` list") && e.contains("botfleet host"),
        "{e}"
    );
}

/// Regression: the client stopped at the first page shorter than the 1000
/// it asked for, so a host that answers fewer per page (a smaller
/// maximum, clamped) showed only its first page.
#[tokio::test]
async fn the_client_reads_every_page_up_to_last_seq() {
    // five entries, at most two a page
    let page = async |Query(q): Query<HashMap<String, i64>>| {
        let after = q.get("after").copied().unwrap_or(0);
        let entries: Vec<Value> = (after + 1..=5)
            .take(2)
            .map(|seq| json!({"seq": seq, "kind": "delivery", "text": format!("e{seq}")}))
            .collect();
        axum::Json(json!({"session": "s", "last_seq": 5, "entries": entries}))
    };
    let base = serve(Router::new().fallback(page)).await;
    let client = botfleet::client::Client::new(&base, TOKEN).unwrap();
    let entries = client.entries_after("s", 0).await.unwrap();
    let seqs: Vec<i64> = entries.iter().filter_map(|e| e["seq"].as_i64()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    let entries = client.entries_after("s", 4).await.unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
}

/// A `limit` over the most a page holds is a 400 naming that most; the
/// most itself is a page.
#[tokio::test]
async fn an_entries_limit_over_the_max_is_a_400_naming_it() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap();
    let path = |limit: i64| format!("/v1/sessions/{session}/entries?limit={limit}");
    let (status, page) = host.get(&path(1000), TOKEN).await;
    assert_eq!(status, 200, "{page}");
    for limit in [1001, 0] {
        let (status, body) = host.get(&path(limit), TOKEN).await;
        assert_eq!(status, 400, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("1 to 1000"), "{message}");
    }
    host.shutdown().await;
}

const GATEWAY_VAR: &str = "BOTFLEET_TEST_GATEWAY_KEY";

/// Starts `fleet` with `env` as the host's environment.
async fn start_with_env(
    fleet: TestFleet,
    env: &[(&str, &str)],
) -> Result<TestHost, (TestFleet, String)> {
    let path = fleet.write();
    let env = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let started = botfleet::host::start(botfleet::host::HostOptions {
        fleet: Some(path),
        env: Some(env),
        ..Default::default()
    })
    .await;
    match started {
        Ok(running) => Ok(TestHost {
            url: running.url(),
            host: Some(running),
            fleet,
            http: reqwest::Client::new(),
        }),
        Err(e) => Err((fleet, format!("{e:#}"))),
    }
}

/// `headers_env`: a gateway key in a custom header, read from the
/// environment at start (not written in fleet.toml), goes out with every
/// model request; a variable that is not set stops the start, naming the
/// header's key and the variable.
#[tokio::test]
async fn a_header_from_headers_env_reaches_the_provider() {
    let server = OpenAiServer::builder()
        .replies([
            Reply::tool_call("c1", "SendMessage", json!({"text": "hi"}).to_string()),
            Reply::text(""),
        ])
        .start()
        .await;
    let extra =
        format!("max_retries = 0\nheaders_env = {{ \"X-Gateway-Key\" = \"{GATEWAY_VAR}\" }}");
    let fleet = || {
        TestFleet::new()
            .openai("main", &server.base_url(), &extra)
            .bot("r", "main", &["SendMessage"])
    };
    let Err((_, e)) = start_with_env(fleet(), &[]).await else {
        panic!("started without {GATEWAY_VAR}");
    };
    assert!(
        e.contains(r#"providers.main.headers_env."X-Gateway-Key""#) && e.contains(GATEWAY_VAR),
        "{e}"
    );
    let host = start_with_env(fleet(), &[(GATEWAY_VAR, " gw-secret-4321\n")])
        .await
        .map_err(|(_, e)| e)
        .unwrap();
    let (_, end) = host.end_turn("r", "hello").await;
    assert_eq!(end["status"], "completed", "{end}");
    let requests = server.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert_eq!(request.header("x-gateway-key"), Some("gw-secret-4321"));
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// What the host answered on `stream` until it closed it: the status and
/// the body as JSON (`null` when it is not JSON). A reset after the
/// answer (the request was not read to its end) ends it too.
async fn answer(stream: &mut TcpStream) -> (u16, Value, String) {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return,
                Err(e) => panic!("{e}"),
            }
        }
    };
    tokio::time::timeout(BOUND, read).await.unwrap();
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (
        status,
        serde_json::from_str(body).unwrap_or(Value::Null),
        head.to_owned(),
    )
}

/// Sends `request` on a new connection (after a first request answered on
/// it, when `after_one` holds); what the host answered to it.
async fn raw(host: &TestHost, request: &[u8], after_one: bool) -> (u16, Value, String) {
    let mut stream = TcpStream::connect(host.url.trim_start_matches("http://"))
        .await
        .unwrap();
    if after_one {
        // a keep-alive connection that was answered once already
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let read = async {
            loop {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed after /healthz");
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_lowercase();
                let Some((head, body)) = text.split_once("\r\n\r\n") else {
                    continue;
                };
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if body.len() >= length {
                    return;
                }
            }
        };
        tokio::time::timeout(BOUND, read).await.unwrap();
    }
    // the host may close before reading all of a request it refuses
    let _ = stream.write_all(request).await;
    answer(&mut stream).await
}

/// Regression: a request whose URI or headers are too large for the host
/// was answered `414` or `431` with an empty body (and an unreadable one
/// `400` so), where every other error has the JSON shape of docs/api.md.
#[tokio::test]
async fn answers_to_requests_the_host_cannot_read_have_the_json_error_shape() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let long_uri = format!(
        "GET /v1/bots?x={} HTTP/1.1\r\nHost: t\r\n\r\n",
        "a".repeat(70_000)
    );
    let mut many_headers = String::from("GET /v1/bots HTTP/1.1\r\nHost: t\r\n");
    for i in 0..120 {
        many_headers.push_str(&format!("X-H{i}: v\r\n"));
    }
    many_headers.push_str("\r\n");
    // one header that fills the host's whole read buffer (no end to it)
    let mut big_header = String::from("GET /v1/bots HTTP/1.1\r\nHost: t\r\nX-Big: ");
    big_header.push_str(&"b".repeat(8192 + 4096 * 100 - big_header.len()));
    let cases: [(&str, &[u8], u16, &str, &str); 4] = [
        (
            "long uri",
            long_uri.as_bytes(),
            414,
            "uri_too_long",
            "65534 bytes",
        ),
        (
            "many headers",
            many_headers.as_bytes(),
            431,
            "headers_too_large",
            "100 headers",
        ),
        (
            "big header",
            big_header.as_bytes(),
            431,
            "headers_too_large",
            "417792 bytes",
        ),
        (
            "bad method",
            b"G(T / HTTP/1.1\r\nHost: t\r\n\r\n",
            400,
            "bad_request",
            "not valid HTTP",
        ),
    ];
    for (what, request, status, code, names) in cases {
        for after_one in [false, true] {
            let (got, body, head) = raw(&host, request, after_one).await;
            assert_eq!(got, status, "{what}: {head}");
            assert_eq!(body["error"]["code"], code, "{what}: {head}\n{body}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(names), "{what}: {message}");
            let head = head.to_lowercase();
            assert!(
                head.contains("content-type: application/json")
                    && head.contains("connection: close"),
                "{what}: {head}"
            );
            // the headers of every other /v1 answer
            assert!(
                head.contains("x-content-type-options: nosniff")
                    && head.contains("cache-control: no-store"),
                "{what}: {head}"
            );
        }
    }
    // the host goes on answering
    let (status, _) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200);
    host.shutdown().await;
}
