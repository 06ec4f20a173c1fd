//! Compaction: older entries of a session are summarised by the model; the
//! summary keeps open plans and tasks, user constraints quoted exactly and
//! (session, seq) pointers into the transcript, the newest user-side
//! messages stay verbatim, and the session's epoch increments. The full
//! transcript always stays in the store and the index.
//!
//! The summary goes into later turns as the bot's people's side of the
//! conversation, so the transcript the summariser reads keeps untrusted
//! text marked as the context marks it ([`render_entries`]): one record
//! line per entry that no text can forge, data from outside quoted with
//! its origin; the prompt keeps instructions only from the bot's people.
//!
//! Where a summary ends ([`cut_at`]): it covers every entry after the
//! previous summary except the newest `keep_recent_inputs` inputs and what
//! follows them — but it keeps at most a quarter of the
//! `runtime.context_entries` window verbatim: the protection of recent
//! inputs yields to the window (a turn of many tool calls can hold more
//! entries than the window; kept out of the summary, they left the window
//! unsummarised). It never ends among the results of a step it covers,
//! and never at or after a running turn's first input (`keep_from`).
//! So after a compaction the next window starts at or before the first
//! entry the summary does not cover: a quarter window is kept, and the
//! window is cut only once three quarters more have been written (see
//! `tail.rs` for when compaction runs).

use std::collections::HashMap;

use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::StoreError;
use botfleet_memory::TokenUsage;
use botfleet_memory::TurnId;

use super::context::render_input;
use super::tail::SessionTail;
use crate::model::ChatMessage;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::Purpose;
use crate::prompts::prompts;
use crate::runtime::Runtime;
use crate::settings::ContextSettings;

/// Longest text of one entry quoted into the compaction request.
const MAX_ENTRY_CHARS: usize = 2000;

/// What a compaction did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compacted {
    /// Last seq the summary covers.
    pub covers_to_seq: i64,
    /// The new epoch.
    pub epoch: i64,
    /// Tokens of the compaction call.
    pub usage: TokenUsage,
}

/// Why a compaction did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompactionError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The model failed (the session simply stays long).
    #[error("the summariser failed: {0}")]
    Model(#[from] ModelError),
    /// The model returned nothing.
    #[error("the summariser returned an empty summary")]
    Empty,
}

fn is_input(kind: &EntryKind) -> bool {
    matches!(
        kind,
        EntryKind::UserMessage { .. } | EntryKind::AgentMessage { .. } | EntryKind::Event { .. }
    )
}

/// How the lines of an entry's text sit under its record line. A record
/// line is the only line that starts at the margin: whatever an entry's
/// text holds, each of its lines starts with this, so no text (a webhook's
/// payload, another bot's message) can start a record of its own and pose
/// as the bot's people.
const INDENT: &str = "    ";

