//! Token counts with tiktoken-rs. The BPE tables are built once per
//! process (tiktoken-rs singletons); counts are cached by the caller per
//! transcript entry, so each entry is counted once, and by text in a
//! bounded process-wide cache ([`CountCache`]), so a text seen again (a
//! session's context rebuilt after its window filled, one public room
//! message in six members' contexts, the same tool call in every bot)
//! is not encoded again. A long text is counted by parts cut where the
//! encodings' pre-tokenizers cut anyway (its lines, runs of words), each
//! part cached, so the count is exact and a text that shares lines with
//! one seen before (a bot's system prompt, a quoted message) only encodes
//! the lines that are new; its total is cached too, so the same long text
//! again is one lookup.

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
        if text.len() <= WHOLE {
            return self.count_cached(text);
        }
        // a long text seen before (a bot's system prompt, the instructions
        // of every fact extraction) is one lookup; a new one is counted by
        // its lines and, within long lines, by runs of words, so a system
        // prompt that differs from another bot's in its name line, or a
        // message that quotes an earlier one, only encodes what is new
        COUNTS.get_or_count(self, text, || {
            segments(text, PIECE)
                .map(|s| self.count_cached(s))
                .fold(0u32, u32::saturating_add)
        })
    }

    fn count_cached(self, text: &str) -> u32 {
        if text.is_empty() {
            return 0;
        }
        COUNTS.get_or_count(self, text, || self.encode_count(text))
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
        u32::try_from(self.bpe().encode_ordinary(text).len()).unwrap_or(u32::MAX)
    }

    /// Builds the encoding's BPE tables now (they are built once per
    /// process, on first use): a host calls it at start, on the blocking
    /// pool, so that its first turn does not wait for them (a quarter of a
    /// second in a debug build). Blocking; cheap once built.
    pub fn warm_up(self) {
        let _ = self.bpe();
    }

    fn bpe(self) -> &'static tiktoken_rs::CoreBPE {
        match self {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        }
    }

    /// Tokens of one chat message: its text plus the per-message framing
    /// (role and separators) that chat formats add, about 4 tokens.
    pub fn count_message(self, text: &str) -> u32 {
        self.count(text).saturating_add(4)
    }
}

/// Texts up to this many bytes are counted (and cached) whole.
const WHOLE: usize = 256;
/// Long lines are cut at word starts into pieces of at least this many bytes.
const PIECE: usize = 128;

/// Cuts `text` where both encodings' pre-tokenizers start a new piece, so
/// the counts of the parts add up to the count of the whole (BPE merges
/// never cross a piece). Two kinds of cut, from the patterns of
/// `o200k_base` and `cl100k_base`:
/// - before a space that follows a non-whitespace character: no piece
///   holds a space except as its first character, and a whitespace piece
///   cannot start before a non-whitespace character;
/// - before a line's first character when it is not whitespace and not
///   `/`: a piece holds a newline only at its end, except `o200k_base`'s
///   punctuation piece, whose tail `[\r\n/]*` may take a `/` after it.
///
/// Every line starts a part; within a line, a part ends at the first
/// space cut past `min_piece` bytes.
fn segments(text: &str, min_piece: usize) -> impl Iterator<Item = &str> {
    let mut start = 0;
    let mut prev: Option<char> = None;
    let mut chars = text.char_indices();
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        for (i, c) in chars.by_ref() {
            let before = prev.replace(c);
            let Some(before) = before else { continue };
            let cut = i > start
                && if before == '\n' {
                    !c.is_whitespace() && c != '/'
                } else {
                    c == ' ' && !before.is_whitespace() && i - start >= min_piece
                };
            if cut {
                let part = &text[start..i];
                start = i;
                return Some(part);
            }
        }
        let part = &text[start..];
        start = text.len();
        Some(part)
    })
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

    /// The cached count of `text`, or `count()` kept for next time (the
    /// shard is not locked while it counts).
    fn get_or_count(&self, encoding: Encoding, text: &str, count: impl FnOnce() -> u32) -> u32 {
        let key = self.key(encoding, text);
        let shard = self.shard(key);
        if let Some(n) = shard.lock().get(&key).copied() {
            return n;
        }
        let n = count();
        let mut shard = shard.lock();
        if shard.len() >= SHARD_CAPACITY {
            shard.clear();
        }
        shard.insert(key, n);
        n
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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

    /// A host warms its encodings up on a blocking thread at start; the
    /// turns that count on other threads then find them built.
    #[test]
    fn encodings_warmed_up_on_another_thread_count_as_ever() {
        let warm = std::thread::spawn(|| {
            Encoding::O200kBase.warm_up();
            Encoding::Cl100kBase.warm_up();
        });
        warm.join().unwrap();
        assert_eq!(Encoding::O200kBase.encode_count("hello world"), 2);
        assert_eq!(Encoding::Cl100kBase.encode_count("hello world"), 2);
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

    /// Text made of pieces that sit on the pre-tokenizers' edges: runs of
    /// spaces, newlines before `/`, contractions, digits, CJK, Unicode
    /// spaces.
    fn edgy_text() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            " ",
            "  ",
            "\n",
            "\r\n",
            "\t",
            "/",
            ".",
            ",",
            "'s",
            "'T",
            "'ll",
            "a",
            "Hello",
            "WORLD",
            "x",
            "12",
            "3456",
            "中文",
            "第二家",
            "é",
            "😀",
            "(",
            ")",
            "\u{3000}",
            "-",
            "_",
            "\"",
            "'",
            "://",
            "#",
            "  \n",
            "\n/",
            "\n\n",
            " /",
            "\n ",
            "\u{a0}",
        ]);
        prop::collection::vec(pieces, 0..160).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn parts_count_as_much_as_the_whole(
            text in edgy_text(),
            min in prop::sample::select(vec![0usize, 1, 16, PIECE]),
        ) {
            prop_assert_eq!(segments(&text, min).collect::<String>(), text.clone());
            for e in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let parts: u32 = segments(&text, min).map(|s| e.encode_count(s)).sum();
                prop_assert_eq!(parts, e.encode_count(&text), "{:?} {:?}", e, text);
            }
        }
    }

    #[test]
    fn long_texts_count_as_encoded() {
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&format!(
                "Line {i}: see https://example.com/a/b?c={i} and ./src/main.rs, it's   fine.\n\
                 第二家供应商被排除了，因为价格太高。 /path/{i}\n\n  indented {i}\t tab\n/slash\n"
            ));
        }
        assert!(text.len() > 10 * WHOLE);
        for e in [Encoding::O200kBase, Encoding::Cl100kBase] {
            assert_eq!(e.count(&text), e.encode_count(&text), "{e:?}");
            // again: its cached total (or its cached parts, if a full shard
            // was emptied meanwhile), never the other encoding's count
            assert_eq!(e.count(&text), e.encode_count(&text), "{e:?}");
        }
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
