//! A request that comes while the host stops is refused 503
//! `unavailable`, and the refusal, expected at every stop, is not logged
//! as an error (QA: `ERROR botfleet::api::error: API error error=the host
//! is stopping`).

use std::sync::Arc;
use std::sync::Mutex;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::http::StatusCode;
use tower::ServiceExt;

/// What this thread logs, as text.
#[derive(Clone, Default)]
struct Logged(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_request_while_the_host_stops_is_refused_without_an_error_line() {
    let logged = Logged::default();
    let writer = logged.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let stop = tokio_util::sync::CancellationToken::new();
    let app = super::refuse_while_stopping(
        Router::new().route("/", axum::routing::get(|| async { "ok" })),
        stop.clone(),
    );
    let answer = app
        .clone()
        .oneshot(Request::get("/").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);

    stop.cancel();
    let answer = app
        .oneshot(Request::get("/").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = axum::body::to_bytes(answer.into_body(), 4096)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the host is stopping"),
        "{body}"
    );
    let log = String::from_utf8_lossy(&logged.0.lock().unwrap()).into_owned();
    assert!(!log.contains("ERROR"), "{log}");
}
