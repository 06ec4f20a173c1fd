//! What a bot's prompt holds of memory at one moment, and what changed
//! since.
//!
//! A [`MemorySnapshot`] is structured data in a deterministic order (the
//! actors crate renders it through `prompts/memory.md`); its
//! [`MemorySnapshot::hash`] is a SHA-256 over everything rendering may
//! show, so equal hashes mean byte-identical rendered memory. Within a
//! compaction epoch the prompt keeps the snapshot it started with;
//! [`MemoryDelta::between`] says what changed since, for a short update at
//! the end of the context, and whether the change must reach the prefix
//! at once ([`MemoryDelta::requires_refresh`]: something shown was
//! forgotten or removed, and a forgotten fact may not stay in the prompt).

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;
use sha2::Sha256;

use super::recall::ScoredEntry;
use super::types::MemoryId;
use super::types::MemoryItem;
use super::types::MemoryScope;

/// Memory as one prompt shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemorySnapshot {
    /// The scopes it covers, in prompt order (agent, user, projects).
    pub scopes: Vec<MemoryScope>,
    /// Every profile fact of those scopes: by scope order, then oldest
    /// first.
    pub profile: Vec<MemoryItem>,
    /// The log entries chosen for the input (best `cap` by relevance ×
    /// recency × importance), shown oldest first.
    pub log: Vec<MemoryItem>,
    /// Live notes at `taken_at`: by scope order, then oldest first.
    pub notes: Vec<MemoryItem>,
    /// The chosen log entries with their scores, best first (for
    /// debugging and the API; not rendered).
    pub ranking: Vec<ScoredEntry>,
    /// When it was taken (ms). Not rendered and not hashed.
    pub taken_at: i64,
    /// Hex SHA-256 of the rendered content (see the module docs).
    pub hash: String,
}

impl MemorySnapshot {
    /// Builds a snapshot from the chosen items (orders them and hashes).
    pub(crate) fn new(
        scopes: Vec<MemoryScope>,
        mut profile: Vec<MemoryItem>,
        ranking: Vec<ScoredEntry>,
        mut notes: Vec<MemoryItem>,
        taken_at: i64,
    ) -> Self {
        let rank: BTreeMap<&MemoryScope, usize> =
            scopes.iter().enumerate().map(|(i, s)| (s, i)).collect();
        let by_scope = |a: &MemoryItem, b: &MemoryItem| {
            rank.get(&a.scope)
                .cmp(&rank.get(&b.scope))
                .then(a.created_at.cmp(&b.created_at))
                .then_with(|| a.id.cmp(&b.id))
        };
        profile.sort_by(by_scope);
        notes.sort_by(by_scope);
        let mut log: Vec<MemoryItem> = ranking.iter().map(|s| s.item.clone()).collect();
        log.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        let hash = content_hash(&profile, &log, &notes);
        Self {
            scopes,
            profile,
            log,
            notes,
            ranking,
            taken_at,
            hash,
        }
    }

    /// Ids of every item shown, in rendering order (profile, log, notes):
    /// what fact extraction may replace or remove after this turn.
    pub fn shown_ids(&self) -> Vec<MemoryId> {
        self.items().map(|i| i.id.clone()).collect()
    }

    /// Every item shown, in rendering order.
    pub fn items(&self) -> impl Iterator<Item = &MemoryItem> {
        self.profile.iter().chain(&self.log).chain(&self.notes)
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.profile.is_empty() && self.log.is_empty() && self.notes.is_empty()
    }
}

/// Hex SHA-256 over every field rendering may use, in rendering order.
fn content_hash(profile: &[MemoryItem], log: &[MemoryItem], notes: &[MemoryItem]) -> String {
    let mut h = Sha256::new();
    for (section, items) in [("profile", profile), ("log", log), ("notes", notes)] {
        h.update(section.as_bytes());
        h.update([0x1e]);
        for i in items {
            // a profile fact shows the UTC day it was last set: hash the
            // day, so a fact set again on the same day renders the same
            let line = format!(
                "{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1e}",
                i.id,
                i.scope,
                i.layer,
                i.importance.get(),
                i.created_at,
                i.updated_at.div_euclid(86_400_000),
                i.expires_at.map(|t| t.to_string()).unwrap_or_default(),
                i.text
            );
            h.update(line.as_bytes());
        }
    }
    hex::encode(h.finalize())
}

/// What changed between a snapshot a prompt holds and a newer one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryDelta {
    /// New items: profile facts and notes not shown before, log entries
    /// written after the older snapshot was taken that made the cut.
    pub added: Vec<MemoryItem>,
    /// Items shown before whose text or importance changed: (old, new).
    pub changed: Vec<(MemoryItem, MemoryItem)>,
    /// Items shown before that no longer exist (forgotten or removed).
    pub removed: Vec<MemoryItem>,
    /// Notes shown before whose expiry has passed.
    pub expired: Vec<MemoryItem>,
}

impl MemoryDelta {
    /// Compares `older` (what the prompt shows) with `newer` (taken now
    /// for the same scopes). `missing` are the ids of `older`'s items that
    /// no longer exist in the store (see `Store::missing_memory_ids`): a
    /// log entry missing from `newer` may only have become less relevant,
    /// so only these count as removed.
    pub fn between(
        older: &MemorySnapshot,
        newer: &MemorySnapshot,
        missing: &BTreeSet<MemoryId>,
    ) -> Self {
        let new_items: BTreeMap<&MemoryId, &MemoryItem> =
            newer.items().map(|i| (&i.id, i)).collect();
        let old_ids: BTreeSet<&MemoryId> = older.items().map(|i| &i.id).collect();
        let mut delta = MemoryDelta::default();
        for old in older.items() {
            match new_items.get(&old.id) {
                Some(new) if new.text != old.text || new.importance != old.importance => {
                    delta.changed.push((old.clone(), (*new).clone()));
                }
                Some(_) => {}
                None if old.is_expired(newer.taken_at) => delta.expired.push(old.clone()),
                None if missing.contains(&old.id) => delta.removed.push(old.clone()),
                None => {}
            }
        }
        for new in newer.profile.iter().chain(&newer.notes) {
            if !old_ids.contains(&new.id) {
                delta.added.push(new.clone());
            }
        }
        for new in &newer.log {
            if !old_ids.contains(&new.id) && new.created_at > older.taken_at {
                delta.added.push(new.clone());
            }
        }
        delta
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.changed.is_empty()
            && self.removed.is_empty()
            && self.expired.is_empty()
    }

    /// Whether the prompt must drop its snapshot now instead of carrying
    /// an update to the next epoch: an item it shows was forgotten,
    /// removed or expired, and such an item must leave the prompt from the
    /// next turn on (the price is one prompt-cache miss).
    pub fn requires_refresh(&self) -> bool {
        !self.removed.is_empty() || !self.expired.is_empty()
    }
}
