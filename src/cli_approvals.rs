//! `botfleet approvals`, `botfleet approve ID`, `botfleet deny ID`.
//!
//! The one-line summary of an action is cut to fit a line, so a long
//! command can hide its end there (`run \`echo "ok ok … o…\``, with
//! `rm -rf notes` after the cut). What a person approves is the exact
//! action, so the listing and the answer to `approve` show it whole,
//! indented under the summary: each argument of the tool, and each script
//! it runs with the hash the approval binds.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde_json::Value;
use serde_json::json;

use super::terminal;

use crate::client::Client;
use crate::client::segment;

/// Lists the user's approvals (pending ones, or all).
pub(crate) async fn list(client: &Client, all: bool, as_json: bool) -> anyhow::Result<ExitCode> {
    // the API's most (`limit` 1-500), and whether more match than that
    let path = if all {
        "/v1/approvals?limit=500"
    } else {
        "/v1/approvals?status=pending&limit=500"
    };
    let v = client.expect(client.get(path).await?, "approvals")?;
    if as_json {
        outln!("{}", super::terminal::json_pretty(&v));
        return Ok(ExitCode::SUCCESS);
    }
    let items = v["approvals"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        // nothing on stdout, as `transcript` of an empty conversation: a
        // script counting lines counted 1 (QA)
        errln!(
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
    // a note, not a row: on stderr (it showed the newest 100 of more,
    // saying nothing: QA)
    if v["more"] == json!(true) {
        errln!(
            "\n(the {} listed are the {}; more match, which the API does not list)",
            items.len(),
            if all {
                "pending ones and then the newest others"
            } else {
                "oldest pending ones"
            }
        );
    }
    // a hint, not a row: on stderr; not under approvals none of which can
    // be decided (QA: it stood under one asked of a former owner, which
    // `approve` then refused)
    if !all && items.iter().any(|a| a["decidable"] != json!(false)) {
        errln!("\ndecide with `botfleet approve ID` or `botfleet deny ID`");
    }
    Ok(ExitCode::SUCCESS)
}

/// One approval on a line, its reason and its exact action below.
fn line(a: &Value, now: i64) -> String {
    let status = a["status"].as_str().unwrap_or("?");
    let when = match status {
        "pending" => {
            let left = (a["expires_at"].as_i64().unwrap_or(now) - now).max(0) / 1000;
            format!("expires in {}m{:02}s", left / 60, left % 60)
        }
        "expired" => match (a["expired_by"].as_str(), a["decided_at"].as_i64()) {
            (Some("user_message"), _) => "expired: a newer message was sent".to_owned(),
            // a stopped subagent never reads a decision nor repeats the call
            (Some("subagent_stopped"), _) => {
                "expired: its subagent was stopped, so its action will not run".to_owned()
            }
            (Some("owner_changed"), _) => {
                "expired: its subagent's task came from the bot's former owner, so its action will not run"
                    .to_owned()
            }
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
        "{}  {:<10} {:<8} {}  {}\n    why: {}{}{}",
        a["id"].as_str().unwrap_or(""),
        a["bot"].as_str().unwrap_or(""),
        status,
        terminal::strict_text(&one_line(a["summary"].as_str().unwrap_or(""))),
        when,
        terminal::strict_text(&one_line(a["reason"].as_str().unwrap_or(""))),
        cannot_run(a).map_or_else(String::new, |why| format!("\n    cannot run: {why}")),
        exact_action(a)
    )
}

/// Why approval `a`'s action cannot run as things stand (the host's
/// `cannot_run`: its bot left the fleet's config, or lost the tool), shown
/// on one line.
fn cannot_run(a: &Value) -> Option<String> {
    a["cannot_run"]
        .as_str()
        .map(|why| terminal::strict_text(&one_line(why)).into_owned())
}

/// `text` (a summary, a reason: the start of a command may be in them)
/// kept on its line: a line break in it is shown escaped (`\u{a}`, as
/// the CLI shows a control character), so it cannot start a line that
/// passes for a line of the listing (`    why: …`, an exact action).
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' => {
                // writing to a String cannot fail
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            _ => out.push(c),
        }
    }
    out
}

/// Indent of the exact action's lines under a summary.
const ACTION_INDENT: &str = "    ";
/// Indent of one argument's or script's lines.
const ARG_INDENT: &str = "      ";

