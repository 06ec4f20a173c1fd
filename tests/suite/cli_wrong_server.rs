//! The CLI against a server that is not a botfleet host (a wrong
//! `--host`): a web server answering every path with a page, or 404 with
//! one, says so and what to do, with the error status; and one answering
//! `GET /v1/events` with an event stream that never breaks a line is cut
//! off, rather than read without bound.

use std::time::Duration;

use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use botfleet::client::Client;

use crate::support::process::cli;

/// Reads a request's head off `conn`; false if it closed first.
async fn read_head(conn: &mut tokio::net::TcpStream) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// Serves every request with `status` and a small HTML page, as a web
/// server at the wrong address would.
async fn web_server(status: &'static str) -> String {
    serve_all(
        status,
        "text/html; charset=utf-8",
        "<html><body>Welcome</body></html>",
    )
    .await
}

/// Serves every request with `status` and `body` of `kind`.
async fn serve_all(status: &'static str, kind: &'static str, page: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                if !read_head(&mut conn).await {
                    return;
                }
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

/// Every command that reads or sends fails with exit status 1 and says
/// the server is no botfleet host and to set --host. (A page answering
/// 200 read as an empty fleet: `bots` printed an empty table,
/// `approvals` "no approvals are waiting for you", both with status 0;
/// a 404 page said only "no details".)
#[tokio::test]
async fn a_server_that_is_not_botfleet_is_named_as_such() {
    for status in ["200 OK", "404 Not Found"] {
        let url = web_server(status).await;
        for args in [
            &["bots"][..],
            &["bots", "--json"],
            &["approvals"],
            &["memory", "echo"],
            &["search", "tea"],
            &["routines", "echo"],
            &["send", "echo", "hi", "--timeout", "5"],
        ] {
            let (code, out, err) = cli(args, &url, "t").await;
            assert_eq!(code, 1, "{status} {args:?}: {out} {err}");
            assert!(
                err.contains("not the API's")
                    && err.contains("text/html")
                    && err.contains("--host"),
                "{status} {args:?}: {err}"
            );
            if status.starts_with("200") {
                assert!(err.contains("not a botfleet host"), "{args:?}: {err}");
                assert!(!out.contains("ID"), "no table of no bots: {out}");
            }
        }
    }
}

/// A server answering every path `200` with JSON that is not the API's
/// (QA: `bots` printed an empty table, `approvals` "no approvals are
/// waiting for you", `retry` "requeued null input(s)", all with status
/// 0): each command says it is no botfleet host, exit 1.
#[tokio::test]
async fn a_server_answering_other_json_is_named_as_such() {
    let url = serve_all("200 OK", "application/json", r#"{"weird": true}"#).await;
    let turn = "01a24337-3e4a-7583-abcc-482064fd1399";
    for args in [
        &["bots"][..],
        &["bots", "--json"],
        &["approvals"],
        &["memory", "echo"],
        &["search", "tea"],
        &["group", "list"],
        &["retry", turn],
        &["cancel", "echo"],
        // (QA: "echo has no routines", exit 0)
        &["routines", "echo"],
        &["routines", "echo", "--json"],
    ] {
        let (code, out, err) = cli(args, &url, "t").await;
        assert_eq!(code, 1, "{args:?}: {out} {err}");
        assert!(
            err.contains("answered JSON without") && err.contains("not a botfleet host"),
            "{args:?}: {err}"
        );
        assert!(!out.contains("weird"), "{args:?}: {out}");
    }
}

/// Serves each connection: reads a request head, answers 200 with an
/// event stream, then sends `x` with no line break, until the reader
/// hangs up.
async fn endless_line_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                if !read_head(&mut conn).await {
                    return;
                }
                let answer = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                              connection: close\r\n\r\nevent: ready\ndata: {}\n\n";
                if conn.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                // 64 MiB, then nothing more but the connection held open
                // (so a reader without a cap waits, rather than fill the
                // test's memory)
                let chunk = vec![b'x'; 64 * 1024];
                for _ in 0..1024 {
                    if conn.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
                let _ = conn.read(&mut [0u8; 64]).await;
            });
        }
    });
    url
}

/// The stream gives the events before the endless line, then an error
/// naming what is wrong and what to check, then ends: it is cut off after
/// about 1 MiB. (It read on without end, keeping every byte.)
#[tokio::test]
async fn an_endless_line_on_the_change_stream_is_cut_off_with_an_error() {
    let url = endless_line_server().await;
    let client = Client::new(&url, "t").unwrap();
    let mut stream = client.checked_events().await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("the event before the endless line")
        .unwrap()
        .unwrap();
    assert_eq!(first.event, "ready");
    let next = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("the endless line was read without end")
        .expect("an error, not the end of the stream");
    let e = format!("{:#}", next.expect_err("no event is in the endless line"));
    assert!(
        e.contains("over 1 MiB") && e.contains("--host") && e.contains(&url),
        "{e}"
    );
    let end = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("the stream ends after the error");
    assert!(end.is_none(), "{end:?}");
}
