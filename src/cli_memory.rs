//! `botfleet memory BOT` (what a bot remembers, with ids) and
//! `botfleet forget ID`.

use std::process::ExitCode;

use serde_json::Value;

use super::terminal;
use crate::client::Client;
use crate::client::segment;

/// Prints what `bot` remembers, scope by scope and layer by layer; with
/// `input`, also what the prompt would show for it and the log entries it
/// would take, best first with their scores.
pub(super) async fn show(
    client: &Client,
    bot: &str,
    input: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let path = format!("/v1/bots/{}/memory", segment(bot));
    let params: Vec<(&str, &str)> = input.map(|i| ("input", i)).into_iter().collect();
    let v = client.get_query(&path, &params).await?;
    if json {
        outln!("{}", super::terminal::json_pretty(&v));
        return Ok(ExitCode::SUCCESS);
    }
    for scope in v["scopes"].as_array().into_iter().flatten() {
        let p = &scope["profile"];
        outln!(
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
                outln!("  {layer:<7} {}", line(item));
            }
        }
    }
    if let Some(input) = input {
        print_prompt(&v, input);
    }
    outln!("forget an item with: botfleet forget <id>");
    Ok(ExitCode::SUCCESS)
}

/// What the prompt would take for `input` (`prompt.shown` and
/// `prompt.recall` of the answer): how many items it shows, and the log
/// entries it takes with their scores and text.
fn print_prompt(v: &Value, input: &str) {
    let prompt = &v["prompt"];
    let text_of = |id: &str| -> &str {
        v["scopes"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["log"]["items"].as_array().into_iter().flatten())
            .find(|i| i["id"].as_str() == Some(id))
            .and_then(|i| i["text"].as_str())
            .unwrap_or("")
    };
    let shown = prompt["shown"].as_array().map_or(0, Vec::len);
    let recall = prompt["recall"].as_array().cloned().unwrap_or_default();
    let entries = match recall.len() {
        0 => "no log entry".to_owned(),
        1 => "1 log entry:".to_owned(),
        n => format!("{n} log entries, best first:"),
    };
    outln!(
        "the prompt for \"{input}\" shows {shown} item(s): every profile fact and live note, and {entries}"
    );
    for r in &recall {
        let id = r["id"].as_str().unwrap_or("?");
        outln!(
            "  recall  {id}  {}  (score {:.3}: relevance {:.3}, recency {:.3}, weight {:.2})",
            text_of(id),
            r["score"].as_f64().unwrap_or(0.0),
            r["relevance"].as_f64().unwrap_or(0.0),
            r["recency"].as_f64().unwrap_or(0.0),
            r["weight"].as_f64().unwrap_or(0.0),
        );
    }
}

fn line(item: &Value) -> String {
    let mut out = format!(
        "{}  {}",
        item["id"].as_str().unwrap_or("?"),
        item["text"].as_str().unwrap_or("")
    );
    if let Some(at) = item["expires_at"].as_i64().and_then(terminal::minute_utc) {
        out.push_str(&format!("  (until {at})"));
    }
    out
}

/// Forgets one memory item.
pub(super) async fn forget(client: &Client, id: &str) -> anyhow::Result<ExitCode> {
    let v = client
        .delete(&format!("/v1/memory/{}", segment(id)))
        .await?;
    match v["status"].as_str() {
        Some("already_forgotten") => outln!("{id} was already forgotten"),
        _ => outln!(
            "forgot {id} ({} {})",
            v["scope"].as_str().unwrap_or("?"),
            v["layer"].as_str().unwrap_or("")
        ),
    }
    Ok(ExitCode::SUCCESS)
}
