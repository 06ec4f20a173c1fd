//! The vocabulary of memory: layers, limits, importance, ids and items.
//! Scopes are in `types/scope.rs`, the operations a scope accepts and
//! what they answer in `types/ops.rs`; both are re-exported here.

mod ops;
mod scope;

pub use ops::MemoryOp;
pub use ops::MemoryOpResult;
pub use ops::MemoryRefusal;
pub use ops::NewMemory;
pub use scope::MemoryScope;
pub use scope::ScopeKind;
pub use scope::bot_projects;
pub use scope::bot_scopes;

use std::fmt;
use std::str::FromStr;

use icu_normalizer::ComposingNormalizerBorrowed;
use icu_properties::CodePointMapData;
use icu_properties::props::GeneralCategory;
use icu_properties::props::GeneralCategoryGroup;
use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;
use sha2::Sha256;
use tantivy::tokenizer::TokenStream;

use crate::ids::IdError;
use crate::index::CharClass;
use crate::index::Script;
use crate::index::classify;
use crate::index::query_analyzer;

/// Most facts in the profile of one scope instance.
pub const MAX_PROFILE_FACTS: usize = 100;
/// Most characters (Unicode scalar values) in the profile of one scope
/// instance, all facts together.
pub const MAX_PROFILE_CHARS: usize = 4000;
/// Longest single profile fact, in characters.
pub const MAX_FACT_CHARS: usize = 500;
/// Longest log entry or note, in characters.
pub const MAX_ENTRY_CHARS: usize = 1000;
/// Most log entries kept per scope instance.
pub const MAX_LOG_ENTRIES: usize = 1000;
/// Most live (unexpired) notes per scope instance.
pub const MAX_LIVE_NOTES: usize = 50;
/// Lifetime of a note when none is given, in hours.
pub const DEFAULT_NOTE_HOURS: u32 = 24;
/// Longest lifetime of a note, in hours (30 days).
pub const MAX_NOTE_HOURS: u32 = 24 * 30;
/// How many facts a refusal suggests replacing.
pub const SUGGESTIONS: usize = 5;

/// A layer of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Stable facts, always in the prompt (≤100 facts, ≤4000 characters).
    Profile,
    /// Dated entries; the prompt takes the most relevant ones.
    Log,
    /// Short-lived working facts with an expiry.
    Notes,
}

impl Layer {
    /// Stable text form (stored).
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Profile => "profile",
            Layer::Log => "log",
            Layer::Notes => "notes",
        }
    }

    /// Parses the stored text form (`note` is accepted for `notes`).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "profile" => Layer::Profile,
            "log" => Layer::Log,
            "notes" | "note" => Layer::Notes,
            _ => return None,
        })
    }

    /// Longest text of one item of this layer, in characters.
    pub fn max_item_chars(self) -> usize {
        match self {
            Layer::Profile => MAX_FACT_CHARS,
            Layer::Log | Layer::Notes => MAX_ENTRY_CHARS,
        }
    }

    /// The scope kind a write goes to when the writer names none: facts
    /// about the person are shared by all their bots (user), a bot's work
    /// log and working notes are its own (agent).
    pub fn default_scope_kind(self) -> ScopeKind {
        match self {
            Layer::Profile => ScopeKind::User,
            Layer::Log | Layer::Notes => ScopeKind::Agent,
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much an item matters, 1 (trivia) to 5 (critical); 3 by default.
/// Weighs log entries in recall and orders replacement suggestions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct Importance(u8);

impl Importance {
    /// The default, 3.
    pub const NORMAL: Importance = Importance(3);

    /// Validates 1..=5.
    pub fn new(value: u8) -> Result<Self, IdError> {
        if (1..=5).contains(&value) {
            Ok(Self(value))
        } else {
            Err(IdError {
                what: "importance",
                value: value.to_string(),
                why: "use an integer from 1 (trivia) to 5 (critical)",
            })
        }
    }

    /// The value, 1..=5.
    pub fn get(self) -> u8 {
        self.0
    }

    /// Recall weight: 0.5, 0.75, 1, 1.5, 2 for importance 1..=5.
    pub fn weight(self) -> f64 {
        match self.0 {
            1 => 0.5,
            2 => 0.75,
            4 => 1.5,
            5 => 2.0,
            _ => 1.0,
        }
    }
}

impl Default for Importance {
    fn default() -> Self {
        Self::NORMAL
    }
}

impl TryFrom<u8> for Importance {
    type Error = IdError;
    fn try_from(v: u8) -> Result<Self, IdError> {
        Self::new(v)
    }
}

impl From<Importance> for u8 {
    fn from(i: Importance) -> u8 {
        i.0
    }
}

/// Alphabet of memory ids (RFC 4648 base32, lowercase).
const ID_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Characters after the `m-` prefix.
const ID_CHARS: usize = 12;

/// The id of a memory item: `m-` and 12 base32 characters (60 bits),
/// short so that the prompt can show it beside every fact.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MemoryId(String);

impl MemoryId {
    /// The id derived from `seed`: the same seed always gives the same id,
    /// so a write retried after a crash finds its own earlier result.
    pub fn derive(seed: &str) -> Self {
        let digest = Sha256::digest(seed.as_bytes());
        let mut bits: u64 = 0;
        for b in &digest[..8] {
            bits = (bits << 8) | u64::from(*b);
        }
        let mut s = String::with_capacity(2 + ID_CHARS);
        s.push_str("m-");
        for i in 0..ID_CHARS {
            let v = (bits >> (64 - 5 * (i + 1))) & 31;
            s.push(char::from(ID_ALPHABET[v as usize]));
        }
        Self(s)
    }

    /// A fresh random id.
    pub fn random() -> Self {
        Self::derive(&uuid::Uuid::new_v4().to_string())
    }

    /// Validates an id. Brackets, quotes and spaces a model may copy around
    /// it are tolerated.
    pub fn parse(s: &str) -> Result<Self, IdError> {
        let t = s
            .trim()
            .trim_matches(|c| matches!(c, '[' | ']' | '"' | '\'' | '`'));
        let ok = t.len() == 2 + ID_CHARS
            && t.starts_with("m-")
            && t.bytes().skip(2).all(|b| ID_ALPHABET.contains(&b));
        if ok {
            Ok(Self(t.to_owned()))
        } else {
            Err(IdError {
                what: "memory id",
                value: s.to_owned(),
                why: "expected m- and 12 characters a-z or 2-7, e.g. m-abcdefgh2345",
            })
        }
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for MemoryId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        Self::parse(s)
    }
}

impl TryFrom<String> for MemoryId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        Self::parse(&s)
    }
}

