//! Memory as the model sees it: `prompts/memory.md` for a snapshot,
//! `prompts/memory_update.md` for what changed inside an epoch.
//!
//! Each item is one data line, `- <id> (<scope>[, <date>][, remembered in
//! shared room <room>][, importance <n>]) "<text>"`, the text JSON-quoted
//! (stored texts are single-line already; quoting also escapes quotes and
//! control characters), so a remembered sentence can never pose as a
//! heading or an instruction of the prompt. Dates are absolute UTC days
//! (the day a profile fact was last set, the day of a log entry) and
//! minutes (note expiry), never "x days ago". Profile facts are listed in
//! the order they were last set, oldest first, and log entries oldest
//! first, as the prompt says: two facts set the same day that disagree
//! are told apart by their place (the day alone could not). An item
//! Remember wrote in a room shared with other people's bots says so
//! (its `source`): anyone in that room may have told it, and the owner's
//! private prompts show it next to what the owner said. The rendering is
//! a pure function of the snapshot.

use std::collections::HashSet;

use botfleet_memory::Encoding;
use botfleet_memory::Layer;
use botfleet_memory::MemoryDelta;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemorySnapshot;
use chrono::DateTime;
use chrono::Utc;

use crate::prompts::prompts;

/// The fewest tokens [`memory_budget`] allows, whatever the threshold:
/// with a tiny `compact_at_tokens` (tests use 1,000) an eighth would hold
/// hardly one item.
pub(crate) const MIN_MEMORY_TOKENS: u64 = 256;

/// The most tokens the items of the memory block may take in a prompt:
/// an eighth of the provider's `compact_at_tokens`, at least
/// [`MIN_MEMORY_TOKENS`]. The block's fixed text (the headings of
/// `prompts/memory.md`, about 170 tokens, and the left-out note, about
/// 70) comes on top: charged to the share, it left items nothing below
/// a `compact_at_tokens` of about 2,000 (the block was all headings, and
/// no update reached the model). Compaction cannot shrink the block, so a
/// block near the threshold made every turn compact (summarising only
/// that turn) and still pass it; at an eighth, the block, a summary (a
/// fifth), the entries kept verbatim (a quarter) and the newest exchange
/// stay under the threshold together.
pub(crate) fn memory_budget(compact_at_tokens: u64) -> u64 {
    (compact_at_tokens / 8).max(MIN_MEMORY_TOKENS)
}

/// The memory block of the prompt, every item of the snapshot.
pub fn render_memory(snapshot: &MemorySnapshot) -> String {
    render_sections(&snapshot.profile, &snapshot.log, &snapshot.notes, [0; 3])
}

/// The memory block of the prompt whose item lines take at most `budget`
/// tokens (counted with `encoding`, each line with its newline; the
/// headings and the left-out note are not charged), and the ids of the
/// items it shows. When the items do not fit, the most important go in
/// first (profile facts, then by importance, notes before log entries,
/// the log by its ranking for the input), each only if it still fits,
/// and the block ends with how many were left out
/// (`prompts/memory_left_out.md`). Kept items are listed as
/// [`render_memory`] lists them, so the block is a pure function of the
/// snapshot. `GET /v1/bots/{bot}/memory` previews it with the same call
/// (`MemoryState::preview`).
pub(crate) fn render_memory_within(
    snapshot: &MemorySnapshot,
    budget: u64,
    encoding: Encoding,
) -> (String, Vec<MemoryId>) {
    let total = snapshot.items().count();
    let mut left = budget;
    let mut kept: HashSet<&MemoryId> = HashSet::new();
    for item in by_priority(snapshot) {
        // the line and its newline
        let tokens = u64::from(encoding.count(&line(item))) + 1;
        if tokens <= left {
            left -= tokens;
            kept.insert(&item.id);
        }
    }
    if kept.len() == total {
        return (render_memory(snapshot), snapshot.shown_ids());
    }
    let pick = |items: &[MemoryItem]| -> Vec<MemoryItem> {
        items
            .iter()
            .filter(|i| kept.contains(&i.id))
            .cloned()
            .collect()
    };
    let (profile, log, notes) = (
        pick(&snapshot.profile),
        pick(&snapshot.log),
        pick(&snapshot.notes),
    );
    let shown: Vec<MemoryId> = profile
        .iter()
        .chain(&log)
        .chain(&notes)
        .map(|i| i.id.clone())
        .collect();
    let omitted = [
        snapshot.profile.len() - profile.len(),
        snapshot.log.len() - log.len(),
        snapshot.notes.len() - notes.len(),
    ];
    let text = format!(
        "{}\n\n{}",
        render_sections(&profile, &log, &notes, omitted),
        left_out(total - shown.len())
    );
    (text, shown)
}

