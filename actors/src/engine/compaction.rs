//! Compaction: older entries of a session are summarised by the model; the
//! summary keeps open plans and tasks, user constraints quoted exactly and
//! (session, seq) pointers into the transcript, the newest user-side
//! messages stay verbatim, and the session's epoch increments. The full
//! transcript always stays in the store and the index.
//!
//! The summary goes into later turns as the bot's people's side of the
//! conversation, so the transcript the summariser reads keeps untrusted
//! text marked as the context marks it (`compaction_records.rs`): one record
//! line per entry that no text can forge, data from outside quoted with
//! its origin; the prompt keeps instructions only from the bot's people.
//!
//! Where a summary ends ([`cut_within`]): it covers every entry after the
//! previous summary except the newest `keep_recent_inputs` inputs and what
//! follows them — but it keeps at most a quarter of the
//! `runtime.context_entries` window verbatim: the protection of recent
//! inputs yields to the window (a turn of many tool calls can hold more
//! entries than the window; kept out of the summary, they left the window
//! unsummarised), and to a token budget (a quarter of `compact_at_tokens`)
//! down to the newest input; the newest input with what followed it stays
//! up to half the window. It never ends among the results of a step it
//! covers, and never at or after a running turn's first input
//! (`keep_from`). So after a compaction the next window starts at or
//! before the first entry the summary does not cover: a quarter window is
//! kept (half at most, for the newest input's turn), and the window is cut
//! only once the rest has been written (see `tail.rs` for when compaction
//! runs).
//!
//! How much one compaction sends, asks for and keeps is bounded by the
//! provider's `compact_at_tokens` (`compaction_bounds.rs`): the entries
//! are summarised in chunks, each stored as it succeeds, so a backlog left
//! by a summariser outage never makes one request too large to take.
//!
//! Each chunk's summariser request is checked against the bot's daily
//! token budget like a turn's model request (`engine/budget.rs`), counting the
//! chunks before it: a compaction of many chunks was checked once, before
//! it started, and ran all of them past the budget. A spent budget ends
//! the round between chunks as a failed chunk does: what the chunks before
//! summarised stays (each summary covers its whole range; no entry is
//! lost, the transcript keeps them all), the rest waits for a later round.

use std::collections::HashMap;

use botfleet_memory::BotRecord;
use botfleet_memory::Encoding;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::SessionId;
use botfleet_memory::StoreError;
use botfleet_memory::TokenUsage;
use botfleet_memory::TurnId;
use tokio_util::sync::CancellationToken;

use self::bounds::Bounds;
use self::bounds::Chunk;
use self::cap::SummaryCap;
// the bounds read these as `super::` items
use self::records::MAX_ENTRY_CHARS;
use self::records::push_indented;
use self::records::render_entry;
// the tests read these as `super::` items
#[cfg(test)]
use self::records::INDENT;
#[cfg(test)]
use self::records::breaks_line;
#[cfg(test)]
use self::records::record;
#[cfg(test)]
use self::records::render_entries;
use super::budget;
use super::tail::SessionTail;
use crate::model::ChatMessage;
use crate::model::FinishReason;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::call_usage::call_usage;
use crate::model::reasoning_text::after_reasoning;
use crate::prompts::prompts;
use crate::runtime::Runtime;
use crate::settings::ContextSettings;

#[path = "compaction_bounds.rs"]
mod bounds;
#[path = "compaction_cap.rs"]
mod cap;

/// The transcript records the summariser reads.
#[path = "compaction_records.rs"]
mod records;

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
    /// The bot's daily token budget was spent before the first chunk's
    /// request (`BudgetPause::reason`): nothing was asked or written.
    #[error("the summariser was not asked: {0}")]
    BudgetSpent(String),
    /// A person's message came before the first chunk's summary was
    /// written ([`ChunkBudget::interrupt`]): nothing was written, and
    /// nothing failed.
    #[error("a person's message came: the compaction stopped for their turn")]
    Interrupted,
}