impl From<MemoryId> for String {
    fn from(id: MemoryId) -> String {
        id.0
    }
}

/// A stored memory item (a profile fact, a log entry or a note).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryItem {
    /// Id.
    pub id: MemoryId,
    /// Whose memory it is.
    pub scope: MemoryScope,
    /// Which layer.
    pub layer: Layer,
    /// The fact, whitespace collapsed to single spaces.
    pub text: String,
    /// How much it matters.
    pub importance: Importance,
    /// Who wrote it, and where when that decides who may see it:
    /// `tool:<bot>` (Remember), `tool:<bot>@room:<room>` (Remember in a
    /// room shared with other people's bots: only that room's prompts
    /// show it there), `extract:<bot>`, `api:<user>`. A replace sets the
    /// replacing writer's.
    pub source: String,
    /// When it was written (ms); the date of a log entry.
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
    /// When a note expires (ms); `None` for profile and log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// Marks a `source` written in a shared room: `tool:<bot>@room:<room>`.
const ROOM_SOURCE: &str = "@room:";

/// Whether an item written by `source` is shown where items of `reader`
/// are: a shared room's items only in that room (the same source), every
/// other item wherever its scope is shown.
pub(crate) fn visible_from(source: &str, reader: &str) -> bool {
    !reader.contains(ROOM_SOURCE) || source == reader
}

impl MemoryItem {
    /// Characters of the text.
    pub fn chars(&self) -> usize {
        self.text.chars().count()
    }

    /// Whether the item is a note whose expiry has passed at `now_ms`.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now_ms)
    }
}