/// The exact action of approval `a` (its `action`: `tool`, `args`,
/// `scripts`), one line per argument and script, each line starting with
/// a newline; empty for a record without one. A string argument is shown
/// as it is, but for its line breaks: each line of it goes on a line of
/// its own behind `| `, so no line of an argument passes for a line of the
/// listing, and a control character in it is escaped even next to a line
/// break (a CR before the break would otherwise vanish on the terminal).
/// Other values are shown as JSON.
fn exact_action(a: &Value) -> String {
    let action = &a["action"];
    let (Some(args), scripts) = (action["args"].as_object(), action["scripts"].as_array()) else {
        return match action {
            Value::Null => String::new(),
            Value::Object(map) if map.is_empty() => String::new(),
            // not the gate's shape: shown whole rather than not at all
            Value::Object(_)
            | Value::Array(_)
            | Value::String(_)
            | Value::Number(_)
            | Value::Bool(_) => {
                format!(
                    "\n{ACTION_INDENT}exact action: {}",
                    terminal::strict_json(action)
                )
            }
        };
    };
    let tool = action["tool"]
        .as_str()
        .or_else(|| a["tool"].as_str())
        .unwrap_or("?");
    let mut out = format!(
        "\n{ACTION_INDENT}exact action ({}):",
        terminal::strict_text(tool)
    );
    if args.is_empty() {
        out.push('\n');
        out.push_str(ARG_INDENT);
        out.push_str("(no arguments)");
    }
    // writing to a String cannot fail (the `write!`s below)
    for (key, value) in args {
        let key = terminal::strict_text(key);
        match value {
            Value::String(text) if !text.contains('\n') => {
                let _ = write!(out, "\n{ARG_INDENT}{key}: {}", terminal::strict_text(text));
            }
            Value::String(text) => {
                let _ = write!(out, "\n{ARG_INDENT}{key}:");
                for part in text.split('\n') {
                    let _ = write!(out, "\n{ARG_INDENT}  | {}", terminal::strict_text(part));
                }
            }
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::Array(_)
            | Value::Object(_) => {
                let _ = write!(out, "\n{ARG_INDENT}{key}: {}", terminal::strict_json(value));
            }
        }
    }
    for script in scripts.into_iter().flatten() {
        let field =
            |name: &str| terminal::strict_text(script[name].as_str().unwrap_or("?")).into_owned();
        let _ = write!(
            out,
            "\n{ARG_INDENT}runs {} ({}, from `{}`), sha256 {}",
            field("path"),
            field("kind"),
            field("origin"),
            field("sha256")
        );
        // what it would run, line by line as a string argument is shown
        if let Some(text) = script["text"].as_str().filter(|t| !t.is_empty()) {
            for part in text.trim_end_matches('\n').split('\n') {
                let _ = write!(out, "\n{ARG_INDENT}  | {}", terminal::strict_text(part));
            }
        }
    }
    out
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
    // what was approved, whole: the summary may have cut it
    outln!(
        "{done} {id}: {}{}",
        terminal::strict_text(&one_line(a["summary"].as_str().unwrap_or(""))),
        exact_action(a)
    );
    outln!("{}", what_follows(a));
    Ok(ExitCode::SUCCESS)
}

/// What follows a decision, said from the host's answer (the decided
/// approval) alone: what the host did (a note in the bot's conversation)
/// and what must still happen, never that the bot was told or may run it.
/// When the answer's `cannot_run` says the bot left the fleet's config or
/// lost the tool, that is said instead of how the action runs.
fn what_follows(a: &Value) -> String {
    let bot = terminal::text(a["bot"].as_str().unwrap_or("the bot")).into_owned();
    if let Some(why) = cannot_run(a) {
        return format!("a note of it is queued in {bot}'s conversation; but {why}");
    }
    let noted =
        format!("a note of it is queued in {bot}'s conversation, read when {bot} next runs");
    if a["status"].as_str() != Some("approved") {
        return noted;
    }
    let tool = a["action"]["tool"]
        .as_str()
        .or_else(|| a["tool"].as_str())
        .unwrap_or("its tool");
    let by = a["expires_at"]
        .as_i64()
        .and_then(terminal::minute_utc)
        .map_or_else(String::new, |t| format!(" by {t}"));
    format!(
        "{noted}; the action runs only if {bot} repeats this exact call{by}, with {} still among its tools",
        terminal::text(tool)
    )
}
