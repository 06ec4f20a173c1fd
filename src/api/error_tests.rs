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
    assert!(message.contains("send the request again"), "{message}");
}

/// Only a request that carried an `Idempotency-Key` is told to send it
/// again with the same key: `PUT /v1/secrets/FOO` takes none. (Before,
/// every storage error said "with the same Idempotency-Key".)
#[tokio::test]
async fn only_a_keyed_request_is_told_to_resend_with_its_key() {
    for e in [
        sqlite(rusqlite::ffi::SQLITE_FULL, "database or disk is full"),
        sqlite(rusqlite::ffi::SQLITE_IOERR_WRITE, "disk I/O error"),
    ] {
        let plain = ApiError::from(e).to_string();
        assert!(!plain.contains("Idempotency-Key"), "{plain}");
        assert!(plain.contains("send the request again"), "{plain}");
    }
    let keyed = ApiError::from(sqlite(
        rusqlite::ffi::SQLITE_FULL,
        "database or disk is full",
    ))
    .resend_with_key(true)
    .to_string();
    assert!(keyed.contains("with the same Idempotency-Key"), "{keyed}");
    let unkeyed = ApiError::from(sqlite(rusqlite::ffi::SQLITE_FULL, "full"))
        .resend_with_key(false)
        .to_string();
    assert!(!unkeyed.contains("Idempotency-Key"), "{unkeyed}");
}

#[tokio::test]
async fn a_failing_disk_is_503_storage_error() {
    let e = sqlite(rusqlite::ffi::SQLITE_IOERR_WRITE, "disk I/O error");
    assert!(matches!(e, StoreError::DiskIo { .. }), "{e:?}");
    let (status, body) = answer(e).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "storage_error", "{body}");
}

/// A damaged database (met at a read or a write) is a storage error that
/// says to restore a backup, not a bare `500 internal`.
#[tokio::test]
async fn a_damaged_database_is_503_with_how_to_restore() {
    for code in [rusqlite::ffi::SQLITE_CORRUPT, rusqlite::ffi::SQLITE_NOTADB] {
        let e = sqlite(code, "database disk image is malformed");
        assert!(matches!(e, StoreError::Damaged { .. }), "{e:?}");
        let (status, body) = answer(e).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "storage_error", "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("damaged"), "{message}");
        assert!(message.contains("\"Backups and restore\""), "{message}");
    }
}

/// A store whose database was deleted under it is a storage error that
/// names the file and says to restart.
#[tokio::test]
async fn a_deleted_database_is_503_naming_the_file() {
    let e = StoreError::FileGone {
        path: "/data/fleet.db".into(),
        what: "was deleted",
    };
    let (status, body) = answer(e).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "storage_error", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("/data/fleet.db was deleted"), "{message}");
    assert!(message.contains("restart the host"), "{message}");
}

#[tokio::test]
async fn other_sqlite_errors_stay_internal() {
    let (status, body) = answer(sqlite(rusqlite::ffi::SQLITE_CONSTRAINT, "constraint")).await;
    assert_eq!(status, 500, "{body}");
}

/// Regression (QA): every `streams_full` refusal wrote a line at ERROR,
/// so any signed-in client could fill the log at that level by opening
/// streams. It is a refusal clients cause: at WARN, once a minute at
/// most, as storage errors are throttled; other server errors stay at
/// ERROR each time.
#[test]
fn a_full_stream_table_is_logged_as_a_throttled_warning() {
    assert_eq!(
        how_logged(&ApiError::StreamsFull("all streams taken".into())),
        Logged::WarnThrottled
    );
    assert_eq!(
        how_logged(&ApiError::StorageFull("disk full".into())),
        Logged::ErrorThrottled
    );
    assert_eq!(how_logged(&ApiError::Internal("bug".into())), Logged::Error);
}
