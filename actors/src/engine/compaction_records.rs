//! The transcript as the summariser reads it: one record line per entry,
//! `#seq author [label] YYYY-MM-DD HH:MM:` (when it was written, in the
//! owner's time zone, so a summary can date what it keeps), its text
//! indented under it, so that no text an
//! entry holds (a webhook's payload, another bot's message) can start a
//! record of its own and pose as the bot's people; what is not from them
//! is quoted with its origin as the context quotes it, and a long text is
//! clipped around a marker that says so.

use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use chrono_tz::Tz;

use crate::engine::context::local_time;
use crate::engine::context::render_input;
use crate::prompts::prompts;

/// Most characters of one entry's text quoted into the compaction request
/// (a chunk that needs less lowers it, `compaction_bounds.rs`): a longer
/// text is quoted as its start and its end around a marker ([`clip`]).
pub(super) const MAX_ENTRY_CHARS: usize = 2000;

/// How the lines of an entry's text sit under its record line. A record
/// line is the only line that starts at the margin: whatever an entry's
/// text holds, each of its lines starts with this, so no text (a webhook's
/// payload, another bot's message) can start a record of its own and pose
/// as the bot's people.
pub(super) const INDENT: &str = "    ";

/// Characters a model or a reader may take for the end of a line (those
/// `str.splitlines` knows): each one in an entry's text starts an indented
/// line, so none can start a line at the margin.
pub(super) fn breaks_line(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\u{0b}'
            | '\u{0c}'
            | '\u{1c}'
            | '\u{1d}'
            | '\u{1e}'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Appends `text` as lines each starting with [`INDENT`] (`\r\n` is one
/// line break).
pub(super) fn push_indented(out: &mut String, text: &str) {
    out.push_str(INDENT);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if breaks_line(c) {
            if c == '\r' && chars.peek() == Some(&'\n') {
                chars.next();
            }
            out.push('\n');
            out.push_str(INDENT);
        } else {
            out.push(c);
        }
    }
    out.push('\n');
}

/// A record line's author on one line: ids never hold a line break or a
/// control character, but the record line must hold none whatever is stored.
fn one_line(author: &str) -> String {
    author
        .chars()
        .map(|c| {
            if c.is_control() || breaks_line(c) {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// An entry's text as the summariser reads it: whole when it has at most
/// `max` characters, else its first and its last `max / 2` characters on
/// either side of a marker (prompts/compact_entry_cut.md) saying how many
/// were cut and that the transcript keeps the entry whole as `seq`. (Its
/// first `max` characters alone, unmarked, lost what a long message says
/// at its end, and the summariser, told not to invent anything, took
/// what it read for the whole message.)
fn clip(text: &str, max: usize, seq: i64) -> String {
    let chars = text.chars().count();
    if chars <= max {
        return text.to_owned();
    }
    let head = max.div_ceil(2);
    let tail = max - head;
    let at = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(b, _)| b);
    let marker = prompts()
        .compact_entry_cut
        .render(&[
            ("cut", &(chars - max).to_string()),
            ("chars", &chars.to_string()),
            ("seq", &seq.to_string()),
        ])
        .unwrap_or_default();
    format!(
        "{}\n{marker}\n{}",
        &text[..at(head)],
        &text[at(chars - tail)..]
    )
}

/// The label of an entry's record line and its text as the summariser
/// reads it; `None` for entries that are no line of the transcript.
/// What is not from the bot's own people is shown as the context shows it,
/// quoted data with its origin (`render_input`); the label tells trusted
/// from untrusted events apart, which the kind's name does not.
/// Texts over `max` characters ([`MAX_ENTRY_CHARS`] unless a chunk needs
/// less) keep that many of their start and end around a marker ([`clip`]).
pub(super) fn record(e: &Entry, max: usize) -> Option<(&'static str, String)> {
    let clip = |text: &str| clip(text, max, e.seq);
    let shown = |kind: EntryKind| render_input(&Entry { kind, ..e.clone() });
    Some(match &e.kind {
        EntryKind::UserMessage { text } => ("user_message", clip(text)),
        EntryKind::Reminder { text } => ("reminder", clip(text)),
        EntryKind::AgentMessage {
            from,
            text,
            hop,
            reply_session,
            chain,
            answers,
        } => (
            "agent_message",
            shown(EntryKind::AgentMessage {
                from: from.clone(),
                text: clip(text),
                hop: *hop,
                reply_session: *reply_session,
                chain: *chain,
                answers: *answers,
            }),
        ),
        EntryKind::Event {
            origin,
            text,
            trusted,
            hop,
            chain,
            asked,
        } => (
            if *trusted {
                "trusted_event"
            } else {
                "untrusted_event"
            },
            shown(EntryKind::Event {
                origin: origin.clone(),
                text: clip(text),
                trusted: *trusted,
                hop: *hop,
                chain: *chain,
                asked: asked.clone(),
            }),
        ),
        // what a tool returned is outside data too (a web page, a file, a
        // search hit): in the context the tool role says so, here a quote
        EntryKind::ToolResult { name, content, .. } => (
            "tool_result",
            shown(EntryKind::Event {
                origin: format!("the tool {name}"),
                text: clip(content),
                trusted: false,
                hop: None,
                chain: None,
                asked: None,
            }),
        ),
        EntryKind::Assistant {
            text, tool_calls, ..
        } => {
            let calls: Vec<String> = tool_calls
                .iter()
                .map(|c| format!("{}({})", c.name, c.arguments))
                .collect();
            let text = if calls.is_empty() {
                format!("(note) {text}")
            } else {
                format!("(note) {text} (calls {})", calls.join(", "))
            };
            ("assistant", clip(&text))
        }
        EntryKind::Delivery { text, .. } => ("delivery", clip(text)),
        EntryKind::Notice { text, .. } => ("notice", clip(text)),
        EntryKind::Approval { summary, .. } => ("approval", clip(summary)),
        // a summary is not a line of the transcript: the newest one
        // heads the request, older ones it already took in
        EntryKind::TurnEnd { .. } | EntryKind::Reaction { .. } | EntryKind::Summary { .. } => {
            return None;
        }
    })
}

/// The transcript record of one entry the summariser reads: a record line
/// `#seq author [label]:` and its text (over `max` characters, clipped
/// around a marker: [`clip`])
/// indented under it; `None` for an entry that is no transcript line.
/// Summary entries are left out: one lies after the seq it covers, so it
/// falls inside the next range, and `compact` already puts the newest
/// summary at the top.
pub(super) fn render_entry(e: &Entry, max: usize, tz: Tz) -> Option<String> {
    let (label, text) = record(e, max)?;
    // a step of calls with no text still tells what the bot did
    let calls =
        matches!(&e.kind, EntryKind::Assistant { tool_calls, .. } if !tool_calls.is_empty());
    if !calls && e.kind.text().trim().is_empty() {
        return None;
    }
    let stamp = local_time::stamp(e.created_at, tz);
    let mut out = match stamp.as_str() {
        "" => format!("#{} {} [{label}]:\n", e.seq, one_line(&e.author)),
        _ => format!("#{} {} [{label}] {stamp}:\n", e.seq, one_line(&e.author)),
    };
    push_indented(&mut out, &text);
    Some(out)
}

/// The transcript records of `entries` ([`render_entry`], times in UTC).
#[cfg(test)]
pub(super) fn render_entries(entries: &[Entry]) -> String {
    entries
        .iter()
        .filter_map(|e| render_entry(e, MAX_ENTRY_CHARS, Tz::UTC))
        .collect()
}
