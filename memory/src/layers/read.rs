//! Memory reads. They go straight to the store's readers (WAL snapshots),
//! never through the scope actors.

use std::collections::BTreeSet;
use std::sync::Arc;

use rusqlite::Connection;
use rusqlite::params;

use super::apply::ITEM_COLUMNS;
use super::apply::forgotten_by_call;
use super::apply::forgotten_scope;
use super::apply::get_item;
use super::apply::item_from_row;
use super::apply::layer_items;
use super::recall::Candidate;
use super::recall::RecallParams;
use super::recall::ScoredEntry;
use super::recall::query_terms;
use super::recall::rank_candidates;
use super::scope_cache::ScopeContents;
use super::snapshot::MemorySnapshot;
use super::types::Importance;
use super::types::Layer;
use super::types::MemoryId;
use super::types::MemoryItem;
use super::types::MemoryScope;
use super::types::bot_scopes;
use super::types::comparison_key;
use super::types::normalize_text;
use crate::error::Result;
use crate::error::StoreError;
use crate::record::BotRecord;
use crate::store::Store;

/// Every item of one scope instance (all layers, expired notes
/// included), oldest first.
fn scope_items(conn: &Connection, scope: &MemoryScope) -> Result<Vec<MemoryItem>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ITEM_COLUMNS} FROM memory WHERE scope_kind = ?1 AND scope_id = ?2
         ORDER BY created_at, id"
    ))?;
    let mut rows = stmt.query(params![scope.kind().as_str(), scope.key()])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(item_from_row(row)?);
    }
    Ok(out)
}

/// The items of one scope instance written by `source` (all layers,
/// expired notes included), oldest first, each with its recall terms.
fn items_of_source(
    conn: &Connection,
    scope: &MemoryScope,
    source: &str,
) -> Result<Vec<(MemoryItem, String)>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ITEM_COLUMNS}, terms FROM memory
         WHERE scope_kind = ?1 AND scope_id = ?2 AND source = ?3
         ORDER BY created_at, id"
    ))?;
    let mut rows = stmt.query(params![scope.kind().as_str(), scope.key(), source])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push((item_from_row(row)?, row.get(10)?));
    }
    Ok(out)
}

/// The log entries of one scope instance as ranking candidates (their
/// stored terms, not their texts).
fn log_candidates(conn: &Connection, scope: &MemoryScope, out: &mut Vec<Candidate>) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, created_at, importance, terms FROM memory
         WHERE scope_kind = ?1 AND scope_id = ?2 AND layer = 'log'",
    )?;
    let mut rows = stmt.query(params![scope.kind().as_str(), scope.key()])?;
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        let importance: i64 = row.get(2)?;
        out.push(Candidate {
            id: MemoryId::parse(&id).map_err(|e| StoreError::Corrupt {
                table: "memory",
                detail: e.to_string(),
            })?,
            created_at: row.get(1)?,
            importance: u8::try_from(importance)
                .ok()
                .and_then(|v| Importance::new(v).ok())
                .unwrap_or_default(),
            terms: row.get(3)?,
        });
    }
    Ok(())
}

/// What lookup found for an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryLookup {
    /// The item exists (a note not past its expiry).
    Found(MemoryItem),
    /// It was forgotten; its scope is kept, its text is not.
    Forgotten(MemoryScope),
    /// A note past its expiry by the store's clock, purged or not yet:
    /// its scope is kept, its text is not shown.
    Expired {
        /// The scope it was in.
        scope: MemoryScope,
        /// When it expired (ms since the epoch).
        at: i64,
    },
    /// No item ever had this id.
    Unknown,
}

