//! Streams whose body ends only by the connection's close (HTTP/1.1 with
//! no `Content-Length` and no chunks, RFC 9112 §6.3): a cut connection
//! ends such a body as cleanly as the server's last byte does. A real
//! HTTP/1.1 server on loopback, written here because the support server
//! (hyper) always frames its bodies.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;

use super::openai_provider::complete;
use super::openai_provider::request;

/// A server that answers its `n`th request (from 0) with the SSE events
/// `bodies[n]` (the last body for every later one) under `Connection:
/// close`, then closes; and how many requests it answered.
async fn close_delimited(bodies: Vec<Vec<serde_json::Value>>) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let answered = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let n = answered.fetch_add(1, Ordering::SeqCst);
            let events = bodies[n.min(bodies.len() - 1)].clone();
            tokio::spawn(async move {
                read_request(&mut socket).await;
                let mut out = String::from(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
                );
                for event in events {
                    if event == "[DONE]" {
                        out.push_str("data: [DONE]\n\n");
                    } else {
                        out.push_str(&format!("data: {event}\n\n"));
                    }
                }
                let _ = socket.write_all(out.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, count)
}

/// Reads a request's head and its `Content-Length` body.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut read = Vec::new();
    let mut buf = [0_u8; 4096];
    loop {
        let n = socket.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        read.extend_from_slice(&buf[..n]);
        let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&read[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if read.len() >= end + 4 + length {
            return;
        }
    }
}

fn chunk(content: &str, finish: Option<&str>) -> serde_json::Value {
    json!({
        "id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    })
}

fn options(url: String) -> OpenAiOptions {
    OpenAiOptions {
        api_key: Some("sk-test".to_owned()),
        timeout: Duration::from_secs(10),
        backoff_base: Duration::from_millis(2),
        backoff_max: Duration::from_millis(50),
        ..OpenAiOptions::new(url, "m")
    }
}

/// Regression (QA): a gateway's `"stop"` on every chunk, then a clean
/// close in the middle of the answer: the cut answer was used as the
/// whole. It is retried, as a reset there is.
#[tokio::test]
async fn a_clean_close_after_interim_finish_reasons_is_retried() {
    let cut = vec![
        chunk("Here is ", Some("stop")),
        chunk("part one", Some("stop")),
    ];
    let whole = vec![
        chunk("Here is part one.", None),
        chunk(" And part two.", None),
        chunk("", Some("stop")),
        json!("[DONE]"),
    ];
    let (url, requests) = close_delimited(vec![cut, whole]).await;
    let model = OpenAiModel::new(options(url)).unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    assert_eq!(
        result.unwrap().text,
        "Here is part one. And part two.".to_owned()
    );
    assert_eq!(requests.load(Ordering::SeqCst), 2);
}

/// A close-delimited stream whose finish reason came on a chunk of its
/// own, after chunks without one, then the close without `[DONE]`: only
/// `[DONE]` was missing, and the answer is used without another call.
#[tokio::test]
async fn a_clean_close_after_the_finish_chunk_is_used() {
    let body = vec![
        chunk("Whole ", None),
        chunk("answer.", None),
        chunk("", Some("stop")),
    ];
    let (url, requests) = close_delimited(vec![body]).await;
    let model = OpenAiModel::new(options(url)).unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    assert_eq!(result.unwrap().text, "Whole answer.".to_owned());
    assert_eq!(requests.load(Ordering::SeqCst), 1);
}
