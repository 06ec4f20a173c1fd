//! The transcript tokenizer: Latin words plus CJK bigrams.
//!
//! Text is cut into units of two kinds:
//!
//! - **words**: runs of letters and digits in any script without CJK
//!   (Latin, Cyrillic, Greek, ...). A combining mark (general category Mn,
//!   Mc, Me: accents, Indic vowel signs and viramas, Thai tone marks)
//!   belongs to the word it follows, and a Default_Ignorable code point
//!   (zero-width space, soft hyphen, word joiner, BOM, ...) inside a word is
//!   dropped from it, so `soft\u{AD}ware` is `software`. The word is put in
//!   NFC (an NFD `nai\u{308}ve` is the NFC `naïve`), fullwidth ASCII is
//!   folded to ASCII, and the word is case-folded with Unicode's full
//!   mappings (`ς`→`σ`, `ß`→`ss`; `İ` becomes `i`, not `i̇`), so text and
//!   query meet whatever their case or normal form. Then its accents are
//!   folded (see [`fold_accents`]: `Zürich` is `zurich`, `Tromsø` is
//!   `tromso`, `Ελλάδα` is `ελλαδα`), on both sides, so a query typed
//!   without accents finds the accented text and the reverse; the marks of
//!   other scripts (Indic vowel signs, Thai tone marks) stay. The English
//!   Snowball stemmer (frostem, what tantivy's `Stemmer` filter runs) then
//!   stems the word, so `Suppliers` and `supplier` meet. Only words are stemmed:
//!   running the stemmer on CJK tokens as a filter would cost ~15% of
//!   indexing throughput for nothing. Words longer than [`MAX_WORD_CHARS`]
//!   characters (hashes, base64 blobs) are dropped.
//! - **letter-prefixed numbers**: in the index, a word of letters followed
//!   by digits (`v2`, `r2`, `x86`, `rfc9110`, `iPhone15`) also gives its
//!   digits as a term at the same position, so the query `2.3.1` (the
//!   phrase `2 3 1`) finds `v2.3.1`, and `86` finds `x86`; and, when they
//!   are two letters or more, its letters (stemmed as a word is), so
//!   `iPhone` finds `iPhone15`, `Windows` finds `Windows11` and `rfc`
//!   finds `rfc9110` (Chinese text writes a product and its number
//!   together: `iPhone15的价格`). The word stays a term too, so
//!   `v2.3.1` finds only the entries that say `v2.3.1`. Only that one shape
//!   is split: a word that starts with digits (`100ms`, `3rd`) or where
//!   letters and digits alternate more than once (`3fa85f64`, `a1b2`, hash
//!   and id fragments) is not, so a number query does not match random
//!   pieces of hashes. Queries are not split: `v2` asks for `v2`.
//! - **CJK runs**: maximal runs of Han, kana and hangul characters. In the
//!   index a run of n characters gives every character (unigram) *and* every
//!   pair of neighbours (bigram), the pair at the position of its first
//!   character, so the run occupies n positions. A query gives bigrams only
//!   (or the unigram of a one-character run) with the same positions, so a
//!   query run becomes a phrase of bigrams that matches exactly where its
//!   text occurs, and a one-character query finds the character anywhere.
//!   A "character" here is one with the marks and ignorables after it, in
//!   NFC: `か\u{3099}` is `が`, decomposed hangul jamo are their syllable,
//!   and a zero-width space inside a run does not cut it.
//!
//! Everything else (spaces, punctuation, symbols, emoji) separates units.
//! Token offsets always point into the original text (normalisation is done
//! per word and per character, never on the whole text), so snippets mark
//! what was written. docs/search.md explains the choice against jieba word
//! segmentation with measured recall; jieba is used on the query side only,
//! see [`han_words`].

use std::borrow::Cow;
use std::sync::LazyLock;

use frostem::Algorithm;
use frostem::Stemmer;
use icu_casemap::CaseMapper;
use icu_casemap::CaseMapperBorrowed;
use icu_normalizer::ComposingNormalizerBorrowed;
use icu_properties::CodePointMapData;
use icu_properties::CodePointSetData;
use icu_properties::props::DefaultIgnorableCodePoint;
use icu_properties::props::GeneralCategory;
use icu_properties::props::GeneralCategoryGroup;
use tantivy::tokenizer::TextAnalyzer;
use tantivy::tokenizer::Token;
use tantivy::tokenizer::TokenStream;
use tantivy::tokenizer::Tokenizer;

