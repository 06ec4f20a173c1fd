//! `botfleet routines BOT`: a bot's routines as a table (when each fires
//! next in its own time zone, how its last run went), and `routines put`
//! and `routines remove`, over `/v1/bots/{bot}/routines` (docs/api.md,
//! "Routines"). Only the bot's owner sees and changes them, as in the API.

use std::process::ExitCode;

use chrono::DateTime;
use chrono::Timelike as _;
use clap::Subcommand;
use reqwest::StatusCode;
use serde_json::Value;
use serde_json::json;

use super::columns::Align;
use super::columns::cell;
use super::columns::cut;
use super::columns::table;
use super::terminal;
use crate::client::Client;
use crate::client::segment;

/// What `botfleet routines` does besides listing.
#[derive(Debug, Subcommand)]
pub enum RoutinesCommand {
    /// Create a routine, or replace the one of that name.
    ///
    /// Replacing it with the same --cron and --timezone keeps its next
    /// slot; another schedule is planned from now. A routine of
    /// fleet.toml is changed there, not here.
    Put {
        /// Bot id.
        bot: String,
        /// Routine name: 1-64 ASCII letters, digits, `-`, `_` or `.`,
        /// starting with a letter or digit.
        name: String,
        /// When it fires: 5 cron fields (minute hour day-of-month month
        /// day-of-week), or 6 with seconds first; `@daily` and the like work.
        #[arg(long)]
        cron: String,
        /// The time zone the cron is read in: an IANA name such as
        /// Asia/Shanghai or UTC.
        #[arg(long)]
        timezone: String,
        /// What the bot is told at each fire.
        #[arg(long)]
        prompt: String,
        /// Tell the bot to report each run (by default it may stay silent
        /// when it has nothing to say).
        #[arg(long)]
        report: bool,
        /// After slots missed while the host was down: run once, or skip
        /// them (default: once).
        #[arg(long, value_parser = ["once", "skip"])]
        catch_up: Option<String>,
    },
    /// Remove a routine made through the API or `routines put` (one of
    /// fleet.toml is removed there).
    Remove {
        /// Bot id.
        bot: String,
        /// Routine name.
        name: String,
    },
}

/// The columns of the listing: heading and alignment.
const COLUMNS: [(&str, Align); 6] = [
    ("NAME", Align::Left),
    ("CRON", Align::Left),
    ("TIMEZONE", Align::Left),
    ("NEXT", Align::Left),
    ("LAST", Align::Left),
    ("ERROR", Align::Left),
];

/// How much of a last run's error the listing shows (terminal cells);
/// `--json` has it whole.
const ERROR_CELLS: usize = 60;

