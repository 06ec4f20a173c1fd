//! Where the turn engine meets memory (`docs/memory.md`): the state block
//! inside an epoch (append an update, or refresh the system message when
//! something it showed was forgotten, has expired or was replaced) and
//! the fact extraction after a completed turn (owed in the write that
//! ends it, run once it is written).

use std::collections::BTreeSet;
use std::sync::Arc;

use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::MemoryId;
use botfleet_memory::Mutation;
use botfleet_memory::OwedExtraction;
use botfleet_memory::StoreError;

use super::Runner;
use crate::memory::extracts_from;
use crate::memory::render_memory_changes;
use crate::memory::spawn_extract_after_turn;
use crate::model::Purpose;
use crate::tools::Runner as RunnerKind;

impl Runner {
    /// Brings the frozen state block of the tail up to date with this
    /// turn's fresh one (`self.block`), inside an epoch:
    /// - unchanged: nothing;
    /// - an item the frozen block shows was forgotten (it no longer exists
    ///   in the store), is a note past its expiry, or has another text now
    ///   (replaced): the system message is re-rendered now, one
    ///   prompt-cache miss, because a forgotten fact must leave the prompt,
    ///   a note disappears at its expiry, and a replaced text (maybe a
    ///   detail the person asked to scrub) must not stay beside its new
    ///   one for the rest of the epoch;
    /// - in a room shared with other people's bots, an item the frozen
    ///   block shows that this turn's may not (the room was its owner's
    ///   alone when the block was frozen): re-rendered now, the same way;
    /// - otherwise (items added or changed, a different choice of log
    ///   entries): the prefix stays byte-identical and the fresh block's
    ///   items the frozen one does not show as they are go in as a short
    ///   update after the turn's inputs in each request (both blocks are
    ///   bounded, `memory::render_memory_within`, so the update is too).
    pub(super) async fn reconcile_state_block(&mut self) {
        self.memory_update = None;
        if self.tail.state_hash == self.block.hash {
            return;
        }
        if self.frozen_items_out_of_reach() || self.frozen_items_stale().await {
            self.tail.refresh_state(&self.block);
            return;
        }
        // only what the frozen block does not show: the whole fresh block
        // sent memory twice in every request of the epoch
        self.memory_update = render_memory_changes(&self.tail.state, &self.block.text);
    }

    /// Whether the frozen state block shows an item this turn may not
    /// show: in a room shared with other people's bots the prompt holds
    /// only what the bot remembered in that room, but a block frozen
    /// while the room was its owner's alone (members added since) showed
    /// the owner's and the bot's private memory, and kept showing it to
    /// the new members' people until the session compacted. Any frozen
    /// item the fresh (room-only) block does not show counts: one of the
    /// room's own left out by the block's bound costs a prompt-cache
    /// miss, a private one left in would be read by the room.
    fn frozen_items_out_of_reach(&self) -> bool {
        self.scope.runner == (RunnerKind::GroupMember { shared: true })
            && self
                .tail
                .state_shown
                .iter()
                .any(|id| !self.block.shown.contains(id))
    }

    /// Whether an item of the tail's frozen state block is gone or
    /// changed its text: it no longer exists (forgotten or removed), it is
    /// a note whose expiry has passed by the store's clock (an expired
    /// note stays in the store until it is purged, but no snapshot shows
    /// it any more), or its text is not the one the frozen block quotes
    /// (Remember or an extraction replaced it; only the update showed the
    /// new text, beside the old one in the system message). A failed read
    /// answers yes: refreshing costs a cache miss, keeping a forgotten
    /// fact in the prompt is wrong.
    async fn frozen_items_stale(&self) -> bool {
        let frozen: Vec<MemoryId> = self
            .tail
            .state_shown
            .iter()
            .filter_map(|id| MemoryId::parse(id).ok())
            .collect();
        if frozen.is_empty() {
            return false;
        }
        let now = self.rt.store.clock().now_ms();
        match self.rt.store.memory_items_by_id(frozen.clone()).await {
            Ok(items) => {
                let live: BTreeSet<&MemoryId> = items
                    .iter()
                    .filter(|i| !i.is_expired(now))
                    .map(|i| &i.id)
                    .collect();
                frozen.iter().any(|id| !live.contains(id))
                    || items
                        .iter()
                        .any(|i| !shows_text(&self.tail.state, &i.id, &i.text))
            }
            Err(e) => {
                tracing::warn!(bot = %self.bot.id, error = %e, "cannot check the prompt's memory for forgotten, expired or replaced items; refreshing it");
                true
            }
        }
    }

