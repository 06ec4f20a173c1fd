//! Snippets: the best fragment of a hit's text with its matches marked
//! `«like this»`.
//!
//! The marks are plain characters rather than HTML, because the first
//! reader is a model (SearchTranscript) and a short marker costs fewer
//! tokens than `<b></b>`. The text is not escaped, so a literal `«` or `»`
//! in it looks like a mark: a client that must tell them apart (the web
//! page) uses [`Snippet::parts`], the same text as alternating plain and
//! matched pieces. A fragment cut from the middle of a longer text starts
//! and/or ends with `…`; a fragment that reaches the end of the text keeps
//! what follows its last word (punctuation) and gets no `…`.
//!
//! A match is an occurrence of a positive part of the query: a term, or a
//! phrase whose terms stand at their relative positions (a quoted phrase, a
//! Chinese word as a phrase of bigrams, `e-mail`). Only the terms of matches
//! are marked, so a phrase query marks its occurrences and not stray
//! occurrences of its words. The text is cut into fragments of about
//! [`FRAGMENT_BYTES`] the way tantivy's `SnippetGenerator` cuts them, except
//! that a fragment is never cut inside a match; the fragment showing most
//! of the query wins: the weights of the distinct parts it holds (rarer
//! terms weigh more), then of all its matches, the earliest on a tie.

use std::collections::HashMap;
use std::ops::Range;

use tantivy::Searcher;
use tantivy::Term;
use tantivy::schema::Field;
use tantivy::tokenizer::Token;

use super::query::Part;
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
/// Most text after the last word that a fragment ending at that word takes
/// along (closing punctuation, a trailing emoji); a longer tail is cut.
const TAIL_BYTES: usize = 32;

/// A hit's snippet in both forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snippet {
    /// The fragment with its matches marked `«…»`.
    pub(crate) marked: String,
    /// The same fragment, unmarked, as alternating pieces: plain text at
    /// even indices, matched text at odd ones (the first piece may be
    /// empty). Unambiguous where `marked` is not: the text's own `«`/`»`
    /// are plain text here.
    pub(crate) parts: Vec<String>,
}

impl Snippet {
    /// A snippet without matches.
    fn plain(text: String) -> Self {
        Self {
            marked: text.clone(),
            parts: vec![text],
        }
    }
}

/// What a match looks like: terms at relative positions (one term at 0 for
/// a plain term).
#[derive(Debug)]
struct Pattern {
    terms: Vec<(usize, String)>,
    /// What one match adds to its fragment's score.
    weight: f32,
}

/// One occurrence of a pattern in a text.
#[derive(Debug)]
struct Match {
    /// First and last token it spans, as indices into the token stream.
    first: usize,
    last: usize,
    /// Byte ranges of its terms in the text.
    marks: Vec<Range<usize>>,
    weight: f32,
    /// Its pattern, an index into [`Snippets::patterns`].
    pattern: usize,
}

/// A candidate fragment: tokens `first..=last`, text bytes `start..stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fragment {
    first: usize,
    last: usize,
    start: usize,
    stop: usize,
}

/// Builds snippets for the hits of one query.
pub(crate) struct Snippets {
    patterns: Vec<Pattern>,
    /// The query's alternatives that can match, each the indices of its
    /// parts' patterns: a text's matches of an alternative are marked only
    /// when every part of it matches in that text.
    alternatives: Vec<Vec<usize>>,
}

