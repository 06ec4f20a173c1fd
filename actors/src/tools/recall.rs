//! SearchTranscript and ReadTranscript: the bot's way back into the archive
//! (every transcript entry, indexed by tantivy; docs/search.md). Their own
//! results are not indexed (`TranscriptIndex::QUOTING_TOOLS`): they only
//! quote entries, and would come back as hits of later searches.
//!
//! Visibility is [`VisibleSessions::of_bot`]: the bot's own sessions, the
//! rooms it is a member of, and for subagents the parent session that
//! delegated the task. A `session` argument naming anything else is
//! refused, with the same message whether the session exists or not.
//!
//! Effect: **internal, idempotent, read-only.** Neither tool writes
//! anything, so "the store writes committed with the outcome" is the empty
//! set: the engine writes no `started` row for them, a call cut off by a
//! crash is simply run again (it can never be "outcome unknown"), and a
//! step of read-only calls takes the engine's in-memory fast path. An
//! external effect would buy nothing here but an extra commit per call.

use async_trait::async_trait;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::IndexError;
use botfleet_memory::MAX_SEARCH_OFFSET;
use botfleet_memory::QueryError;
use botfleet_memory::SearchQuery;
use botfleet_memory::SessionId;
use botfleet_memory::SessionRecord;
use botfleet_memory::TranscriptIndex;
use botfleet_memory::TranscriptSearch;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use unicode_segmentation::UnicodeSegmentation;

use super::Effect;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::parse_args;
use super::truncate_output;
use super::visible::VisibleSessions;
use super::visible::describe_session;
use crate::model::ToolSpec;

/// Hits SearchTranscript returns when the model does not say.
pub const SEARCH_DEFAULT_LIMIT: usize = 8;
/// Most hits one SearchTranscript call returns.
pub const SEARCH_MAX_LIMIT: usize = 30;
/// Entries ReadTranscript shows before and after the asked seq by default.
pub const READ_DEFAULT_AROUND: i64 = 3;
/// Most entries ReadTranscript shows on each side of the asked seq.
pub const READ_MAX_AROUND: i64 = 20;
/// Longest text of one neighbouring entry in ReadTranscript, in characters.
const READ_ENTRY_CHARS: usize = 1_500;
/// Longest text of the asked entry itself, in characters.
const READ_TARGET_CHARS: usize = 6_000;

/// Characters of a long entry's text one ReadTranscript shows: at most
/// [`READ_TARGET_CHARS`], and within half the cap a tool result is sent
/// with (`cap_tokens`), counting a token per character (a character of
/// Chinese is about one) and leaving the rest to the entries around it.
/// At a small `compact_at_tokens` a 6,000-character page was clipped to
/// its start and end, and "reads on" skipped the middle it cut (QA,
/// 2026-12-06).
fn page_chars(cap_tokens: u64) -> usize {
    usize::try_from(cap_tokens / 2).map_or(READ_TARGET_CHARS, |half| half.min(READ_TARGET_CHARS))
}

/// Full-text search over the transcripts the bot may see.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchTranscript;

/// Reads the entries around one seq of a session the bot may see.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTranscript;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
    /// Best hits to skip: the start of the next page.
    #[serde(default)]
    offset: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// `None`: this conversation.
    #[serde(default)]
    session: Option<String>,
    seq: i64,
    /// Character of the asked entry's text to show from.
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    before: Option<i64>,
    #[serde(default)]
    after: Option<i64>,
}

fn index_of(ctx: &ToolContext<'_>, tool: &str) -> Result<TranscriptIndex, ToolError> {
    ctx.rt.transcript_index().ok_or_else(|| {
        ToolError::new(
            format!("{tool} is not available: this host runs without a transcript index"),
            "answer from the conversation you have",
        )
    })
}

async fn visible(ctx: &ToolContext<'_>) -> Result<VisibleSessions, ToolError> {
    VisibleSessions::of_bot(ctx.store(), ctx.bot)
        .await
        .map_err(|e| {
            ToolError::new(
                format!("could not read which conversations you may see: {e}"),
                "try again in a moment",
            )
        })
}

