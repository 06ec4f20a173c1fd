//! For benches only, not a stable API: may change or go away with any
//! release.
//!
//! Exposes the turn engine's per-session context (the private
//! `SessionTail`) so `benches/context.rs` can time what every model call of
//! a turn does — the token total from cached per-message counts and the
//! request assembled from the context — without a store or a model.
//! Everything here calls the engine's own functions; nothing is copied.

use std::sync::Arc;

use botfleet_memory::Encoding;
use botfleet_memory::Entry;
use botfleet_memory::SessionId;

use crate::engine::SessionTail;
use crate::model::ModelRequest;
use crate::model::Purpose;
use crate::model::ToolSpec;
use crate::runtime::StateBlock;

/// One session's context as a bot keeps it between turns.
#[derive(Debug, Clone)]
pub struct BenchTail {
    tail: SessionTail,
    bot: String,
    specs: Vec<Arc<ToolSpec>>,
    memory_update: Option<String>,
    memory_update_at: Option<usize>,
}

impl BenchTail {
    /// A context loaded from `entries` (all of `session`, in seq order), as
    /// the engine loads it from the store: system message = `identity` +
    /// `state`, then the entries. No token is counted yet.
    pub fn from_entries(
        session: SessionId,
        identity: &str,
        state: &StateBlock,
        entries: &[Entry],
        encoding: Encoding,
    ) -> Self {
        let mut tail = SessionTail::new(session);
        tail.fill(None, identity, state, None, entries, encoding);
        Self {
            tail,
            bot: "bench".to_owned(),
            specs: Vec::new(),
            memory_update: None,
            memory_update_at: None,
        }
    }

    /// Tools offered with each request.
    pub fn set_tools(&mut self, specs: Vec<ToolSpec>) {
        self.specs = specs.into_iter().map(Arc::new).collect();
    }

    /// A memory update (memory changed inside the epoch) sent after the
    /// turn's inputs in each request (where the next request puts it), or
    /// none.
    pub fn set_memory_update(&mut self, update: Option<String>) {
        self.memory_update = update;
        self.memory_update_at = None;
    }

    /// Appends a new entry (ignored when its seq is not past the loaded ones).
    pub fn push(&mut self, entry: &Entry) {
        self.tail.push(entry);
    }

    /// Tokens of the whole context; counts only messages not counted before.
    pub fn tokens(&mut self) -> u64 {
        self.tail.tokens()
    }

    /// Messages in the context.
    pub fn len(&self) -> usize {
        self.tail.len()
    }

    /// Whether the context holds no message (never: the system message is
    /// always there).
    pub fn is_empty(&self) -> bool {
        self.tail.len() == 0
    }

    /// What a model call does before sending: the token total (the
    /// compaction check) and the request built from the context. Give the
    /// request back with [`BenchTail::restore`].
    pub fn assemble(&mut self) -> (u64, ModelRequest) {
        let tokens = self.tail.tokens();
        let messages = self
            .tail
            .take_request(self.memory_update.as_deref(), &mut self.memory_update_at);
        let request = ModelRequest {
            purpose: Purpose::Turn,
            bot: self.bot.clone(),
            messages,
            tools: std::mem::take(&mut self.specs),
            max_tokens: None,
        };
        (tokens, request)
    }

    /// What a model call does after the response: the context takes its
    /// messages back.
    pub fn restore(&mut self, request: ModelRequest) {
        let update_at = self.memory_update.as_ref().and(self.memory_update_at);
        self.tail.restore_request(request.messages, update_at);
        self.specs = request.tools;
    }
}

#[cfg(test)]
mod tests {
    use botfleet_memory::BotId;
    use botfleet_memory::EntryId;
    use botfleet_memory::EntryKind;

    use super::*;
    use crate::model::ChatMessage;

    fn entry(session: SessionId, seq: i64, text: &str) -> Entry {
        Entry {
            id: EntryId::new_v7(),
            session,
            seq,
            gid: seq,
            author: "alice".into(),
            turn: None,
            created_at: 0,
            kind: EntryKind::UserMessage { text: text.into() },
        }
    }

    #[test]
    fn assembles_like_the_engine_and_gives_the_context_back() {
        let bot = BotId::new("b").unwrap();
        let session = SessionId::derive(&bot, "dm", "alice");
        let entries = vec![entry(session, 1, "hello"), entry(session, 2, "how are you")];
        let state = StateBlock::default();
        let mut tail =
            BenchTail::from_entries(session, "You are b.", &state, &entries, Encoding::O200kBase);
        // the system message, and each input after its time note
        assert_eq!(tail.len(), 5);
        let total = tail.tokens();
        assert!(total > 12, "{total}");

        tail.set_memory_update(Some("the user moved to Lisbon".into()));
        let (tokens, request) = tail.assemble();
        assert_eq!(tokens, total);
        // consecutive user messages go as one (engine/request.rs)
        assert_eq!(request.messages.len(), 2);
        assert_eq!(
            request.messages.last(),
            Some(&ChatMessage::User {
                content: "[time: Thursday 1970-01-01 00:00 (UTC)]\n\nhello\n\n\
                          [time: Thursday 1970-01-01 00:00 (UTC)]\n\nhow are you\n\n\
                          the user moved to Lisbon"
                    .into()
            })
        );
        tail.restore(request);
        assert_eq!(tail.len(), 5);
        assert_eq!(tail.tokens(), total);

        // an entry already loaded is ignored; a new one is counted once
        tail.push(&entries[1]);
        assert_eq!(tail.len(), 5);
        tail.push(&entry(session, 3, "fine"));
        assert_eq!(tail.len(), 7);
        assert!(tail.tokens() > total);
    }
}
