//! The parts of secrets that the cut ends of a piece go through, found
//! exactly in the bytes of the longer text around the piece (Read's
//! window on a file keeps them: `tools/read_window.rs`).
//!
//! No search of the piece alone finds such a part: it is not the whole
//! secret. [`Redactor::scrub_piece`] guesses from the piece alone (a
//! start of a secret of at least `PARTIAL_MIN_CHARS` at its end), so it
//! lets shorter parts through and hides innocent text that only looks
//! like one; with the bytes around the piece there is nothing to guess.

use std::borrow::Cow;
use std::ops::Range;

use super::Redactor;
use super::merged;
use super::replaced;

/// A piece of a longer text with the bytes of that text around it.
struct Joined<'a> {
    before: &'a [u8],
    piece: &'a [u8],
    after: &'a [u8],
}

impl Joined<'_> {
    fn len(&self) -> usize {
        self.before.len() + self.piece.len() + self.after.len()
    }

    /// The bytes in `range` of the joined text.
    fn bytes(&self, range: Range<usize>) -> Vec<u8> {
        let mut out = Vec::with_capacity(range.len());
        let mut at = 0;
        for part in [self.before, self.piece, self.after] {
            let (lo, hi) = (range.start.max(at), range.end.min(at + part.len()));
            if lo < hi {
                out.extend_from_slice(&part[lo - at..hi - at]);
            }
            at += part.len();
        }
        out
    }
}

impl Redactor {
    /// `piece`, cut out of a longer text of which `before` and `after`
    /// are the bytes just before and just after it, with every part of a
    /// secret that a cut end goes through replaced by
    /// [`REDACTED`](super::REDACTED), and with it every secret that
    /// overlaps that part (it is no longer whole once the part is
    /// replaced). The secrets wholly inside are left as they are, for
    /// [`Redactor::scrub`]: this looks only near the ends.
    ///
    /// Empty `before` (or `after`) means the piece starts (ends) where the
    /// text does. With [`Redactor::longest`] − 1 bytes on each side (fewer
    /// only where the text ends) every secret through a cut is found
    /// whole, so not one char of it shows and nothing else is hidden.
    pub fn hide_cut_parts<'a>(&self, piece: &'a str, before: &[u8], after: &[u8]) -> Cow<'a, str> {
        let joined = Joined {
            before,
            piece: piece.as_bytes(),
            after,
        };
        let (start, end) = (before.len(), before.len() + piece.len());
        let mut hide = Vec::new();
        if !before.is_empty() {
            // from the start on, as far as secrets through it, or through
            // the end of those, reach
            let mut reach = start;
            while reach < end {
                match self.through(&joined, reach) {
                    Some(span) => reach = span.end,
                    None => break,
                }
            }
            if reach > start {
                hide.push(0..reach.min(end) - start);
            }
        }
        if !after.is_empty() {
            let mut from = end;
            while from > start {
                match self.through(&joined, from) {
                    Some(span) => from = span.start,
                    None => break,
                }
            }
            if from < end {
                hide.push(from.max(start) - start..piece.len());
            }
        }
        if hide.is_empty() {
            return Cow::Borrowed(piece);
        }
        for range in &mut hide {
            // a match of a secret starts and ends on chars already; this
            // keeps a `before` that does not from splitting one
            while !piece.is_char_boundary(range.start) {
                range.start -= 1;
            }
            while !piece.is_char_boundary(range.end) {
                range.end += 1;
            }
        }
        Cow::Owned(replaced(piece, &merged(hide)))
    }

    /// The bytes of `joined` that the occurrences of secrets going through
    /// byte `at` (starting before it and ending after it) cover, from the
    /// first start to the last end; `None` for no such occurrence.
    fn through(&self, joined: &Joined<'_>, at: usize) -> Option<Range<usize>> {
        // every occurrence through `at` lies in this region
        let shared = self.shared_now();
        let longest = self
            .max_len
            .max(shared.as_ref().map_or(0, |now| now.longest()));
        let reach = longest.saturating_sub(1);
        let lo = at.saturating_sub(reach);
        let region = joined.bytes(lo..joined.len().min(at + reach));
        let mut span: Option<Range<usize>> = None;
        // the shared set's, the longest at each start (which covers the
        // others there)
        for found in shared.iter().flat_map(|now| now.occurrences(&region)) {
            let (s, e) = (lo + found.start, lo + found.end);
            if s < at && at < e {
                span = Some(match span {
                    Some(span) => span.start.min(s)..span.end.max(e),
                    None => s..e,
                });
            }
        }
        for pattern in &self.patterns {
            let pattern = pattern.expose().as_bytes();
            if pattern.is_empty() {
                // never made (`Redactor::new` skips empty secrets)
                continue;
            }
            for (i, bytes) in region.windows(pattern.len()).enumerate() {
                let (s, e) = (lo + i, lo + i + pattern.len());
                if s < at && at < e && bytes == pattern {
                    span = Some(match span {
                        Some(span) => span.start.min(s)..span.end.max(e),
                        None => s..e,
                    });
                }
            }
        }
        span
    }
}
