//! Which log entries the prompt shows: the best `cap` by
//!
//! ```text
//! score = (1 + relevance_weight · bm25(input, entry)) · 0.5^(age / half_life) · weight(importance)
//! ```
//!
//! with `relevance_weight` 2 and `half_life` 30 days by default: an entry
//! that shares two rare terms with the input (bm25 ≈ 1.5–2) still beats an
//! unrelated entry of today when it is two months old.
//!
//! - **Relevance** is Okapi BM25 of the current input against each entry,
//!   with the entries of the candidate set as the corpus (k1 = 1.2,
//!   b = 0.75, idf = ln(1 + (N − n + ½)/(n + ½)), each distinct query term
//!   counted once). Terms are the transcript index's query units: Latin
//!   words case- and accent-folded and stemmed, CJK runs as overlapping
//!   bigrams (one character alone as itself), so `供应商` matches
//!   `新供应商名单`, `Suppliers` matches `supplier` and `Zurich` matches
//!   `Zürich`. An entry's letter-prefixed numbers also give their
//!   digits and letters, as the index's do (`x86` gives `86`, `iPhone15`
//!   gives `iphone`), so an input of `86` or `iPhone` meets them as a
//!   search does. A short list of English function
//!   words (`the`, `with`, `what`, …) is left out: in a log of a few dozen
//!   entries their idf does not push them down enough. The `1 +` keeps an entry that shares
//!   nothing with the input in the running, ranked by recency and weight,
//!   so an empty input shows the newest, most important entries.
//! - **Recency** halves every `half_life_days` (30 by default) after the
//!   entry's date; an entry dated in the future counts as new.
//! - **Importance** 1..=5 weighs 0.5, 0.75, 1, 1.5, 2.
//!
//! Ties (equal scores) go to the newer entry, then the smaller id, so the
//! result is a pure function of the set of entries, the input and `now`:
//! the order the entries come in does not matter.

use std::collections::HashSet;

use serde::Deserialize;
use serde::Serialize;
use tantivy::tokenizer::TextAnalyzer;
use tantivy::tokenizer::TokenStream;

use super::types::Importance;
use super::types::MemoryId;
use super::types::MemoryItem;
use crate::index::query_analyzer;
use crate::index::recall_analyzer;

/// How many log entries the prompt takes by default.
pub const LOG_PROMPT_CAP: usize = 30;

const DAY_MS: f64 = 86_400_000.0;

/// Parameters of log recall.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecallParams {
    /// Most entries returned.
    pub cap: usize,
    /// Days after which an entry's recency weight halves.
    pub half_life_days: f64,
    /// Multiplies the BM25 relevance before the `1 +`.
    pub relevance_weight: f64,
    /// BM25 term-frequency saturation.
    pub k1: f64,
    /// BM25 length normalisation.
    pub b: f64,
}

impl Default for RecallParams {
    fn default() -> Self {
        Self {
            cap: LOG_PROMPT_CAP,
            half_life_days: 30.0,
            relevance_weight: 2.0,
            k1: 1.2,
            b: 0.75,
        }
    }
}

/// A log entry with its score and the factors of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredEntry {
    /// The entry.
    pub item: MemoryItem,
    /// The product below.
    pub score: f64,
    /// BM25 of the input against the entry (0 when nothing is shared).
    pub relevance: f64,
    /// 0.5^(age / half-life).
    pub recency: f64,
    /// Importance weight.
    pub weight: f64,
}

/// English function words left out of recall terms (as the stemmer
/// leaves them).
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "ani", "are", "as", "at", "be",
    "been", "but", "by", "can", "could", "did", "do", "doe", "for", "from", "had", "has", "have",
    "he", "her", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no",
    "not", "of", "on", "or", "our", "she", "so", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "to", "up", "us", "was", "we", "were", "what", "when",
    "where", "which", "who", "will", "with", "would", "you", "your",
];

/// The recall terms of a text (see the module docs).
pub fn terms(text: &str) -> Vec<String> {
    terms_with(&mut query_analyzer(), text)
}

fn terms_with(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        let t = &stream.token().text;
        if !STOP_WORDS.contains(&t.as_str()) {
            out.push(t.clone());
        }
    }
    out
}

/// The stored form of a text's terms: its recall terms (an input's
/// [`terms`], and the parts of its letter-prefixed numbers) joined by
/// spaces (terms never contain whitespace). Written with every log entry,
/// so ranking at prompt time does not tokenize.
pub(crate) fn stored_terms(text: &str) -> String {
    terms_with(&mut recall_analyzer(), text).join(" ")
}

