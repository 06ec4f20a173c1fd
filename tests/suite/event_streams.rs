//! The caps on open `GET /v1/events` streams: per user
//! (`host.max_streams_per_user`, `429 too_many_streams`) and in all
//! (`host.max_connections` less a reserve for other requests, `503
//! streams_full`). Streams are exempt from the request timeout, so with no
//! cap one token holder opening a few hundred of them filled every
//! connection the host accepts, and everyone's requests went unanswered
//! until the streams closed.
//!
//! Every wait is bounded, so that the old code (no caps: the stream opens,
//! or a request waits for a connection) fails instead of hanging.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::browser::Browser;
use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::start_refused;
use crate::support::process::poll;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

const CAROL_TOKEN: &str = "carol-secret-token";
const DAVE_TOKEN: &str = "dave-secret-token";
const MORE_USERS: &str = "[[users]]\nid = \"carol\"\ntoken = \"carol-secret-token\"\n\n\
                          [[users]]\nid = \"dave\"\ntoken = \"dave-secret-token\"\n";

/// Longest any wait below may take.
const BOUND: Duration = Duration::from_secs(20);
/// Longest a plain request may take to count as answered promptly.
const PROMPT: Duration = Duration::from_secs(5);

/// An open stream, read up to its `ready` event; it closes when dropped.
struct Open(#[allow(dead_code)] BoxStream<'static, reqwest::Result<bytes::Bytes>>);

/// A refused stream: its status, `Retry-After` header and JSON body.
#[derive(Debug)]
struct Refused {
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

impl Refused {
    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

/// Opens `GET /v1/events` with `token` on a connection of its own.
async fn stream(host: &TestHost, token: &str) -> Result<Open, Refused> {
    let send = host
        .http
        .get(format!("{}/v1/events", host.url))
        .bearer_auth(token)
        .send();
    let resp = tokio::time::timeout(BOUND, send)
        .await
        .expect("GET /v1/events not answered")
        .unwrap();
    let status = resp.status().as_u16();
    if status != 200 {
        let retry_after = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = resp.json().await.unwrap();
        return Err(Refused {
            status,
            retry_after,
            body,
        });
    }
    let mut bytes = resp.bytes_stream().boxed();
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains("event: ready") {
        let chunk = tokio::time::timeout(BOUND, bytes.next())
            .await
            .expect("no ready event")
            .expect("the stream ended before its ready event")
            .unwrap();
        got.extend_from_slice(&chunk);
    }
    Ok(Open(bytes))
}

/// `n` open streams of `token`.
async fn streams(host: &TestHost, token: &str, n: usize) -> Vec<Open> {
    let mut open = Vec::new();
    for i in 0..n {
        match stream(host, token).await {
            Ok(s) => open.push(s),
            Err(refused) => panic!("stream {i} of {token} refused: {refused:?}"),
        }
    }
    open
}

/// `GET /v1/bots` with `token`, answered within [`PROMPT`].
async fn bots_promptly(host: &TestHost, token: &str) -> u16 {
    let (status, body) = tokio::time::timeout(PROMPT, host.get("/v1/bots", token))
        .await
        .unwrap_or_else(|_| panic!("GET /v1/bots for {token} not answered within {PROMPT:?}"));
    assert_eq!(status, 200, "{body}");
    status
}

async fn start(host_lines: &str) -> TestHost {
    TestFleet::new()
        .host(host_lines)
        .tables(MORE_USERS)
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await
}

#[tokio::test]
async fn a_user_over_the_stream_cap_is_refused_429_and_others_go_on() {
    let host = start("max_streams_per_user = 2\nmax_connections = 16").await;
    let mut alice = streams(&host, TOKEN, 2).await;

    let refused = match stream(&host, TOKEN).await {
        Ok(_) => panic!("a third stream of alice was opened past max_streams_per_user = 2"),
        Err(refused) => refused,
    };
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.code(), "too_many_streams", "{refused:?}");
    for says in [
        "already have 2 event streams open",
        "host.max_streams_per_user allows 2",
        "close other tabs or clients",
    ] {
        assert!(refused.message().contains(says), "{says:?}: {refused:?}");
    }
    assert_eq!(refused.retry_after.as_deref(), Some("10"), "{refused:?}");

    // another user streams and asks; so does alice, beside her streams
    let _bob = streams(&host, BOB_TOKEN, 2).await;
    bots_promptly(&host, BOB_TOKEN).await;
    bots_promptly(&host, TOKEN).await;

    // a stream that ends (its client went away) frees its slot
    alice.pop();
    // the host learns of the closed connection on its own time: one
    // bounded poll (support::process::poll), as for any change it makes
    let freed = poll(BOUND.as_secs(), async || match stream(&host, TOKEN).await {
        Ok(s) => Ok(s),
        Err(refused) => {
            assert_eq!(refused.status, 429, "{refused:?}");
            Err(format!(
                "the closed stream's slot was not freed: {refused:?}"
            ))
        }
    })
    .await;
    alice.push(freed);
    let again = stream(&host, TOKEN)
        .await
        .err()
        .expect("a third stream again");
    assert_eq!(again.status, 429, "{again:?}");
    drop(alice);
    host.shutdown().await;
}

#[tokio::test]
async fn streams_of_all_users_leave_connections_for_other_requests() {
    // 8 connections: at most 6 streams, 2 kept for other requests
    let host = start("max_streams_per_user = 3\nmax_connections = 8").await;
    let _alice = streams(&host, TOKEN, 3).await;
    let _bob = streams(&host, BOB_TOKEN, 3).await;

    let refused = match stream(&host, CAROL_TOKEN).await {
        Ok(_) => panic!("a seventh stream was opened with max_connections = 8"),
        Err(refused) => refused,
    };
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.code(), "streams_full", "{refused:?}");
    for says in [
        "6 event streams open",
        "host.max_connections (8)",
        "less 2 connections kept for other requests",
    ] {
        assert!(refused.message().contains(says), "{says:?}: {refused:?}");
    }
    assert_eq!(refused.retry_after.as_deref(), Some("10"), "{refused:?}");

    // the reserve answers plain requests, two at once, from users with
    // and without streams
    let (carol, dave) = tokio::join!(
        bots_promptly(&host, CAROL_TOKEN),
        bots_promptly(&host, DAVE_TOKEN)
    );
    assert_eq!((carol, dave), (200, 200));
    bots_promptly(&host, TOKEN).await;
    host.shutdown().await;
}

/// Reads until the server closes the connection; returns what it sent.
async fn read_until_closed(tcp: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
                Err(e) => panic!("{e}"),
            }
        }
    };
    let closed = tokio::time::timeout(BOUND, read).await;
    let got = String::from_utf8_lossy(&got).into_owned();
    assert!(closed.is_ok(), "still open after {BOUND:?}; got {got}");
    got
}

