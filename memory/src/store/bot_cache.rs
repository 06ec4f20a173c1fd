//! Bot records kept between reads. A bot record is read on every
//! activation, every SendToAgent (its target) and every delegation, and
//! written almost never (`Mutation::UpsertBot`), so the store keeps the
//! records it read, all filed under one generation that the writer bumps
//! after committing any bot write and before answering anyone: a reader
//! takes the generation *before* it reads, so a record read while a write
//! committed is stale at once, and a write that was answered is seen by
//! every read after it.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use crate::ids::BotId;
use crate::record::BotRecord;

/// Records kept at most; past it the cache starts over.
const MAX_BOTS: usize = 65_536;

/// The generation of the bots table and the records read under it.
#[derive(Debug, Default)]
pub(crate) struct BotCache {
    generation: AtomicU64,
    records: Mutex<(u64, HashMap<BotId, BotRecord>)>,
}

impl BotCache {
    /// The generation to file a read under (take it before reading).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Marks every record stale (the writer, after a bot write commits).
    pub(crate) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The record of `id` if it was read at the current generation.
    pub(crate) fn get(&self, id: &BotId) -> Option<BotRecord> {
        let now = self.generation();
        let records = self.records.lock();
        if records.0 != now {
            return None;
        }
        records.1.get(id).cloned()
    }

    /// Keeps `record`, read at `generation`.
    pub(crate) fn put(&self, generation: u64, record: &BotRecord) {
        let mut records = self.records.lock();
        if records.0 != generation {
            if generation < records.0 {
                // read before a write the cache already knows of
                return;
            }
            *records = (generation, HashMap::new());
        }
        if records.1.len() >= MAX_BOTS {
            records.1.clear();
        }
        records.1.insert(record.id.clone(), record.clone());
    }
}