    /// The fact extraction this completed turn owes, written in the batch
    /// that ends it (`commit`), so that a crash right after the end finds
    /// it owed and runs it at the next start (`memory/extract_owed.rs`).
    /// `None` when no extraction runs for the turn: `runtime.extract_memory`
    /// is off, the bot's model does not answer extraction (a script
    /// without an extract rule answers nothing), the turn is in a room
    /// shared with other users' bots (as the memory tools), or it has no
    /// message from the bot's owner (routines, hooks, other bots). It
    /// holds what the extraction reads: what the owner wrote in the
    /// turn's inputs, the final reply (`batch` is the end's batch, not yet
    /// written: its last step counts), and the ids of the memory items
    /// the prompt showed (the frozen block and the update), the only ones
    /// it may replace or remove.
    pub(super) async fn owed_extraction(&self, batch: &[Mutation]) -> Option<OwedExtraction> {
        if !self.rt.settings.extract_memory
            || !self.model.answers(Purpose::Extract)
            || self.scope.runner == (RunnerKind::GroupMember { shared: true })
            || self.state.input_seqs.is_empty()
        {
            return None;
        }
        let (user_texts, final_reply) = match &self.texts {
            // gathered while the turn ran (its end's step included): no read
            Some(texts) => (texts.user.clone(), texts.reply()),
            // a resumed turn: read back from the store, plus the end's batch
            None => match self.stored_texts().await {
                Ok(mut texts) => {
                    for m in batch {
                        if let Mutation::Append(e) = m {
                            texts.note(&e.kind, false);
                        }
                    }
                    (texts.user.clone(), texts.reply())
                }
                Err(e) => {
                    tracing::warn!(bot = %self.bot.id, turn = %self.turn, error = %e, "cannot read the turn for fact extraction; skipped");
                    return None;
                }
            },
        };
        if user_texts.is_empty() {
            return None;
        }
        let final_reply = self.with_earlier_replies(final_reply).await;
        let mut shown: BTreeSet<&str> = self.tail.state_shown.iter().map(String::as_str).collect();
        if self.memory_update.is_some() {
            shown.extend(self.block.shown.iter().map(String::as_str));
        }
        // kept only if they parse, as the extraction reads them
        let shown = shown
            .into_iter()
            .filter(|id| MemoryId::parse(id).is_ok())
            .map(str::to_owned)
            .collect();
        Some(OwedExtraction {
            turn: self.turn,
            bot: self.bot.id.clone(),
            session: self.session,
            owner: self.bot.owner.clone(),
            shown,
            user_texts,
            final_reply,
            attempts: 0,
            // set by the writer
            created_at: 0,
        })
    }

    /// Starts in the background the fact extraction that the turn's end
    /// recorded as owed (`owed_extraction`). The reply is never affected:
    /// a failure is only logged, and the extraction clears its owed record
    /// with its outcome.
    pub(super) fn spawn_extraction(&self, owed: OwedExtraction) {
        let shown = owed
            .shown
            .iter()
            .filter_map(|id| MemoryId::parse(id).ok())
            .collect();
        // detached: the extraction logs its own outcome
        drop(spawn_extract_after_turn(
            Arc::clone(&self.rt),
            (*self.bot).clone(),
            owed.session,
            owed.turn,
            shown,
            owed.user_texts,
            owed.final_reply,
        ));
    }