impl Store {
    async fn memory_read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.read_blocking(f))
            .await
            .map_err(|e| StoreError::Reader(e.to_string()))?
    }

    /// Every item of the given scopes (all layers; notes expired before
    /// `now_ms` left out), by scope order then oldest first.
    pub async fn memory_items(
        &self,
        scopes: Vec<MemoryScope>,
        now_ms: i64,
    ) -> Result<Vec<MemoryItem>> {
        self.memory_read(move |c| {
            let mut out = Vec::new();
            for s in &scopes {
                out.extend(
                    scope_items(c, s)?
                        .into_iter()
                        .filter(|i| !i.is_expired(now_ms)),
                );
            }
            Ok(out)
        })
        .await
    }

    /// An item by id, or whether it was forgotten or expired (a note
    /// past its expiry reads expired whether or not a write to its scope
    /// purged it yet, so no caller checks the time itself).
    pub async fn memory_lookup(&self, id: &MemoryId) -> Result<MemoryLookup> {
        let id = id.clone();
        let now = self.clock().now_ms();
        self.memory_read(move |c| {
            Ok(match get_item(c, &id)? {
                Some(item) => match item.expires_at.filter(|_| item.is_expired(now)) {
                    Some(at) => MemoryLookup::Expired {
                        scope: item.scope,
                        at,
                    },
                    None => MemoryLookup::Found(item),
                },
                None => match forgotten_scope(c, &id)? {
                    Some((scope, None)) => MemoryLookup::Forgotten(scope),
                    Some((scope, Some(at))) => MemoryLookup::Expired { scope, at },
                    None => MemoryLookup::Unknown,
                },
            })
        })
        .await
    }

    /// The items the tool call `call` forgot with
    /// [`MemoryOp::RemoveByCall`](super::MemoryOp::RemoveByCall), as
    /// (id, scope), by scope then id; their texts are not kept.
    pub async fn memory_forgotten_by(&self, call: &str) -> Result<Vec<(MemoryId, MemoryScope)>> {
        let call = call.to_owned();
        self.memory_read(move |c| forgotten_by_call(c, &call)).await
    }

    /// Items by id (those that exist), in the order given.
    pub async fn memory_items_by_id(&self, ids: Vec<MemoryId>) -> Result<Vec<MemoryItem>> {
        if ids.is_empty() {
            // nothing to read: no trip through the blocking pool
            return Ok(Vec::new());
        }
        self.memory_read(move |c| {
            let mut out = Vec::with_capacity(ids.len());
            for id in &ids {
                if let Some(item) = get_item(c, id)? {
                    out.push(item);
                }
            }
            Ok(out)
        })
        .await
    }

    /// The ids among `ids` that no longer exist (for
    /// [`super::MemoryDelta::between`]).
    pub async fn missing_memory_ids(&self, ids: Vec<MemoryId>) -> Result<BTreeSet<MemoryId>> {
        if ids.is_empty() {
            return Ok(BTreeSet::new());
        }
        self.memory_read(move |c| {
            let mut out = BTreeSet::new();
            for id in ids {
                if get_item(c, &id)?.is_none() {
                    out.insert(id);
                }
            }
            Ok(out)
        })
        .await
    }

    /// What a snapshot reads of `scope`: from the scope cache when the
    /// scope was not written since it was read, else from the store (and
    /// then cached).
    fn scope_contents(&self, c: &Connection, scope: &MemoryScope) -> Result<Arc<ScopeContents>> {
        let cache = self.memory_cache();
        let generation = match cache.get(scope) {
            Ok(contents) => return Ok(contents),
            Err(generation) => generation,
        };
        let mut log = Vec::new();
        log_candidates(c, scope, &mut log)?;
        let contents = Arc::new(ScopeContents {
            profile: layer_items(c, scope, Layer::Profile)?,
            notes: layer_items(c, scope, Layer::Notes)?,
            log,
        });
        cache.put(scope, generation, contents.clone());
        Ok(contents)
    }

    /// The snapshot of `scopes` for `input` at `now_ms`: every profile
    /// fact, the live notes, and the best log entries (see
    /// [`super::rank_log`]).
    pub async fn memory_snapshot(
        &self,
        scopes: Vec<MemoryScope>,
        input: String,
        now_ms: i64,
        params: RecallParams,
    ) -> Result<MemorySnapshot> {
        let query = query_terms(&input);
        let store = self.clone();
        self.memory_read(move |c| {
            let mut profile = Vec::new();
            let mut notes = Vec::new();
            let mut contents = Vec::with_capacity(scopes.len());
            for s in &scopes {
                let scope = store.scope_contents(c, s)?;
                profile.extend(scope.profile.iter().cloned());
                notes.extend(
                    scope
                        .notes
                        .iter()
                        .filter(|i| !i.is_expired(now_ms))
                        .cloned(),
                );
                contents.push(scope);
            }
            let candidates: Vec<&Candidate> = contents.iter().flat_map(|s| &s.log).collect();
            let mut ranking = Vec::new();
            for (i, f) in rank_candidates(&candidates, &query, now_ms, &params) {
                let Some(item) = get_item(c, &candidates[i].id)? else {
                    continue;
                };
                ranking.push(ScoredEntry {
                    item,
                    score: f.score,
                    relevance: f.relevance,
                    recency: f.recency,
                    weight: f.weight,
                });
            }
            Ok(MemorySnapshot::new(scopes, profile, ranking, notes, now_ms))
        })
        .await
    }

    /// The snapshot of the items of `scope` whose `source` is `source`
    /// (who wrote them, and where: see [`MemoryItem::source`]) for
    /// `input` at `now_ms`: those profile facts, those live notes, and the
    /// best of those log entries. What a turn shows where only what was
    /// written there may be shown (a bot's turn in a room shared with
    /// other people's bots). Read from the store each time, past the scope
    /// cache, which keeps no sources: such turns are few, and a scope at
    /// its limits is ~1,150 rows.
    pub async fn memory_snapshot_of_source(
        &self,
        scope: MemoryScope,
        source: String,
        input: String,
        now_ms: i64,
        params: RecallParams,
    ) -> Result<MemorySnapshot> {
        self.memory_snapshot_of_source_since(scope, source, None, input, now_ms, params)
            .await
    }

    /// [`Store::memory_snapshot_of_source`] without the items created
    /// before `since` (ms, the store's clock, that millisecond included;
    /// `None`: every item): a room
    /// given to more people at `since` (`Store::room_audience_since`)
    /// shows them none of what its members remembered there before.
    pub async fn memory_snapshot_of_source_since(
        &self,
        scope: MemoryScope,
        source: String,
        since: Option<i64>,
        input: String,
        now_ms: i64,
        params: RecallParams,
    ) -> Result<MemorySnapshot> {
        let query = query_terms(&input);
        self.memory_read(move |c| {
            let mut profile = Vec::new();
            let mut notes = Vec::new();
            let mut log = Vec::new();
            let mut candidates = Vec::new();
            for (item, terms) in items_of_source(c, &scope, &source)? {
                // one of the same millisecond as the change counts as
                // before it: the side that shows nothing it should not
                if since.is_some_and(|since| item.created_at <= since) {
                    continue;
                }
                match item.layer {
                    Layer::Profile => profile.push(item),
                    Layer::Notes if item.is_expired(now_ms) => {}
                    Layer::Notes => notes.push(item),
                    Layer::Log => {
                        candidates.push(Candidate {
                            id: item.id.clone(),
                            created_at: item.created_at,
                            importance: item.importance,
                            terms,
                        });
                        log.push(item);
                    }
                }
            }
            let refs: Vec<&Candidate> = candidates.iter().collect();
            let ranking = rank_candidates(&refs, &query, now_ms, &params)
                .into_iter()
                .map(|(i, f)| ScoredEntry {
                    item: log[i].clone(),
                    score: f.score,
                    relevance: f.relevance,
                    recency: f.recency,
                    weight: f.weight,
                })
                .collect();
            Ok(MemorySnapshot::new(
                vec![scope],
                profile,
                ranking,
                notes,
                now_ms,
            ))
        })
        .await
    }

    /// The snapshot of every scope `bot` reaches (agent, its owner, its
    /// projects) for `input` at `now_ms`, with the default recall.
    pub async fn bot_memory_snapshot(
        &self,
        bot: &BotRecord,
        input: &str,
        now_ms: i64,
    ) -> Result<MemorySnapshot> {
        self.memory_snapshot(
            bot_scopes(bot),
            input.to_owned(),
            now_ms,
            RecallParams::default(),
        )
        .await
    }

    /// Live items of `scopes` whose text contains `text` (case and
    /// whitespace ignored), in every layer: what "forget X" should remove.
    pub async fn find_memory(
        &self,
        scopes: Vec<MemoryScope>,
        text: &str,
        now_ms: i64,
    ) -> Result<Vec<MemoryItem>> {
        let needle = comparison_key(&normalize_text(text));
        if needle.is_empty() {
            return Ok(Vec::new());
        }
        let items = self.memory_items(scopes, now_ms).await?;
        Ok(items
            .into_iter()
            .filter(|i| comparison_key(&i.text).contains(&needle))
            .collect())
    }
}