/// Prints `bot`'s routines (`--json`: the API's answer).
pub(super) async fn list(client: &Client, bot: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    // (QA: another server's JSON read as "BOT has no routines", exit 0)
    let v = client.expect(
        client
            .get(&format!("/v1/bots/{}/routines", segment(bot)))
            .await?,
        "routines",
    )?;
    if as_json {
        outln!("{}", terminal::json_pretty(&v));
        return Ok(ExitCode::SUCCESS);
    }
    let routines = v["routines"].as_array().cloned().unwrap_or_default();
    if routines.is_empty() {
        // said on stderr, nothing on stdout, as `transcript` of an empty
        // conversation (QA); a subagent runs none (the host answers its `put` 409): point
        // at its parent, not at a command that is refused (QA, 2026-12-04)
        let record = client.get(&format!("/v1/bots/{}", segment(bot))).await?;
        if let Some(parent) = record["origin"]
            .as_str()
            .and_then(|o| o.strip_prefix("subagent:"))
        {
            errln!(
                "{bot} is a subagent of {parent} and runs no routines; put the routine on \
                 {parent}: `botfleet routines put {parent} NAME --cron CRON --timezone ZONE \
                 --prompt TEXT`"
            );
            return Ok(ExitCode::SUCCESS);
        }
        // a removed bot takes none either (its `put` is refused, 409)
        if record["settings"]["removed_at"].is_i64() {
            errln!(
                "{} is removed and has no routines; it takes new ones once fleet.toml lists \
                 it again and the host restarts",
                cell(bot)
            );
            return Ok(ExitCode::SUCCESS);
        }
        errln!(
            "{} has no routines; add one with `botfleet routines put {} NAME --cron CRON \
             --timezone ZONE --prompt TEXT`, or in fleet.toml",
            bot,
            bot
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows: Vec<[String; 6]> = vec![COLUMNS.map(|(heading, _)| heading.to_owned())];
    rows.extend(routines.iter().map(row));
    for line in table(&rows, &COLUMNS.map(|(_, align)| align)) {
        outln!("{line}");
    }
    for r in &routines {
        if r["last_status"] == json!("failed")
            && let Some(turn) = r["last_turn"].as_str()
        {
            outln!(
                "{} failed its last run: run it again with `botfleet retry {turn}`",
                cell(r["name"].as_str().unwrap_or("?"))
            );
        }
    }
    // the table alone shows a removed bot's routines as coming, and a
    // paused bot's NEXT in the past; a note only, the listing stands
    // without it
    let id = v["bot"].as_str().unwrap_or(bot);
    if let Ok(bots) = client.get("/v1/bots").await
        && let Some(b) = bots["bots"]
            .as_array()
            .and_then(|all| all.iter().find(|b| b["id"] == json!(id)))
        && let Some(note) = held_note(id, b)
    {
        outln!("{note}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Why the routines of bot `id` (its entry in `GET /v1/bots`) do not run
/// now, if they do not: it is removed (their slots pass without a run), or
/// its daily token budget is spent (their slots wait for the pause's end).
fn held_note(id: &str, b: &Value) -> Option<String> {
    let id = cell(id);
    if b["removed_at"].is_i64() {
        return Some(format!(
            "{id} is removed: its routines do not run (their slots pass without a run); \
             `botfleet routines remove {id} NAME` deletes one"
        ));
    }
    let until = b["paused_until"].as_i64()?;
    Some(format!(
        "{id} is paused by its daily token budget until {}: its routines wait (a NEXT in the \
         past is a slot waiting), then each runs once, late, or lets its missed slots pass, as \
         its catch_up says",
        terminal::minute_utc(until).unwrap_or_else(|| until.to_string())
    ))
}

/// One routine of `GET /v1/bots/{bot}/routines` as a row of the listing.
fn row(r: &Value) -> [String; 6] {
    let text = |key: &str| cell(r[key].as_str().unwrap_or(""));
    let last = r["last_status"]
        .as_str()
        .map_or_else(|| "-".to_owned(), cell);
    let error = r["last_error"]
        .as_str()
        .map_or_else(|| "-".to_owned(), |e| cut(&cell(e), ERROR_CELLS));
    [
        text("name"),
        text("cron"),
        text("timezone"),
        next_fire(r),
        last,
        error,
    ]
}

/// When `r` fires next, in its own time zone (`next_fire_local`):
/// `YYYY-MM-DD HH:MM`, with seconds when the slot has some; `-` when no
/// slot comes.
fn next_fire(r: &Value) -> String {
    let Some(local) = r["next_fire_local"].as_str() else {
        return "-".to_owned();
    };
    match DateTime::parse_from_rfc3339(local) {
        Ok(at) if at.second() == 0 => at.format("%Y-%m-%d %H:%M").to_string(),
        Ok(at) => at.format("%Y-%m-%d %H:%M:%S").to_string(),
        // not what the API gives: shown as it came
        Err(_) => cell(local),
    }
}

/// Runs `put` or `remove`.
pub(super) async fn run(client: &Client, action: &RoutinesCommand) -> anyhow::Result<ExitCode> {
    match action {
        RoutinesCommand::Put {
            bot,
            name,
            cron,
            timezone,
            prompt,
            report,
            catch_up,
        } => {
            let mut body = json!({
                "cron": cron,
                "timezone": timezone,
                "prompt": prompt,
                "silent_ok": !report,
            });
            if let (Some(catch_up), Some(o)) = (catch_up, body.as_object_mut()) {
                o.insert("catch_up".into(), json!(catch_up));
            }
            let path = format!("/v1/bots/{}/routines/{}", segment(bot), segment(name));
            let (status, v) = client.put(&path, &body).await.map_err(flags_named)?;
            let routine = &v["routine"];
            let done = if status == StatusCode::CREATED {
                "created"
            } else {
                "replaced"
            };
            let next = match next_fire(routine).as_str() {
                "-" => "no slot comes".to_owned(),
                at => format!(
                    "next at {at} ({})",
                    cell(routine["timezone"].as_str().unwrap_or(timezone))
                ),
            };
            outln!("{done} routine {name} of {bot}: {next}");
            Ok(ExitCode::SUCCESS)
        }
        RoutinesCommand::Remove { bot, name } => {
            let path = format!("/v1/bots/{}/routines/{}", segment(bot), segment(name));
            client.delete(&path).await?;
            outln!("removed routine {name} of {bot}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The host's refusal of a routine as the CLI's user gave it: the body's
/// fields (`` `cron`: … ``) by the flags that set them (`--cron`) (QA).
fn flags_named(e: anyhow::Error) -> anyhow::Error {
    match e.downcast::<crate::client::HostAnswered>() {
        Ok(mut answered) => {
            for field in ["cron", "timezone", "prompt", "catch_up"] {
                let flag = format!("`--{}`", field.replace('_', "-"));
                answered.message = answered.message.replace(&format!("`{field}`"), &flag);
            }
            anyhow::Error::new(answered)
        }
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// The next fire shows in the routine's own zone, as the API gives it
    /// (`next_fire_local`), not in UTC; a last error is cut short.
    #[test]
    fn a_row_shows_the_local_next_fire_and_a_short_error() {
        let r = json!({
            "name": "brief", "cron": "0 8 * * 1-5", "timezone": "Asia/Shanghai",
            "next_fire": "2026-12-03T00:00:00+00:00",
            "next_fire_local": "2026-12-03T08:00:00+08:00",
            "last_status": "failed", "last_error": "x".repeat(100),
        });
        let [name, cron, zone, next, last, error] = row(&r);
        assert_eq!(
            [name, cron, zone, next, last],
            [
                "brief",
                "0 8 * * 1-5",
                "Asia/Shanghai",
                "2026-12-03 08:00",
                "failed"
            ]
            .map(str::to_owned)
        );
        assert_eq!(error, format!("{}…", "x".repeat(59)));
        let never = json!({"name": "n", "next_fire_local": null, "last_status": null});
        let cells = row(&never);
        assert_eq!(
            (&cells[3], &cells[4], &cells[5]),
            (&"-".into(), &"-".into(), &"-".into())
        );
    }
}
