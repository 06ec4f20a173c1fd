//! `botfleet bots`: the bot list as a table whose columns fit their
//! longest value.
//!
//! Ids, names and providers are others' text (a subagent's name holds the
//! description its parent's model wrote), so each cell is escaped and
//! measured as escaped ([`super::columns`]): a fixed width let a subagent
//! id such as `a.sub-29ffbdea1146` push the rest of its row out of line.

use std::process::ExitCode;

use serde_json::Value;
use serde_json::json;

use super::columns::Align;
use super::columns::cell;
use super::columns::table;
use super::terminal;
use crate::client::Client;

/// The columns: heading and alignment.
const COLUMNS: [(&str, Align); 6] = [
    ("ID", Align::Left),
    ("NAME", Align::Left),
    ("PROVIDER", Align::Left),
    ("STATE", Align::Left),
    ("QUEUED", Align::Right),
    ("COMPLETED", Align::Right),
];

/// Prints the bots the token's user may see (`--json`: the API's answer;
/// `--all`: every finished subagent too).
pub(super) async fn bots(client: &Client, all: bool, as_json: bool) -> anyhow::Result<ExitCode> {
    let path = if all {
        "/v1/bots?subagents=all"
    } else {
        "/v1/bots"
    };
    let v = client.expect(client.get(path).await?, "bots")?;
    if as_json {
        outln!("{}", terminal::json_pretty(&v));
        return Ok(ExitCode::SUCCESS);
    }
    let listed = v["bots"].as_array().map_or(&[][..], Vec::as_slice);
    if listed.is_empty() {
        // said on stderr, nothing on stdout, as every empty listing (QA:
        // a bare header line)
        errln!(
            "you have no bots: list some in fleet.toml under [[bots]] with `owner` set to your \
             user id, and restart the host (docs/operations.md)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows: Vec<[String; 6]> = vec![COLUMNS.map(|(heading, _)| heading.to_owned())];
    for b in listed {
        rows.push([
            cell(b["id"].as_str().unwrap_or("")),
            cell(b["name"].as_str().unwrap_or("")),
            cell(b["provider"].as_str().unwrap_or("")),
            state(b),
            b["queued"].as_u64().unwrap_or(0).to_string(),
            b["turns"]["completed"].as_i64().unwrap_or(0).to_string(),
        ]);
    }
    for line in table(&rows, &COLUMNS.map(|(_, align)| align)) {
        outln!("{line}");
    }
    let left_out = v["subagents_left_out"].as_u64().unwrap_or(0);
    if left_out > 0 {
        outln!(
            "({left_out} older finished subagents not listed: `botfleet bots --all` lists them)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What a bot is doing, from its entry in `GET /v1/bots`.
fn state(b: &Value) -> String {
    if b["removed_at"].is_i64() {
        // no longer in the fleet file: takes no messages
        "removed".into()
    } else if b["running_turn"].is_string() {
        "working".into()
    } else if let Some(ended @ ("done" | "failed" | "stopped")) = b["subagent_status"].as_str() {
        // a subagent whose task ended, as CheckSubagent and the web page
        // say (it read `idle` or `asleep`, a stopped one too, which takes
        // no more work)
        ended.into()
    } else if let Some(until) = b["paused_until"].as_i64() {
        // its daily token budget is spent: what it has queued waits
        format!(
            "paused until {}",
            terminal::minute_utc(until).unwrap_or_else(|| until.to_string())
        )
    } else if b["active"] == json!(true) {
        "idle".into()
    } else {
        "asleep".into()
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// A bot whose daily budget is spent says so and until when, rather
    /// than "idle" with messages queued.
    #[test]
    fn a_paused_bot_says_until_when() {
        let b = json!({"id": "t", "active": true, "paused_until": 1_764_633_600_000_i64});
        assert_eq!(state(&b), "paused until 2025-12-02 00:00 UTC");
        let working = json!({"running_turn": "t1", "paused_until": 1_764_633_600_000_i64});
        assert_eq!(state(&working), "working");
        assert_eq!(
            state(&json!({"active": true, "paused_until": null})),
            "idle"
        );
    }

    /// A subagent whose task ended says how (it read `idle` or `asleep`,
    /// a stopped one too); one at work, or running between turns, reads
    /// as any bot.
    #[test]
    fn a_finished_subagent_says_how_its_task_ended() {
        for status in ["done", "failed", "stopped"] {
            for active in [true, false] {
                let b = json!({"active": active, "subagent_status": status});
                assert_eq!(state(&b), status);
            }
        }
        let b = json!({"active": true, "subagent_status": "running"});
        assert_eq!(state(&b), "idle");
        let b = json!({"active": true, "running_turn": "t1", "subagent_status": "done"});
        assert_eq!(state(&b), "working");
        let b = json!({"removed_at": 1, "subagent_status": "stopped"});
        assert_eq!(state(&b), "removed");
    }
}