/// The snapshot's items, most important first: profile facts (the
/// stable facts about the person and the work; a fact of importance 3
/// went after every note of 4), then by importance, notes (short-lived, so current)
/// before log entries in their ranking for the input; by importance among
/// profile facts, the last set first among equals, and in the snapshot's
/// order among other equals.
fn by_priority(snapshot: &MemorySnapshot) -> Vec<&MemoryItem> {
    let ranked_log: Vec<&MemoryItem> = if snapshot.ranking.len() == snapshot.log.len() {
        snapshot.ranking.iter().map(|s| &s.item).collect()
    } else {
        snapshot.log.iter().collect()
    };
    let mut items: Vec<&MemoryItem> = snapshot
        .profile
        .iter()
        .chain(&snapshot.notes)
        .chain(ranked_log)
        .collect();
    let layer_rank = |l: Layer| match l {
        Layer::Profile => 0,
        Layer::Notes => 1,
        Layer::Log => 2,
    };
    // among profile facts of the same importance the newest first: of
    // two that disagree, the later one is more likely true now, and a
    // bound that kept the older one showed the model only the stale fact
    let set_at = |i: &MemoryItem| match i.layer {
        Layer::Profile => i.updated_at,
        Layer::Notes | Layer::Log => 0,
    };
    items.sort_by_key(|i| {
        (
            i.layer != Layer::Profile,
            std::cmp::Reverse(i.importance.get()),
            layer_rank(i.layer),
            std::cmp::Reverse(set_at(i)),
        )
    });
    items
}

/// The note ending a block that left `count` items out.
fn left_out(count: usize) -> String {
    // in the count's number: "1 more remembered items are" (QA)
    let (left, still) = if count == 1 {
        ("1 more remembered item is".to_owned(), "It is")
    } else {
        (format!("{count} more remembered items are"), "They are")
    };
    prompts()
        .memory_left_out
        .render(&[("left", &left), ("still", still)])
        .unwrap_or_default()
}

/// The block of these items: profile facts in the order they were last
/// set ([`oldest_set_first`]), as the prompt says; log entries and notes
/// in the snapshot's order (log entries oldest first). `omitted`: how
/// many of each section (profile, log, notes) the budget left out; a
/// section with none shown says so rather than "(none)", which told the
/// model there were none (QA, 2026-12-04: a live note left out read as
/// no notes at all).
fn render_sections(
    profile: &[MemoryItem],
    log: &[MemoryItem],
    notes: &[MemoryItem],
    omitted: [usize; 3],
) -> String {
    let section = |items: Vec<&MemoryItem>, omitted: usize| {
        if !items.is_empty() {
            items.into_iter().map(line).collect::<Vec<_>>().join("\n")
        } else if omitted > 0 {
            prompts()
                .memory_section_left_out
                .render(&[("count", &omitted.to_string())])
                .map(|t| t.trim_end().to_owned())
                .unwrap_or_default()
        } else {
            "(none)".to_owned()
        }
    };
    let [profile_out, log_out, notes_out] = omitted;
    prompts()
        .memory
        .render(&[
            ("profile", &section(oldest_set_first(profile), profile_out)),
            ("log", &section(log.iter().collect(), log_out)),
            ("notes", &section(notes.iter().collect(), notes_out)),
        ])
        .unwrap_or_default()
}

