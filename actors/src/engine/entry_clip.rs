//! The per-entry cap of a request: no one message may take more than
//! [`entry_cap`] tokens of what a model call sends.
//!
//! A person's 500 KB paste, a huge report from another bot or a tool's
//! huge result went whole into every request until a compaction after a
//! later message summarised it; with a real endpoint the request passed
//! the model's context window and the turn failed, and compaction cannot
//! help while the message is the running turn's input (it keeps a running
//! turn's entries). A message over the cap goes as its start and its end
//! around a note (prompts/entry_clipped.md, prompts/result_clipped.md for
//! a tool's result) saying how much was cut and how to get at the rest.
//! Only the request is clipped: the transcript and the session's context
//! keep the entry whole, and the clip of a message is the same in every
//! request (the prompt prefix a provider cached stays byte-identical).

use std::collections::HashMap;

use botfleet_memory::Encoding;

use super::tool_name;
use crate::engine::context::grouped;
use crate::model::ChatMessage;
use crate::prompts::prompts;

/// The fewest tokens the cap allows, whatever the provider's
/// `compact_at_tokens`: with a tiny threshold (tests use 1,000) a lower
/// cap would leave of a message little more than its note.
pub(crate) const MIN_ENTRY_TOKENS: u64 = 1_000;

/// How many times the kept length is narrowed before giving up on a text
/// whose start and end count more tokens than its share (each try scales
/// the kept characters by the ratio of tokens wanted to tokens found).
const FIT_TRIES: usize = 8;

/// The most tokens one message may take in a request: half a running
/// turn's budget (`request::turn_budget`, half of `compact_at_tokens`),
/// so a quarter of `compact_at_tokens`, and at least
/// [`MIN_ENTRY_TOKENS`]. A turn's input and its newest tool result at the
/// cap together fit the turn's budget (its older results go as stubs), so
/// however large an entry is, a request grows by at most the cap for it.
pub(crate) fn entry_cap(turn_budget: u64) -> u64 {
    (turn_budget / 2).max(MIN_ENTRY_TOKENS)
}

/// What the note between a clipped text's start and end is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut<'a> {
    /// The text's start that is kept.
    pub(crate) head: &'a str,
    /// The text's end that is kept.
    pub(crate) tail: &'a str,
    /// Characters left out between them.
    pub(crate) cut: usize,
    /// Characters of the whole text.
    pub(crate) chars: usize,
}

/// `text`, if it counts more than `budget` tokens, as the rendering of
/// `render` (its start, a note, its end) of about `budget` tokens: the
/// start and the end are equal shares of the characters kept. `None`
/// when the text fits. Deterministic: the same text and budget give the
/// same clip.
pub(crate) fn clip(
    text: &str,
    budget: u64,
    encoding: Encoding,
    render: &dyn Fn(Cut<'_>) -> String,
) -> Option<String> {
    let tokens = u64::from(encoding.count(text));
    if tokens <= budget {
        return None;
    }
    let chars = text.chars().count();
    // the note's own tokens, with numbers as long as they can get
    let note = u64::from(encoding.count(&render(Cut {
        head: "",
        tail: "",
        cut: chars,
        chars,
    })));
    let room = budget.saturating_sub(note).max(1);
    let mut keep = scale(chars, room, tokens);
    let mut parts = split(text, chars, keep);
    for _ in 0..FIT_TRIES {
        let found = u64::from(encoding.count(parts.0)) + u64::from(encoding.count(parts.1));
        if found <= room || keep == 0 {
            break;
        }
        // a little under the ratio, so a text whose start and end are
        // denser than its middle gets there in a few tries
        keep = scale(keep, room, found).saturating_sub(keep / 32 + 1);
        parts = split(text, chars, keep);
    }
    let (head, tail) = parts;
    let kept = head.chars().count() + tail.chars().count();
    Some(render(Cut {
        head,
        tail,
        cut: chars - kept,
        chars,
    }))
}

/// Which of `messages` (with their `seqs` and token `counts`, all three
/// parallel) take more than `cap` tokens, and what a request sends for
/// each instead, with its tokens, by index: a user-side message or a
/// tool's result clipped to its start and its end around a note, an
/// assistant message with its text clipped (its calls stay whole: the
/// model's own output, bounded by its output limit). The system prompt is
/// the bot's own, not an entry, and is never clipped.
pub(crate) fn plan_clips(
    messages: &[ChatMessage],
    seqs: &[i64],
    counts: &[u32],
    cap: u64,
    encoding: Encoding,
) -> HashMap<usize, (String, u32)> {
    let mut out = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        let count = counts.get(i).copied().unwrap_or(0);
        if u64::from(count) <= cap {
            continue;
        }
        let seq = seqs.get(i).copied().unwrap_or(0).to_string();
        // a message's count is its text's and 4 for its role
        let text_cap = cap.saturating_sub(4);
        let clipped = match message {
            ChatMessage::System { .. } => None,
            ChatMessage::User { content } => {
                clip(content, text_cap, encoding, &|c| entry_note(c, &seq)).map(|text| {
                    let tokens = encoding.count_message(&text);
                    (text, tokens)
                })
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                let tool = tool_name(&messages[..i], tool_call_id).unwrap_or("the tool");
                clip(content, text_cap, encoding, &|c| result_note(c, tool, &seq)).map(|text| {
                    let tokens = encoding.count_message(&text);
                    (text, tokens)
                })
            }
            ChatMessage::Assistant { content, .. } => {
                let own = encoding.count(content);
                let calls = count.saturating_sub(own);
                let share = text_cap.saturating_sub(u64::from(calls)).max(cap / 2);
                clip(content, share, encoding, &|c| entry_note(c, &seq)).map(|text| {
                    let tokens = calls.saturating_add(encoding.count(&text));
                    (text, tokens)
                })
            }
        };
        if let Some(clipped) = clipped {
            out.insert(i, clipped);
        }
    }
    out
}

/// A clipped message: prompts/entry_clipped.md.
fn entry_note(c: Cut<'_>, seq: &str) -> String {
    prompts()
        .entry_clipped
        .render(&[
            ("head", c.head),
            ("tail", c.tail),
            ("cut", &grouped(c.cut)),
            ("chars", &grouped(c.chars)),
            ("seq", seq),
        ])
        .unwrap_or_else(|e| format!("{}\n[{e}]\n{}", c.head, c.tail))
}

/// A clipped result of `tool`: prompts/result_clipped.md.
fn result_note(c: Cut<'_>, tool: &str, seq: &str) -> String {
    prompts()
        .result_clipped
        .render(&[
            ("head", c.head),
            ("tail", c.tail),
            ("cut", &grouped(c.cut)),
            ("chars", &grouped(c.chars)),
            ("tool", tool),
            ("seq", seq),
        ])
        .unwrap_or_else(|e| format!("{}\n[{e}]\n{}", c.head, c.tail))
}

/// `n * wanted / found`, in integers that do not overflow.
fn scale(n: usize, wanted: u64, found: u64) -> usize {
    let scaled = u128::from(wanted) * (n as u128) / u128::from(found.max(1));
    usize::try_from(scaled).unwrap_or(usize::MAX).min(n)
}

/// The first half of `keep` characters of `text` (of `chars` characters)
/// and its last other half.
fn split(text: &str, chars: usize, keep: usize) -> (&str, &str) {
    let keep = keep.min(chars);
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let at = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(b, _)| b);
    (&text[..at(head)], &text[at(chars - tail)..])
}

#[cfg(test)]
#[path = "entry_clip_tests.rs"]
mod tests;