impl Snippets {
    /// A generator marking matches of `alternatives` (the positive
    /// alternatives of the query, each a conjunction of parts) in
    /// `field`. A part with a term no document has cannot match: its
    /// alternative is left out. An alternative is marked in a text only
    /// where all its parts match: `供应商 OR 明天的雨` marked the `的` and
    /// `明天` of a text without `雨` (QA, 2026-12-05).
    pub(crate) fn new<'a>(
        searcher: &Searcher,
        field: Field,
        alternatives: impl Iterator<Item = &'a [Part]>,
    ) -> tantivy::Result<Self> {
        let mut term_weights: HashMap<&str, Option<f32>> = HashMap::new();
        // each part's pattern (`None`: it cannot match)
        let mut seen: Vec<(&Part, Option<usize>)> = Vec::new();
        let mut patterns = Vec::new();
        let mut live = Vec::new();
        for alternative in alternatives {
            let mut indices = Vec::with_capacity(alternative.len());
            for part in alternative {
                let index = match seen.iter().find(|(p, _)| *p == part) {
                    Some((_, index)) => *index,
                    None => {
                        let index =
                            pattern_of(searcher, field, part, &mut term_weights)?.map(|pattern| {
                                patterns.push(pattern);
                                patterns.len() - 1
                            });
                        seen.push((part, index));
                        index
                    }
                };
                indices.extend(index);
                if index.is_none() {
                    indices.clear();
                    break;
                }
            }
            if !indices.is_empty() {
                live.push(indices);
            }
        }
        Ok(Self {
            patterns,
            alternatives: live,
        })
    }

    /// The snippet of `text`.
    pub(crate) fn render(&self, text: &str) -> Snippet {
        let tokens = tokens_of(text);
        let matches = self.find(&tokens);
        let Some(fragment) = best_fragment(&fragments(&tokens, &matches), &matches) else {
            return Snippet::plain(head(text));
        };
        let fragment = widened(fragment, &tokens);
        let marks: Vec<Range<usize>> = within(&fragment, &matches)
            .flat_map(|m| m.marks.iter().cloned())
            .collect();
        // A fragment holding the last word reaches the end of the text
        // unless a long tail follows it.
        let stop = if fragment.last + 1 == tokens.len() && text.len() - fragment.stop <= TAIL_BYTES
        {
            text.len()
        } else {
            fragment.stop
        };
        let mut parts = Vec::new();
        let mut plain = String::new();
        if fragment.start > 0 {
            plain.push_str(ELLIPSIS);
        }
        let mut at = fragment.start;
        for mark in merge(&marks) {
            plain.push_str(&text[at..mark.start]);
            parts.push(std::mem::take(&mut plain));
            parts.push(text[mark.clone()].to_owned());
            at = mark.end;
        }
        plain.push_str(&text[at..stop]);
        if stop < text.len() {
            plain.push_str(ELLIPSIS);
        }
        parts.push(plain);
        let mut marked = String::with_capacity(stop - fragment.start + 16);
        for (i, part) in parts.iter().enumerate() {
            if i % 2 == 1 {
                marked.push_str(HIGHLIGHT_OPEN);
                marked.push_str(part);
                marked.push_str(HIGHLIGHT_CLOSE);
            } else {
                marked.push_str(part);
            }
        }
        Snippet { marked, parts }
    }

    /// Every match of every pattern in `tokens`, sorted by first token.
    fn find(&self, tokens: &[Token]) -> Vec<Match> {
        let at: HashMap<(usize, &str), usize> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| ((t.position, t.text.as_str()), i))
            .collect();
        let mut out = Vec::new();
        for token in tokens {
            for (index, pattern) in self.patterns.iter().enumerate() {
                if pattern.terms.first().is_none_or(|(_, t)| *t != token.text) {
                    continue;
                }
                let found: Option<Vec<usize>> = pattern
                    .terms
                    .iter()
                    .map(|(offset, t)| at.get(&(token.position + offset, t.as_str())).copied())
                    .collect();
                let Some(found) = found else {
                    continue;
                };
                let (Some(&first), Some(&last)) = (found.iter().min(), found.iter().max()) else {
                    continue;
                };
                out.push(Match {
                    first,
                    last,
                    marks: found
                        .iter()
                        .map(|&i| tokens[i].offset_from..tokens[i].offset_to)
                        .collect(),
                    weight: pattern.weight,
                    pattern: index,
                });
            }
        }
        // only the alternatives all of whose parts match in this text
        let found: Vec<bool> = (0..self.patterns.len())
            .map(|p| out.iter().any(|m| m.pattern == p))
            .collect();
        let mut marked = vec![false; self.patterns.len()];
        for alternative in &self.alternatives {
            if alternative.iter().all(|&p| found.get(p) == Some(&true)) {
                for &p in alternative {
                    if let Some(slot) = marked.get_mut(p) {
                        *slot = true;
                    }
                }
            }
        }
        out.retain(|m| marked.get(m.pattern) == Some(&true));
        out.sort_by_key(|m| (m.first, m.last));
        out
    }
}

/// The pattern of `part`, weighted by how rare its terms are (`None`
/// when one of them is in no document: it cannot match).
fn pattern_of<'a>(
    searcher: &Searcher,
    field: Field,
    part: &'a Part,
    term_weights: &mut HashMap<&'a str, Option<f32>>,
) -> tantivy::Result<Option<Pattern>> {
    let terms: Vec<(usize, &str)> = match part {
        Part::Term(t) => vec![(0, t.as_str())],
        Part::Phrase(terms) => terms.iter().map(|(o, t)| (*o, t.as_str())).collect(),
    };
    let mut weight = Some(0.0);
    for &(_, text) in &terms {
        let term_weight = match term_weights.get(text) {
            Some(w) => *w,
            None => {
                let doc_freq = searcher.doc_freq(&Term::from_field_text(field, text))?;
                let w = (doc_freq > 0).then(|| 1.0 / (1.0 + doc_freq as f32));
                term_weights.insert(text, w);
                w
            }
        };
        weight = weight.zip(term_weight).map(|(a, b)| a + b);
    }
    Ok(weight.map(|weight| Pattern {
        terms: terms.into_iter().map(|(o, t)| (o, t.to_owned())).collect(),
        weight,
    }))
}

