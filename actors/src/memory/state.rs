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
use crate::runtime::MemoryReach;
use crate::runtime::StateBlock;
use crate::runtime::StateProvider;

/// Supplies a bot's memory snapshot, rendered through `prompts/memory.md`,
/// as the state block of its prompt. Install it with
/// `Runtime::set_state_provider(Arc::new(MemoryState::new(store)))`.
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
        let scopes = match reach {
            MemoryReach::All => bot_scopes(bot),
            MemoryReach::OwnOnly => vec![MemoryScope::Agent(bot.id.clone())],
        };
        let snapshot = self
            .store
            .memory_snapshot(scopes, input.to_owned(), now, RecallParams::default())
            .await;
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
