//! UTF-16 surrogates without their other half: a pair split across two
//! stream events, or a lone one anywhere in an answer.
//!
//! JSON escapes characters outside the Basic Multilingual Plane as a pair
//! of `\uXXXX` surrogates. A server (or a proxy) that cuts a string by
//! UTF-16 units can put the two halves of one pair in two events — a
//! high surrogate ending one tool-call argument delta, the low one
//! starting the next. Each event alone is then invalid JSON (serde refuses
//! a lone surrogate), although the deltas joined are fine.
//!
//! [`mark_lone`] rewrites each lone surrogate escape of an event (or of a
//! whole completion, where a lone one is as fatal) into two characters
//! that stand for it (a noncharacter marker and a private-use character
//! carrying its 10 bits), which are valid JSON; [`join`] turns a marked
//! high half followed by a marked low half back into the character, and
//! any half left alone into U+FFFD.
//!
//! Tool-call arguments are JSON text inside a JSON string, so a surrogate
//! escaped in them is only read by the tool. Pieces of arguments are
//! joined before that, which puts a pair cut between two deltas back
//! together; [`replace_lone_escapes`] then writes a half still alone as
//! `\uFFFD`, where it would make the arguments invalid JSON.

use std::borrow::Cow;

/// Marks a lone high surrogate (U+D800..=U+DBFF) in text.
const HIGH: char = '\u{FDD0}';
/// Marks a lone low surrogate (U+DC00..=U+DFFF) in text.
const LOW: char = '\u{FDD1}';
/// The private-use block that carries a half's 10 bits.
const PAYLOAD: u32 = 0xE000;

/// `data` (one event's JSON, or a whole completion's) with each lone surrogate escape replaced by
/// its marked form; borrowed unchanged when it has none (the usual case).
pub(super) fn mark_lone(data: &[u8]) -> Cow<'_, [u8]> {
    rewrite_lone(data, |out, unit| match unit {
        0xD800..=0xDBFF => push_marked(out, HIGH, unit - 0xD800),
        _ => push_marked(out, LOW, unit - 0xDC00),
    })
}

