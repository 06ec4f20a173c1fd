//! `botfleet send --timeout N` and `group send --timeout N` end within
//! about N seconds when the host takes connections and never answers (a
//! host stopped with SIGSTOP): subscribing to its change signals and every
//! poll are bounded by the time left, not by the 30 s a request may take.
//! The host is a fake on a loopback socket that answers what it is told
//! to and keeps every other request waiting.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::io::BufReader;
use tokio::net::TcpListener;
use tokio::net::TcpStream;

use crate::support::fleet::TOKEN;
use crate::support::process::BIN;

/// What the fake host answers.
#[derive(Debug, Clone, Copy)]
enum Fake {
    /// Nothing: every request waits forever.
    Silent,
    /// The change stream (its `ready` event) and the post of the message;
    /// then it stops: polls wait forever.
    StopsAfterThePost,
    /// Answers the change stream, then holds the message's POST.
    HoldsThePost,
}

/// Starts the fake; returns its URL.
async fn fake_host(fake: Fake) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve(socket, fake));
        }
    });
    url
}

/// Answers the requests of one connection until one gets no answer; that
/// one waits, its socket open, until the test ends.
async fn serve(socket: TcpStream, fake: Fake) {
    let mut socket = BufReader::new(socket);
    loop {
        let mut request = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            if socket.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
            if request.is_empty() {
                request = line;
            }
        }
        let mut body = vec![0; length];
        socket.read_exact(&mut body).await.unwrap();
        let answer = match fake {
            Fake::Silent => None,
            Fake::StopsAfterThePost => answer_until_polled(&request),
            Fake::HoldsThePost => {
                answer_until_polled(&request).filter(|_| request.starts_with("GET /v1/events"))
            }
        };
        let Some(answer) = answer else {
            std::future::pending::<()>().await;
            return;
        };
        socket.write_all(answer.as_bytes()).await.unwrap();
        socket.flush().await.unwrap();
    }
}

/// The answer of a host that stops after it took the message: the change
/// stream's head and first event (then nothing more), and the admission
/// of a message to a bot or a room.
fn answer_until_polled(request: &str) -> Option<String> {
    let mut words = request.split_whitespace();
    let (method, path) = (words.next()?, words.next()?);
    if method == "GET" && path == "/v1/events" {
        let event = "event: ready\ndata: {}\n\n";
        return Some(format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
            event.len()
        ));
    }
    if method == "POST" && path.ends_with("/messages") {
        let admitted = json!({
            "status": "accepted",
            "bot": "b",
            "session": "s-1",
            "seq": 7,
            "gid": 7,
            "entry_id": "e-7",
            "admitted_at": "2025-01-01T00:00:00Z",
            "unknown_mentions": [],
        })
        .to_string();
        return Some(format!(
            "HTTP/1.1 202 Accepted\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{admitted}",
            admitted.len()
        ));
    }
    None
}

/// Runs the CLI against `host`; returns (exit code, stdout, stderr), or
/// fails if it has not ended after 20 s (`--timeout 2` is asked).
async fn cli_ends(args: &[&str], host: &str) -> (i32, String, String) {
    let child = tokio::process::Command::new(BIN)
        .args(args)
        .env("BOTFLEET_HOST", host)
        .env("BOTFLEET_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{args:?} did not end within 20 s with --timeout 2"))
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn send_gives_up_on_a_host_that_does_not_answer() {
    let host = fake_host(Fake::Silent).await;
    let (code, _, err) = cli_ends(&["send", "b", "hello", "--timeout", "2"], &host).await;
    assert_eq!(code, 1, "not sent: an error, {err}");
    assert!(
        err.contains("error: the host did not answer within 2 s; your message was not sent"),
        "{err}"
    );
    let (code, out, err) =
        cli_ends(&["send", "b", "hello", "--timeout", "2", "--json"], &host).await;
    assert_eq!(code, 1, "{err}");
    // on stderr with --json too (QA: it was on stdout only)
    assert!(
        err.contains("error: the host did not answer within 2 s"),
        "{err}"
    );
    assert_eq!(
        serde_json::from_str::<Value>(out.trim()).unwrap(),
        json!({"status": "error", "sent": false, "error": {"message": "the host did not answer within 2 s; your message was not sent"}})
    );
}

#[tokio::test]
async fn send_gives_up_on_a_host_that_stops_after_the_post() {
    let host = fake_host(Fake::StopsAfterThePost).await;
    let (code, _, err) = cli_ends(&["send", "b", "hello", "--timeout", "2"], &host).await;
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("no reply within 2 s; your message is saved (seq 7)"),
        "{err}"
    );
}

#[tokio::test]
async fn group_send_gives_up_on_a_host_that_stops_after_the_post() {
    let host = fake_host(Fake::StopsAfterThePost).await;
    let (code, _, err) =
        cli_ends(&["group", "send", "team", "hello", "--timeout", "2"], &host).await;
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("did not end within 2 s; your message is saved (#7)"),
        "{err}"
    );
    let host = fake_host(Fake::Silent).await;
    let (code, _, err) =
        cli_ends(&["group", "send", "team", "hello", "--timeout", "2"], &host).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("your message was not sent"), "{err}");
}

#[tokio::test]
async fn send_gives_up_on_a_host_that_holds_the_post_and_says_how_to_resend() {
    let host = fake_host(Fake::HoldsThePost).await;
    for args in [
        &["send", "b", "hello", "--timeout", "2", "--nonce", "k-1"][..],
        &[
            "group",
            "send",
            "team",
            "hello",
            "--timeout",
            "2",
            "--nonce",
            "k-1",
        ][..],
    ] {
        let (code, _, err) = cli_ends(args, &host).await;
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("may or may not be saved") && err.contains("--nonce k-1"),
            "{args:?}: {err}"
        );
    }
}
