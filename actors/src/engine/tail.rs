//! A session's context kept in memory by its bot between turns.

use std::collections::HashSet;

use botfleet_memory::Entry;
use botfleet_memory::SessionId;
use botfleet_memory::SessionRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreError;

use super::context::ContextBuilder;

/// The rendered context of one session and what it already holds.
#[derive(Debug)]
pub(crate) struct SessionTail {
    pub(crate) session: SessionId,
    pub(crate) context: ContextBuilder,
    /// The session's record (loaded with the tail).
    pub(crate) record: Option<SessionRecord>,
    /// Highest seq read from the store by the last load.
    loaded_upto: Option<i64>,
    /// Seqs pushed after the load (inputs and the turns' own entries).
    pushed: HashSet<i64>,
    /// Entries since the last load.
    since_load: usize,
}

impl SessionTail {
    /// An empty tail that loads from the store before first use.
    pub(crate) fn new(session: SessionId) -> Self {
        Self {
            session,
            context: ContextBuilder::new(String::new()),
            record: None,
            loaded_upto: None,
            pushed: HashSet::new(),
            since_load: 0,
        }
    }

    /// Whether the tail must (re)load before a turn: never loaded, or grown
    /// past twice the window (then it is rebuilt from the newest `window`
    /// entries).
    pub(crate) fn needs_load(&self, window: usize) -> bool {
        self.loaded_upto.is_none() || self.since_load > window.max(1)
    }

    /// Loads the newest `window` entries of the session.
    pub(crate) async fn load(
        &mut self,
        store: &Store,
        system: &str,
        window: usize,
    ) -> Result<(), StoreError> {
        if self.record.is_none() {
            self.record = store.get_session(self.session).await?;
        }
        let entries = store.tail_entries(self.session, window as i64).await?;
        let mut context = ContextBuilder::new(system.to_owned());
        for e in &entries {
            context.push(e);
        }
        self.context = context;
        self.loaded_upto = Some(entries.last().map(|e| e.seq).unwrap_or(0));
        self.pushed.clear();
        self.since_load = 0;
        Ok(())
    }

    /// Appends an entry unless the tail already holds it.
    pub(crate) fn push(&mut self, entry: &Entry) {
        if entry.session != self.session {
            return;
        }
        let Some(upto) = self.loaded_upto else {
            return;
        };
        if entry.seq <= upto || !self.pushed.insert(entry.seq) {
            return;
        }
        self.context.push(entry);
        self.since_load += 1;
    }
}
