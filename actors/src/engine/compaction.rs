//! Compaction: older entries of a session are summarised by the model; the
//! summary keeps open plans and tasks, user constraints quoted exactly and
//! (session, seq) pointers into the transcript, the newest user-side
//! messages stay verbatim, and the session's epoch increments. The full
//! transcript always stays in the store and the index.
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

/// The transcript lines the summariser reads. Summary entries are left
/// out: one lies after the seq it covers, so it falls inside the next
/// range, and `compact` already puts the newest summary at the top.
fn render_entries(entries: &[Entry]) -> String {
    let mut out = String::new();
    for e in entries {
        let text: String = match &e.kind {
            EntryKind::Assistant { text, tool_calls } => {
                let calls: Vec<String> = tool_calls
                    .iter()
                    .map(|c| format!("{}({})", c.name, c.arguments))
                    .collect();
                if calls.is_empty() {
                    format!("(note) {text}")
                } else {
                    format!("(note) {text} (calls {})", calls.join(", "))
                }
            }
            // a summary is not a line of the transcript: the newest one
            // heads the request, older ones it already took in
            EntryKind::TurnEnd { .. } | EntryKind::Reaction { .. } | EntryKind::Summary { .. } => {
                continue;
            }
            other => other.text().to_owned(),
        };
        if text.trim().is_empty() {
            continue;
        }
        let clipped: String = text.chars().take(MAX_ENTRY_CHARS).collect();
        out.push_str(&format!(
            "#{} {} [{}]: {}\n",
            e.seq,
            e.author,
            e.kind.name(),
            clipped
        ));
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
        transcript.push_str(&format!(
            "[earlier summary, up to seq {covers_to_seq}]\n{text}\n\n"
        ));
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
mod tests {
    use botfleet_memory::SessionId;
    use pretty_assertions::assert_eq;

    use super::*;

    fn entry(seq: i64, author: &str, kind: EntryKind) -> Entry {
        Entry {
            id: EntryId::new_v7(),
            session: SessionId::new_v7(),
            seq,
            gid: seq,
            author: author.into(),
            turn: None,
            created_at: 0,
            kind,
        }
    }

    fn user(seq: i64) -> Entry {
        entry(
            seq,
            "u",
            EntryKind::UserMessage {
                text: format!("message {seq}"),
            },
        )
    }

    /// A turn at `seq`: the input, a step of `calls` calls and their
    /// results, a reply step, the turn's end.
    fn turn(seq: i64, calls: usize) -> Vec<Entry> {
        let ids: Vec<String> = (0..calls).map(|i| format!("c{seq}_{i}")).collect();
        let mut out = vec![
            user(seq),
            entry(
                seq + 1,
                "b",
                EntryKind::Assistant {
                    text: String::new(),
                    tool_calls: ids
                        .iter()
                        .map(|id| botfleet_memory::ToolCallBody {
                            id: id.clone(),
                            name: "SearchTranscript".into(),
                            arguments: "{}".into(),
                        })
                        .collect(),
                },
            ),
        ];
        for (i, id) in ids.iter().enumerate() {
            out.push(entry(
                seq + 2 + i as i64,
                "b",
                EntryKind::ToolResult {
                    call_id: id.clone(),
                    name: "SearchTranscript".into(),
                    content: "no hits".into(),
                    is_error: false,
                },
            ));
        }
        let next = seq + 2 + calls as i64;
        out.push(entry(
            next,
            "b",
            EntryKind::Assistant {
                text: "done".into(),
                tool_calls: Vec::new(),
            },
        ));
        out
    }

    fn session(turns: usize, calls: usize) -> Vec<Entry> {
        let mut out = Vec::new();
        for _ in 0..turns {
            let seq = out.last().map_or(1, |e: &Entry| e.seq + 1);
            out.extend(turn(seq, calls));
        }
        out
    }

    /// Short turns: the newest `keep_recent_inputs` inputs and what follows
    /// them stay verbatim, as before.
    #[test]
    fn the_newest_inputs_stay_verbatim_when_they_fit_a_quarter_window() {
        // 10 turns of 3 entries (no calls): inputs at 1, 4, 7, …, 28
        let entries = session(10, 0);
        assert_eq!(cut_at(&entries, 0, 4, 200, None), Some(18));
        // fewer than 4 inputs since the summary: those stay, what is
        // before them is covered
        assert_eq!(cut_at(&entries[20..], 20, 4, 200, None), Some(21));
        assert_eq!(cut_at(&entries[21..], 21, 4, 200, None), None);
    }

    /// Regression: turns of many tool calls. The newest 4 inputs spanned
    /// more entries than the window, and staying out of every summary they
    /// left the window unsummarised. Now at most a quarter window is kept:
    /// fewer inputs, or, when the newest input alone spans more, the end
    /// of its turn — never a result without its call.
    #[test]
    fn recent_inputs_yield_to_the_window() {
        // 6 turns of 11 entries (8 calls): inputs at 1, 12, 23, 34, 45, 56
        let entries = session(6, 8);
        let newest = entries.last().unwrap().seq;
        assert_eq!(newest, 66);
        // the old rule kept inputs 23 on: 44 entries, more than a window of 40
        // a window of 40 keeps 10 at most: the newest input spans 11, so
        // the cut falls inside its turn
        assert_eq!(cut_at(&entries, 0, 4, 40, None), Some(56));
        // a window of 100 keeps 25: the newest two inputs (45 and 56)
        assert_eq!(cut_at(&entries, 0, 4, 100, None), Some(44));
        // a window of 12 keeps 3 at most, and the cut never ends among the
        // results of a step it covers: 63 would leave 64 and 65 without
        // their call
        assert_eq!(cut_at(&entries, 0, 4, 12, None), Some(65));
        assert_eq!(cut_at(&entries[..62], 0, 4, 12, None), Some(62));
        // a running turn's inputs stay, whatever the window
        assert_eq!(cut_at(&entries, 0, 4, 12, Some(56)), Some(55));
        assert_eq!(cut_at(&entries, 55, 4, 12, Some(56)), None);
    }

    /// Regression: a summary entry lies after the seq it covers, so the
    /// range after one summary held that summary (and later ranges older
    /// ones), and the summariser read it twice: once at the top of the
    /// request, once as a transcript line.
    #[test]
    fn summaries_are_not_transcript_lines() {
        let entries = vec![
            entry(
                21,
                "u",
                EntryKind::UserMessage {
                    text: "book the train".into(),
                },
            ),
            entry(
                26,
                "system",
                EntryKind::Summary {
                    text: "The person plans a trip to Lyon.".into(),
                    covers_to_seq: 20,
                    epoch: 1,
                },
            ),
            entry(
                27,
                "b",
                EntryKind::Delivery {
                    text: "Booked.".into(),
                    card: None,
                    call_id: "c1".into(),
                },
            ),
        ];
        assert_eq!(
            render_entries(&entries),
            "#21 u [user_message]: book the train\n#27 b [delivery]: Booked.\n"
        );
    }
}
