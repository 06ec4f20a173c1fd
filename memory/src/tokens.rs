//! Token counts with tiktoken-rs. The BPE tables are built once per
//! process (tiktoken-rs singletons); counts are cached by the caller per
//! transcript entry, so each entry is counted once.

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
}
