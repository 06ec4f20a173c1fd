//! Accent folding of the tokenizer's words (see [`fold_accents`]): a query
//! typed without accents finds the text that has them, and the reverse.

use icu_normalizer::DecomposingNormalizerBorrowed;

use super::NFC;
use super::joins;

/// NFD, which [`fold_accents`] takes a word apart with.
const NFD: DecomposingNormalizerBorrowed<'static> = DecomposingNormalizerBorrowed::new_nfd();

/// Whether `c` (of a case-folded NFC word) may change in [`fold_accents`]:
/// a Latin letter beyond ASCII, a Greek letter with tonos or dialytika,
/// `ё`, `ѐ`, `ѝ`, or a combining diacritical mark NFC left alone. A word
/// without any (English, most Cyrillic, Indic, Thai, ...) skips the
/// folding.
pub(super) fn may_fold_accent(c: char) -> bool {
    matches!(
        u32::from(c),
        0xC0..=0x24F
            | 0x300..=0x36F
            | 0x386..=0x390
            | 0x3AA..=0x3B0
            | 0x3CA..=0x3CE
            | 0x450..=0x451
            | 0x45D
            | 0x1AB0..=0x1AFF
            | 0x1DC0..=0x1DFF
            | 0x1E00..=0x1FFF
            | 0xFE20..=0xFE2F
    )
}

/// The alphabet of the letter a combining mark follows, as far as
/// [`fold_accents`] cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    /// Latin or Greek: every diacritical mark is dropped.
    LatinOrGreek,
    /// Cyrillic `е`: its diaeresis is dropped (`ё` is `е`), as is a
    /// stress mark.
    CyrillicIe,
    /// Other Cyrillic letters: only stress marks (acute, grave) are
    /// dropped; `й`, `ў` and `ї` stay letters of their own.
    Cyrillic,
    /// Anything else (Indic, Thai, Hebrew, digits, ...): marks are kept.
    Other,
}

impl Base {
    fn of(c: char) -> Self {
        match u32::from(c) {
            0x435 => Self::CyrillicIe,
            0x400..=0x52F => Self::Cyrillic,
            0x41..=0x5A
            | 0x61..=0x7A
            | 0xAA
            | 0xBA
            | 0xC0..=0x24F
            | 0x250..=0x2AF
            | 0x370..=0x3FF
            | 0x1D00..=0x1DBF
            | 0x1E00..=0x1FFF
            | 0x2C60..=0x2C7F
            | 0xA720..=0xA7FF
            | 0xAB30..=0xAB6F => Self::LatinOrGreek,
            _ => Self::Other,
        }
    }

    /// Whether the combining mark `mark` after a letter of this kind is
    /// dropped.
    fn drops(self, mark: char) -> bool {
        let diacritical = matches!(
            u32::from(mark),
            0x300..=0x36F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0xFE20..=0xFE2F
        );
        match self {
            Self::LatinOrGreek => diacritical,
            Self::CyrillicIe => matches!(mark, '\u{300}' | '\u{301}' | '\u{308}'),
            Self::Cyrillic => matches!(mark, '\u{300}' | '\u{301}'),
            Self::Other => false,
        }
    }
}

/// The ASCII spelling of a Latin letter that has no decomposition (after
/// case folding: `ß` is already `ss`).
fn unaccented(c: char) -> Option<&'static str> {
    Some(match c {
        'ø' => "o",
        'æ' => "ae",
        'œ' => "oe",
        'đ' | 'ð' => "d",
        'ł' => "l",
        'þ' => "th",
        'ı' => "i",
        'ħ' => "h",
        _ => return None,
    })
}

/// Appends `word` (case-folded, NFC) to `out` with its accents folded:
/// taken apart (NFD), the diacritical marks on Latin and Greek letters
/// dropped (`zürich` → `zurich`, `ελλάδα` → `ελλαδα`, Vietnamese `hà nội`
/// → `ha noi`), Cyrillic `ё` → `е` and stress marks dropped, the Latin
/// letters without a decomposition spelled without their stroke
/// ([`unaccented`]: `tromsø` → `tromso`), and the rest put back in NFC.
/// Marks of other scripts (Indic vowel signs, Thai tone marks) are part of
/// their letters and stay.
pub(super) fn fold_accents(word: &str, out: &mut String) {
    let start = out.len();
    let mut base = Base::Other;
    for c in NFD.normalize_iter(word.chars()) {
        if joins(c) {
            if !base.drops(c) {
                out.push(c);
            }
            continue;
        }
        base = Base::of(c);
        match unaccented(c) {
            Some(plain) => out.push_str(plain),
            None => out.push(c),
        }
    }
    if !NFC.is_normalized(&out[start..]) {
        let kept = out.split_off(start);
        out.extend(NFC.normalize_iter(kept.chars()));
    }
}
