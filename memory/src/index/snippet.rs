//! Snippets: the best fragment of a hit's text with its matches marked
//! `«like this»`.
//!
//! The marks are plain characters rather than HTML, because the first
//! reader is a model (SearchTranscript) and a short, unambiguous marker
//! costs fewer tokens than `<b></b>`. The text is not escaped; a web client
//! escapes it and turns `«`/`»` into `<mark>` after. A fragment cut from the
//! middle of a longer text starts and/or ends with `…`.

use std::collections::BTreeMap;

use tantivy::Searcher;
use tantivy::Term;
use tantivy::schema::Field;
use tantivy::snippet::SnippetGenerator;

use super::tokenizer::index_analyzer;

/// Opens a highlight.
pub const HIGHLIGHT_OPEN: &str = "«";
/// Closes a highlight.
pub const HIGHLIGHT_CLOSE: &str = "»";
/// Marks text cut away before or after a fragment.
const ELLIPSIS: &str = "…";
/// Fragment length budget, in bytes of text (tantivy measures bytes):
/// about 80 Latin words' worth or 80 CJK characters.
const FRAGMENT_BYTES: usize = 240;

/// Builds snippets for the hits of one query.
pub(crate) struct Snippets {
    generator: SnippetGenerator,
}

impl Snippets {
    /// A generator highlighting `terms` (indexed term texts) of `field`.
    pub(crate) fn new<'a>(
        searcher: &Searcher,
        field: Field,
        terms: impl Iterator<Item = &'a str>,
    ) -> tantivy::Result<Self> {
        let mut weights = BTreeMap::new();
        for text in terms {
            if weights.contains_key(text) {
                continue;
            }
            let doc_freq = searcher.doc_freq(&Term::from_field_text(field, text))?;
            if doc_freq > 0 {
                weights.insert(text.to_owned(), 1.0 / (1.0 + doc_freq as f32));
            }
        }
        Ok(Self {
            generator: SnippetGenerator::new(weights, index_analyzer(), field, FRAGMENT_BYTES),
        })
    }

    /// The marked snippet of `text`.
    pub(crate) fn render(&self, text: &str) -> String {
        let snippet = self.generator.snippet(text);
        let fragment = snippet.fragment();
        if fragment.is_empty() {
            return head(text);
        }
        let range = snippet.fragment_range();
        let mut out = String::with_capacity(fragment.len() + 16);
        if range.start > 0 {
            out.push_str(ELLIPSIS);
        }
        let mut at = 0;
        for mark in merge(snippet.highlighted()) {
            out.push_str(&fragment[at..mark.start]);
            out.push_str(HIGHLIGHT_OPEN);
            out.push_str(&fragment[mark.clone()]);
            out.push_str(HIGHLIGHT_CLOSE);
            at = mark.end;
        }
        out.push_str(&fragment[at..]);
        if range.end < text.len() {
            out.push_str(ELLIPSIS);
        }
        out
    }
}

/// Sorts highlight ranges and merges overlapping or touching ones (the
/// bigrams of one CJK match overlap: `供应`+`应商` is one mark `«供应商»`).
fn merge(ranges: &[std::ops::Range<usize>]) -> Vec<std::ops::Range<usize>> {
    let mut sorted = ranges.to_vec();
    sorted.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<std::ops::Range<usize>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The start of a text without matches to show.
fn head(text: &str) -> String {
    let cut = text
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|&end| end <= FRAGMENT_BYTES)
        .last()
        .unwrap_or(0);
    if cut < text.len() {
        format!("{}{ELLIPSIS}", &text[..cut])
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_overlapping_and_touching_marks() {
        assert_eq!(merge(&[3..9, 0..6, 12..15]), vec![0..9, 12..15]);
        assert_eq!(merge(&[0..3, 3..6]), vec![0..6]);
    }

    #[test]
    fn head_cuts_on_a_char_boundary() {
        let text = "供".repeat(100);
        let h = head(&text);
        assert!(h.ends_with(ELLIPSIS));
        assert_eq!(h.chars().count(), FRAGMENT_BYTES / 3 + 1);
        assert_eq!(head("short"), "short");
    }
}
