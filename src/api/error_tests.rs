//! How store failures reach a client: a full or failing disk as SQLite
//! reports it, through `StoreError`, to the status and advice.

use axum::response::IntoResponse;

use super::*;

/// A SQLite error with `code`, as rusqlite returns it.
fn sqlite(code: std::ffi::c_int, message: &str) -> StoreError {
    StoreError::from(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(code),
        Some(message.into()),
    ))
}

async fn answer(e: StoreError) -> (u16, serde_json::Value) {
    let response = ApiError::from(e).into_response();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let json = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}"));
    (status, json)
}

#[tokio::test]
async fn a_full_disk_is_507_with_what_to_do() {
    let e = sqlite(rusqlite::ffi::SQLITE_FULL, "database or disk is full");
    assert!(matches!(e, StoreError::DiskFull { .. }), "{e:?}");
    let (status, body) = answer(e).await;
    assert_eq!(status, 507, "{body}");
    assert_eq!(body["error"]["code"], "storage_full", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("free disk space"), "{message}");
    assert!(message.contains("same Idempotency-Key"), "{message}");
}

#[tokio::test]
async fn a_failing_disk_is_503_storage_error() {
    let e = sqlite(rusqlite::ffi::SQLITE_IOERR_WRITE, "disk I/O error");
    assert!(matches!(e, StoreError::DiskIo { .. }), "{e:?}");
    let (status, body) = answer(e).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "storage_error", "{body}");
}

#[tokio::test]
async fn other_sqlite_errors_stay_internal() {
    let (status, body) = answer(sqlite(rusqlite::ffi::SQLITE_CORRUPT, "malformed")).await;
    assert_eq!(status, 500, "{body}");
}