/// Per session the bot's owner reads from a later seq than its start,
/// that seq: a room another user shared with them after it began is
/// searched and read from the change that gave it to them on, a bot's
/// session given to them with the bot from that change on
/// (`Store::history_floors`, as `GET /v1/search` does).
async fn history_floors(ctx: &ToolContext<'_>) -> Result<Vec<(SessionId, i64)>, ToolError> {
    ctx.store()
        .history_floors(&ctx.bot.owner)
        .await
        .map_err(|e| {
            ToolError::new(
                format!("could not read which conversations you may see: {e}"),
                "try again in a moment",
            )
        })
}

/// Parses a `session` argument and checks that the bot may read it.
fn visible_session<'v>(
    tool: &str,
    raw: &str,
    visible: &'v VisibleSessions,
) -> Result<&'v SessionRecord, ToolError> {
    let raw = raw.trim();
    let id: SessionId = raw.parse().map_err(|_| {
        ToolError::bad_args(
            tool,
            format!(
                "{raw:?} is not a session id; use the `session` of a SearchTranscript hit (a UUID)"
            ),
        )
    })?;
    visible.get(id).ok_or_else(|| {
        ToolError::new(
            format!(
                "session {id} is not one you may read: you can read only your own conversations and the rooms you are a member of"
            ),
            "call SearchTranscript without `session` to search everything you may read",
        )
    })
}

/// Maps a refused query to the next step for the model.
fn query_error(e: &QueryError) -> ToolError {
    let hint = match e {
        QueryError::Empty | QueryError::NoWords { .. } => {
            "call SearchTranscript with the words to find, e.g. {\"query\": \"supplier audit\"}"
        }
        QueryError::TooLong { .. } => {
            "call SearchTranscript again with a few distinctive words of what you look for"
        }
        QueryError::UnbalancedQuote { .. } => {
            "call SearchTranscript again with the quote closed (\"exact phrase\") or removed"
        }
        QueryError::EmptyPhrase { .. } => {
            "call SearchTranscript again with words between the quotes, or without the quotes"
        }
        QueryError::OnlyExclusions => {
            "call SearchTranscript again with at least one word to find besides the -excluded ones"
        }
        // the tool checks both before searching; listed so that a new
        // variant is a compile error
        QueryError::LimitOutOfRange { .. } | QueryError::OffsetOutOfRange { .. } => {
            "call SearchTranscript again with a smaller limit or offset"
        }
        QueryError::UnknownRole { .. } | QueryError::UnknownKind { .. } => {
            "call SearchTranscript again without the filter"
        }
    };
    ToolError::new(format!("the search was refused: {e}"), hint)
}

fn search_error(e: &IndexError) -> ToolError {
    if let IndexError::Query(q) = e {
        return query_error(q);
    }
    if matches!(
        e,
        IndexError::Damaged { .. } | IndexError::SearchTimeout { .. }
    ) {
        // the index is being rebuilt from the store: a retry in this turn
        // would likely fail again, or miss older entries
        return ToolError::new(
            format!("the transcript search is unavailable: {e}"),
            "answer without searching for now; the search works again after the rebuild",
        );
    }
    let hint = if e.is_retryable() {
        "try again in a moment; if it keeps failing, answer without it"
    } else {
        "answer without searching, and tell the person the transcript search is broken"
    };
    ToolError::new(format!("the transcript search failed: {e}"), hint)
}