/// `json` (a call's arguments, whole) with each lone surrogate escape
/// replaced by `\uFFFD`, so the arguments parse and the model's text
/// keeps a visible mark where the broken character was.
pub(super) fn replace_lone_escapes(json: String) -> String {
    let replaced = match rewrite_lone(json.as_bytes(), |out, _| {
        out.extend_from_slice(b"\\uFFFD");
    }) {
        Cow::Borrowed(_) => return json,
        Cow::Owned(bytes) => bytes,
    };
    // only ASCII escapes were replaced, by ASCII, so the bytes are still
    // UTF-8 and the lossy conversion never replaces anything
    String::from_utf8(replaced)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `data` with each lone surrogate escape (`\uD800`..`\uDFFF` without its
/// other half) replaced by what `write` writes for its code unit; every
/// other byte copied. Borrowed unchanged when it has none.
fn rewrite_lone(data: &[u8], mut write: impl FnMut(&mut Vec<u8>, u32)) -> Cow<'_, [u8]> {
    if !data
        .windows(3)
        .any(|w| w[0] == b'\\' && matches!(w[1], b'u' | b'U') && is_surrogate_lead(w[2]))
    {
        return Cow::Borrowed(data);
    }
    let mut out = Vec::with_capacity(data.len() + 16);
    let mut i = 0;
    while i < data.len() {
        if data[i] != b'\\' {
            out.push(data[i]);
            i += 1;
            continue;
        }
        let Some(unit) = escape_at(data, i) else {
            // any other escape (`\\`, `\"`, `\n`…): copied whole, so an
            // escaped backslash is never read as the start of another
            let end = (i + 2).min(data.len());
            out.extend_from_slice(&data[i..end]);
            i = end;
            continue;
        };
        match unit {
            0xD800..=0xDBFF if matches!(escape_at(data, i + 6), Some(0xDC00..=0xDFFF)) => {
                // a whole pair: left as it is
                out.extend_from_slice(&data[i..i + 12]);
                i += 12;
            }
            0xD800..=0xDFFF => {
                write(&mut out, unit);
                i += 6;
            }
            _ => {
                out.extend_from_slice(&data[i..i + 6]);
                i += 6;
            }
        }
    }
    Cow::Owned(out)
}

/// `text` with marked halves joined back into characters; a half without
/// its other half becomes U+FFFD.
pub(super) fn join(text: String) -> String {
    if !text.contains([HIGH, LOW]) {
        return text;
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let bits = |at: usize| {
            chars
                .get(at)
                .map(|c| u32::from(*c).wrapping_sub(PAYLOAD))
                .filter(|b| *b < 0x400)
        };
        match chars[i] {
            HIGH => {
                let high = bits(i + 1);
                let low = (chars.get(i + 2) == Some(&LOW))
                    .then(|| bits(i + 3))
                    .flatten();
                match (high, low) {
                    (Some(h), Some(l)) => {
                        out.push(char::from_u32(0x10000 + (h << 10) + l).unwrap_or('\u{FFFD}'));
                        i += 4;
                    }
                    (Some(_), None) => {
                        out.push('\u{FFFD}');
                        i += 2;
                    }
                    (None, _) => {
                        out.push(HIGH);
                        i += 1;
                    }
                }
            }
            LOW => {
                if bits(i + 1).is_some() {
                    out.push('\u{FFFD}');
                    i += 2;
                } else {
                    out.push(LOW);
                    i += 1;
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Whether a hex digit may start a surrogate's code (`D`).
fn is_surrogate_lead(b: u8) -> bool {
    matches!(b, b'd' | b'D')
}

/// The code unit of a `\uXXXX` escape starting at `at`, if one does.
fn escape_at(data: &[u8], at: usize) -> Option<u32> {
    let escape = data.get(at..at + 6)?;
    if escape[0] != b'\\' || !matches!(escape[1], b'u' | b'U') {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    u32::from_str_radix(hex, 16).ok()
}

/// Writes the marked form of a half (`marker`, then its 10 `bits` in the
/// private-use block) as JSON escapes.
fn push_marked(out: &mut Vec<u8>, marker: char, bits: u32) {
    out.extend_from_slice(
        format!("\\u{:04X}\\u{:04X}", u32::from(marker), PAYLOAD + bits).as_bytes(),
    );
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn parse(data: &str) -> String {
        let marked = mark_lone(data.as_bytes());
        serde_json::from_slice::<String>(&marked).unwrap()
    }

    #[test]
    fn a_pair_split_across_two_events_is_joined() {
        // 😀 is \ud83d\ude00
        let first = parse(r#""smile \ud83d""#);
        let second = parse(r#""\ude00!""#);
        assert_eq!(join(first + &second), "smile 😀!");
    }

    #[test]
    fn whole_pairs_and_other_escapes_are_left_alone() {
        let data = r#""a \ud83d\ude00 b \\ud83d c \" \u00e9""#;
        assert_eq!(mark_lone(data.as_bytes()).as_ref(), data.as_bytes());
        assert_eq!(join(parse(data)), "a 😀 b \\ud83d c \" é");
        assert!(matches!(mark_lone(br#""plain""#), Cow::Borrowed(_)));
    }

    #[test]
    fn a_half_left_alone_becomes_a_replacement_character() {
        assert_eq!(join(parse(r#""x \ud83d""#)), "x \u{FFFD}");
        assert_eq!(join(parse(r#""\ude00 y""#)), "\u{FFFD} y");
        assert_eq!(join(parse(r#""\ude00\ud83d""#)), "\u{FFFD}\u{FFFD}");
    }

    /// Regression: a lone surrogate escaped inside a call's arguments
    /// (JSON text in a JSON string) made them invalid JSON ("unexpected
    /// end of hex escape"), so the tool refused them.
    #[test]
    fn a_lone_escape_in_arguments_becomes_an_escaped_replacement_character() {
        let fixed = replace_lone_escapes(r#"{"text":"a \ud800 b \udfff"}"#.to_owned());
        assert_eq!(fixed, r#"{"text":"a \uFFFD b \uFFFD"}"#);
        let value: serde_json::Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(value["text"], "a \u{FFFD} b \u{FFFD}");
        // whole pairs, escaped backslashes and other escapes stay as they are
        let kept = r#"{"a":"\ud83d\ude00","b":"\\ud800","c":"\u00e9\n"}"#;
        assert_eq!(replace_lone_escapes(kept.to_owned()), kept);
        // a high half followed by a whole pair: only the first is alone
        assert_eq!(
            replace_lone_escapes(r#""\ud83d\ud83d\ude00""#.to_owned()),
            r#""\uFFFD\ud83d\ude00""#
        );
    }
}