/// One log entry as ranking sees it.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) id: MemoryId,
    pub(crate) created_at: i64,
    pub(crate) importance: Importance,
    /// [`stored_terms`] of its text.
    pub(crate) terms: String,
}

/// The factors of one candidate's score.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Factors {
    pub(crate) score: f64,
    pub(crate) relevance: f64,
    pub(crate) recency: f64,
    pub(crate) weight: f64,
}

/// The distinct recall terms of an input, in order.
pub(crate) fn query_terms(input: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    terms(input)
        .into_iter()
        .filter(|t| seen.insert(t.clone()))
        .collect()
}

/// Scores `candidates` for `query` and returns the best `params.cap` as
/// (index into `candidates`, factors), best first.
pub(crate) fn rank_candidates(
    candidates: &[&Candidate],
    query: &[String],
    now_ms: i64,
    params: &RecallParams,
) -> Vec<(usize, Factors)> {
    if params.cap == 0 || candidates.is_empty() {
        return Vec::new();
    }
    // term frequencies of the query terms only, and document lengths
    let mut tfs: Vec<Vec<u32>> = Vec::with_capacity(candidates.len());
    let mut lengths: Vec<f64> = Vec::with_capacity(candidates.len());
    let mut df = vec![0u32; query.len()];
    for c in candidates {
        let mut tf = vec![0u32; query.len()];
        let mut len = 0u32;
        for t in c.terms.split(' ').filter(|t| !t.is_empty()) {
            len += 1;
            if let Some(k) = query.iter().position(|q| q == t) {
                tf[k] += 1;
            }
        }
        for (k, f) in tf.iter().enumerate() {
            if *f > 0 {
                df[k] += 1;
            }
        }
        tfs.push(tf);
        lengths.push(f64::from(len));
    }
    let n = candidates.len() as f64;
    let avg_len = (lengths.iter().sum::<f64>() / n).max(1.0);
    let idf: Vec<f64> = df
        .iter()
        .map(|d| {
            let d = f64::from(*d);
            (1.0 + (n - d + 0.5) / (d + 0.5)).ln()
        })
        .collect();
    let mut scored: Vec<(usize, Factors)> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let norm = params.k1 * (1.0 - params.b + params.b * lengths[i] / avg_len);
            let relevance: f64 = tfs[i]
                .iter()
                .zip(&idf)
                .filter(|(f, _)| **f > 0)
                .map(|(f, idf)| {
                    let f = f64::from(*f);
                    idf * f * (params.k1 + 1.0) / (f + norm)
                })
                .sum::<f64>()
                // the sum of no terms is -0.0 (shown "-0.000"); -0.0 + 0.0 is 0.0
                + 0.0;
            let age_days = (now_ms - c.created_at).max(0) as f64 / DAY_MS;
            let recency = if params.half_life_days > 0.0 {
                0.5f64.powf(age_days / params.half_life_days)
            } else {
                1.0
            };
            let weight = c.importance.weight();
            let score = (1.0 + params.relevance_weight * relevance) * recency * weight;
            (
                i,
                Factors {
                    score,
                    relevance,
                    recency,
                    weight,
                },
            )
        })
        .collect();
    // best first: higher score, then newer, then smaller id
    scored.sort_by(|(i, a), (j, b)| {
        let (ci, cj) = (&candidates[*i], &candidates[*j]);
        b.score
            .total_cmp(&a.score)
            .then_with(|| cj.created_at.cmp(&ci.created_at))
            .then_with(|| ci.id.cmp(&cj.id))
    });
    scored.truncate(params.cap);
    scored
}

/// Ranks `entries` for `input` at `now_ms` and keeps the best
/// `params.cap`, best first. (The store ranks the same way from the terms
/// it keeps with each entry.)
pub fn rank_log(
    entries: Vec<MemoryItem>,
    input: &str,
    now_ms: i64,
    params: &RecallParams,
) -> Vec<ScoredEntry> {
    let candidates: Vec<Candidate> = entries
        .iter()
        .map(|e| Candidate {
            id: e.id.clone(),
            created_at: e.created_at,
            importance: e.importance,
            terms: stored_terms(&e.text),
        })
        .collect();
    let refs: Vec<&Candidate> = candidates.iter().collect();
    let ranked = rank_candidates(&refs, &query_terms(input), now_ms, params);
    let mut slots: Vec<Option<MemoryItem>> = entries.into_iter().map(Some).collect();
    ranked
        .into_iter()
        .filter_map(|(i, f)| {
            Some(ScoredEntry {
                item: slots[i].take()?,
                score: f.score,
                relevance: f.relevance,
                recency: f.recency,
                weight: f.weight,
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "recall_tests.rs"]
mod tests;
