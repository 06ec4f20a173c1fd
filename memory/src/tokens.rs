//! Token counts with tiktoken-rs. The BPE tables are built once per
//! process (tiktoken-rs singletons); counts are cached by the caller per
//! transcript entry, so each entry is counted once, and by text in a
//! bounded process-wide cache ([`CountCache`]), so a text seen again (a
//! session's context rebuilt after its window filled, one public room
//! message in six members' contexts, the same tool call in every bot)
//! is not encoded again.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::hash::Hash;
use std::hash::Hasher;
use std::hash::RandomState;
use std::sync::LazyLock;

use parking_lot::Mutex;
use serde::Deserialize;
use serde::Serialize;

/// A tokenizer encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// GPT-4o / o-series / Grok-compatible (the default).
    #[default]
    O200kBase,
    /// GPT-4 / GPT-3.5.
    Cl100kBase,
}

impl Encoding {
    /// Parses a config value (`o200k_base`, `cl100k_base`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "o200k_base" => Some(Encoding::O200kBase),
            "cl100k_base" => Some(Encoding::Cl100kBase),
            _ => None,
        }
    }

    /// Tokens in `text` (special-token text counts as ordinary text).
    pub fn count(self, text: &str) -> u32 {
        if text.is_empty() {
            return 0;
        }
        let key = COUNTS.key(self, text);
        if let Some(n) = COUNTS.get(key) {
            return n;
        }
        let n = self.encode_count(text);
        COUNTS.put(key, n);
        n
    }

    /// Empties the process-wide cache of counts (benchmarks time uncached
    /// counts with it; counting stays correct either way).
    pub fn clear_cache() {
        for shard in &COUNTS.shards {
            shard.lock().clear();
        }
    }

    /// Tokens in `text`, always encoding it (no cache).
    pub fn encode_count(self, text: &str) -> u32 {
        let bpe = match self {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        };
        u32::try_from(bpe.encode_ordinary(text).len()).unwrap_or(u32::MAX)
    }

    /// Tokens of one chat message: its text plus the per-message framing
    /// (role and separators) that chat formats add, about 4 tokens.
    pub fn count_message(self, text: &str) -> u32 {
        self.count(text).saturating_add(4)
    }
}

/// Cached counts: 16 shards of at most [`SHARD_CAPACITY`] texts each; a
/// full shard is emptied (counts are cheap to redo, the bound is what
/// matters). Keys are a keyed 64-bit hash of the encoding and the text plus
/// the text's length: two texts share a count only if both collide, and
/// then the cost is one message's token estimate, never a wrong byte sent.
struct CountCache {
    hasher: RandomState,
    shards: [Mutex<HashMap<(u64, usize), u32>>; 16],
}

const SHARD_CAPACITY: usize = 4096;

static COUNTS: LazyLock<CountCache> = LazyLock::new(|| CountCache {
    hasher: RandomState::new(),
    shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
});

impl CountCache {
    fn key(&self, encoding: Encoding, text: &str) -> (u64, usize) {
        let mut h = self.hasher.build_hasher();
        encoding.hash(&mut h);
        text.hash(&mut h);
        (h.finish(), text.len())
    }

    fn shard(&self, key: (u64, usize)) -> &Mutex<HashMap<(u64, usize), u32>> {
        // the top bits: the map itself uses the low ones
        &self.shards[(key.0 >> 60) as usize]
    }

    fn get(&self, key: (u64, usize)) -> Option<u32> {
        self.shard(key).lock().get(&key).copied()
    }

    fn put(&self, key: (u64, usize), n: u32) {
        let mut shard = self.shard(key).lock();
        if shard.len() >= SHARD_CAPACITY {
            shard.clear();
        }
        shard.insert(key, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_english_and_chinese() {
        let e = Encoding::O200kBase;
        assert_eq!(e.count(""), 0);
        let en = e.count("The quick brown fox jumps over the lazy dog.");
        assert!((8..=12).contains(&en), "{en}");
        let zh = e.count("第二家供应商被排除了，因为价格太高。");
        assert!(zh > 5, "{zh}");
        assert!(Encoding::Cl100kBase.count("hello world") >= 2);
        assert_eq!(Encoding::parse("cl100k_base"), Some(Encoding::Cl100kBase));
        assert_eq!(Encoding::parse("gpt2"), None);
    }

    #[test]
    fn cached_counts_equal_encoded_counts() {
        let texts = [
            "The quick brown fox jumps over the lazy dog.",
            "第二家供应商被排除了，因为价格太高。",
            "mixed 中文 and English, 3 numbers 1234",
        ];
        for e in [Encoding::O200kBase, Encoding::Cl100kBase] {
            for t in texts {
                // twice: the second answer comes from the cache
                assert_eq!(e.count(t), e.encode_count(t), "{e:?} {t}");
                assert_eq!(e.count(t), e.encode_count(t), "{e:?} {t}");
            }
        }
        // the two encodings are cached apart
        let t = "第二家供应商被排除了，因为价格太高。";
        assert_ne!(
            Encoding::O200kBase.count(t),
            Encoding::Cl100kBase.count(t),
            "o200k and cl100k segment Chinese differently"
        );
    }

    #[test]
    fn the_cache_stays_bounded() {
        for i in 0..(16 * SHARD_CAPACITY + 1000) {
            Encoding::O200kBase.count(&format!("text number {i}"));
        }
        for shard in &COUNTS.shards {
            assert!(shard.lock().len() <= SHARD_CAPACITY);
        }
    }
}