use self::accents::fold_accents;
use self::accents::may_fold_accent;

#[path = "tokenizer_accents.rs"]
mod accents;

/// Name under which the index analyzer is registered (stored in the schema).
pub(crate) const TOKENIZER_NAME: &str = "botfleet_cjk_bigram";

/// Longest word indexed, in characters (after case and accent folding).
/// Counted in characters, not bytes, so a word of a non-Latin alphabet
/// (Georgian takes 3 bytes a letter) is allowed as many letters as an
/// English one; a term stays at most 256 bytes.
pub const MAX_WORD_CHARS: usize = 64;

/// NFC, which text and queries are put in word by word (and CJK character by
/// character) before they are compared.
const NFC: ComposingNormalizerBorrowed<'static> = ComposingNormalizerBorrowed::new_nfc();

/// Unicode's full case folding.
const CASE: CaseMapperBorrowed<'static> = CaseMapper::new();

/// The script of a CJK character, as far as query segmentation cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Script {
    /// Chinese characters (hanzi, kanji, hanja) and their marks (々, 〇).
    Han,
    /// Hiragana and katakana, full and half width.
    Kana,
    /// Korean hangul.
    Hangul,
}

/// What the tokenizer makes of one character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CharClass {
    /// Part of a CJK run.
    Cjk(Script),
    /// Part of a word.
    Word,
    /// A separator.
    Other,
}

/// Classifies a character. Default_Ignorable code points (the hangul
/// fillers are letters by category) are separators when they start a unit;
/// after a letter they [join](joins) it.
pub(crate) fn classify(c: char) -> CharClass {
    let cp = u32::from(c);
    if is_ignorable(c) {
        return CharClass::Other;
    }
    let script = match cp {
        0x3005..=0x3007 | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF => Some(Script::Han),
        // Extensions B to H (H, U+31350–U+323AF, is Unicode 15)
        0x20000..=0x323AF => Some(Script::Han),
        // 0x30FB is the katakana middle dot, a punctuation mark.
        0x3041..=0x309F | 0x30A0..=0x30FA | 0x30FC..=0x30FF | 0x31F0..=0x31FF => Some(Script::Kana),
        0xFF66..=0xFF9F => Some(Script::Kana),
        0x1100..=0x11FF | 0x3131..=0x318E | 0xAC00..=0xD7A3 => Some(Script::Hangul),
        _ => None,
    };
    match script {
        Some(s) => CharClass::Cjk(s),
        None if c.is_alphanumeric() => CharClass::Word,
        None => CharClass::Other,
    }
}

/// Whether `c` is a Default_Ignorable code point: invisible, it neither
/// splits a word nor is part of its term.
fn is_ignorable(c: char) -> bool {
    match u32::from(c) {
        // Latin to Arabic, Han, hangul syllables: none there but U+AD and
        // U+34F (checked without the lookup, which costs on every character)
        0..=0xAC | 0xAE..=0x34E | 0x350..=0x61B | 0x3400..=0x9FFF | 0xAC00..=0xD7A3 => false,
        _ => CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c),
    }
}

/// Whether `c` belongs to the letter or CJK character before it instead of
/// starting a unit of its own: combining marks (Mn, Mc, Me), so an accent
/// of NFD text, a virama or a Thai tone mark does not split a word;
/// Default_Ignorable code points (zero-width space, soft hyphen), dropped
/// from the term; and the medial vowel and final consonant jamo of a
/// decomposed hangul syllable, which NFC composes with the jamo before them.
fn joins(c: char) -> bool {
    match u32::from(c) {
        // letters of Latin, Greek, Cyrillic, Han and hangul syllables, the
        // common case, without the lookups (U+AD is the soft hyphen)
        0..=0xAC | 0xAE..=0x2FF | 0x370..=0x482 | 0x3400..=0x9FFF | 0xAC00..=0xD7A3 => {
            return false;
        }
        _ => {}
    }
    matches!(u32::from(c), 0x1161..=0x1175 | 0x11A8..=0x11C2)
        || GeneralCategoryGroup::Mark.contains(CodePointMapData::<GeneralCategory>::new().get(c))
        || is_ignorable(c)
}

