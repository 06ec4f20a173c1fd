//! A summariser's answer read only as far as the summary can use.
//!
//! A compaction asks for at most `summary_tokens` (its `max_tokens`), and
//! keeps no more than that ([`super::bounds::bounded_summary`]). A server
//! that ignores `max_tokens` (some OpenAI-compatible servers do, and a
//! proxy may drop it) kept the call reading until the answer ended or
//! passed `max_response_bytes`: megabytes and minutes of text that were
//! cut away afterwards, while a person's turn waited for the compaction
//! (a 290 KB summary took over 30 s to read in a debug build under load).
//! [`SummaryCap`] stops the stream once the summary's part of the text
//! passes [`BYTES_PER_TOKEN`] bytes a token of the bound: more than any
//! text but a pathological one holds in that many tokens, so what is kept
//! is the same as if the whole answer had been read. The text stopped
//! there is the summary, cut off at its bound.
//!
//! A leading reasoning block (`<think>…</think>`, from a thinking model
//! served without a reasoning parser) is not the summary and does not
//! count: the cap applies to what follows it.

use crate::model::SinkControl;
use crate::model::StreamSink;
use crate::model::reasoning_text::after_reasoning;

/// Bytes of text read for each token of the summary's bound: twice what
/// `clip_tokens` first tries (8), so the clip never lacks text.
const BYTES_PER_TOKEN: usize = 16;

/// Why the stream was stopped, as the call's abort gives it.
pub(super) const CAPPED: &str =
    "the summary passed its token bound; the rest of the answer was not read";

/// Stops a summariser's stream past its bound (module docs).
#[derive(Debug)]
pub(super) struct SummaryCap {
    /// The most bytes of summary text read.
    cap: usize,
    /// The text so far (the answer's start, which may be reasoning).
    text: String,
    /// The length of `text` at which to look again.
    next_check: usize,
    /// Whether this sink stopped the stream.
    pub(super) tripped: bool,
}

impl SummaryCap {
    /// A cap for a summary of at most `summary_tokens` tokens.
    pub(super) fn new(summary_tokens: u64) -> Self {
        let cap = usize::try_from(summary_tokens)
            .unwrap_or(usize::MAX)
            .saturating_mul(BYTES_PER_TOKEN);
        Self {
            cap,
            text: String::new(),
            next_check: cap,
            tripped: false,
        }
    }
}

impl StreamSink for SummaryCap {
    fn on_text(&mut self, delta: &str) -> SinkControl {
        self.text.push_str(delta);
        // looked at each time the text grows by half the cap, so a long
        // reasoning block costs a few scans, not one per delta
        if self.text.len() < self.next_check {
            return SinkControl::Continue;
        }
        self.next_check = self.text.len().saturating_add(self.cap / 2 + 1);
        match after_reasoning(&self.text) {
            Ok(summary) if summary.len() > self.cap => {
                self.tripped = true;
                SinkControl::Abort {
                    reason: CAPPED.to_owned(),
                }
            }
            // short yet, or still inside the reasoning block
            Ok(_) | Err(_) => SinkControl::Continue,
        }
    }

    fn on_restart(&mut self) {
        self.text.clear();
        self.next_check = self.cap;
        self.tripped = false;
    }
}

#[cfg(test)]
mod tests {
    use super::SummaryCap;
    use crate::model::SinkControl;
    use crate::model::StreamSink;

    fn feed(cap: &mut SummaryCap, text: &str, piece: usize) -> Option<usize> {
        let mut read = 0;
        for chunk in text.as_bytes().chunks(piece) {
            let chunk = std::str::from_utf8(chunk).unwrap();
            read += chunk.len();
            if let SinkControl::Abort { .. } = cap.on_text(chunk) {
                return Some(read);
            }
        }
        None
    }

    #[test]
    fn a_long_answer_is_stopped_past_the_bound() {
        let mut cap = SummaryCap::new(10);
        let read = feed(&mut cap, &"word ".repeat(10_000), 7).expect("stopped");
        assert!(cap.tripped);
        assert!((160..=250).contains(&read), "read {read} bytes");
    }

    #[test]
    fn an_answer_within_the_bound_is_read_whole() {
        let mut cap = SummaryCap::new(100);
        assert_eq!(feed(&mut cap, &"word ".repeat(300), 7), None);
        assert!(!cap.tripped);
    }

    #[test]
    fn a_leading_reasoning_block_does_not_count() {
        let mut cap = SummaryCap::new(10);
        let answer = format!("<think>{}</think>short summary", "hmm ".repeat(5_000));
        assert_eq!(feed(&mut cap, &answer, 50), None);
        let long = format!(
            "<think>{}</think>{}",
            "hmm ".repeat(100),
            "word ".repeat(1_000)
        );
        assert!(feed(&mut SummaryCap::new(10), &long, 50).is_some());
    }

    #[test]
    fn a_restart_forgets_the_text_before_it() {
        let mut cap = SummaryCap::new(10);
        assert_eq!(feed(&mut cap, &"a".repeat(150), 10), None);
        cap.on_restart();
        assert_eq!(feed(&mut cap, &"a".repeat(150), 10), None);
    }
}
