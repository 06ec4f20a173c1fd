//! Memory as the engine's long-lived state block ([`StateProvider`]).

use async_trait::async_trait;
use botfleet_memory::BotRecord;
use botfleet_memory::MemoryScope;
use botfleet_memory::MemorySnapshot;
use botfleet_memory::RecallParams;
use botfleet_memory::RoomId;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::bot_scopes;
use sha2::Digest;
use sha2::Sha256;

use std::collections::HashMap;

use super::render::memory_budget;
use super::render::render_memory_within;
use super::tool_source;
use crate::runtime::MemoryReach;
use crate::runtime::StateBlock;
use crate::runtime::StateProvider;
use crate::settings::ContextSettings;
use crate::settings::FleetSettings;

/// Supplies a bot's memory snapshot, rendered through `prompts/memory.md`,
/// as the state block of its prompt. Install it with
/// `Runtime::set_state_provider(Arc::new(MemoryState::new(store)))`.
///
/// In a room shared with other people's bots ([`MemoryReach::SharedRoom`])
/// the block shows only what the bot remembered in that room
/// ([`super::tool_source`]): not its owner's or its projects' memory, nor
/// its own written anywhere else — a DM, another room, a routine, a
/// hook, a task, fact extraction, the API — and of that, only what it
/// remembered since the room was last given to more people (a change of
/// members or of a member's owner: `Store::room_audience_since`), not
/// what it remembered while the room was its owner's alone.
///
/// The block's items take at most `memory_budget(compact_at_tokens)`
/// tokens of the bot's provider, the headings and the left-out note on
/// top (`render_memory_within`: profile facts first, then the most
/// important items, and how many were left out), so however much a bot
/// remembers, its prompt stays within what compaction can keep under the
/// threshold.
///
/// [`MemoryState::preview`] renders the same block for the API's preview
/// (`GET /v1/bots/{bot}/memory?input=…`), with what it left out.
///
/// The block is empty when the bot remembers nothing. Its hash is the
/// SHA-256 of the rendered text, which changes exactly when the shown
/// items change (log entries are shown oldest first, so a different
/// ranking of the same entries does not change it). A failed read logs
/// and answers an empty block: memory never fails a turn.
#[derive(Debug, Clone)]
pub struct MemoryState {
    store: Store,
    /// The context settings of each provider, for the block's budget.
    context: HashMap<String, ContextSettings>,
    /// Those of a provider not in `context`.
    default_context: ContextSettings,
}

impl MemoryState {
    /// A provider reading `store`, bounding blocks by the default context
    /// settings (see [`MemoryState::bounded_by`]).
    pub fn new(store: Store) -> Self {
        Self {
            store,
            context: HashMap::new(),
            default_context: ContextSettings::default(),
        }
    }

    /// Bounds each bot's block by its provider's `compact_at_tokens` (and
    /// counts it with that provider's encoding), as `settings` has them.
    pub fn bounded_by(mut self, settings: &FleetSettings) -> Self {
        self.context = settings.context.clone();
        self.default_context = settings.default_context.clone();
        self
    }
}

/// A bot's memory block as a turn renders it for an input
/// ([`MemoryState::preview`]), and what it was cut from: what
/// `GET /v1/bots/{bot}/memory?input=…` and `botfleet memory BOT --input`
/// report, so the operator is told what the prompt holds, not what it
/// could hold.
#[derive(Debug, Clone)]
pub struct MemoryPreview {
    /// The block, its hash and the ids it shows, as the turn's prompt
    /// gets them (empty when the bot remembers nothing).
    pub block: StateBlock,
    /// What the block was cut from: every profile fact and live note, and
    /// the log entries recalled for the input (`ranking`, best first);
    /// those not among `block.shown` are left out of the prompt.
    pub snapshot: MemorySnapshot,
}

impl MemoryState {
    /// The block a turn of `bot` with `input` would get where `reach`
    /// holds, rendered by the same code as [`StateProvider::state_block`],
    /// with what it was cut from. A failed read is an error here (the
    /// caller reports it), where a turn goes on without memory.
    pub async fn preview(
        &self,
        bot: &BotRecord,
        input: &str,
        reach: MemoryReach,
    ) -> Result<MemoryPreview, StoreError> {
        let snapshot = self.snapshot(bot, input, reach).await?;
        let block = self.block_of(bot, &snapshot);
        Ok(MemoryPreview { block, snapshot })
    }

    /// The snapshot a turn of `bot` with `input` renders where `reach`
    /// holds.
    async fn snapshot(
        &self,
        bot: &BotRecord,
        input: &str,
        reach: MemoryReach,
    ) -> Result<MemorySnapshot, StoreError> {
        let now = self.store.clock().now_ms();
        let input = input.to_owned();
        let params = RecallParams::default();
        match reach {
            MemoryReach::All => {
                self.store
                    .memory_snapshot(bot_scopes(bot), input, now, params)
                    .await
            }
            // only what the bot remembered in this room: its agent scope
            // also holds what people told it elsewhere, in private; and
            // only since the room was last given to more people: what it
            // remembered there before was its owner's room's
            MemoryReach::SharedRoom(room) => {
                let since = match RoomId::new(&room) {
                    Ok(id) => self.store.room_audience_since(&id).await?,
                    Err(_) => None,
                };
                self.store
                    .memory_snapshot_of_source_since(
                        MemoryScope::Agent(bot.id.clone()),
                        tool_source(&bot.id, Some(&room)),
                        since,
                        input,
                        now,
                        params,
                    )
                    .await
            }
        }
    }

    /// The context settings of `bot`'s provider.
    fn settings_of(&self, bot: &BotRecord) -> &ContextSettings {
        self.context
            .get(&bot.provider)
            .unwrap_or(&self.default_context)
    }

    /// `snapshot` as the prompt's block, within the budget of `bot`'s
    /// provider; empty when the bot remembers nothing.
    fn block_of(&self, bot: &BotRecord, snapshot: &MemorySnapshot) -> StateBlock {
        if snapshot.is_empty() {
            return StateBlock::default();
        }
        let ctx = self.settings_of(bot);
        let (text, shown) =
            render_memory_within(snapshot, memory_budget(ctx.compact_at_tokens), ctx.encoding);
        StateBlock {
            hash: Sha256::digest(text.as_bytes()).into(),
            shown: shown.into_iter().map(String::from).collect(),
            text,
        }
    }
}

#[async_trait]
impl StateProvider for MemoryState {
    async fn state_block(&self, bot: &BotRecord, input: &str, reach: MemoryReach) -> StateBlock {
        match self.snapshot(bot, input, reach).await {
            Ok(snapshot) => self.block_of(bot, &snapshot),
            Err(e) => {
                tracing::warn!(bot = %bot.id, error = %e, "memory snapshot failed; the prompt goes without memory");
                StateBlock::default()
            }
        }
    }
}