/// Where the unit starting at byte `start` of `text` ends: after its first
/// character and every character that [joins](joins) it.
fn unit_end(text: &str, start: usize) -> usize {
    let mut chars = text[start..].char_indices();
    let Some((_, first)) = chars.next() else {
        return start;
    };
    let mut end = start + first.len_utf8();
    for (i, c) in chars {
        if !joins(c) {
            break;
        }
        end = start + i + c.len_utf8();
    }
    end
}

/// Appends the folded form of a non-ASCII word (or CJK character) to
/// `out`: ignorables dropped, fullwidth ASCII folded, NFC, then (if `fold`)
/// full case folding and [accent folding](fold_accents), in that order (so
/// `Ø` is first `ø`, then `o`; CJK characters are never accent-folded).
/// `İ` folds to `i`, as in Turkish, rather than to Unicode's default `i̇`
/// (i + combining dot): nobody types the dot in a query, and `İSTANBUL`
/// should be found by `istanbul`. `buf` is scratch.
fn fold_into(raw: &str, fold: bool, buf: &mut String, out: &mut String) {
    buf.clear();
    buf.extend(raw.chars().filter(|&c| !is_ignorable(c)).map(fold_width));
    let nfc = NFC.normalize(buf);
    if !fold {
        out.push_str(&nfc);
        return;
    }
    let dotted;
    let nfc = if nfc.contains('\u{130}') {
        dotted = nfc.replace('\u{130}', "i");
        dotted.as_str()
    } else {
        &*nfc
    };
    let folded = CASE.fold_string(nfc);
    if folded.chars().any(may_fold_accent) {
        fold_accents(&folded, out);
    } else {
        out.push_str(&folded);
    }
}

/// Folds fullwidth ASCII letters and digits (`Ｆ`, `２`) to ASCII.
fn fold_width(c: char) -> char {
    match u32::from(c) {
        cp @ (0xFF10..=0xFF19 | 0xFF21..=0xFF3A | 0xFF41..=0xFF5A) => {
            char::from_u32(cp - 0xFEE0).unwrap_or(c)
        }
        _ => c,
    }
}

/// Whether `text` has a word longer than [`MAX_WORD_CHARS`] (as
/// [`TranscriptTokenStream`] measures it, after folding), which the
/// tokenizer drops.
pub(crate) fn has_overlong_word(text: &str) -> bool {
    let mut tokenizer = TranscriptTokenizer::new(Mode::Query);
    let mut stream = tokenizer.token_stream(text);
    while stream.advance() {}
    stream.dropped
}

/// The letters and the digits of a word made of letters followed by ASCII
/// digits (`v2` → `v`, `2`; `x86` → `x`, `86`), `None` for any other word
/// (`2`, `100ms`, `a1b2`). `word` is lowercased and width-folded.
fn prefixed_number(word: &str) -> Option<(&str, &str)> {
    let split = word.find(|c: char| c.is_ascii_digit())?;
    let (letters, digits) = word.split_at(split);
    let shape = !letters.is_empty()
        && letters.chars().all(char::is_alphabetic)
        && digits.bytes().all(|b| b.is_ascii_digit());
    shape.then_some((letters, digits))
}

/// Fewest letters of a letter-prefixed number indexed as a word of their
/// own: `iphone` of `iphone15`, not `v` of `v2` (a one-letter term would
/// match every version and register name).
const MIN_PREFIX_LETTERS: usize = 2;

/// Which side of the index a token stream is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Documents: unigrams and bigrams of CJK runs.
    Index,
    /// Queries: bigrams of CJK runs (the unigram of a one-character run).
    Query,
    /// Memory log entries' recall terms (`layers/recall.rs`), compared
    /// term by term with an input's [`Mode::Query`] terms: CJK runs as a
    /// query cuts them, letter-prefixed numbers split as the index splits
    /// them, so recall meets `x86` for `86` and `iPhone15` for `iPhone`
    /// as search does (QA: their relevance was 0).
    Recall,
}

