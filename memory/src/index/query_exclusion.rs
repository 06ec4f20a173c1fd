//! Exclusions (`-word`, `-"a phrase"`) in a form tantivy evaluates safely.
//!
//! tantivy 0.27's `Exclude` (what a boolean query's `MustNot` clauses
//! become) asks each excluded scorer `seek_danger(doc)` for every candidate
//! `doc`, even when that scorer already stands past `doc`: a new scorer
//! stands on its first match, and a phrase that never occurs is at the end
//! from the start. `seek_danger` is only meant for targets at or after the
//! scorer's document, and `PhraseScorer::seek_danger` checks that with a
//! `debug_assert!` ("target (63) should be greater than or equal to doc
//! (2147483647)"): in a debug build every search that excluded a phrase or
//! a Chinese word (a phrase of bigrams) panicked. In a release build the
//! assert is compiled out and the answer comes out right (the postings'
//! default `seek_danger` answers a target behind them with their own
//! document, "not here"), but only because of code that promises nothing.
//!
//! Wrapping the phrase in a `BooleanQuery` of its own does not help: a
//! one-clause boolean query hands out its clause's scorer unchanged, and
//! intersections pass `seek_danger` on to their parts. So each excluded
//! clause is wrapped in [`Excluded`], whose scorer keeps the trait's
//! default `seek_danger`: it looks at `doc()` first and only ever seeks
//! forward (`seek`), so the wrapped scorer never sees a target behind it
//! and never leaves a valid state. Excluded clauses add no score, so the
//! cost is one indirect call per candidate.

use tantivy::DocId;
use tantivy::DocSet;
use tantivy::Score;
use tantivy::SegmentReader;
use tantivy::Term;
use tantivy::query::EmptyScorer;
use tantivy::query::EnableScoring;
use tantivy::query::Explanation;
use tantivy::query::Query;
use tantivy::query::Scorer;
use tantivy::query::Weight;

/// A query to exclude, evaluated so that tantivy's `Exclude` never seeks
/// it backwards (see the module docs).
#[derive(Debug)]
pub(super) struct Excluded(Box<dyn Query>);

impl Excluded {
    /// Wraps the query of an excluded clause.
    pub(super) fn new(query: Box<dyn Query>) -> Self {
        Self(query)
    }
}

impl Clone for Excluded {
    fn clone(&self) -> Self {
        Self(self.0.box_clone())
    }
}

impl Query for Excluded {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(ExcludedWeight(self.0.weight(enable_scoring)?)))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        self.0.query_terms(visitor);
    }
}

/// The weight of an [`Excluded`] query: the inner weight, whose scorers it
/// wraps in [`SeekForward`].
struct ExcludedWeight(Box<dyn Weight>);

impl Weight for ExcludedWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let scorer = self.0.scorer(reader, boost)?;
        // an empty scorer is never sought, and the boolean query drops it
        // from the exclusions only when it sees it as such
        if scorer.is::<EmptyScorer>() {
            return Ok(scorer);
        }
        Ok(Box::new(SeekForward(scorer)))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        self.0.explain(reader, doc)
    }

    fn count(&self, reader: &SegmentReader) -> tantivy::Result<u32> {
        self.0.count(reader)
    }
}

/// A scorer that answers `seek_danger` with the trait's default (look at
/// `doc()`, seek only forward) instead of the wrapped scorer's own.
struct SeekForward(Box<dyn Scorer>);

impl DocSet for SeekForward {
    fn advance(&mut self) -> DocId {
        self.0.advance()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        self.0.seek(target)
    }

    // `seek_danger` is deliberately not forwarded: the default is the fix.

    fn doc(&self) -> DocId {
        self.0.doc()
    }

    fn size_hint(&self) -> u32 {
        self.0.size_hint()
    }

    fn cost(&self) -> u64 {
        self.0.cost()
    }
}

impl Scorer for SeekForward {
    fn score(&mut self) -> Score {
        self.0.score()
    }
}