    /// `reply` after what earlier turns over the same inputs delivered: a
    /// turn a newer message interrupted after it replied owes no
    /// extraction (its inputs come again), and the turn that answers them
    /// all read only its own reply, so the first reply was never read (QA,
    /// 2026-12-05). Several inputs are what an interrupt leaves: only
    /// then are the session's entries since the first read.
    async fn with_earlier_replies(&self, reply: String) -> String {
        let inputs = &self.state.input_seqs;
        if inputs.len() < 2 {
            return reply;
        }
        let from = inputs.iter().min().copied().unwrap_or(1).saturating_sub(1);
        let entries = match self
            .rt
            .store
            .entries_after(self.session, from, EARLIER_REPLIES_READ)
            .await
        {
            Ok(entries) => entries,
            Err(e) => {
                tracing::warn!(bot = %self.bot.id, turn = %self.turn, error = %e, "fact extraction: cannot read the earlier replies to the turn's inputs; reading its own");
                return reply;
            }
        };
        let mut said: Vec<String> = entries
            .into_iter()
            .filter(|e| e.turn.is_some_and(|t| t != self.turn))
            .filter_map(|e| match e.kind {
                EntryKind::Delivery { text, .. } => Some(text),
                _ => None,
            })
            .collect();
        if said.is_empty() {
            return reply;
        }
        if !reply.is_empty() {
            said.push(reply);
        }
        said.join("\n\n")
    }

    /// What fact extraction reads of a resumed turn (its texts were not
    /// gathered as it ran): the owner's messages among its inputs, its
    /// deliveries and its last non-empty assistant text, as stored.
    async fn stored_texts(&self) -> Result<TurnTexts, StoreError> {
        let inputs = &self.state.input_seqs;
        let from = inputs.iter().min().copied().unwrap_or(1).saturating_sub(1);
        let entries = self
            .rt
            .store
            .entries_after(self.session, from, i64::MAX)
            .await?;
        let mut texts = TurnTexts::default();
        for e in entries
            .iter()
            .filter(|e| e.turn == Some(self.turn) || inputs.contains(&e.seq))
        {
            let owners_input = inputs.contains(&e.seq) && extracts_from(&self.bot, &e.author);
            texts.note(&e.kind, owners_input);
        }
        Ok(texts)
    }
}

/// Most entries read for [`Runner::with_earlier_replies`]: the inputs and
/// the interrupted turns' entries after them.
const EARLIER_REPLIES_READ: i64 = 200;

/// Whether the memory block `block` shows item `id` with `text`: its
/// line (`- <id> (<scope>[, <date>]) "<text>"`, `memory/render.rs`) ends
/// with the text JSON-quoted as the block quotes it. A block without a
/// line for `id` does not (it is only asked about ids it shows).
fn shows_text(block: &str, id: &MemoryId, text: &str) -> bool {
    let Ok(quoted) = serde_json::to_string(text) else {
        return false;
    };
    let (start, end) = (format!("- {id} ("), format!(") {quoted}"));
    block
        .lines()
        .any(|l| l.starts_with(&start) && l.ends_with(&end))
}

/// What fact extraction reads of a turn, gathered while it runs: the
/// owner's messages among its inputs, its deliveries, its last assistant
/// text.
#[derive(Debug, Default)]
pub(super) struct TurnTexts {
    user: Vec<String>,
    deliveries: Vec<String>,
    last_text: String,
}

impl TurnTexts {
    /// The owner's messages among a new turn's input entries.
    pub(super) fn of_inputs(bot: &BotRecord, inputs: &[Entry]) -> Self {
        let user = inputs
            .iter()
            .filter(|e| extracts_from(bot, &e.author))
            .filter_map(|e| {
                if let EntryKind::UserMessage { text } = &e.kind {
                    Some(text.clone())
                } else {
                    None
                }
            })
            .collect();
        Self {
            user,
            ..Self::default()
        }
    }

    /// A model step's text.
    pub(super) fn assistant(&mut self, text: &str) {
        if !text.trim().is_empty() {
            text.clone_into(&mut self.last_text);
        }
    }

    /// A delivered message.
    pub(super) fn delivered(&mut self, text: &str) {
        self.deliveries.push(text.to_owned());
    }

    /// A stored entry of the turn: an owner's message among its inputs
    /// (`owners_input`), a delivery, or a model step's text.
    fn note(&mut self, kind: &EntryKind, owners_input: bool) {
        if let EntryKind::UserMessage { text } = kind {
            if owners_input {
                self.user.push(text.clone());
            }
        } else if let EntryKind::Delivery { text, .. } = kind {
            self.delivered(text);
        } else if let EntryKind::Assistant { text, .. } = kind {
            self.assistant(text);
        }
    }

    /// The final reply: the deliveries one after the other, or the last
    /// assistant text when nothing was delivered.
    fn reply(&self) -> String {
        if self.deliveries.is_empty() {
            self.last_text.clone()
        } else {
            self.deliveries.join("\n\n")
        }
    }
}