/// How long a summariser call runs before a person's message cuts it off
/// ([`ChunkBudget::interrupt`]).
const CUT_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// Whom a compaction runs for and what its summariser requests count
/// against.
pub(crate) struct ChunkBudget<'a> {
    /// The turn the summaries are written under (`None`: a fresh id each,
    /// and no turn named: a background compaction, which has no turn
    /// record, or a turn whose start is not written yet).
    pub turn: Option<TurnId>,
    /// Tokens the running turn used and has not stored yet (0 in the
    /// background).
    pub pending: u64,
    /// Whether each chunk's usage is stored with its summary: a
    /// background compaction's, which no turn's end stores. A turn's
    /// compaction adds its usage to the turn's (`Compacted::usage`).
    pub stores_usage: bool,
    /// Ends a wait for the bot's extractions in flight (the turn's cancel).
    pub stop: &'a CancellationToken,
    /// A person's new message (the run's interrupt): the compaction stops
    /// before its next chunk, and its summariser call is cut off once it
    /// has run for [`CUT_AFTER`]; what the chunks before summarised
    /// stays. A person waited for a summariser
    /// that was slow or did not answer at all, up to its whole timeout
    /// and retries (QA, 2026-12-05: 40 s for a two-word reply).
    pub interrupt: &'a CancellationToken,
}

fn is_input(kind: &EntryKind) -> bool {
    matches!(
        kind,
        EntryKind::UserMessage { .. } | EntryKind::AgentMessage { .. } | EntryKind::Event { .. }
    )
}

/// Entries a summary leaves verbatim at most: a quarter of the window.
pub(crate) fn verbatim_budget(window: usize) -> i64 {
    i64::try_from(window / 4).unwrap_or(i64::MAX).max(1)
}

/// Entries a summary leaves verbatim at most to keep the newest input
/// with what followed it: half the window, the most that stays without
/// making the next background compaction due at once
/// (`SessionTail::unsummarised_past`).
fn newest_input_budget(window: usize) -> i64 {
    i64::try_from(window / 2).unwrap_or(i64::MAX).max(1)
}

/// [`cut_within`] with no token bound on what stays verbatim.
#[cfg(test)]
pub(crate) fn cut_at(
    entries: &[Entry],
    covers_to_seq: i64,
    keep_inputs: usize,
    window: usize,
    keep_from: Option<i64>,
) -> Option<i64> {
    cut_within(entries, covers_to_seq, keep_inputs, window, keep_from, None)
}

