//! Compaction: older entries of a session are summarised by the model; the
//! summary keeps open plans and tasks, user constraints quoted exactly and
//! (session, seq) pointers into the transcript, the newest user-side
//! messages stay verbatim, and the session's epoch increments. The full
//! transcript always stays in the store and the index.

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

/// Compacts the tail's session if there is something to summarise: the
/// entries after the current summary, except the newest
/// `keep_recent_inputs` user-side messages and anything from `keep_from`
/// on. Reloads nothing itself: the caller invalidates the tail.
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
    let inputs: Vec<i64> = entries
        .iter()
        .filter(|e| is_input(&e.kind))
        .map(|e| e.seq)
        .collect();
    let keep = settings.keep_recent_inputs.max(1);
    let Some(first_kept) = inputs
        .len()
        .checked_sub(keep)
        .and_then(|i| inputs.get(i))
        .copied()
    else {
        return Ok(None);
    };
    let first_kept = keep_from.map_or(first_kept, |k| first_kept.min(k));
    let cut = first_kept - 1;
    if cut <= tail.covers_to_seq {
        return Ok(None);
    }
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