/// `items` in the order they were last set (`updated_at`), oldest first,
/// the id breaking ties: when two facts disagree, the later one is listed
/// after the other, whatever their scopes and even on the same day.
pub(super) fn oldest_set_first(items: &[MemoryItem]) -> Vec<&MemoryItem> {
    let mut out: Vec<&MemoryItem> = items.iter().collect();
    out.sort_by(|a, b| {
        a.updated_at
            .cmp(&b.updated_at)
            .then_with(|| a.id.cmp(&b.id))
    });
    out
}

/// The update for a turn whose fresh memory block (`fresh`) differs from
/// the one its context froze (`frozen`), both rendered by
/// [`render_memory_within`]: only the item lines of the fresh block the
/// frozen one does not hold as they are (added or changed items, log
/// entries chosen for this input), so memory is never sent twice, and the
/// update is bounded like the block; and the fresh block's left-out note
/// when the frozen block does not end with the same one, so the model
/// learns that items it is not shown exist (an update of item lines only
/// said nothing once nothing new fit). `None` when there are none (items
/// only left the block: a forgotten one refreshes it instead).
pub(crate) fn render_memory_changes(frozen: &str, fresh: &str) -> Option<String> {
    let before: HashSet<&str> = frozen.lines().collect();
    let changes: Vec<&str> = fresh
        .lines()
        .filter(|l| (l.starts_with(ITEM_LINE) || is_left_out(l)) && !before.contains(l))
        .collect();
    if changes.is_empty() {
        return None;
    }
    prompts()
        .memory_update
        .render(&[("changes", &changes.join("\n"))])
        .ok()
}

/// Whether `line` is the note [`left_out`] renders, for the first number
/// in it.
fn is_left_out(line: &str) -> bool {
    let digits: String = line
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse::<usize>().is_ok_and(|n| line == left_out(n))
}

/// How an item's line starts in the block ([`line`]); no other line of
/// `prompts/memory.md` does.
const ITEM_LINE: &str = "- ";

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
    format!("{ITEM_LINE}{}", describe(item))
}

/// `<id> (<scope>[, <date>][, remembered in shared room <room>][,
/// importance <n>]) "<text>"`.
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
    push_room_and_importance(&mut meta, item);
    format!("{} ({meta}) {}", item.id, quote(&item.text))
}

/// The end of an item's parenthesis: the shared room it was remembered in
/// ([`shared_room`]), and its importance when not 3.
fn push_room_and_importance(meta: &mut String, item: &MemoryItem) {
    if let Some(room) = shared_room(&item.source) {
        meta.push_str(", remembered in shared room ");
        meta.push_str(room);
    }
    if item.importance.get() != 3 {
        meta.push_str(&format!(", importance {}", item.importance.get()));
    }
}

/// The room a `source` says the item was remembered in, a room shared
/// with other people's bots (`tool:<bot>@room:<room>`,
/// [`super::tool_source`]); `None` for every other writer.
pub(crate) fn shared_room(source: &str) -> Option<&str> {
    source
        .split_once(ROOM_SOURCE)
        .map(|(_, room)| room)
        .filter(|room| !room.is_empty())
}

/// What [`super::tool_source`] puts before a shared room's id.
const ROOM_SOURCE: &str = "@room:";

/// An item as the fact extractor is shown it (`prompts/extract_input.md`):
/// `- <id> (<scope> <layer>, set <minute>[, until <minute>][, remembered
/// in shared room <room>][, importance <n>]) "<text>"`, with the UTC
/// minute it was last set, so two items that disagree can be ordered even
/// when set the same day.
pub(super) fn extraction_line(item: &MemoryItem) -> String {
    let mut meta = format!(
        "{} {}, set {}",
        item.scope,
        item.layer,
        minute(item.updated_at)
    );
    if let Some(t) = item.expires_at {
        meta.push_str(", until ");
        meta.push_str(&minute(t));
    }
    push_room_and_importance(&mut meta, item);
    format!("{ITEM_LINE}{} ({meta}) {}", item.id, quote(&item.text))
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

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
