//! Memory as the model sees it: `prompts/memory.md` for a snapshot,
//! `prompts/memory_update.md` for what changed inside an epoch.
//!
//! Each item is one data line, `- <id> (<scope>[, <date>]) "<text>"`, the
//! text JSON-quoted (stored texts are single-line already; quoting also
//! escapes quotes and control characters), so a remembered sentence can
//! never pose as a heading or an instruction of the prompt. Dates are
//! absolute UTC days (the day a profile fact was last set, the day of a
//! log entry) and minutes (note expiry), never "x days ago":
//! the rendering is a pure function of the snapshot, so its bytes change
//! exactly when `MemorySnapshot::hash` does.

use botfleet_memory::MemoryDelta;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemorySnapshot;
use chrono::DateTime;
use chrono::Utc;

use crate::prompts::prompts;

/// The memory block of the prompt.
pub fn render_memory(snapshot: &MemorySnapshot) -> String {
    let section = |items: &[MemoryItem]| {
        if items.is_empty() {
            "(none)".to_owned()
        } else {
            items.iter().map(line).collect::<Vec<_>>().join("\n")
        }
    };
    prompts()
        .memory
        .render(&[
            ("profile", &section(&snapshot.profile)),
            ("log", &section(&snapshot.log)),
            ("notes", &section(&snapshot.notes)),
        ])
        .unwrap_or_default()
}

/// The short update appended at the end of the context when memory
/// changed inside an epoch; `None` when nothing changed.
pub fn render_memory_update(delta: &MemoryDelta) -> Option<String> {
    if delta.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    for i in &delta.added {
        lines.push(format!("+ added {}", describe(i)));
    }
    for (old, new) in &delta.changed {
        lines.push(format!(
            "~ changed {} (was {})",
            describe(new),
            quote(&old.text)
        ));
    }
    for i in &delta.removed {
        lines.push(format!("- forgotten {} (disregard it)", i.id));
    }
    for i in &delta.expired {
        lines.push(format!("- expired {}", i.id));
    }
    prompts()
        .memory_update
        .render(&[("changes", &lines.join("\n"))])
        .ok()
}

fn line(item: &MemoryItem) -> String {
    format!("- {}", describe(item))
}

/// `<id> (<scope>[, <date>]) "<text>"`.
fn describe(item: &MemoryItem) -> String {
    let mut meta = item.scope.to_string();
    match item.layer {
        botfleet_memory::Layer::Profile => {
            // the day it was last set: two facts that disagree (one added
            // instead of replacing the other) can then be ordered
            meta.push_str(", set ");
            meta.push_str(&day(item.updated_at));
        }
        botfleet_memory::Layer::Log => {
            meta.push_str(", ");
            meta.push_str(&day(item.created_at));
        }
        botfleet_memory::Layer::Notes => {
            if let Some(t) = item.expires_at {
                meta.push_str(", until ");
                meta.push_str(&minute(t));
            }
        }
    }
    if item.importance.get() != 3 {
        meta.push_str(&format!(", importance {}", item.importance.get()));
    }
    format!("{} ({meta}) {}", item.id, quote(&item.text))
}

fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

fn at(ms: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default()
}

fn day(ms: i64) -> String {
    at(ms).format("%Y-%m-%d").to_string()
}

fn minute(ms: i64) -> String {
    at(ms).format("%Y-%m-%d %H:%M UTC").to_string()
}