/// Characters a model or a reader may take for the end of a line (those
/// `str.splitlines` knows): each one in an entry's text starts an indented
/// line, so none can start a line at the margin.
fn breaks_line(c: char) -> bool {
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
fn push_indented(out: &mut String, text: &str) {
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

/// The first [`MAX_ENTRY_CHARS`] characters of an entry's text.
fn clip(text: &str) -> String {
    text.chars().take(MAX_ENTRY_CHARS).collect()
}

/// The label of an entry's record line and its text as the summariser
/// reads it; `None` for entries that are no line of the transcript.
/// What is not from the bot's own people is shown as the context shows it,
/// quoted data with its origin (`render_input`); the label tells trusted
/// from untrusted events apart, which the kind's name does not.
fn record(e: &Entry) -> Option<(&'static str, String)> {
    let shown = |kind: EntryKind| render_input(&Entry { kind, ..e.clone() });
    Some(match &e.kind {
        EntryKind::UserMessage { text } => ("user_message", clip(text)),
        EntryKind::Reminder { text } => ("reminder", clip(text)),
        EntryKind::AgentMessage {
            from,
            text,
            hop,
            reply_session,
        } => (
            "agent_message",
            shown(EntryKind::AgentMessage {
                from: from.clone(),
                text: clip(text),
                hop: *hop,
                reply_session: *reply_session,
            }),
        ),
        EntryKind::Event {
            origin,
            text,
            trusted,
            hop,
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
            }),
        ),
        EntryKind::Assistant { text, tool_calls } => {
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

/// The transcript records the summariser reads: per entry a record line
/// `#seq author [label]:` and its text indented under it. Summary entries
/// are left out: one lies after the seq it covers, so it falls inside the
/// next range, and `compact` already puts the newest summary at the top.
fn render_entries(entries: &[Entry]) -> String {
    let mut out = String::new();
    for e in entries {
        let Some((label, text)) = record(e) else {
            continue;
        };
        // a step of calls with no text still tells what the bot did
        let calls =
            matches!(&e.kind, EntryKind::Assistant { tool_calls, .. } if !tool_calls.is_empty());
        if !calls && e.kind.text().trim().is_empty() {
            continue;
        }
        out.push_str(&format!("#{} {} [{label}]:\n", e.seq, one_line(&e.author)));
        push_indented(&mut out, &text);
    }
    out
}

/// Entries a summary leaves verbatim at most: a quarter of the window.
pub(crate) fn verbatim_budget(window: usize) -> i64 {
    i64::try_from(window / 4).unwrap_or(i64::MAX).max(1)
}

/// The last seq a summary of `entries` (the entries after the current
/// summary, oldest first) covers, `None` when that is nothing new: every
/// entry but the newest `keep_inputs` inputs and what follows them, and at
/// most [`verbatim_budget`] entries kept (fewer inputs are kept when they
/// span more; when the newest input alone spans more, the cut falls inside
/// its turn); then through the results of every call it covers (a result
/// without its call is dropped from the context, so it would be in neither);
/// never from `keep_from` on (a running turn's inputs and entries).
pub(crate) fn cut_at(
    entries: &[Entry],
    covers_to_seq: i64,
    keep_inputs: usize,
    window: usize,
    keep_from: Option<i64>,
) -> Option<i64> {
    let newest = entries.last()?.seq;
    let oldest_verbatim = newest.saturating_sub(verbatim_budget(window)) + 1;
    let inputs: Vec<i64> = entries
        .iter()
        .filter(|e| is_input(&e.kind))
        .map(|e| e.seq)
        .collect();
    let recent = &inputs[inputs.len().saturating_sub(keep_inputs.max(1))..];
    let first_kept = recent
        .iter()
        .copied()
        .find(|&seq| seq >= oldest_verbatim)
        .unwrap_or(oldest_verbatim);
    let mut cut = first_kept - 1;
    // through the results of the calls it covers (those of a covered step
    // that come later, past other entries, included)
    let results: HashMap<&str, i64> = entries
        .iter()
        .filter_map(|e| {
            if let EntryKind::ToolResult { call_id, .. } = &e.kind {
                Some((call_id.as_str(), e.seq))
            } else {
                None
            }
        })
        .collect();
    for e in entries {
        if e.seq > cut {
            break;
        }
        if let EntryKind::Assistant { tool_calls, .. } = &e.kind {
            for c in tool_calls {
                if let Some(&seq) = results.get(c.id.as_str()) {
                    cut = cut.max(seq);
                }
            }
        }
    }
    let cut = keep_from.map_or(cut, |k| cut.min(k - 1));
    (cut > covers_to_seq).then_some(cut)
}

/// Compacts the tail's session if there is something to summarise: the
/// entries after the current summary through [`cut_at`]. Reloads nothing
/// itself: the caller invalidates the tail.
pub(crate) async fn compact(
    rt: &Runtime,
    bot: &BotRecord,
    model: &dyn Model,
    tail: &SessionTail,
    settings: &ContextSettings,
    keep_from: Option<i64>,
    turn: Option<TurnId>,
) -> Result<Option<Compacted>, CompactionError> {
    let session = tail.session;
    let entries = rt
        .store
        .entries_after(session, tail.covers_to_seq, i64::MAX)
        .await?;
    let Some(cut) = cut_at(
        &entries,
        tail.covers_to_seq,
        settings.keep_recent_inputs,
        rt.settings.context_entries,
        keep_from,
    ) else {
        return Ok(None);
    };
    let previous = rt.store.latest_summary(session).await?;
    let mut transcript = String::new();
    if let Some(Entry {
        kind:
            EntryKind::Summary {
                text,
                covers_to_seq,
                ..
            },
        ..
    }) = &previous
    {
        // indented too: a summary that copied a record line verbatim
        // must not bring it back as a record
        transcript.push_str(&format!("[earlier summary, up to seq {covers_to_seq}]\n"));
        push_indented(&mut transcript, text);
        transcript.push('\n');
    }
    let covered: Vec<Entry> = entries.into_iter().filter(|e| e.seq <= cut).collect();
    transcript.push_str(&render_entries(&covered));
    let system = prompts()
        .compact
        .render(&[("bot", bot.id.as_str()), ("session", &session.to_string())])
        .unwrap_or_default();
    let request = ModelRequest {
        purpose: Purpose::Compact,
        bot: bot.id.to_string(),
        messages: vec![
            ChatMessage::System { content: system },
            ChatMessage::User {
                content: transcript,
            },
        ],
        tools: Vec::new(),
        max_tokens: None,
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let response = model.complete(&request, &mut (), &cancel).await?;
    let summary = response.text.trim().to_owned();
    if summary.is_empty() {
        return Err(CompactionError::Empty);
    }
    let epoch = tail.epoch + 1;
    let mut usage = TokenUsage {
        calls: 1,
        ..TokenUsage::default()
    };
    if let Some(u) = response.usage {
        usage.prompt_tokens = u.prompt_tokens;
        usage.cached_tokens = u.cached_prompt_tokens;
        usage.completion_tokens = u.completion_tokens;
    }
    let id = match turn {
        Some(t) => EntryId::derive(t, "compaction", &epoch.to_string()),
        None => EntryId::new_v7(),
    };
    rt.store
        .write(vec![
            Mutation::Append(Box::new(NewEntry {
                id,
                session,
                author: "system".into(),
                turn,
                kind: EntryKind::Summary {
                    text: summary,
                    covers_to_seq: cut,
                    epoch,
                },
            })),
            Mutation::SetEpoch { session, epoch },
        ])
        .await?;
    tracing::info!(bot = %bot.id, %session, covers_to_seq = cut, epoch, "compacted session");
    Ok(Some(Compacted {
        covers_to_seq: cut,
        epoch,
        usage,
    }))
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
