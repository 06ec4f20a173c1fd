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
        let record = client.get(&format!("/v1/bots/{}", segment(bot))).await?;
        errln!("{}", no_hooks(bot, &record));
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows: Vec<[String; 5]> = vec![COLUMNS.map(|(heading, _)| heading.to_owned())];
    rows.extend(hooks.iter().map(row));
    for line in table(&rows, &COLUMNS.map(|(_, align)| align)) {
        outln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Why `bot` (its record: `GET /v1/bots/{bot}`) has no webhooks, and
/// how it could get one. Hooks are defined under a bot of fleet.toml: a
/// subagent's or a CreateAgent bot's have nowhere to go, and a removed
/// bot takes none until fleet.toml lists it again; the advice to add one
/// under `[[bots.hooks]]` named an entry those bots do not have (QA).
fn no_hooks(bot: &str, record: &Value) -> String {
    let origin = record["origin"].as_str().unwrap_or("config");
    let shown = cell(bot);
    if let Some(parent) = origin.strip_prefix("subagent:") {
        return format!(
            "{shown} is a subagent of {} and takes no webhooks; define the hook on a bot of \
             fleet.toml, under its [[bots.hooks]] (name, secret_env), and restart the host",
            cell(parent)
        );
    }
    if let Some(maker) = origin.strip_prefix("agent:") {
        return format!(
            "{shown} was made by {} (CreateAgent) and has no fleet.toml entry to define \
             webhooks under; define the hook on a bot of fleet.toml, under its [[bots.hooks]] \
             (name, secret_env), and restart the host",
            cell(maker)
        );
    }
    if record["settings"]["removed_at"].is_i64() {
        return format!(
            "{shown} is removed and takes no webhooks; it takes them once fleet.toml lists it \
             again (with [[bots.hooks]]) and the host restarts"
        );
    }
    format!(
        "{shown} has no webhooks; add one to fleet.toml under [[bots.hooks]] (name, secret_env) \
         and restart the host"
    )
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::no_hooks;

    /// Regression (QA): every bot without hooks was told to add one under
    /// its `[[bots.hooks]]` in fleet.toml, which a subagent, a bot made by
    /// CreateAgent and a removed bot do not have.
    #[test]
    fn the_advice_fits_where_the_bot_comes_from() {
        let said = no_hooks("r", &json!({"origin": "config", "settings": {}}));
        assert!(
            said.starts_with("r has no webhooks; add one to fleet.toml"),
            "{said}"
        );
        let said = no_hooks("p.sub-1", &json!({"origin": "subagent:p"}));
        assert!(
            said.starts_with("p.sub-1 is a subagent of p and takes no webhooks")
                && !said.contains("add one"),
            "{said}"
        );
        let said = no_hooks("made", &json!({"origin": "agent:boss"}));
        assert!(
            said.starts_with("made was made by boss (CreateAgent) and has no fleet.toml entry"),
            "{said}"
        );
        let said = no_hooks(
            "gone",
            &json!({"origin": "config", "settings": {"removed_at": 1}}),
        );
        assert!(
            said.starts_with("gone is removed and takes no webhooks"),
            "{said}"
        );
    }
}
