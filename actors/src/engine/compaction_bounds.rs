//! The bounds of a compaction, all derived from the provider's
//! `compact_at_tokens` (T below), so that no part of it grows with how long
//! the summariser was down or with what one entry holds:
//!
//! - **a request** carries at most T/2 tokens of transcript records
//!   ([`Bounds::chunk_tokens`]): the entries since the last summary are
//!   summarised in chunks ([`plan_chunks`]), each request folding the
//!   summary so far with the next slice. With the earlier summary (at most
//!   T/5) and the instructions, one request stays smaller than a turn's
//!   request at the threshold, which the model takes. (All of a backlog in
//!   one request grew every turn the summariser failed, until the model
//!   refused every attempt and the summary never advanced again.)
//! - **a summary** holds at most T/5 tokens, at most 4096
//!   ([`Bounds::summary_tokens`]): the answer's `max_tokens`, and a longer
//!   answer (or one the token limit cut off) is cut at a character
//!   boundary and marked ([`bounded_summary`], prompts/compact_clipped.md).
//!   (A 300 KB summary went out with every later turn.)
//! - **the entries kept verbatim** after a summary hold at most T/4 tokens
//!   ([`Bounds::verbatim_tokens`], used by `cut_within`): when the newest
//!   user-side messages hold more, fewer are kept, but never fewer than
//!   the newest one (with what follows it); the rest is summarised.
//!
//! So after a compaction the context holds the system prompt, a summary
//! of at most T/5 tokens, at most T/4 tokens verbatim and the newest
//! input's exchange: well under T, so the next turn does not compact again
//! at once.

use std::collections::HashMap;

use botfleet_memory::Encoding;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use chrono_tz::Tz;

use super::MAX_ENTRY_CHARS;
use super::render_entry;
use crate::engine::context::render_input;
use crate::prompts::prompts;
use crate::settings::ContextSettings;

/// The longest summary, whatever the threshold: models cap their answers
/// (some refuse a larger `max_tokens`), and a summary this long already
/// holds far more than a bot needs to carry on.
const MAX_SUMMARY_TOKENS: u64 = 4096;

/// An entry's text is never clipped shorter than this to fit a chunk.
const MIN_ENTRY_CHARS: usize = 64;

/// The token bounds of one provider's compactions (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Tokens of transcript records in one compaction request: T/2.
    pub(crate) chunk_tokens: u64,
    /// Tokens of a summary (and the request's `max_tokens`): T/5, at most
    /// [`MAX_SUMMARY_TOKENS`].
    pub(crate) summary_tokens: u64,
    /// Tokens of the entries a summary leaves verbatim (the newest input
    /// and what follows it aside): T/4.
    pub(crate) verbatim_tokens: u64,
    /// The provider's tokenizer.
    pub(crate) encoding: Encoding,
    /// The time zone the records' times are in (the bot's owner's; UTC
    /// from [`Bounds::of`]).
    pub(crate) timezone: Tz,
}

impl Bounds {
    /// The bounds of a provider's context settings.
    pub(crate) fn of(settings: &ContextSettings) -> Self {
        // the configuration refuses a threshold under 1000; the floor only
        // keeps every bound positive whatever a test sets
        let t = settings.compact_at_tokens.max(100);
        Self {
            chunk_tokens: t / 2,
            summary_tokens: (t / 5).min(MAX_SUMMARY_TOKENS),
            verbatim_tokens: t / 4,
            encoding: settings.encoding,
            timezone: Tz::UTC,
        }
    }

    /// The `max_tokens` of a compaction request.
    pub(crate) fn max_tokens(&self) -> u32 {
        u32::try_from(self.summary_tokens).unwrap_or(u32::MAX)
    }

    /// About how many words a summary may hold (told to the summariser).
    pub(crate) fn summary_words(&self) -> u64 {
        self.summary_tokens * 3 / 4
    }

    fn count(&self, text: &str) -> u64 {
        u64::from(self.encoding.count(text))
    }
}

/// The longest prefix of `text`, cut at a character boundary, of at most
/// `max` tokens.
pub(crate) fn clip_tokens(text: &str, max: u64, encoding: Encoding) -> &str {
    // a token holds a few bytes: a prefix of 8 bytes a token is at least
    // as long as the answer in any text but a pathological one, and
    // counting it spares counting a huge text whole
    let mut end = usize::try_from(max.saturating_mul(8)).map_or(text.len(), |n| n.min(text.len()));
    loop {
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let tokens = u64::from(encoding.count(&text[..end]));
        if tokens <= max {
            return &text[..end];
        }
        // shorter in proportion, and by a tenth more so few rounds do it;
        // `end` > 0 here (an empty prefix has no tokens)
        let scaled = u128::try_from(end).unwrap_or(u128::MAX) * u128::from(max) * 9
            / (u128::from(tokens) * 10);
        end = usize::try_from(scaled).unwrap_or(0).min(end - 1);
    }
}

/// A summary as it is stored and sent: `text` itself when it holds at most
/// `bounds.summary_tokens` tokens and was not cut off (`cut_off`: the
/// answer stopped at its token limit); else its start, cut at a character
/// boundary, and a marker saying so, both together within the bound.
pub(crate) fn bounded_summary(
    text: &str,
    bounds: &Bounds,
    covers_to_seq: i64,
    cut_off: bool,
) -> String {
    if !cut_off && bounds.count(text) <= bounds.summary_tokens {
        return text.to_owned();
    }
    let marker = prompts()
        .compact_clipped
        .render(&[
            ("tokens", &bounds.summary_tokens.to_string()),
            ("seq", &covers_to_seq.to_string()),
        ])
        .unwrap_or_default();
    // the line break between them counts for one token at most
    let room = bounds
        .summary_tokens
        .saturating_sub(bounds.count(&marker) + 1);
    let kept = clip_tokens(text, room, bounds.encoding).trim_end();
    format!("{kept}\n{marker}")
}

