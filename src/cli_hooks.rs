//! `botfleet hooks BOT`: a bot's webhooks as a table, over
//! `GET /v1/bots/{bot}/hooks` (docs/api.md, "Webhooks"). They are defined
//! in fleet.toml; only the bot's owner sees them, and never their secrets.

use std::process::ExitCode;

use serde_json::Value;

use super::columns::Align;
use super::columns::cell;
use super::columns::table;
use super::terminal;
use crate::client::Client;
use crate::client::segment;

/// The columns of the listing: heading and alignment.
const COLUMNS: [(&str, Align); 5] = [
    ("NAME", Align::Left),
    ("PATH", Align::Left),
    ("MAX BYTES", Align::Right),
    ("PER MINUTE", Align::Right),
    ("TIMESTAMP", Align::Left),
];

/// Prints `bot`'s webhooks (`--json`: the API's answer).
pub(super) async fn list(client: &Client, bot: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let v = client
        .get(&format!("/v1/bots/{}/hooks", segment(bot)))
        .await?;
    if as_json {
        outln!("{}", terminal::json_pretty(&v));
        return Ok(ExitCode::SUCCESS);
    }
    let hooks = v["hooks"].as_array().cloned().unwrap_or_default();
    if hooks.is_empty() {
        // said on stderr, nothing on stdout, as `routines` of a bot with none
        errln!(
            "{} has no webhooks; add one to fleet.toml under [[bots.hooks]] (name, secret_env) \
             and restart the host",
            cell(bot)
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows: Vec<[String; 5]> = vec![COLUMNS.map(|(heading, _)| heading.to_owned())];
    rows.extend(hooks.iter().map(row));
    for line in table(&rows, &COLUMNS.map(|(_, align)| align)) {
        outln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One hook's row: its name, the path deliveries are posted to, its
/// payload limit, its rate, and whether a signature must carry a
/// timestamp (else within how many seconds one must be).
fn row(h: &Value) -> [String; 5] {
    let number = |key: &str| h[key].as_u64().map(|n| n.to_string()).unwrap_or_default();
    let timestamp = if h["require_timestamp"] == true {
        format!("required, ±{}s", number("timestamp_tolerance_s"))
    } else {
        format!("optional, ±{}s", number("timestamp_tolerance_s"))
    };
    [
        cell(h["name"].as_str().unwrap_or("?")),
        cell(h["path"].as_str().unwrap_or("?")),
        number("max_payload_bytes"),
        number("deliveries_per_minute"),
        timestamp,
    ]
}
