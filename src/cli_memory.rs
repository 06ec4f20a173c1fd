//! `botfleet memory BOT` (what a bot remembers, with ids) and
//! `botfleet forget ID`.

use std::collections::HashSet;
use std::process::ExitCode;

use serde_json::Value;

use super::terminal;
use crate::client::Client;
use crate::client::segment;

/// Prints what `bot` remembers, scope by scope and layer by layer (an
/// item remembered in a room shared with other people's bots says which);
/// with `input`, also what the prompt would show for it: how many items
/// of each layer the bounded memory block holds and which it leaves out
/// (marked in the listing), and the log entries recalled, best first with
/// their scores.
pub(super) async fn show(
    client: &Client,
    bot: &str,
    input: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let path = format!("/v1/bots/{}/memory", segment(bot));
    let params: Vec<(&str, &str)> = input.map(|i| ("input", i)).into_iter().collect();
    let v = client.expect(client.get_query(&path, &params).await?, "scopes")?;
    if json {
        outln!("{}", super::terminal::json_pretty(&v));
        return Ok(ExitCode::SUCCESS);
    }
    let shown = shown_ids(&v);
    let mut any = false;
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
                any = true;
                // a profile fact or note the block leaves out (a log entry
                // not recalled is not a candidate: the recall list says)
                let left_out = input.is_some()
                    && layer != "log"
                    && item["id"].as_str().is_some_and(|id| !shown.contains(id));
                let mark = if left_out {
                    "  [left out of the prompt]"
                } else {
                    ""
                };
                outln!("  {layer:<7} {}{mark}", line(item));
            }
        }
    }
    if let Some(input) = input {
        print_prompt(&v, input, &shown);
    }
    // nothing to forget: no command offered for it (QA)
    if any {
        // a hint, not an item: on stderr
        errln!("forget an item with: botfleet forget <id>");
    }
    Ok(ExitCode::SUCCESS)
}

/// The ids `prompt.shown` of the answer: those the memory block holds.
fn shown_ids(v: &Value) -> HashSet<&str> {
    v["prompt"]["shown"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// How many of one layer's candidates the block shows, and the ids it
/// leaves out.
#[derive(Default)]
struct LayerCount<'a> {
    candidates: usize,
    left_out: Vec<&'a str>,
}

impl<'a> LayerCount<'a> {
    /// A candidate `id`, shown when among `shown`.
    fn add(&mut self, id: &'a str, shown: &HashSet<&str>) {
        self.candidates += 1;
        if !shown.contains(id) {
            self.left_out.push(id);
        }
    }

    fn shown(&self) -> usize {
        self.candidates - self.left_out.len()
    }
}

/// What the prompt would show for `input` (`prompt` of the answer): the
/// candidates of the block (every profile fact and live note, and the log
/// entries recalled for `input`), how many of each layer the bounded
/// block holds and which it leaves out, and the recalled entries with
/// their scores and text, best first.
fn print_prompt(v: &Value, input: &str, shown: &HashSet<&str>) {
    let prompt = &v["prompt"];
    let items = || {
        v["scopes"].as_array().into_iter().flatten().flat_map(|s| {
            ["profile", "log", "notes"]
                .into_iter()
                .flat_map(move |l| s[l]["items"].as_array().into_iter().flatten())
        })
    };
    let text_of = |id: &str| -> &str {
        items()
            .find(|i| i["id"].as_str() == Some(id))
            .and_then(|i| i["text"].as_str())
            .unwrap_or("")
    };
    let recall = prompt["recall"].as_array().cloned().unwrap_or_default();
    let recall_ids: Vec<&str> = prompt["recall"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str())
        .collect();
    let (mut profile, mut notes, mut log) = (
        LayerCount::default(),
        LayerCount::default(),
        LayerCount::default(),
    );
    for item in items() {
        let count = match item["layer"].as_str() {
            Some("profile") => &mut profile,
            Some("notes") => &mut notes,
            // log entries count by the recall list below
            _ => continue,
        };
        if let Some(id) = item["id"].as_str() {
            count.add(id, shown);
        }
    }
    for id in recall_ids {
        log.add(id, shown);
    }
    let layers = [
        ("profile facts", profile),
        ("notes", notes),
        ("log entries recalled", log),
    ];
    let candidates: usize = layers.iter().map(|(_, c)| c.candidates).sum();
    let left: usize = layers.iter().map(|(_, c)| c.left_out.len()).sum();
    if left == 0 {
        outln!(
            "the prompt for \"{input}\" shows all {candidates} item(s) it would take: every profile fact and live note, and the log entries recalled for it"
        );
    } else {
        outln!(
            "the prompt for \"{input}\" shows {} of the {candidates} item(s) it would take: the memory block is kept to a share of the context (the most important first), so {left} {} left out",
            candidates - left,
            if left == 1 { "is" } else { "are" }
        );
    }
    for (name, c) in &layers {
        let mut row = format!("  {name}: {} of {} shown", c.shown(), c.candidates);
        if !c.left_out.is_empty() {
            row.push_str(&format!("; left out: {}", c.left_out.join(", ")));
        }
        outln!("{row}");
    }
    if !recall.is_empty() {
        outln!("log entries recalled for \"{input}\", best first:");
    }
    for r in &recall {
        let id = r["id"].as_str().unwrap_or("?");
        let where_ = if shown.contains(id) {
            "shown"
        } else {
            "left out"
        };
        outln!(
            "  recall  {id}  {}  (score {:.3}: relevance {:.3}, recency {:.3}, weight {:.2}; {where_})",
            text_of(id),
            r["score"].as_f64().unwrap_or(0.0),
            r["relevance"].as_f64().unwrap_or(0.0),
            r["recency"].as_f64().unwrap_or(0.0),
            r["weight"].as_f64().unwrap_or(0.0),
        );
    }
}

/// An item of the listing: id, text, expiry of a note, its importance
/// and who wrote it (QA: the listing showed neither, which the prompt's
/// choice and a replace's go by), and the shared room it was remembered
/// in (its `source`, `tool:<bot>@room:<room>`): someone in that room may
/// have told it, not the owner.
fn line(item: &Value) -> String {
    let mut out = format!(
        "{}  {}",
        item["id"].as_str().unwrap_or("?"),
        item["text"].as_str().unwrap_or("")
    );
    if let Some(at) = item["expires_at"].as_i64().and_then(terminal::minute_utc) {
        out.push_str(&format!("  (until {at})"));
    }
    let source = item["source"].as_str().unwrap_or("");
    let by = match source.split_once(':') {
        Some(("tool", bot)) => {
            let bot = bot.split_once("@room:").map_or(bot, |(bot, _)| bot);
            format!(", by {bot}'s Remember")
        }
        Some(("extract", bot)) => format!(", by {bot}'s fact extraction"),
        _ if source.is_empty() => String::new(),
        _ => format!(", source {source}"),
    };
    out.push_str(&format!("  (importance {}{by})", item["importance"]));
    if let Some(room) = item["source"]
        .as_str()
        .and_then(|s| s.split_once("@room:"))
        .map(|(_, room)| room)
        .filter(|r| !r.is_empty())
    {
        out.push_str(&format!("  (remembered in shared room {room})"));
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
