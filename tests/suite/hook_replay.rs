//! Webhooks against replays and floods: a captured delivery sent again
//! under a fresh delivery id is answered as the delivery it repeats (not a
//! new event), a timestamped signature is refused once its timestamp is
//! past the tolerance, a flood meets the hook's rate (429 with
//! `Retry-After`), and a body declared over the limit is refused from the
//! headers, before it is read. A replay is answered so after a restart of
//! the host too.

use std::time::Duration;
use std::time::SystemTime;

use botfleet::api::sign_hook;
use pretty_assertions::assert_eq;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::status_wait_body;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

const SECRET: &str = "a-hook-secret-of-some-length";

/// The model takes a note of what it saw, and does not reply.
const NOTE: &str = r#"
[[rule]]
steps = [ { text = "saw: {{input}}" } ]
"#;

/// Bot `r` with the hook `gh`.
fn hooked_fleet(host_lines: &str) -> TestFleet {
    TestFleet::new()
        .host(host_lines)
        .script("s", NOTE)
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\nmax_payload_bytes = 2048\n"
        ))
}

async fn hooked_host(host_lines: &str) -> TestHost {
    hooked_fleet(host_lines).start().await
}

/// Posts `body` to the hook with these headers; the status, the
/// `Retry-After` header and the answer.
async fn post(host: &TestHost, headers: &[(&str, String)], body: &str) -> (u16, Value) {
    let (status, _, answer) = post_full(host, headers, body).await;
    (status, answer)
}

async fn post_full(
    host: &TestHost,
    headers: &[(&str, String)],
    body: &str,
) -> (u16, Option<String>, Value) {
    post_to(&host.http, &host.url, headers, body).await
}

/// Posts `body` to the hook of the host at `url`.
async fn post_to(
    http: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &str,
) -> (u16, Option<String>, Value) {
    let mut req = http
        .post(format!("{url}/v1/hooks/r/gh"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    status_wait_body(req.send().await.unwrap()).await
}

fn body_only(delivery: &str, body: &str) -> Vec<(&'static str, String)> {
    vec![
        ("X-Botfleet-Delivery", delivery.to_owned()),
        (
            "X-Botfleet-Signature",
            sign_hook(SECRET.as_bytes(), body.as_bytes()),
        ),
    ]
}

/// Headers of a delivery signed Stripe-style at `timestamp`: the HMAC of
/// `"{timestamp}.{body}"`.
fn timestamped(delivery: &str, timestamp: i64, body: &str) -> Vec<(&'static str, String)> {
    vec![
        ("X-Botfleet-Delivery", delivery.to_owned()),
        ("X-Botfleet-Timestamp", timestamp.to_string()),
        (
            "X-Botfleet-Signature",
            sign_hook(SECRET.as_bytes(), format!("{timestamp}.{body}").as_bytes()),
        ),
    ]
}

fn unix_now() -> i64 {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_secs()).unwrap()
}

async fn events_in(host: &TestHost, session: &str) -> usize {
    host.entries(session)
        .await
        .iter()
        .filter(|e| e["kind"] == "event")
        .count()
}

/// Regression: the signature covers only the body, so a captured request
/// sent again with a fresh `X-Botfleet-Delivery` was a new 202, a new
/// event and a new bot turn, every time. It is now answered as the
/// delivery it repeats (`duplicate`, `replay_of`), and admits nothing.
#[tokio::test]
async fn a_replayed_signature_under_a_new_delivery_id_is_a_duplicate() {
    let host = hooked_host("").await;
    let body = r#"{"action":"opened","title":"Replay me"}"#;
    let (status, first) = post(&host, &body_only("d-1", body), body).await;
    assert_eq!(status, 202, "{first}");
    let session = first["session"].as_str().unwrap().to_owned();
    for fresh in ["d-2", "d-3"] {
        let (status, again) = post(&host, &body_only(fresh, body), body).await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["status"], "duplicate", "{again}");
        assert_eq!(again["replay_of"], "d-1", "{again}");
        assert_eq!(again["seq"], first["seq"], "{again}");
    }
    // the sender's own retry is still a plain duplicate
    let (status, retry) = post(&host, &body_only("d-1", body), body).await;
    assert_eq!((status, retry.get("replay_of")), (200, None), "{retry}");
    // another body is another delivery
    let other = r#"{"action":"closed"}"#;
    let (status, next) = post(&host, &body_only("d-4", other), other).await;
    assert_eq!(status, 202, "{next}");
    // d-4 sent again with d-1's payload and signature: d-4 is taken by
    // another payload, and that is what its sender must hear (QA: it was
    // answered as d-1's duplicate, hiding the reuse of the id)
    let (status, reused) = post(&host, &body_only("d-4", body), body).await;
    assert_eq!(
        (status, &reused["status"], reused.get("replay_of")),
        (409, &Value::from("conflict"), None),
        "{reused}"
    );
    assert!(
        reused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("this X-Botfleet-Delivery id was used with a different payload"),
        "{reused}"
    );
    host.wait_turn_end(&session, next["seq"].as_i64().unwrap())
        .await;
    assert_eq!(events_in(&host, &session).await, 2);
    host.shutdown().await;
}

