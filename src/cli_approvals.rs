//! `botfleet approvals`, `botfleet approve ID`, `botfleet deny ID`.

use std::process::ExitCode;

use serde_json::Value;
use serde_json::json;

use crate::client::Client;
use crate::client::segment;

/// Lists the user's approvals (pending ones, or all).
pub(crate) async fn list(client: &Client, all: bool, as_json: bool) -> anyhow::Result<ExitCode> {
    let path = if all {
        "/v1/approvals?limit=100"
    } else {
        "/v1/approvals?status=pending&limit=100"
    };
    let v = client.get(path).await?;
    if as_json {
        outln!("{}", super::terminal::json_pretty(&v));
        return Ok(ExitCode::SUCCESS);
    }
    let items = v["approvals"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        outln!(
            "{}",
            if all {
                "no approvals"
            } else {
                "no approvals are waiting for you"
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let now = chrono::Utc::now().timestamp_millis();
    for a in &items {
        outln!("{}", line(a, now));
    }
    if !all {
        outln!("\ndecide with `botfleet approve ID` or `botfleet deny ID`");
    }
    Ok(ExitCode::SUCCESS)
}

/// One approval on a line (and its reason below).
fn line(a: &Value, now: i64) -> String {
    let status = a["status"].as_str().unwrap_or("?");
    let when = match status {
        "pending" => {
            let left = (a["expires_at"].as_i64().unwrap_or(now) - now).max(0) / 1000;
            format!("expires in {}m{:02}s", left / 60, left % 60)
        }
        "expired" => match (a["expired_by"].as_str(), a["decided_at"].as_i64()) {
            (Some("user_message"), _) => "expired: a newer message was sent".to_owned(),
            // approved, then its window to be used ran out
            (_, Some(_)) => "expired: approved but not used in time".to_owned(),
            (_, None) => "expired: nobody decided in time".to_owned(),
        },
        _ => match a["consumed_at"].as_i64() {
            Some(_) => "used".to_owned(),
            None => String::new(),
        },
    };
    format!(
        "{}  {:<10} {:<8} {}  {}\n    why: {}",
        a["id"].as_str().unwrap_or(""),
        a["bot"].as_str().unwrap_or(""),
        status,
        a["summary"].as_str().unwrap_or(""),
        when,
        a["reason"].as_str().unwrap_or("")
    )
}

/// Approves or denies one approval.
pub(crate) async fn decide(client: &Client, id: &str, decision: &str) -> anyhow::Result<ExitCode> {
    let v = client
        .post_ok(
            &format!("/v1/approvals/{}", segment(id)),
            &json!({ "decision": decision }),
        )
        .await?;
    let a = &v["approval"];
    let done = if decision == "approve" {
        "approved"
    } else {
        "denied"
    };
    outln!(
        "{done} {id}: {} ({} was told)",
        a["summary"].as_str().unwrap_or(""),
        a["bot"].as_str().unwrap_or("the bot")
    );
    Ok(ExitCode::SUCCESS)
}
