//! Memory as the engine's long-lived state block ([`StateProvider`]).

use async_trait::async_trait;
use botfleet_memory::BotRecord;
use botfleet_memory::MemoryScope;
use botfleet_memory::RecallParams;
use botfleet_memory::Store;
use botfleet_memory::bot_scopes;
use sha2::Digest;
use sha2::Sha256;

use super::render::render_memory;
use super::tool_source;
use crate::runtime::MemoryReach;
use crate::runtime::StateBlock;
use crate::runtime::StateProvider;

/// Supplies a bot's memory snapshot, rendered through `prompts/memory.md`,
/// as the state block of its prompt. Install it with
/// `Runtime::set_state_provider(Arc::new(MemoryState::new(store)))`.
///
/// In a room shared with other people's bots ([`MemoryReach::SharedRoom`])
/// the block shows only what the bot remembered in that room
/// ([`super::tool_source`]): not its owner's or its projects' memory, nor
/// its own written anywhere else — a DM, another room, a routine, a
/// hook, a task, fact extraction, the API.
///
/// The block is empty when the bot remembers nothing. Its hash is the
/// SHA-256 of the rendered text, which changes exactly when the shown
/// items change (log entries are shown oldest first, so a different
/// ranking of the same entries does not change it). A failed read logs
/// and answers an empty block: memory never fails a turn.
#[derive(Debug, Clone)]
pub struct MemoryState {
    store: Store,
}

impl MemoryState {
    /// A provider reading `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

#[async_trait]
impl StateProvider for MemoryState {
    async fn state_block(&self, bot: &BotRecord, input: &str, reach: MemoryReach) -> StateBlock {
        let now = self.store.clock().now_ms();
        let input = input.to_owned();
        let params = RecallParams::default();
        let snapshot = match reach {
            MemoryReach::All => {
                self.store
                    .memory_snapshot(bot_scopes(bot), input, now, params)
                    .await
            }
            // only what the bot remembered in this room: its agent scope
            // also holds what people told it elsewhere, in private
            MemoryReach::SharedRoom(room) => {
                self.store
                    .memory_snapshot_of_source(
                        MemoryScope::Agent(bot.id.clone()),
                        tool_source(&bot.id, Some(&room)),
                        input,
                        now,
                        params,
                    )
                    .await
            }
        };
        match snapshot {
            Ok(snapshot) if snapshot.is_empty() => StateBlock::default(),
            Ok(snapshot) => {
                let text = render_memory(&snapshot);
                StateBlock {
                    hash: Sha256::digest(text.as_bytes()).into(),
                    shown: snapshot.shown_ids().into_iter().map(String::from).collect(),
                    text,
                }
            }
            Err(e) => {
                tracing::warn!(bot = %bot.id, error = %e, "memory snapshot failed; the prompt goes without memory");
                StateBlock::default()
            }
        }
    }
}