/// Regression: the signatures were remembered in memory only, so after a
/// restart a captured body-only request (no timestamp, so no age limit)
/// sent again under a new delivery id was a new 202, a new event and a new
/// turn. The store remembers a signature with its delivery's admission:
/// after the host process stopped and started again, the replay is still
/// the first delivery's duplicate, and so is a timestamped one within its
/// tolerance.
#[tokio::test]
async fn a_replay_after_a_restart_is_still_a_duplicate() {
    let fleet = hooked_fleet("");
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let http = reqwest::Client::new();
    let body = r#"{"action":"opened","title":"Replay me after a restart"}"#;
    let stamped = r#"{"event":"deploy","id":7}"#;
    let now = unix_now();

    let host = HostProcess::start(&path, port, &log).await;
    let (status, _, first) = post_to(&http, &host.url, &body_only("d-1", body), body).await;
    assert_eq!(status, 202, "{first}");
    let session = first["session"].as_str().unwrap().to_owned();
    let headers = timestamped("t-1", now, stamped);
    let (status, _, first_stamped) = post_to(&http, &host.url, &headers, stamped).await;
    assert_eq!(status, 202, "{first_stamped}");
    host.stop(&log).await;

    let host = HostProcess::start(&path, port, &log).await;
    let (status, _, again) = post_to(&http, &host.url, &body_only("d-2", body), body).await;
    assert_eq!(
        (status, &again["status"], &again["replay_of"]),
        (200, &Value::from("duplicate"), &Value::from("d-1")),
        "{again}"
    );
    assert_eq!(again["seq"], first["seq"], "{again}");
    let headers = timestamped("t-2", now, stamped);
    let (status, _, again) = post_to(&http, &host.url, &headers, stamped).await;
    assert_eq!(
        (status, &again["replay_of"], &again["seq"]),
        (200, &Value::from("t-1"), &first_stamped["seq"]),
        "{again}"
    );
    // the sender's own retry is still a plain duplicate
    let (status, _, retry) = post_to(&http, &host.url, &body_only("d-1", body), body).await;
    assert_eq!((status, retry.get("replay_of")), (200, None), "{retry}");
    // one event per delivery: the replays admitted nothing
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let entries = client.entries_after(&session, 0).await.unwrap();
    let events = entries.iter().filter(|e| e["kind"] == "event").count();
    assert_eq!(events, 2, "{entries:#?}");
    host.stop(&log).await;
}