/// Collapses every run of whitespace (newlines included) to one space and
/// trims: a stored fact is one line, so it cannot fake a heading or an
/// instruction block when rendered. And composes it (NFC): a decomposed
/// `e\u{301}` is the one character `é` a person sees, so it is counted
/// and kept as one (QA: a decomposed text met the length limits at half
/// its length, and a two-letter Forget `matching` of it passed the
/// three-character minimum).
pub fn normalize_text(text: &str) -> String {
    let composed = ComposingNormalizerBorrowed::new_nfc().normalize(text);
    composed.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The comparison key of a text: NFKC (full-width "８０８０" is "8080",
/// a decomposed "Café" the composed one), spacing normalized and
/// lowercased, NFKC again (lowercasing can leave a text unnormalized),
/// and without the spaces that are optional typography next to CJK text
/// ([`optional_space`]): "项目代号Alpha" is in "项目代号 Alpha 2026".
/// Latin word boundaries stay: "a b" is not "ab". Invisible characters
/// are dropped ([`without_invisible`]). Then its letters are
/// case- and accent-folded as recall's terms are ([`folded_letters`]):
/// "Lives in Zürich" contains "zurich", "Straße" is "STRASSE". Only
/// compared, never shown.
pub(crate) fn comparison_key(text: &str) -> String {
    let nfkc = ComposingNormalizerBorrowed::new_nfkc();
    // invisible characters (a zero-width space, a soft hyphen) first: a
    // text with one reads as the text without it (QA: `Alice lives in\u{200b}
    // Berlin` was a second item, and Forget `lives in Berlin` left it)
    let visible = without_invisible(text);
    let lower = normalize_text(&nfkc.normalize(&visible)).to_lowercase();
    folded_letters(&without_optional_spaces(&nfkc.normalize(&lower)))
}

/// `text` without its Default_Ignorable code points (zero-width spaces
/// and joiners, soft hyphens, a BOM, variation selectors): characters
/// that show nothing.
pub fn without_invisible(text: &str) -> String {
    let ignorable =
        icu_properties::CodePointSetData::new::<icu_properties::props::DefaultIgnorableCodePoint>();
    text.chars().filter(|c| !ignorable.contains(*c)).collect()
}

/// Whether `text` shows nothing: only white space, invisible characters
/// ([`without_invisible`]), control characters (a NUL alone was taken as
/// a message and echoed: QA) and blank glyphs (U+2800 BRAILLE PATTERN
/// BLANK, which is neither, and draws an empty cell: QA, a message of it
/// was delivered as a blank bubble). A message, a fact, a room's post of
/// it is refused as empty.
pub fn shows_nothing(text: &str) -> bool {
    let ignorable =
        icu_properties::CodePointSetData::new::<icu_properties::props::DefaultIgnorableCodePoint>();
    text.chars()
        .all(|c| c.is_whitespace() || c.is_control() || c == '\u{2800}' || ignorable.contains(c))
}

/// `key` with each letter outside ASCII (and each letter followed by a
/// combining mark) replaced by what the transcript tokenizer makes of it
/// as a word of its own: case-folded, its accents folded (`ü` → `u`, `ø`
/// → `o`, `ς` → `σ`, `ß` → `ss`, Cyrillic letters but `ё` kept). Each
/// letter goes alone so that the stemmer, which leaves words of one or
/// two letters as they are, changes nothing, and so that spaces and
/// punctuation stay: a key is matched as a substring. The tokenizer's own
/// folding, not a copy of it, so Forget matches as recall ranks.
fn folded_letters(key: &str) -> String {
    if key.is_ascii() {
        return key.to_owned();
    }
    let marks = CodePointMapData::<GeneralCategory>::new();
    let is_mark = |c: char| GeneralCategoryGroup::Mark.contains(marks.get(c));
    let mut analyzer = query_analyzer();
    let mut out = String::with_capacity(key.len());
    let mut chars = key.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let mut end = start + c.len_utf8();
        while let Some(&(i, m)) = chars.peek().filter(|&&(_, m)| is_mark(m)) {
            end = i + m.len_utf8();
            chars.next();
        }
        let letter = &key[start..end];
        if letter.is_ascii() || classify(c) != CharClass::Word {
            out.push_str(letter);
            continue;
        }
        let mut stream = analyzer.token_stream(letter);
        let first = stream.advance().then(|| stream.token().text.clone());
        match first {
            Some(folded) if !stream.advance() => out.push_str(&folded),
            // dropped (an ignorable) or cut in two: kept as written
            Some(_) | None => out.push_str(letter),
        }
    }
    out
}

/// `text` (single spaces between words, trimmed) without each space
/// between two characters for which [`optional_space`] holds.
fn without_optional_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut before: Option<char> = None;
    while let Some(c) = chars.next() {
        let optional = c == ' '
            && before
                .zip(chars.peek().copied())
                .is_some_and(|(a, b)| optional_space(a, b));
        if !optional {
            out.push(c);
        }
        before = Some(c);
    }
    out
}

/// Whether a space between `a` and `b` is only typography: Chinese and
/// Japanese are written without spaces, so one next to a Han or kana
/// character (or CJK punctuation) is optional, as is the space between
/// Chinese and Latin or digits (盘古之白: people and models write
/// "项目代号 Alpha" and "项目代号Alpha" alike). Korean separates its words
/// with spaces, so one between two hangul characters counts; one between
/// hangul and anything else does not.
fn optional_space(a: char, b: char) -> bool {
    unspaced(a) || unspaced(b) || is_hangul(a) != is_hangul(b)
}

/// Han (hanzi, kanji, hanja and their marks 々 〇) and kana, as the search
/// tokenizer classifies them, and CJK punctuation (、。「」…, the katakana
/// middle dot ・, half-width ｡｢｣､･): scripts written without spaces between
/// words.
fn unspaced(c: char) -> bool {
    matches!(classify(c), CharClass::Cjk(Script::Han | Script::Kana))
        || matches!(u32::from(c), 0x3001..=0x303F | 0x30FB | 0xFF61..=0xFF65)
}

/// Hangul syllables and jamo, as the search tokenizer classifies them.
fn is_hangul(c: char) -> bool {
    classify(c) == CharClass::Cjk(Script::Hangul)
}

#[cfg(test)]
#[path = "types_tests.rs"]
mod tests;
