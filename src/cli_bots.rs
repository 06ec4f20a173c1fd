//! `botfleet bots`: the bot list as a table whose columns fit their
//! longest value.
//!
//! Ids, names and providers are others' text (a subagent's name holds the
//! description its parent's model wrote), so each cell is escaped first
//! ([`super::terminal::text`], and newlines and tabs too, which would break
//! the row) and measured as escaped: a fixed width let a subagent id such
//! as `a.sub-29ffbdea1146` push the rest of its row out of line.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde_json::Value;
use serde_json::json;
use unicode_width::UnicodeWidthStr as _;

use super::terminal;
use crate::client::Client;

/// How a column lines its cells up.
#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

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
    let v = client.get(path).await?;
    if as_json {
        outln!("{}", terminal::json_pretty(&v));
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows: Vec<[String; 6]> = vec![COLUMNS.map(|(heading, _)| heading.to_owned())];
    for b in v["bots"].as_array().into_iter().flatten() {
        rows.push([
            cell(b["id"].as_str().unwrap_or("")),
            cell(b["name"].as_str().unwrap_or("")),
            cell(b["provider"].as_str().unwrap_or("")),
            state(b),
            b["queued"].as_u64().unwrap_or(0).to_string(),
            b["turns"]["completed"].as_i64().unwrap_or(0).to_string(),
        ]);
    }
    for line in table(&rows) {
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

/// `s` as it will print: escaped for the terminal, with newlines and tabs
/// escaped too, so the cell stays on its row and its width is its length.
fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in terminal::text(s).chars() {
        match c {
            '\n' | '\t' => {
                // writing to a String cannot fail
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// The rows as lines, each column as wide as its widest cell (in the
/// terminal's cells: a CJK character takes two) and one space between
/// columns; no trailing spaces.
fn table(rows: &[[String; 6]]) -> Vec<String> {
    let mut widths = [0usize; 6];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.width());
        }
    }
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (i, ((cell, width), (_, align))) in row.iter().zip(widths).zip(COLUMNS).enumerate()
            {
                if i > 0 {
                    line.push(' ');
                }
                // `{:<w$}` pads by characters, not by cells
                let pad = " ".repeat(width.saturating_sub(cell.width()));
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            line.trim_end().to_owned()
        })
        .collect()
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

    fn row(cells: [&str; 6]) -> [String; 6] {
        cells.map(str::to_owned)
    }

    /// A CJK name takes two cells per character: the columns after it
    /// line up with those of an ASCII row.
    #[test]
    fn wide_characters_count_as_two_cells() {
        let lines = table(&[
            row(["ID", "NAME", "PROVIDER", "STATE", "QUEUED", "COMPLETED"]),
            row(["r", "研究员", "main", "asleep", "0", "12"]),
            row(["w", "W", "main", "awake", "1", "3"]),
        ]);
        assert_eq!(
            lines,
            vec![
                "ID NAME   PROVIDER STATE  QUEUED COMPLETED",
                "r  研究员 main     asleep      0        12",
                "w  W      main     awake       1         3",
            ]
        );
    }
}
