//! `botfleet memory BOT` (what a bot remembers, with ids) and
//! `botfleet forget ID`.

use std::process::ExitCode;

use serde_json::Value;

use crate::client::Client;

/// Prints what `bot` remembers, scope by scope and layer by layer.
pub(super) async fn show(
    client: &Client,
    bot: &str,
    input: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut path = format!("/v1/bots/{bot}/memory");
    if let Some(i) = input {
        path.push_str("?input=");
        path.push_str(&encode(i));
    }
    let v = client.get(&path).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    for scope in v["scopes"].as_array().into_iter().flatten() {
        let p = &scope["profile"];
        println!(
            "{} — profile {}/{} facts, {}/{} characters; log {}; notes {}",
            scope["scope"].as_str().unwrap_or("?"),
            p["count"],
            p["max_facts"],
            p["chars"],
            p["max_chars"],
            scope["log"]["count"],
            scope["notes"]["count"],
        );
        for layer in ["profile", "log", "notes"] {
            for item in scope[layer]["items"].as_array().into_iter().flatten() {
                println!("  {layer:<7} {}", line(item));
            }
        }
    }
    println!("forget an item with: botfleet forget <id>");
    Ok(ExitCode::SUCCESS)
}

fn line(item: &Value) -> String {
    let mut out = format!(
        "{}  {}",
        item["id"].as_str().unwrap_or("?"),
        item["text"].as_str().unwrap_or("")
    );
    if let Some(t) = item["expires_at"].as_i64() {
        let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(t).unwrap_or_default();
        out.push_str(&format!("  (until {})", at.format("%Y-%m-%d %H:%M UTC")));
    }
    out
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Forgets one memory item.
pub(super) async fn forget(client: &Client, id: &str) -> anyhow::Result<ExitCode> {
    let v = client.delete(&format!("/v1/memory/{id}")).await?;
    match v["status"].as_str() {
        Some("already_forgotten") => println!("{id} was already forgotten"),
        _ => println!(
            "forgot {id} ({} {})",
            v["scope"].as_str().unwrap_or("?"),
            v["layer"].as_str().unwrap_or("")
        ),
    }
    Ok(ExitCode::SUCCESS)
}