/// The tokenizer; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct TranscriptTokenizer {
    mode: Mode,
}

impl TranscriptTokenizer {
    pub(crate) fn new(mode: Mode) -> Self {
        Self { mode }
    }
}

/// The analyzer documents are indexed with (and snippets highlighted with).
pub(crate) fn index_analyzer() -> TextAnalyzer {
    TextAnalyzer::from(TranscriptTokenizer::new(Mode::Index))
}

/// The analyzer query text is cut with.
pub(crate) fn query_analyzer() -> TextAnalyzer {
    TextAnalyzer::from(TranscriptTokenizer::new(Mode::Query))
}

/// The analyzer a memory log entry's recall terms are cut with.
pub(crate) fn recall_analyzer() -> TextAnalyzer {
    TextAnalyzer::from(TranscriptTokenizer::new(Mode::Recall))
}

impl Tokenizer for TranscriptTokenizer {
    type TokenStream<'a> = TranscriptTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> TranscriptTokenStream<'a> {
        TranscriptTokenStream {
            text,
            mode: self.mode,
            cursor: 0,
            next_position: 0,
            run: Vec::new(),
            run_text: String::new(),
            scratch: String::new(),
            run_base: 0,
            step: 0,
            steps: 0,
            token: Token::default(),
            stemmer: Stemmer::new(Algorithm::English),
            parts: Vec::new(),
            dropped: false,
        }
    }
}

/// Token stream of [`TranscriptTokenizer`].
pub(crate) struct TranscriptTokenStream<'a> {
    text: &'a str,
    mode: Mode,
    /// Next byte to scan.
    cursor: usize,
    /// Position of the next unit.
    next_position: usize,
    /// The characters of the current CJK run.
    run: Vec<RunChar>,
    /// The folded text of the run's characters, one after the other.
    run_text: String,
    /// Scratch space of [`fold_into`].
    scratch: String,
    /// Position of the run's first character.
    run_base: usize,
    /// Next token of the run to emit, and how many there are.
    step: usize,
    steps: usize,
    token: Token,
    /// Stems words (CJK tokens are not stemmed: it would only cost time).
    stemmer: Stemmer,
    /// The parts of the letter-prefixed number just emitted (index mode):
    /// its digits and its letters, to emit next at the same position.
    parts: Vec<String>,
    /// Whether a word was dropped for being longer than [`MAX_WORD_CHARS`].
    dropped: bool,
}

/// One character of a CJK run (with the marks and ignorables after it).
#[derive(Debug, Clone, Copy)]
struct RunChar {
    /// Byte range in the source text.
    from: usize,
    to: usize,
    /// Byte range of its folded form in `run_text`.
    folded_from: usize,
    folded_to: usize,
}

