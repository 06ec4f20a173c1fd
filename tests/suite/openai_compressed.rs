//! A model server (or a proxy in front of it) that compresses its answer
//! although the request asked for none. botfleet decompresses nothing, so
//! the error says so, naming the encoding, instead of quoting the
//! compressed bytes as the server's words (QA: an error status's gzip
//! body was quoted as mojibake). The request says `Accept-Encoding:
//! identity`, so a server that honours it never compresses.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header::ACCEPT_ENCODING;
use axum::http::header::CONTENT_ENCODING;
use axum::http::header::CONTENT_TYPE;
use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use pretty_assertions::assert_eq;

use super::openai_provider::complete;
use super::openai_provider::request;

/// The first bytes of a gzip stream, and more that is not text.
const GZIP_BYTES: &[u8] = &[
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xab, 0x56, 0xca, 0x48, 0xcd,
];

/// A server answering every request with `status` and a gzip-labelled
/// body; counts the requests and keeps the last `Accept-Encoding` asked.
async fn gzip_server(status: u16) -> (String, Arc<AtomicUsize>, Arc<Mutex<Option<String>>>) {
    encoded_server(status, &["gzip"], GZIP_BYTES.to_vec()).await
}

/// A server answering every request with `status`, one `Content-Encoding`
/// header per item of `encodings` (in that order), and `body`.
async fn encoded_server(
    status: u16,
    encodings: &'static [&'static str],
    body: Vec<u8>,
) -> (String, Arc<AtomicUsize>, Arc<Mutex<Option<String>>>) {
    let count = Arc::new(AtomicUsize::new(0));
    let asked = Arc::new(Mutex::new(None));
    let (counted, noted) = (count.clone(), asked.clone());
    let handler = move |headers: HeaderMap| {
        counted.fetch_add(1, Ordering::SeqCst);
        *noted.lock().unwrap() = headers
            .get(ACCEPT_ENCODING)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = body.clone();
        async move {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, "application/json".parse().unwrap());
            for e in encodings {
                headers.append(CONTENT_ENCODING, e.parse().unwrap());
            }
            (StatusCode::from_u16(status).unwrap(), headers, body)
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let app = axum::Router::new().fallback(handler);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (address, count, asked)
}

fn model(address: &str, stream: bool) -> OpenAiModel {
    OpenAiModel::new(OpenAiOptions {
        max_retries: 1,
        stream,
        backoff_base: Duration::from_millis(2),
        backoff_max: Duration::from_millis(20),
        ..OpenAiOptions::new(format!("http://{address}/v1"), "test-model")
    })
    .unwrap()
}

#[tokio::test]
async fn a_compressed_error_body_is_named_not_quoted() {
    let (address, count, asked) = gzip_server(503).await;
    let error = complete(&model(&address, true), &request("x"))
        .await
        .0
        .unwrap_err();
    let ModelError::Http { status, body, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(*status, 503);
    assert_eq!(
        body,
        "(a body sent compressed, Content-Encoding: gzip, not shown: the request asked for none)"
    );
    // still an error status, retried as one
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(asked.lock().unwrap().as_deref(), Some("identity"));
}

#[tokio::test]
async fn a_compressed_answer_fails_at_once_saying_why() {
    for stream in [true, false] {
        let (address, count, _) = gzip_server(200).await;
        let error = complete(&model(&address, stream), &request("x"))
            .await
            .0
            .unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("compressed (Content-Encoding: gzip)")
                && text.contains("Accept-Encoding: identity")
                && text.contains("send answers uncompressed")
                && !text.contains('\u{fffd}'),
            "{text}"
        );
        // no retry sends it uncompressed
        assert_eq!(count.load(Ordering::SeqCst), 1, "stream {stream}");
    }
    // a fleet's provider adds no advice about its base_url: the cause is
    // the server's or its proxy's compression (QA: it came first)
    let (address, _, _) = gzip_server(200).await;
    let model = OpenAiModel::new(OpenAiOptions {
        provider: Some("main".to_owned()),
        max_retries: 0,
        ..OpenAiOptions::new(format!("http://{address}/v1"), "test-model")
    })
    .unwrap();
    let text = complete(&model, &request("x"))
        .await
        .0
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("send answers uncompressed") && !text.contains("base_url"),
        "{text}"
    );
}

/// Regression (QA): only the first `Content-Encoding` header was read, so
/// a proxy's `gzip` after an upstream's `identity` passed and the bytes
/// were quoted again; and `identity, identity` was taken for compressed.
#[tokio::test]
async fn every_content_encoding_header_is_read() {
    let (address, _, _) = encoded_server(400, &["identity", "gzip"], GZIP_BYTES.to_vec()).await;
    let error = complete(&model(&address, false), &request("x"))
        .await
        .0
        .unwrap_err();
    let ModelError::Http { body, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(
        body,
        "(a body sent compressed, Content-Encoding: gzip, not shown: the request asked for none)"
    );
    let completion = serde_json::json!({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "plain"}}]
    });
    let (address, _, _) = encoded_server(
        200,
        &["identity, identity"],
        completion.to_string().into_bytes(),
    )
    .await;
    let answer = complete(&model(&address, false), &request("x"))
        .await
        .0
        .unwrap();
    assert_eq!(answer.text, "plain");
}