/// The last seq a summary of `entries` (the entries after the current
/// summary, oldest first) covers, `None` when that is nothing new: every
/// entry but the newest `keep_inputs` inputs and what follows them, and at
/// most [`verbatim_budget`] entries kept (fewer inputs are kept when they
/// span more); the newest input with what follows it is kept up to
/// [`newest_input_budget`] entries, and only when it spans more does the
/// cut fall inside its turn (QA, 2026-12-06: with a window of 20, a plain
/// turn's six entries passed its quarter, and every summary took the
/// person's last message, leaving the bot's reply to it verbatim after
/// the summary, answering nothing the model could see); with `verbatim`
/// (tokens and tokenizer), fewer inputs are kept too when they hold more
/// tokens, but never fewer than the newest input (none that far: the
/// newest entries within the tokens); then through the results of every call it covers (a result
/// without its call is dropped from the context, so it would be in
/// neither); never from `keep_from` on (a running turn's inputs and
/// entries).
pub(crate) fn cut_within(
    entries: &[Entry],
    covers_to_seq: i64,
    keep_inputs: usize,
    window: usize,
    keep_from: Option<i64>,
    verbatim: Option<(u64, Encoding)>,
) -> Option<i64> {
    let first = entries.first()?.seq;
    // the budgets count transcript entries, not seqs: summaries written
    // among them (a catch-up round of many chunks writes one per chunk,
    // after the running turn's input) are no part of what stays verbatim
    // (with 12 of them after a person's message, the next summary took
    // that message and left the reply to it)
    let transcript: Vec<i64> = entries
        .iter()
        .filter(|e| !matches!(e.kind, EntryKind::Summary { .. }))
        .map(|e| e.seq)
        .collect();
    let nth_newest = |n: i64| {
        usize::try_from(n)
            .ok()
            .and_then(|n| transcript.len().checked_sub(n))
            .and_then(|i| transcript.get(i).copied())
            // fewer than `n`: all of them
            .unwrap_or(first)
    };
    let oldest_verbatim = nth_newest(verbatim_budget(window));
    let oldest_newest_input = nth_newest(newest_input_budget(window));
    let oldest_in_tokens = verbatim.map_or(i64::MIN, |(budget, encoding)| {
        bounds::oldest_within(entries, budget, encoding)
    });
    let inputs: Vec<i64> = entries
        .iter()
        .filter(|e| is_input(&e.kind))
        .map(|e| e.seq)
        .collect();
    let recent = &inputs[inputs.len().saturating_sub(keep_inputs.max(1))..];
    let floor = oldest_verbatim.max(oldest_in_tokens);
    let first_kept = recent
        .iter()
        .copied()
        .find(|&seq| seq >= floor)
        // the token bound never takes the newest input: a person's
        // newest message stays in their words (a huge one is the
        // context's to clip, not the summary's to replace)
        .or_else(|| {
            recent
                .last()
                .copied()
                .filter(|&seq| seq >= oldest_newest_input)
        })
        .unwrap_or(floor);
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

/// The summary so far: its text and the last seq it covers.
struct Fold {
    text: String,
    covers_to_seq: i64,
}

/// The request summarising one chunk: the summary so far (cut to the
/// summary bound: one written before there was a bound may be longer) and
/// the chunk's records.
fn chunk_request(
    bot: &BotRecord,
    session: SessionId,
    fold: Option<&Fold>,
    chunk: &Chunk,
    bounds: &Bounds,
) -> ModelRequest {
    let mut transcript = String::new();
    if let Some(fold) = fold {
        // indented too: a summary that copied a record line verbatim
        // must not bring it back as a record
        transcript.push_str(&format!(
            "[earlier summary, up to seq {}]\n",
            fold.covers_to_seq
        ));
        let text = bounds::bounded_summary(&fold.text, bounds, fold.covers_to_seq, false);
        push_indented(&mut transcript, &text);
        transcript.push('\n');
    }
    transcript.push_str(&chunk.records);
    let system = prompts()
        .compact
        .render(&[
            ("bot", bot.id.as_str()),
            ("session", &session.to_string()),
            ("words", &bounds.summary_words().to_string()),
            ("timezone", bounds.timezone.name()),
        ])
        .unwrap_or_default();
    ModelRequest {
        purpose: Purpose::Compact,
        bot: bot.id.to_string(),
        messages: vec![
            ChatMessage::System { content: system },
            ChatMessage::User {
                content: transcript,
            },
        ],
        tools: Vec::new(),
        max_tokens: Some(bounds.max_tokens()),
    }
}

/// Asks the model for the summary of one chunk: the summary text (within
/// the bound) and the call's usage.
async fn summarise(
    model: &dyn Model,
    request: &ModelRequest,
    hidden: &crate::safety::Redactor,
    bounds: &Bounds,
    through: i64,
    cancel: &CancellationToken,
) -> Result<(String, TokenUsage), CompactionError> {
    let mut cap = SummaryCap::new(bounds.summary_tokens);
    // a failure's text reaches the log and the turn's error: cleaned of
    // the host's credentials
    let response = match model
        .complete_hiding(request, hidden, &mut cap, cancel)
        .await
    {
        Ok(response) => response,
        // stopped past the bound (a server that ignores `max_tokens`):
        // the text so far is the summary, cut off; no usage came with it
        Err(ModelError::Aborted { partial, .. }) if cap.tripped => ModelResponse {
            text: partial,
            finish: FinishReason::Length,
            ..ModelResponse::default()
        },
        Err(e) => return Err(e.into()),
    };
    // a thinking model served without a reasoning parser puts its
    // reasoning first (`<think>…</think>`): it is not the summary; one
    // that never closes leaves no summary
    let summary = after_reasoning(&response.text).unwrap_or_default();
    if summary.is_empty() {
        return Err(CompactionError::Empty);
    }
    let cut_off = response.finish == FinishReason::Length;
    let summary = bounds::bounded_summary(summary, bounds, through, cut_off);
    // a stream stopped at the bound brings no usage: counted as sent and
    // as read, as a turn's call cut off is
    Ok((summary, call_usage(request, &response, bounds.encoding)))
}

/// Compacts the tail's session if there is something to summarise: the
/// entries after the current summary through [`cut_within`], in chunks
/// ([`bounds::plan_chunks`]). Each chunk's summary folds the one before
/// and is stored at once (a `summary` entry, a new epoch), so what a
/// round summarised stays summarised: a chunk that fails ends the round
/// (an error when it was the first, else what the chunks before did), and
/// the next round goes on from there. Before each chunk's request the
/// bot's daily budget is checked (`budget::pause_before_request`, with
/// `account`'s pending tokens and the chunks before): spent, the round
/// ends there the same way (`CompactionError::BudgetSpent` before the
/// first). Reloads nothing itself: the caller invalidates the tail.
pub(crate) async fn compact(
    rt: &Runtime,
    bot: &BotRecord,
    model: &dyn Model,
    tail: &SessionTail,
    settings: &ContextSettings,
    keep_from: Option<i64>,
    account: &ChunkBudget<'_>,
) -> Result<Option<Compacted>, CompactionError> {
    let session = tail.session;
    // the records' times read in the owner's time zone
    let bounds = Bounds {
        timezone: rt.settings.timezone_of(&bot.owner),
        ..Bounds::of(settings)
    };
    let entries = rt
        .store
        .entries_after(session, tail.covers_to_seq, i64::MAX)
        .await?;
    let Some(cut) = cut_within(
        &entries,
        tail.covers_to_seq,
        settings.keep_recent_inputs,
        rt.settings.context_entries,
        keep_from,
        Some((bounds.verbatim_tokens, bounds.encoding)),
    ) else {
        return Ok(None);
    };
    let previous = rt.store.latest_summary(session).await?;
    let mut epoch = tail.epoch;
    let mut fold = None;
    if let Some(Entry {
        kind:
            EntryKind::Summary {
                text,
                covers_to_seq,
                epoch: summary_epoch,
            },
        ..
    }) = previous
    {
        // the store's epoch, should the tail lag behind it: a new
        // summary's id derives from its epoch
        epoch = epoch.max(summary_epoch);
        fold = Some(Fold {
            text,
            covers_to_seq,
        });
    }
    let covered: Vec<Entry> = entries.into_iter().filter(|e| e.seq <= cut).collect();
    let chunks = bounds::plan_chunks(&covered, cut, &bounds);
    let count = chunks.len();
    let mut done: Option<Compacted> = None;
    // chunks summarised and stored: fewer than planned when the loop stops
    // early (QA: the log said `chunks=3` of a run that wrote one)
    let mut summarised = 0;
    let vault = rt.vault();
    for (i, chunk) in chunks.iter().enumerate() {
        // the chunks before count once: stored with their summaries, or
        // pending with the turn's usage
        if account.interrupt.is_cancelled() {
            tracing::info!(bot = %bot.id, %session, chunk = i + 1, chunks = count,
                "a person's message came: the compaction stops before its next chunk");
            if done.is_none() {
                return Err(CompactionError::Interrupted);
            }
            break;
        }
        let spent = done.as_ref().map_or(0, |d| d.usage.total());
        let pending = account
            .pending
            .saturating_add(if account.stores_usage { 0 } else { spent });
        if let Some(pause) = budget::pause_before_request(rt, bot, pending, account.stop).await? {
            tracing::info!(bot = %bot.id, %session, chunk = i + 1, chunks = count, used = pause.used, budget = pause.budget,
                "daily token budget spent: the compaction stops before its next summariser request");
            if done.is_none() {
                return Err(CompactionError::BudgetSpent(pause.reason()));
            }
            break;
        }
        let request = chunk_request(bot, session, fold.as_ref(), chunk, &bounds);
        let call_cancel = CancellationToken::new();
        let started = tokio::time::Instant::now();
        // (the step, which reads `epoch`, ends before it is moved on)
        let result = {
            let step = async {
                let (summary, usage) = summarise(
                    model,
                    &request,
                    vault.host_redactor(),
                    &bounds,
                    chunk.through,
                    &call_cancel,
                )
                .await?;
                let epoch = epoch + 1;
                let stored = account.stores_usage.then(|| usage_row(rt, bot, usage));
                let at = (chunk.through, epoch);
                write_summary(rt, session, account.turn, &summary, at, stored).await?;
                Ok::<_, CompactionError>((summary, usage, epoch))
            };
            // a person's message cuts the call off once it has run for
            // `CUT_AFTER`: a summariser that answers at once is let finish (a
            // call cut off is paid for and asked again), one that is slow or
            // does not answer no longer holds the person's turn
            let cut = async {
                account.interrupt.cancelled().await;
                tokio::time::sleep_until(started + CUT_AFTER).await;
                call_cancel.cancel();
            };
            tokio::pin!(step);
            tokio::select! {
                result = &mut step => result,
                () = cut => step.await,
            }
        };
        match result {
            Ok((summary, usage, new_epoch)) => {
                epoch = new_epoch;
                fold = Some(Fold {
                    text: summary,
                    covers_to_seq: chunk.through,
                });
                let mut total = done.as_ref().map_or_else(TokenUsage::default, |d| d.usage);
                total.add(&usage);
                done = Some(Compacted {
                    covers_to_seq: chunk.through,
                    epoch,
                    usage: total,
                });
                summarised += 1;
            }
            Err(CompactionError::Model(ModelError::Cancelled))
                if account.interrupt.is_cancelled() =>
            {
                tracing::info!(bot = %bot.id, %session, chunk = i + 1, chunks = count,
                    "a person's message came: the compaction's summariser call was cut off");
                if done.is_none() {
                    return Err(CompactionError::Interrupted);
                }
                break;
            }
            Err(e) if done.is_some() => {
                tracing::warn!(bot = %bot.id, %session, error = %e, chunk = i + 1, chunks = count,
                    "a chunk of the compaction failed: the summary stops where the chunks before it ended");
                break;
            }
            Err(e) => return Err(e),
        }
    }
    if let Some(d) = &done {
        tracing::info!(bot = %bot.id, %session, covers_to_seq = d.covers_to_seq, epoch = d.epoch, chunks = summarised, planned = count, "compacted session");
    }
    Ok(done)
}

/// The summariser call's `usage` as the bot's daily usage (no turn).
fn usage_row(rt: &Runtime, bot: &BotRecord, usage: TokenUsage) -> Mutation {
    Mutation::AddUsage {
        bot: bot.id.clone(),
        day: rt.store.clock().now().format("%Y-%m-%d").to_string(),
        turns: 0,
        usage,
    }
}

/// Stores a summary through `covers_to_seq` and its epoch as the
/// session's, with its call's usage (`stored`) when no turn stores it.
async fn write_summary(
    rt: &Runtime,
    session: SessionId,
    turn: Option<TurnId>,
    summary: &str,
    (covers_to_seq, epoch): (i64, i64),
    stored: Option<Mutation>,
) -> Result<(), StoreError> {
    let id = match turn {
        Some(t) => EntryId::derive(t, "compaction", &epoch.to_string()),
        None => EntryId::new_v7(),
    };
    let mut batch = vec![
        Mutation::Append(Box::new(NewEntry {
            id,
            session,
            author: "system".into(),
            turn,
            kind: EntryKind::Summary {
                text: summary.to_owned(),
                covers_to_seq,
                epoch,
            },
        })),
        Mutation::SetEpoch { session, epoch },
    ];
    batch.extend(stored);
    rt.store.write(batch).await.map(|_| ())
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "compaction_round_tests.rs"]
mod round_tests;