/// Tokens of an entry as the context shows it verbatim (0 for entries the
/// context leaves out). The same text as the tail counts (`token_text`).
pub(crate) fn verbatim_tokens(e: &Entry, encoding: Encoding) -> u64 {
    let text = match &e.kind {
        EntryKind::UserMessage { .. }
        | EntryKind::AgentMessage { .. }
        | EntryKind::Event { .. }
        | EntryKind::Reminder { .. } => render_input(e),
        EntryKind::Assistant {
            text,
            tool_calls,
            reasoning,
        } => {
            // its reasoning goes back with its calls in every request:
            // left out, a thinking model's steps looked small, all fit
            // the verbatim window, and a session of long reasoning never
            // found anything to summarise (QA, 2026-12-05: 42 KB requests
            // at compact_at_tokens 6,000)
            crate::model::assistant_token_text(
                reasoning.as_deref().unwrap_or_default(),
                text,
                tool_calls
                    .iter()
                    .map(|c| (c.name.as_str(), c.arguments.as_str())),
            )
        }
        EntryKind::ToolResult { content, .. } => content.clone(),
        EntryKind::Delivery { .. }
        | EntryKind::Reaction { .. }
        | EntryKind::Notice { .. }
        | EntryKind::Approval { .. }
        | EntryKind::TurnEnd { .. }
        | EntryKind::Summary { .. } => return 0,
    };
    u64::from(encoding.count_message(&text))
}

/// The first seq of the newest entries that together hold at most
/// `budget` tokens verbatim (past the newest entry when it alone holds
/// more). Counts only as far back as the budget reaches.
pub(crate) fn oldest_within(entries: &[Entry], budget: u64, encoding: Encoding) -> i64 {
    let mut first = entries.last().map_or(0, |e| e.seq + 1);
    let mut sum = 0u64;
    for e in entries.iter().rev() {
        sum = sum.saturating_add(verbatim_tokens(e, encoding));
        if sum > budget {
            break;
        }
        first = e.seq;
    }
    first
}

/// The transcript records of one compaction request and the last seq they
/// cover.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chunk {
    /// Records of the entries (`render_entry`).
    pub(crate) records: String,
    /// The last seq the chunk covers (the summary folding it ends there).
    pub(crate) through: i64,
}

/// An entry's record, its text clipped shorter than the usual
/// [`MAX_ENTRY_CHARS`] when the record would not fit `budget` tokens by itself;
/// with its tokens. `None` for an entry that is no transcript line.
fn fitted(e: &Entry, budget: u64, bounds: &Bounds) -> Option<(String, u64)> {
    let mut chars = MAX_ENTRY_CHARS;
    loop {
        let record = render_entry(e, chars, bounds.timezone)?;
        let tokens = bounds.count(&record);
        if tokens <= budget || chars <= MIN_ENTRY_CHARS {
            return Some((record, tokens));
        }
        let scaled = u128::try_from(chars).unwrap_or(u128::MAX) * u128::from(budget) * 9
            / (u128::from(tokens) * 10);
        chars = usize::try_from(scaled)
            .unwrap_or(0)
            .clamp(MIN_ENTRY_CHARS, chars - 1);
    }
}

/// Cuts the entries a compaction covers (oldest first, through `cut`) into
/// chunks of at most `bounds.chunk_tokens` tokens of records, each at least
/// one record, the last ending at `cut`. A chunk ends where no call it
/// holds waits for a result in the next (so a summary that stops there
/// leaves no result without its call) when such a place lies in it; a step
/// whose results alone pass the bound is split.
pub(crate) fn plan_chunks(covered: &[Entry], cut: i64, bounds: &Bounds) -> Vec<Chunk> {
    let budget = bounds.chunk_tokens;
    let results: HashMap<&str, i64> = covered
        .iter()
        .filter_map(|e| {
            if let EntryKind::ToolResult { call_id, .. } = &e.kind {
                Some((call_id.as_str(), e.seq))
            } else {
                None
            }
        })
        .collect();
    let mut chunks = Vec::new();
    let (mut text, mut tokens) = (String::new(), 0u64);
    // where the open chunk could end: length of its text, seq, tokens
    let mut safe: Option<(usize, i64, u64)> = None;
    // the newest result any call so far waits for
    let mut open_until = i64::MIN;
    let mut last_seq = cut;
    for e in covered {
        if let Some((record, t)) = fitted(e, budget, bounds) {
            while !text.is_empty() && tokens + t > budget {
                match safe.take() {
                    Some((len, seq, at)) if len > 0 => {
                        let rest = text.split_off(len);
                        chunks.push(Chunk {
                            records: std::mem::replace(&mut text, rest),
                            through: seq,
                        });
                        tokens -= at;
                    }
                    Some(_) | None => {
                        chunks.push(Chunk {
                            records: std::mem::take(&mut text),
                            through: last_seq,
                        });
                        tokens = 0;
                    }
                }
            }
            text.push_str(&record);
            tokens += t;
        }
        if let EntryKind::Assistant { tool_calls, .. } = &e.kind {
            for c in tool_calls {
                if let Some(&seq) = results.get(c.id.as_str()) {
                    open_until = open_until.max(seq);
                }
            }
        }
        last_seq = e.seq;
        if open_until <= e.seq {
            safe = Some((text.len(), e.seq, tokens));
        }
    }
    match chunks.last_mut() {
        // entries after the last record (no transcript lines) go with it
        Some(last) if text.is_empty() => last.through = cut,
        Some(_) | None => chunks.push(Chunk {
            records: text,
            through: cut,
        }),
    }
    chunks
}