/// A sender that also sends `X-Botfleet-Timestamp` signs
/// `"{timestamp}.{body}"`: accepted within the tolerance (300 s by
/// default), refused (401) past it, and its replay under a new id is a
/// duplicate; body-only senders keep working beside it.
#[tokio::test]
async fn a_timestamped_signature_is_refused_once_old() {
    let host = hooked_host("").await;
    let body = r#"{"event":"deploy","id":1}"#;
    let now = unix_now();
    let (status, fresh) = post(&host, &timestamped("t-1", now, body), body).await;
    assert_eq!(status, 202, "{fresh}");
    let session = fresh["session"].as_str().unwrap().to_owned();
    let (status, replay) = post(&host, &timestamped("t-2", now, body), body).await;
    assert_eq!(
        (status, &replay["replay_of"]),
        (200, &Value::from("t-1")),
        "{replay}"
    );

    // the same capture within the tolerance, its timestamp moved into the
    // body: a replay of t-1 in another form, said so (QA: "this id was
    // used with a different payload; send a new id", for a new id)
    let moved = format!("{now}.{body}");
    let replayed = vec![
        ("X-Botfleet-Delivery", "t-6".to_owned()),
        (
            "X-Botfleet-Signature",
            sign_hook(SECRET.as_bytes(), moved.as_bytes()),
        ),
    ];
    let (status, refused) = post(&host, &replayed, &moved).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["replay_of"], "t-1", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("came before with delivery \"t-1\"") && !message.contains("send a new id"),
        "{message}"
    );

    let old = r#"{"event":"deploy","id":2}"#;
    let (status, refused) = post(&host, &timestamped("t-3", now - 1000, old), old).await;
    assert_eq!(status, 401, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("s old") && message.contains("tolerance of 300 s"),
        "{message}"
    );
    // the body-only signature under a timestamp does not pass
    let mut mixed = body_only("t-4", old);
    mixed.push(("X-Botfleet-Timestamp", now.to_string()));
    let (status, refused) = post(&host, &mixed, old).await;
    assert_eq!(status, 401, "{refused}");

    // an old timestamped capture replayed without its header, the
    // timestamp moved into the body, the same signature (QA, high: it was
    // admitted, past the tolerance and again once a day)
    let moved = format!("{}.{old}", now - 1000);
    let replayed = vec![
        ("X-Botfleet-Delivery", "t-5".to_owned()),
        (
            "X-Botfleet-Signature",
            sign_hook(SECRET.as_bytes(), moved.as_bytes()),
        ),
    ];
    let (status, refused) = post(&host, &replayed, &moved).await;
    assert_eq!(status, 401, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("timestamped signature signs") && message.contains(" s old, past"),
        "{message}"
    );

    // and under the first delivery's own id: a replay too, not a new
    // delivery to send under a new id (QA)
    let moved = format!("{now}.{body}");
    let replayed = vec![
        ("X-Botfleet-Delivery", "t-1".to_owned()),
        (
            "X-Botfleet-Signature",
            sign_hook(SECRET.as_bytes(), moved.as_bytes()),
        ),
    ];
    let (status, refused) = post(&host, &replayed, &moved).await;
    assert_eq!(status, 409, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("this delivery and its signature came before")
            && !message.contains("send a new id"),
        "{message}"
    );

    // the same with a zero-padded timestamp, which the header takes (QA,
    // high: it was taken for a plain body, admitted at any age)
    let padded = format!("00{}.{old}", now - 1000);
    let replayed = vec![
        ("X-Botfleet-Delivery", "t-7".to_owned()),
        (
            "X-Botfleet-Signature",
            sign_hook(SECRET.as_bytes(), padded.as_bytes()),
        ),
    ];
    let (status, refused) = post(&host, &replayed, &padded).await;
    assert_eq!(status, 401, "{refused}");

    let plain = r#"{"event":"push"}"#;
    let (status, accepted) = post(&host, &body_only("b-1", plain), plain).await;
    assert_eq!(status, 202, "{accepted}");
    host.wait_turn_end(&session, accepted["seq"].as_i64().unwrap())
        .await;
    assert_eq!(events_in(&host, &session).await, 2);
    host.shutdown().await;
}