impl TranscriptTokenStream<'_> {
    /// Emits token `step` of the current run.
    fn emit_run_token(&mut self, step: usize) {
        let (first, bigram) = match (self.mode, self.run.len()) {
            (Mode::Index, _) => (step / 2, step % 2 == 1),
            (Mode::Query | Mode::Recall, 1) => (0, false),
            (Mode::Query | Mode::Recall, _) => (step, true),
        };
        let head = self.run[first];
        let tail = if bigram { self.run[first + 1] } else { head };
        self.token.offset_from = head.from;
        self.token.offset_to = tail.to;
        self.token.position = self.run_base + first;
        self.token.text.clear();
        self.token
            .text
            .push_str(&self.run_text[head.folded_from..tail.folded_to]);
    }

    /// Reads the CJK run starting at the cursor.
    fn load_run(&mut self) {
        self.run.clear();
        self.run_text.clear();
        let mut from = self.cursor;
        while let Some(c) = self.text[from..].chars().next() {
            if !matches!(classify(c), CharClass::Cjk(_)) {
                break;
            }
            let to = unit_end(self.text, from);
            let folded_from = self.run_text.len();
            // Kana, hangul syllables and the main Han blocks are NFC by
            // themselves; a character with marks after it, a jamo or a
            // compatibility ideograph (U+F900…) is normalised.
            if to - from == c.len_utf8() && (0x3040..=0xD7A3).contains(&u32::from(c)) {
                self.run_text.push(c);
            } else {
                fold_into(
                    &self.text[from..to],
                    false,
                    &mut self.scratch,
                    &mut self.run_text,
                );
            }
            self.run.push(RunChar {
                from,
                to,
                folded_from,
                folded_to: self.run_text.len(),
            });
            from = to;
        }
        self.cursor = from;
        self.run_base = self.next_position;
        self.next_position += self.run.len();
        self.step = 0;
        self.steps = match (self.mode, self.run.len()) {
            (_, 0) => 0,
            (Mode::Index, n) => 2 * n - 1,
            (Mode::Query | Mode::Recall, 1) => 1,
            (Mode::Query | Mode::Recall, n) => n - 1,
        };
    }

    /// Reads the word starting at the cursor into the token; false if it is
    /// too long to index.
    fn load_word(&mut self) -> bool {
        let start = self.cursor;
        let rest = &self.text[start..];
        let len = rest
            .char_indices()
            .find(|&(_, c)| classify(c) != CharClass::Word && !joins(c))
            .map_or(rest.len(), |(i, _)| i);
        let raw = &rest[..len];
        self.cursor = start + len;
        self.token.text.clear();
        if raw.is_ascii() {
            self.token.text.push_str(raw);
            self.token.text.make_ascii_lowercase();
        } else {
            fold_into(raw, true, &mut self.scratch, &mut self.token.text);
        }
        self.token.offset_from = start;
        self.token.offset_to = self.cursor;
        self.token.position = self.next_position;
        self.next_position += 1;
        if self.token.text.len() > MAX_WORD_CHARS
            && self.token.text.chars().count() > MAX_WORD_CHARS
        {
            self.dropped = true;
            return false;
        }
        if self.mode != Mode::Query
            && let Some((letters, digits)) = prefixed_number(&self.token.text)
        {
            // (emitted last first: the digits, then the letters)
            if letters.chars().count() >= MIN_PREFIX_LETTERS {
                self.parts.push(self.stemmer.stem(letters).into_owned());
            }
            self.parts.push(digits.to_owned());
        }
        if let Cow::Owned(stem) = self.stemmer.stem(&self.token.text) {
            self.token.text = stem;
        }
        true
    }
}

impl TokenStream for TranscriptTokenStream<'_> {
    fn advance(&mut self) -> bool {
        if let Some(part) = self.parts.pop() {
            // A part of the word just emitted: same position and offsets,
            // so a snippet marks the whole word (`«v2»`).
            self.token.text = part;
            return true;
        }
        loop {
            if self.step < self.steps {
                self.emit_run_token(self.step);
                self.step += 1;
                return true;
            }
            let rest = &self.text[self.cursor..];
            let Some((skip, class)) = rest
                .char_indices()
                .map(|(i, c)| (i, classify(c)))
                .find(|(_, class)| *class != CharClass::Other)
            else {
                self.cursor = self.text.len();
                return false;
            };
            self.cursor += skip;
            match class {
                CharClass::Cjk(_) => self.load_run(),
                CharClass::Word => {
                    if self.load_word() {
                        return true;
                    }
                }
                CharClass::Other => {}
            }
        }
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

/// The shared jieba segmenter (its dictionary takes ~0.1 s to load, once).
static JIEBA: LazyLock<jieba_rs::Jieba> = LazyLock::new(jieba_rs::Jieba::new);

/// Cuts a run of Han characters from a query into words with jieba
/// (default mode, HMM on for unknown words). Each word is then searched as
/// a phrase of bigrams, and the words need not be adjacent: `供应商排除`
/// finds `供应商被排除了`.
pub(crate) fn han_words(run: &str) -> Vec<&str> {
    JIEBA.cut(run, true).into_iter().map(|t| t.word).collect()
}

/// Loads the jieba dictionary now rather than on the first Han query.
pub(crate) fn warm_up() {
    LazyLock::force(&JIEBA);
}

#[cfg(test)]
#[path = "tokenizer_tests.rs"]
mod tests;