/// A client refused a stream (a script that opens them in a loop) does not
/// keep its connection: the refusal closes it, even on a keep-alive
/// request, rather than leave it idle until `host.header_timeout_s`.
#[tokio::test]
async fn a_refused_stream_gives_its_connection_back() {
    let host = start("max_streams_per_user = 1").await;
    let _alice = streams(&host, TOKEN, 1).await;
    let mut tcp = TcpStream::connect(host.url.trim_start_matches("http://"))
        .await
        .unwrap();
    let request =
        format!("GET /v1/events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut tcp).await;
    let head = answer.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 429"), "{answer}");
    assert!(head.contains("\r\nconnection: close\r\n"), "{answer}");
    assert!(head.contains("\r\nretry-after: 10\r\n"), "{answer}");
    assert!(answer.contains("too_many_streams"), "{answer}");
    host.shutdown().await;
}

/// Out-of-range values are refused at start, naming the key and the range.
#[tokio::test]
async fn max_streams_per_user_out_of_range_is_refused_naming_the_key() {
    let cases = [
        (
            "max_streams_per_user = 0",
            "is 0 but must be 1 to 1024: with 0 neither the web page",
        ),
        (
            "max_streams_per_user = 1025",
            "is 1025 but must be 1 to 1024: each stream holds a connection",
        ),
        ("max_streams_per_user = -1", "line "),
        ("max_streams_per_user = \"16\"", "line "),
    ];
    for (lines, says) in cases {
        let fleet = TestFleet::new()
            .host(lines)
            .script("s", ECHO)
            .bot("r", "s", &["SendMessage"]);
        let e = start_refused(&fleet, lines).await;
        assert!(
            e.contains("fleet.toml") && e.contains("max_streams_per_user") && e.contains(says),
            "{lines}: {e}"
        );
    }
    for edge in ["max_streams_per_user = 1", "max_streams_per_user = 1024"] {
        let host = start(edge).await;
        host.shutdown().await;
    }
}

/// The web page refused its stream shows the host's message once, keeps
/// working without live updates, and goes live after the host's
/// `Retry-After` once a slot is free.
#[tokio::test]
async fn the_page_says_why_its_stream_is_refused_and_goes_live_later() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = start("max_streams_per_user = 1").await;
    let held = streams(&host, TOKEN, 1).await;
    browser.sign_in(&host.url, TOKEN).await;
    browser.find("#conn.refused").await;
    browser
        .wait_text("#toasts", "host.max_streams_per_user allows 1")
        .await;
    let title = browser
        .js("return document.querySelector('#conn').title", json!([]))
        .await;
    assert!(
        title
            .as_str()
            .unwrap_or_default()
            .contains("close other tabs"),
        "{title}"
    );
    // the page itself works meanwhile
    browser.find(".list a[href='#/bots/r']").await;

    drop(held);
    browser.find("#conn.live").await;
    browser.quit().await;
    host.shutdown().await;
}

/// Regression (round 19's race tester): a `botfleet send` past the
/// user's stream cap exited 1 with the message not sent ("waiting" sends
/// of one user, each holding a stream, used them up). The message is
/// sent, and its reply polled for.
#[tokio::test]
async fn a_send_past_the_stream_cap_is_sent_and_polls_for_its_reply() {
    let host = start("max_streams_per_user = 1").await;
    let _held = streams(&host, TOKEN, 1).await;
    let (code, out, err) =
        crate::support::process::cli(&["send", "r", "over the cap"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("over the cap"), "the echo reply: {out:?}");
    assert!(
        err.contains("all your event streams are in use"),
        "says why it polls: {err:?}"
    );
    host.shutdown().await;
}

/// A `botfleet send` while the host's streams are all in use (`503
/// streams_full`, other users' open pages) is sent too, and its reply
/// polled for, as past the user's own cap. (It exited 1 before sending:
/// the message was never saved; QA, 2026-12-05.)
#[tokio::test]
async fn a_send_while_the_hosts_streams_are_full_is_sent_and_polls() {
    // 4 connections: 2 streams in all, both bob's
    let host = start("max_connections = 4").await;
    let _bob = streams(&host, BOB_TOKEN, 2).await;
    let (code, out, err) =
        crate::support::process::cli(&["send", "r", "while full"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("while full"), "the echo reply: {out:?}");
    assert!(
        err.contains("the host's event streams are all in use"),
        "says why it polls: {err:?}"
    );
    host.shutdown().await;
}
