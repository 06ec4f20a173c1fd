//! Text people gave, quoted in a message about it (an error naming the
//! value it refuses). Rust's `{:?}` escapes every grapheme extender, so a
//! query of `❤️` came out as `"❤\u{fe0f}"`, a family emoji with its
//! zero-width joiners as `\u{200d}`s and Hindi's vowel signs and viramas
//! as escapes: the person could not recognise what they typed. Here only
//! what would hide or rearrange text is escaped.

use unicode_segmentation::UnicodeSegmentation;

/// Most grapheme clusters of a value [`quote_short`] shows whole.
const SHORT_PREFIX: usize = 24;

/// `text` in double quotes, as written: a quote and a backslash get a
/// backslash, and what would hide or rearrange the text around it is
/// written as `\u{…}` (control characters, line and paragraph
/// separators, bidi controls, invisible spaces and the byte order mark).
/// Joiners, variation selectors and combining marks stay: they are part
/// of what the person typed and shows as such.
pub fn quote_as_written(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hides_text(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `c` would hide or rearrange the text of a message it is
/// quoted in (a bidi override reverses what follows it).
fn hides_text(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// `value` quoted as [`quote_as_written`] does: whole when short, else its
/// first characters (whole grapheme clusters) and its length
/// (`"aaaa…" (65000 characters)`), so that a message about a huge value
/// stays short and still says which it was.
pub fn quote_short(value: &str) -> String {
    let chars = value.chars().count();
    let mut clusters = value.grapheme_indices(true);
    let Some((cut, _)) = clusters.nth(2 * SHORT_PREFIX) else {
        return quote_as_written(value);
    };
    let end = value[..cut]
        .grapheme_indices(true)
        .nth(SHORT_PREFIX)
        .map_or(cut, |(at, _)| at);
    let quoted = quote_as_written(&value[..end]);
    // the closing quote goes after the ellipsis: `"abc…"`
    format!("{}…\" ({chars} characters)", &quoted[..quoted.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (round 20, Chinese-user tester): `{:?}` escaped the
    /// emoji variation selector, zero-width joiners and Indic signs.
    #[test]
    fn text_is_quoted_as_written_but_what_hides_text_is_escaped() {
        assert_eq!(quote_as_written("❤\u{fe0f}"), "\"❤\u{fe0f}\"");
        let family = "👨\u{200d}👩\u{200d}👧\u{200d}👦";
        assert_eq!(quote_as_written(family), format!("\"{family}\""));
        assert_eq!(quote_as_written("हिन्दी"), "\"हिन्दी\"");
        assert_eq!(quote_as_written("供应商"), "\"供应商\"");
        assert_eq!(
            quote_as_written("a\"b\\c\nd\u{202e}e\u{200b}f\u{7}"),
            "\"a\\\"b\\\\c\\nd\\u{202e}e\\u{200b}f\\u{7}\""
        );
    }

    /// What the person sees: the search's refusal quotes the query as
    /// typed (it read "❤\u{fe0f}" and "न\u{94d}दी").
    #[test]
    fn a_refused_query_is_quoted_as_typed() {
        let refusal = crate::QueryError::NoWords {
            query: "❤\u{fe0f}".into(),
        }
        .to_string();
        assert!(
            refusal.starts_with("the search query \"❤\u{fe0f}\" has no searchable words"),
            "{refusal}"
        );
    }

    #[test]
    fn a_long_value_is_cut_between_grapheme_clusters() {
        let long = "x".repeat(65_000);
        assert_eq!(
            quote_short(&long),
            format!("\"{}…\" (65000 characters)", "x".repeat(24))
        );
        let family = "👨\u{200d}👩\u{200d}👧\u{200d}👦";
        let shown = quote_short(&family.repeat(60));
        assert_eq!(
            shown,
            format!("\"{}…\" (420 characters)", family.repeat(24))
        );
        // 48 clusters or fewer are shown whole
        let short = family.repeat(48);
        assert_eq!(quote_short(&short), format!("\"{short}\""));
        assert_eq!(quote_short("a\"b"), "\"a\\\"b\"");
    }
}
