//! `GET /healthz`: whether the host is up, and whether its store can save
//! (docs/operations.md, "Monitoring"). No auth.
//!
//! - `200 ok`: up, writes work, nothing stopped.
//! - `200 degraded` and one line per reason: up and writing, but a write
//!   failed in the last ten minutes, the search index or the JSONL
//!   mirror stopped until a restart (its directory was deleted), or the
//!   start found the database behind what it had committed.
//! - `503 failing` and one line per reason: up, but the store cannot save
//!   anything: its last write failed (full or failing disk, a deleted
//!   file) and none succeeded since, or the database is damaged (every
//!   write refused until a restore and a restart).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;

use super::ApiState;

/// The answer of `GET /healthz` (text/plain).
pub(super) async fn healthz(State(state): State<ApiState>) -> Response {
    let report = state.fleet.store().stats().health.report();
    let status = if report.failing() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (status, report.text()).into_response()
}