fn when(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

#[async_trait]
impl Tool for SearchTranscript {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "SearchTranscript".into(),
            description: "Search the full transcripts of your conversations (your own sessions and the rooms you are a member of), including what scrolled out of your context. Returns the best matching entries with their session, seq and a snippet (matches marked «like this»); read around a hit with ReadTranscript.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words that must all occur (any order; English words match other inflections; unquoted Chinese text is cut into words that also match in any order, e.g. 排除供应商 finds 供应商被排除了). \"exact phrase\" in double quotes requires the words in order and adjacent, for Chinese or Japanese text exactly as written; -word to exclude, a OR b for either. At most 512 characters."},
                    "session": {"type": "string", "description": "Only this session (the `session` of an earlier hit)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX_LIMIT, "description": format!("Most hits to return (default {SEARCH_DEFAULT_LIMIT}).")},
                    "offset": {"type": "integer", "minimum": 0, "maximum": MAX_SEARCH_OFFSET, "description": "Best hits to skip (default 0): the next page of a search with more matches than hits, as its output says."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Internal
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: SearchArgs = parse_args("SearchTranscript", args)?;
        let limit = match args.limit {
            None => SEARCH_DEFAULT_LIMIT,
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| (1..=SEARCH_MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    ToolError::bad_args(
                        "SearchTranscript",
                        format!("limit {n} is out of range; ask for 1 to {SEARCH_MAX_LIMIT} hits"),
                    )
                })?,
        };
        let offset = match args.offset {
            None => 0,
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| *n <= MAX_SEARCH_OFFSET)
                .ok_or_else(|| {
                    ToolError::bad_args(
                        "SearchTranscript",
                        format!(
                            "offset {n} is out of range; skip 0 to {MAX_SEARCH_OFFSET} hits, or narrow the query with more words or a `session`"
                        ),
                    )
                })?,
        };
        let index = index_of(ctx, "SearchTranscript")?;
        let visible = visible(ctx).await?;
        let sessions = match &args.session {
            Some(raw) => vec![visible_session("SearchTranscript", raw, &visible)?.id],
            None => visible.ids(),
        };
        let floors = history_floors(ctx).await?;
        let copies = visible
            .room_copies(ctx.store(), &sessions, &floors)
            .await
            .map_err(|e| {
                ToolError::new(
                    format!("could not read which conversations you may see: {e}"),
                    "try again in a moment",
                )
            })?;
        let sent = visible.bot_copies(&sessions);
        let query = SearchQuery::new(args.query.clone())
            .in_sessions(sessions)
            .visible_from(floors)
            .without_room_copies(copies)
            .without_bot_copies(sent)
            .with_limit(limit)
            .with_offset(offset);
        // a search has a deadline, but a cancelled turn does not wait for it
        let results = tokio::select! {
            // a turn already cancelled does not start a search
            biased;
            () = ctx.cancel.cancelled() => {
                return Err(ToolError::new(
                    "the search was stopped: the turn was cancelled",
                    "nothing to do",
                ));
            }
            results = index.search(query) => results.map_err(|e| search_error(&e))?,
        };
        let mut out = String::new();
        let query_json = serde_json::to_string(&args.query).unwrap_or_default();
        if results.hits.is_empty() && results.total > 0 {
            // a page past the end: the matches exist, the offset skipped them
            out.push_str(&format!(
                "No more entries: {} match {query_json}, all of them before offset {offset}. Call SearchTranscript with a smaller offset (0 for the best ones).",
                results.total
            ));
            return Ok(ToolOutput::text(out));
        }
        if results.hits.is_empty() {
            out.push_str(&format!(
                "No entries match {query_json} in the conversations you may read. Try fewer or other words, or drop quotes and -exclusions."
            ));
            return Ok(ToolOutput::text(out));
        }
        let end = offset + results.hits.len();
        if offset == 0 {
            out.push_str(&format!(
                "{} of {} matching entries, best first.",
                results.hits.len(),
                results.total
            ));
        } else {
            out.push_str(&format!(
                "Entries {} to {end} of {} matching, best first.",
                offset + 1,
                results.total
            ));
        }
        out.push_str(" Read around one with ReadTranscript {\"session\": …, \"seq\": …}.\n");
        if results.total > end && end <= MAX_SEARCH_OFFSET {
            // hits past the first page were out of the model's reach:
            // say how to get them (as the API's next_offset does)
            out.push_str(&format!(
                "More match: call SearchTranscript again with the same query and \"offset\": {end} for the next ones, or add words to narrow it.\n"
            ));
        }
        for (i, hit) in results.hits.iter().enumerate() {
            let place = match visible.get(hit.session) {
                Some(s) if s.id == ctx.session() => "this conversation".to_owned(),
                Some(s) => describe_session(s),
                None => "another conversation".to_owned(),
            };
            out.push_str(&format!(
                "\n[{}] {{\"session\": \"{}\", \"seq\": {}}} · {place} · {} ({}) · {}\n    {}\n",
                offset + i + 1,
                hit.session,
                hit.seq,
                hit.author,
                hit.kind,
                when(hit.time_ms),
                hit.snippet.replace('\n', " ")
            ));
        }
        Ok(ToolOutput::text(truncate_output(
            &out,
            ctx.limits().max_output_bytes,
        )))
    }
}

