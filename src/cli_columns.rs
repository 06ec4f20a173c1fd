//! Tables of the CLI (`botfleet bots`, `botfleet group list`): columns as
//! wide as their widest cell, measured in terminal cells.
//!
//! Cells are mostly others' text (ids, display names, room names, a
//! subagent's name holding what its parent's model wrote), so each is
//! escaped first ([`super::terminal::text`], and newlines and tabs too,
//! which would break the row) and measured as escaped. `{:<24}` pads by
//! characters, so a row with Chinese or emoji (two cells per character)
//! pushed the rest of its row out of line; a long name can be [`cut`]
//! to a width, between grapheme clusters.

use std::fmt::Write as _;

use unicode_segmentation::UnicodeSegmentation as _;
use unicode_width::UnicodeWidthStr as _;

use super::terminal;

/// How a column lines its cells up.
#[derive(Clone, Copy)]
pub(super) enum Align {
    Left,
    Right,
}

/// `s` as it will print: escaped for the terminal, with newlines and tabs
/// escaped too, so the cell stays on its row and its width is its length.
pub(super) fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in terminal::text(s).chars() {
        match c {
            '\n' | '\t' => {
                // writing to a String cannot fail
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// `s` if it takes at most `max` terminal cells, else its longest start
/// that ends between two grapheme clusters and fits with `…` after it
/// (an emoji sequence or a letter with its accents is never split).
pub(super) fn cut(s: &str, max: usize) -> String {
    if s.width() <= max {
        return s.to_owned();
    }
    let room = max.saturating_sub(1);
    let mut end = 0;
    for (at, cluster) in s.grapheme_indices(true) {
        if s[..at + cluster.len()].width() > room {
            break;
        }
        end = at + cluster.len();
    }
    format!("{}…", &s[..end])
}

/// The rows as lines, each column as wide as its widest cell (in the
/// terminal's cells: a CJK character takes two) and one space between
/// columns; no trailing spaces.
pub(super) fn table<const N: usize>(rows: &[[String; N]], align: &[Align; N]) -> Vec<String> {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.width());
        }
    }
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (i, ((cell, width), align)) in row.iter().zip(widths).zip(align).enumerate() {
                if i > 0 {
                    line.push(' ');
                }
                // `{:<w$}` pads by characters, not by cells
                let pad = " ".repeat(width.saturating_sub(cell.width()));
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            line.trim_end().to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn row(cells: [&str; 3]) -> [String; 3] {
        cells.map(str::to_owned)
    }

    /// A CJK name takes two cells per character: the columns after it
    /// line up with those of an ASCII row.
    #[test]
    fn wide_characters_count_as_two_cells() {
        let lines = table(
            &[
                row(["ID", "NAME", "COMPLETED"]),
                row(["r", "研究员", "12"]),
                row(["w", "W🤖", "3"]),
            ],
            &[Align::Left, Align::Left, Align::Right],
        );
        assert_eq!(
            lines,
            vec![
                "ID NAME   COMPLETED",
                "r  研究员        12",
                "w  W🤖            3",
            ]
        );
    }

    /// A long name is cut to the width with `…`, between clusters: never
    /// inside an emoji sequence, a flag, a letter with its accent or a
    /// Devanagari conjunct.
    #[test]
    fn a_long_name_is_cut_between_grapheme_clusters() {
        assert_eq!(cut("研究员", 6), "研究员");
        assert_eq!(cut("很长的房间名字", 9), "很长的房…");
        assert_eq!(cut("很长的房间名字", 10), "很长的房…");
        let family = "👨\u{200d}👩\u{200d}👧\u{200d}👦";
        assert_eq!(cut(&family.repeat(10), 7), format!("{}…", family.repeat(3)));
        assert_eq!(cut(&"🇨🇳".repeat(10), 6), "🇨🇳🇨🇳…");
        assert_eq!(cut(&"e\u{301}".repeat(10), 4), "e\u{301}e\u{301}e\u{301}…");
        assert_eq!(cut("क्षत्रिय", 3), "क्ष…");
        for (s, max) in [("👩🏽\u{200d}💻".repeat(9), 9), ("ab".repeat(30), 1)] {
            let shown = cut(&s, max);
            assert!(shown.width() <= max, "{shown}");
            assert!(s.starts_with(shown.trim_end_matches('…')), "{shown}");
        }
    }
}
