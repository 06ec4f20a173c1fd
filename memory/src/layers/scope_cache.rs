//! What a memory snapshot reads of each scope instance, kept between
//! turns: its profile, its notes and its log entries as ranking
//! candidates. A snapshot at the limits read ~3,300 rows per turn; with a
//! scope unchanged since the last turn it now reads only the ~30 log
//! entries the ranking picks.
//!
//! Freshness: every scope instance has a generation, bumped by the store
//! writer after a commit that wrote to it and before any caller of that
//! commit is answered. A reader takes the generation *before* it reads the
//! rows and files what it read under it, so a write committed meanwhile
//! either is in those rows or makes the entry stale at once; a write that
//! was answered is always seen by the next snapshot.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::recall::Candidate;
use super::types::MemoryItem;
use super::types::MemoryScope;

/// Scope instances kept at most, and items (facts, notes, log candidates)
/// across them; past either the cache starts over (a cold snapshot costs
/// one read of the scope, nothing else). Most scopes are small (a fleet of
/// 1,000 bots has 1,000 agent scopes); 200,000 items is ~60 scopes at the
/// limits, some tens of MB.
const MAX_SCOPES: usize = 8192;
const MAX_ITEMS: usize = 200_000;

/// Generation of each scope instance's memory (0: never written by this
/// process).
#[derive(Debug, Default)]
pub(crate) struct MemoryGenerations {
    map: Mutex<HashMap<MemoryScope, u64>>,
}

impl MemoryGenerations {
    pub(crate) fn get(&self, scope: &MemoryScope) -> u64 {
        self.map.lock().get(scope).copied().unwrap_or(0)
    }

    /// Marks `scopes` as written (called by the writer after the commit,
    /// before answering).
    pub(crate) fn bump<'a>(&self, scopes: impl IntoIterator<Item = &'a MemoryScope>) {
        let mut scopes = scopes.into_iter().peekable();
        if scopes.peek().is_none() {
            return;
        }
        let mut map = self.map.lock();
        for scope in scopes {
            *map.entry(scope.clone()).or_insert(0) += 1;
        }
    }
}

/// One scope instance as a snapshot reads it.
#[derive(Debug)]
pub(crate) struct ScopeContents {
    /// Profile facts, oldest first.
    pub(crate) profile: Vec<MemoryItem>,
    /// Notes, expired ones included (filtered at use), oldest first.
    pub(crate) notes: Vec<MemoryItem>,
    /// Log entries as ranking candidates (stored terms, no texts).
    pub(crate) log: Vec<Candidate>,
}

/// The contents of recently read scope instances, each filed under the
/// generation it was read at.
#[derive(Debug)]
pub(crate) struct ScopeCache {
    generations: Arc<MemoryGenerations>,
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<MemoryScope, (u64, Arc<ScopeContents>)>,
    /// Items across `map`.
    items: usize,
}

impl ScopeContents {
    fn items(&self) -> usize {
        self.profile.len() + self.notes.len() + self.log.len()
    }
}

impl ScopeCache {
    pub(crate) fn new(generations: Arc<MemoryGenerations>) -> Self {
        Self {
            generations,
            entries: Mutex::new(Entries::default()),
        }
    }

    /// The cached contents of `scope` if still current; otherwise the
    /// generation to file a fresh read under (take it before reading).
    pub(crate) fn get(&self, scope: &MemoryScope) -> Result<Arc<ScopeContents>, u64> {
        let current = self.generations.get(scope);
        match self.entries.lock().map.get(scope) {
            Some((generation, contents)) if *generation == current => Ok(contents.clone()),
            _ => Err(current),
        }
    }

    /// Files `contents`, read at `generation`.
    pub(crate) fn put(&self, scope: &MemoryScope, generation: u64, contents: Arc<ScopeContents>) {
        let mut entries = self.entries.lock();
        let added = contents.items();
        if let Some((_, old)) = entries.map.remove(scope) {
            entries.items -= old.items();
        }
        if entries.map.len() >= MAX_SCOPES || entries.items + added > MAX_ITEMS {
            entries.map.clear();
            entries.items = 0;
        }
        entries.items += added;
        entries.map.insert(scope.clone(), (generation, contents));
    }
}

#[cfg(test)]
#[path = "scope_cache_tests.rs"]
mod tests;