fn around(tool: &str, name: &str, value: Option<i64>) -> Result<i64, ToolError> {
    match value {
        None => Ok(READ_DEFAULT_AROUND),
        Some(n) if (0..=READ_MAX_AROUND).contains(&n) => Ok(n),
        Some(n) => Err(ToolError::bad_args(
            tool,
            format!("{name} {n} is out of range; give 0 to {READ_MAX_AROUND} entries"),
        )),
    }
}

/// What of an entry's text ReadTranscript shows: `max` characters from
/// character `from`, and whether the note after a cut says how to read
/// on (the asked entry).
#[derive(Debug, Clone, Copy)]
struct Window {
    from: usize,
    max: usize,
    read_on: bool,
}

impl Window {
    /// A neighbouring entry: its start.
    fn neighbour() -> Self {
        Self {
            from: 0,
            max: READ_ENTRY_CHARS,
            read_on: false,
        }
    }
}

/// Cuts `text` to at most `max` characters, saying how much was left
/// out. The cut falls between grapheme clusters (an accent, a skin tone
/// or half a flag stays with what it belongs to), so a few characters
/// fewer may be kept.
fn clip(text: &str, max: usize) -> String {
    clip_window(
        text,
        Window {
            from: 0,
            max,
            read_on: false,
        },
    )
}

/// `text` from character `w.from` (the grapheme cluster holding it on),
/// at most `w.max` characters, with what was left out before and after.
fn clip_window(text: &str, w: Window) -> String {
    let count = text.chars().count();
    if w.from == 0 && count <= w.max {
        return text.to_owned();
    }
    let (mut start, mut skipped) = (0, 0);
    let (mut end, mut kept) = (0, 0);
    for g in text.graphemes(true) {
        let n = g.chars().count();
        if kept == 0 && skipped + n <= w.from {
            skipped += n;
            start += g.len();
            end = start;
            continue;
        }
        if kept + n > w.max {
            break;
        }
        kept += n;
        end += g.len();
    }
    let mut out = String::new();
    if skipped > 0 {
        out.push_str(&format!("[{skipped} characters before] …"));
    }
    out.push_str(&text[start..end]);
    let after = count - skipped - kept;
    if after > 0 && w.read_on {
        out.push_str(&format!(
            "… [{after} more characters: ReadTranscript with \"offset\": {} reads on]",
            skipped + kept
        ));
    } else if after > 0 {
        out.push_str(&format!("… [{after} more characters]"));
    }
    out
}

/// One entry as a compact line for the model.
fn render_entry(entry: &Entry, w: Window) -> String {
    let body = match &entry.kind {
        EntryKind::UserMessage { text } => format!("(user message) {}", clip_window(text, w)),
        EntryKind::AgentMessage { from, text, .. } => {
            format!("(message from bot {from}) {}", clip_window(text, w))
        }
        EntryKind::Event { origin, text, .. } => {
            format!("(event {origin}) {}", clip_window(text, w))
        }
        EntryKind::Assistant {
            text, tool_calls, ..
        } => {
            let mut s = String::from("(note)");
            if !text.is_empty() {
                s.push(' ');
                s.push_str(&clip_window(text, w));
            }
            for call in tool_calls {
                s.push_str(&format!(
                    " [calls {} {}]",
                    call.name,
                    clip(&call.arguments, 200)
                ));
            }
            s
        }
        EntryKind::ToolResult {
            name,
            content,
            is_error,
            ..
        } => {
            let what = if *is_error { "error of" } else { "result of" };
            format!("({what} {name}) {}", clip_window(content, w))
        }
        EntryKind::Delivery { text, .. } => format!("(sent) {}", clip_window(text, w)),
        EntryKind::Reaction {
            target_seq, emoji, ..
        } => format!("(reacted {emoji} to #{target_seq})"),
        EntryKind::Reminder { text } => format!("(reminder) {}", clip_window(text, w)),
        EntryKind::Notice { code, text, .. } => format!("(notice {code}) {}", clip_window(text, w)),
        EntryKind::Approval {
            status, summary, ..
        } => format!("(approval {}) {}", status.as_str(), clip_window(summary, w)),
        EntryKind::TurnEnd { status, .. } => format!("(turn ended: {})", status.as_str()),
        EntryKind::Summary { text, .. } => format!("(summary) {}", clip_window(text, w)),
    };
    format!(
        "#{} {} {}: {}",
        entry.seq,
        when(entry.created_at),
        entry.author,
        body.replace('\n', "\n    ")
    )
}

