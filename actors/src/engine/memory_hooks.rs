//! Where the turn engine meets memory (`docs/memory.md`): the state block
//! inside an epoch (append an update, or refresh the system message when
//! something it showed was forgotten or has expired) and the fact
//! extraction after a completed turn.

use std::collections::BTreeSet;
use std::sync::Arc;

use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::MemoryId;
use botfleet_memory::SessionId;
use botfleet_memory::StoreError;
use botfleet_memory::TurnId;

use super::Runner;
use crate::memory::spawn_extract_after_turn;
use crate::prompts::prompts;
use crate::runtime::Runtime;
use crate::tools::Runner as RunnerKind;

impl Runner {
    /// Brings the frozen state block of the tail up to date with this
    /// turn's fresh one (`self.block`), inside an epoch:
    /// - unchanged: nothing;
    /// - an item the frozen block shows was forgotten (it no longer exists
    ///   in the store) or is a note past its expiry: the system message is
    ///   re-rendered now, one prompt-cache miss, because a forgotten fact
    ///   must leave the prompt and a note disappears at its expiry;
    /// - otherwise (items added or changed, a different choice of log
    ///   entries): the prefix stays byte-identical and the fresh block goes
    ///   in as a short update after the turn's inputs in each request.
    pub(super) async fn reconcile_state_block(&mut self) {
        self.memory_update = None;
        if self.tail.state_hash == self.block.hash {
            return;
        }
        if self.frozen_items_gone().await {
            self.tail.refresh_state(&self.block);
            return;
        }
        self.memory_update = prompts()
            .memory_update
            .render(&[("changes", &self.block.text)])
            .ok();
    }

    /// Whether an item of the tail's frozen state block is gone: it no
    /// longer exists (forgotten or removed), or it is a note whose expiry
    /// has passed by the store's clock (an expired note stays in the store
    /// until it is purged, but no snapshot shows it any more). A failed
    /// read answers yes: refreshing costs a cache miss, keeping a
    /// forgotten fact in the prompt is wrong.
    async fn frozen_items_gone(&self) -> bool {
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
            }
            Err(e) => {
                tracing::warn!(bot = %self.bot.id, error = %e, "cannot check the prompt's memory for forgotten or expired items; refreshing it");
                true
            }
        }
    }

    /// Starts the fact extraction for this completed turn in the
    /// background (when `runtime.extract_memory` is on): what the bot's
    /// owner wrote in the turn's inputs, the turn's final reply, and the
    /// ids of the memory items the prompt showed (the frozen block and the
    /// update), which are the only ones it may replace or remove. Not in
    /// rooms shared with other users' bots (as the memory tools), nor for
    /// turns without a message from the owner (routines, hooks, other
    /// bots). The reply is never affected: a failure is only logged.
    pub(super) fn spawn_extraction(&self) {
        if !self.rt.settings.extract_memory
            || self.scope.runner == (RunnerKind::GroupMember { shared: true })
            || self.state.input_seqs.is_empty()
        {
            return;
        }
        let mut shown: BTreeSet<&str> = self.tail.state_shown.iter().map(String::as_str).collect();
        if self.memory_update.is_some() {
            shown.extend(self.block.shown.iter().map(String::as_str));
        }
        let shown: Vec<MemoryId> = shown
            .into_iter()
            .filter_map(|id| MemoryId::parse(id).ok())
            .collect();
        let rt = Arc::clone(&self.rt);
        let bot = (*self.bot).clone();
        let (session, turn) = (self.session, self.turn);
        if let Some(texts) = &self.texts {
            // gathered while the turn ran: no transcript read
            if !texts.user.is_empty() {
                drop(spawn_extract_after_turn(
                    rt,
                    bot,
                    session,
                    turn,
                    shown,
                    texts.user.clone(),
                    texts.reply(),
                ));
            }
            return;
        }
        let inputs = self.state.input_seqs.clone();
        tokio::spawn(async move {
            match turn_texts(&rt, &bot, session, turn, &inputs).await {
                Ok((user_texts, _)) if user_texts.is_empty() => {}
                Ok((user_texts, reply)) => {
                    // detached: the extraction logs its own outcome
                    drop(spawn_extract_after_turn(
                        rt, bot, session, turn, shown, user_texts, reply,
                    ));
                }
                Err(e) => {
                    tracing::warn!(bot = %bot.id, turn = %turn, error = %e, "cannot read the turn for fact extraction; skipped");
                }
            }
        });
    }
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
            .filter(|e| e.author == bot.owner.as_str())
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

/// The owner's messages among the turn's inputs (`inputs` are their seqs)
/// and the turn's final reply: its deliveries, one after the other, or
/// when it delivered nothing its last non-empty assistant text.
async fn turn_texts(
    rt: &Runtime,
    bot: &BotRecord,
    session: SessionId,
    turn: TurnId,
    inputs: &[i64],
) -> Result<(Vec<String>, String), StoreError> {
    let from = inputs.iter().min().copied().unwrap_or(1).saturating_sub(1);
    let entries = rt.store.entries_after(session, from, i64::MAX).await?;
    let mut user_texts = Vec::new();
    let mut deliveries = Vec::new();
    let mut last_text = String::new();
    for e in entries
        .iter()
        .filter(|e| e.turn == Some(turn) || inputs.contains(&e.seq))
    {
        if let EntryKind::UserMessage { text } = &e.kind {
            if inputs.contains(&e.seq) && e.author == bot.owner.as_str() {
                user_texts.push(text.clone());
            }
        } else if let EntryKind::Delivery { text, .. } = &e.kind {
            deliveries.push(text.clone());
        } else if let EntryKind::Assistant { text, .. } = &e.kind
            && !text.trim().is_empty()
        {
            last_text = text.clone();
        }
    }
    let reply = if deliveries.is_empty() {
        last_text
    } else {
        deliveries.join("\n\n")
    };
    Ok((user_texts, reply))
}