/// Regression: 400 deliveries in 0.7 s were all admitted. A hook takes a
/// minute's worth of its `deliveries_per_minute` (120 by default) at once,
/// and 2 more a second; a sender far faster than that (this loop sends
/// dozens a second) meets 429 with `Retry-After`, while a retry of a
/// delivery already admitted is still answered `duplicate`.
#[tokio::test]
async fn a_flood_of_deliveries_meets_the_hooks_rate() {
    let host = hooked_host("").await;
    let mut accepted = 0;
    let refused = loop {
        assert!(accepted < 1000, "1000 deliveries admitted, none refused");
        let body = format!(r#"{{"n":{accepted}}}"#);
        let headers = body_only(&format!("f-{accepted}"), &body);
        let (status, retry_after, answer) = post_full(&host, &headers, &body).await;
        match status {
            202 => accepted += 1,
            429 => break (retry_after, answer),
            other => panic!("delivery {accepted}: {other} {answer}"),
        }
    };
    assert!(accepted >= 120, "only {accepted} admitted before a 429");
    let (retry_after, answer) = refused;
    assert_eq!(answer["error"]["code"], "rate_limited", "{answer}");
    assert_eq!(
        answer["error"]["key"], "bots[].hooks[].deliveries_per_minute",
        "{answer}"
    );
    let wait: u64 = retry_after.unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let first = r#"{"n":0}"#;
    let (status, again) = post(&host, &body_only("f-0", first), first).await;
    assert_eq!((status, &again["status"]), (200, &Value::from("duplicate")));
    host.shutdown().await;
}

/// Regression: a delivery declaring a body over the hook's limit was
/// answered only once the whole body came; one whose body never came held
/// the connection until `host.request_timeout_s` (503). It is refused
/// (413) from its headers.
#[tokio::test]
async fn a_declared_length_over_the_hooks_limit_is_refused_unread() {
    let host = hooked_host("request_timeout_s = 2").await;
    let addr = host.url.trim_start_matches("http://").to_owned();
    for length in [2049_u64, 10_000_000] {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /v1/hooks/r/gh HTTP/1.1\r\nHost: t\r\nX-Botfleet-Delivery: big\r\n\
             X-Botfleet-Signature: sha256={}\r\nContent-Length: {length}\r\n\
             Connection: close\r\n\r\n",
            "0".repeat(64)
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let read = stream.read_to_end(&mut answer);
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .expect("no answer")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 413"), "{length}: {answer}");
        assert!(answer.contains("too_large"), "{answer}");
    }
    host.shutdown().await;
}

/// A hook's settings from fleet.toml: `require_timestamp` refuses a
/// body-only signature (401 naming the header to add), and a low
/// `deliveries_per_minute` is met at once.
#[tokio::test]
async fn a_hooks_settings_from_fleet_toml_apply() {
    let host = TestFleet::new()
        .script("s", NOTE)
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\nrequire_timestamp = true\n\
             deliveries_per_minute = 2\n"
        ))
        .start()
        .await;
    let body = r#"{"n":0}"#;
    let (status, refused) = post(&host, &body_only("s-0", body), body).await;
    assert_eq!(status, 401, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("require_timestamp") && message.contains("X-Botfleet-Timestamp"),
        "{message}"
    );
    let now = unix_now();
    for n in 1..=2 {
        let body = format!(r#"{{"n":{n}}}"#);
        let (status, answer) =
            post(&host, &timestamped(&format!("s-{n}"), now, &body), &body).await;
        assert_eq!(status, 202, "{answer}");
    }
    let body = r#"{"n":3}"#;
    let (status, refused) = post(&host, &timestamped("s-3", now, body), body).await;
    assert_eq!(status, 429, "{refused}");
    host.shutdown().await;
}

/// Regression: a message declaring 10 MB (over `host.max_body_bytes`) and
/// sending nothing got no answer until `host.request_timeout_s`. It is
/// refused (413) from its headers.
#[tokio::test]
async fn a_message_declared_over_the_body_limit_is_refused_unread() {
    let host = hooked_host("request_timeout_s = 2").await;
    let addr = host.url.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/bots/r/messages HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 10000000\r\nConnection: close\r\n\r\n",
        crate::support::fleet::TOKEN
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer))
        .await
        .expect("no answer")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("too_large"), "{answer}");
    host.shutdown().await;
}