#[async_trait]
impl Tool for ReadTranscript {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ReadTranscript".into(),
            description: format!(
                "Read the entries around one entry of a transcript you may see (e.g. a SearchTranscript hit): by default {READ_DEFAULT_AROUND} before and {READ_DEFAULT_AROUND} after it. A long entry's text is shown up to {READ_TARGET_CHARS} characters at a time (fewer when your context is small): `offset` reads on from any character."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "session": {"type": "string", "description": "The session (from a SearchTranscript hit); leave it out for this conversation."},
                    "seq": {"type": "integer", "minimum": 1, "description": "The entry's seq in that session."},
                    "offset": {"type": "integer", "minimum": 0, "description": format!("Show the entry's text from this character on (up to {READ_TARGET_CHARS} characters at a time; default 0): to read a long entry's middle or end.")},
                    "before": {"type": "integer", "minimum": 0, "maximum": READ_MAX_AROUND, "description": format!("Entries before it (default {READ_DEFAULT_AROUND}).")},
                    "after": {"type": "integer", "minimum": 0, "maximum": READ_MAX_AROUND, "description": format!("Entries after it (default {READ_DEFAULT_AROUND}).")}
                },
                "required": ["seq"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Internal
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        const TOOL: &str = "ReadTranscript";
        let args: ReadArgs = parse_args(TOOL, args)?;
        let before = around(TOOL, "before", args.before)?;
        let after = around(TOOL, "after", args.after)?;
        let visible = visible(ctx).await?;
        let this = ctx.session().to_string();
        let session = visible_session(TOOL, args.session.as_deref().unwrap_or(&this), &visible)?;
        let last = session.last_seq;
        if last == 0 {
            return Err(ToolError::new(
                format!("session {} has no entries yet", session.id),
                "search for another entry with SearchTranscript",
            ));
        }
        // a room shared with the owner after it began, a session given to
        // them: from then on
        let first = history_floors(ctx)
            .await?
            .into_iter()
            .find(|(s, _)| *s == session.id)
            .map_or(1, |(_, from)| from);
        if !(first..=last).contains(&args.seq) {
            return Err(ToolError::bad_args(
                TOOL,
                format!(
                    "seq {} is out of range: session {} has entries {first} to {last} for you; use the seq of a SearchTranscript hit",
                    args.seq, session.id
                ),
            ));
        }
        let from = (args.seq - before).max(first);
        let to = (args.seq + after).min(last);
        let entries = ctx
            .store()
            .entries_between(session.id, from, to)
            .await
            .map_err(|e| {
                ToolError::new(
                    format!("could not read the transcript: {e}"),
                    "try again in a moment",
                )
            })?;
        let place = if session.id == ctx.session() {
            "this conversation".to_owned()
        } else {
            describe_session(session)
        };
        let mut out = format!(
            "Session {} ({place}), entries {from} to {to} of {last}; → marks seq {}:\n",
            session.id, args.seq
        );
        let offset = args.offset.unwrap_or(0);
        if let Some(target) = entries.iter().find(|e| e.seq == args.seq) {
            // the text `offset` counts in: the entry's (`EntryKind::text`)
            let chars = target.kind.text().chars().count();
            if offset > 0 && offset >= chars {
                return Err(ToolError::bad_args(
                    TOOL,
                    format!(
                        "offset {offset} is past the end of entry #{}'s text ({chars} characters); give an offset below {chars}, or leave it out to read from the start",
                        args.seq
                    ),
                ));
            }
        }
        for entry in &entries {
            let (mark, window) = if entry.seq == args.seq {
                let target = Window {
                    from: offset,
                    max: page_chars(ctx.result_cap_tokens),
                    read_on: true,
                };
                ("→ ", target)
            } else {
                ("  ", Window::neighbour())
            };
            out.push_str(mark);
            out.push_str(&render_entry(entry, window));
            out.push('\n');
        }
        if to < last {
            out.push_str(&format!(
                "(more after #{to}: call ReadTranscript with a later seq)\n"
            ));
        }
        Ok(ToolOutput::text(truncate_output(
            &out,
            ctx.limits().max_output_bytes,
        )))
    }
}

#[cfg(test)]
#[path = "recall_tests.rs"]
mod tests;
