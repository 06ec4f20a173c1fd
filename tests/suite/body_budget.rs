//! `host.body_bytes_per_user`: one user's request bodies still arriving
//! hold at most that many bytes of the host's memory. A body is read
//! whole before its request is handled: one user's 400 connections, each
//! sending all but 20 bytes of a 1 MiB body and then nothing, took the
//! host from 77 MB to 543 MB of memory until they closed (QA). Past the
//! budget a request is refused `429 rate_limited` at once, its body
//! unread; other users are not held back, and once the uploads end the
//! user's messages are taken again.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::process::poll;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

/// A message whose body is declared 4,096 bytes long, of which only the
/// head arrives: it holds its bytes until the connection closes.
async fn stalled_upload(host: &TestHost, token: &str) -> TcpStream {
    let mut stream = TcpStream::connect(host.url.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "POST /v1/bots/r/messages HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n{{\"text\": \""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

#[tokio::test]
async fn a_users_uploads_in_flight_are_bounded_and_others_are_served() {
    let host = TestFleet::new()
        .host("max_body_bytes = 4096\nbody_bytes_per_user = 8192")
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot_of("q", "s", &["SendMessage"], "bob")
        .start()
        .await;
    let mut first = stalled_upload(&host, TOKEN).await;
    let second = stalled_upload(&host, TOKEN).await;

    // the two hold alice's 8,192 bytes once the host has taken them up:
    // her next message is refused, its body unread, saying why and when
    let (status, refused) = poll(20, async || {
        let (status, answer) = host.send("r", "one more", Some("k-more")).await;
        if status == 429 {
            Ok((status, answer))
        } else {
            Err(format!("not refused yet: {status} {answer}"))
        }
    })
    .await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["code"], "rate_limited", "{refused}");
    assert_eq!(
        refused["error"]["key"], "host.body_bytes_per_user",
        "{refused}"
    );
    assert_eq!(refused["error"]["retry_after_s"], 1, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("8192") && message.contains("nothing was saved"),
        "{message}"
    );

    // bob is served meanwhile
    let (status, sent) = host
        .post_raw(
            "/v1/bots/q/messages",
            Some(BOB_TOKEN),
            None,
            serde_json::json!({ "text": "bob's" }).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{sent}");

    // one upload finishes (a whole body: answered), the other closes:
    // alice's budget is hers again
    let rest = format!("{}\"}}", "x".repeat(4096 - 10 - 2));
    first.write_all(rest.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(20), first.read(&mut answer))
        .await
        .expect("the finished upload is answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    drop(second);
    let (status, sent) = poll(20, async || {
        let (status, answer) = host.send("r", "one more", Some("k-more")).await;
        if status == 202 {
            Ok((status, answer))
        } else {
            Err(format!("still refused: {status} {answer}"))
        }
    })
    .await;
    assert_eq!(status, 202, "{sent}");
    host.shutdown().await;
}