/// The tokens of a text as the index has them.
fn tokens_of(text: &str) -> Vec<Token> {
    let mut analyzer = index_analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut tokens = Vec::new();
    while let Some(token) = stream.next() {
        tokens.push(token.clone());
    }
    tokens
}

/// Cuts the tokens into fragments of about [`FRAGMENT_BYTES`], as tantivy
/// does, except where the cut would fall inside a match: then the next
/// fragment starts at the match (the fragments overlap), or, if the match
/// already starts the fragment, the fragment runs over the budget to its end.
fn fragments(tokens: &[Token], matches: &[Match]) -> Vec<Fragment> {
    // For each token, the first token of the earliest match that spans it
    // without starting at it.
    let mut inside: Vec<Option<usize>> = vec![None; tokens.len()];
    for m in matches {
        for slot in &mut inside[m.first + 1..=m.last] {
            *slot = Some(slot.map_or(m.first, |f| f.min(m.first)));
        }
    }
    let mut out = Vec::new();
    let (mut first, mut start, mut stop) = (0, 0, 0);
    for (k, token) in tokens.iter().enumerate() {
        if token.offset_to - start > FRAGMENT_BYTES {
            match inside[k] {
                Some(from) if from == first => {}
                Some(from) if from > first => {
                    out.push(Fragment {
                        first,
                        last: k - 1,
                        start,
                        stop,
                    });
                    first = from;
                    start = tokens[from].offset_from;
                }
                Some(_) | None => {
                    if k > first {
                        out.push(Fragment {
                            first,
                            last: k - 1,
                            start,
                            stop,
                        });
                    }
                    first = k;
                    start = token.offset_from;
                }
            }
        }
        stop = token.offset_to;
    }
    if tokens.len() > first {
        out.push(Fragment {
            first,
            last: tokens.len() - 1,
            start,
            stop,
        });
    }
    out
}

/// The fragment that shows most of the query: the weights of the distinct
/// patterns it holds, each counted once, then the weight of all its
/// matches, the earliest on a tie; `None` if no fragment holds a match.
/// Summing every match alone let eleven `deploy`s beat a fragment with
/// `deploy` and `rollback` of a query needing both, and the snippet hid
/// why the text matched (QA, 2026-12-07).
fn best_fragment(fragments: &[Fragment], matches: &[Match]) -> Option<Fragment> {
    let mut best: Option<((f32, f32), Fragment)> = None;
    let mut seen: Vec<usize> = Vec::new();
    for fragment in fragments {
        seen.clear();
        let (mut covered, mut total) = (0.0f32, 0.0f32);
        for m in within(fragment, matches) {
            total += m.weight;
            if !seen.contains(&m.pattern) {
                seen.push(m.pattern);
                covered += m.weight;
            }
        }
        let score = (covered, total);
        if total > 0.0 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, *fragment));
        }
    }
    best.map(|(_, fragment)| fragment)
}

/// `fragment` with the words before it that fit in [`FRAGMENT_BYTES`]
/// with it: the last fragment of a text is what the cuts before it left,
/// maybe a few words, and a match there was shown with almost nothing
/// around it (`…today, and finally the supplier «onboarding»` of a 270-byte
/// text: QA, 2026-12-05). A fragment already at the budget is unchanged.
fn widened(mut fragment: Fragment, tokens: &[Token]) -> Fragment {
    while fragment.first > 0 {
        let before = &tokens[fragment.first - 1];
        if fragment.stop - before.offset_from > FRAGMENT_BYTES {
            break;
        }
        fragment.first -= 1;
        fragment.start = before.offset_from;
    }
    fragment
}

/// The matches lying wholly in a fragment (`matches` sorted by first token).
fn within<'a>(fragment: &Fragment, matches: &'a [Match]) -> impl Iterator<Item = &'a Match> {
    let from = matches.partition_point(|m| m.first < fragment.first);
    let (first, last) = (fragment.first, fragment.last);
    matches[from..]
        .iter()
        .take_while(move |m| m.first <= last)
        .filter(move |m| m.first >= first && m.last <= last)
}

/// Sorts highlight ranges and merges overlapping or touching ones (the
/// bigrams of one CJK match overlap: `供应`+`应商` is one mark `«供应商»`).
fn merge(ranges: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut sorted = ranges.to_vec();
    sorted.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<Range<usize>> = Vec::with_capacity(sorted.len());
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
