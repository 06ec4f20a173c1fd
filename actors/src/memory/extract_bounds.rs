//! The bounds of the fact extraction's request, derived from the bot's
//! provider's `compact_at_tokens` (T) as a turn's request is: every text
//! the extractor reads (each message of the person's, the reply) is
//! clipped to the turn's per-message cap (`entry_cap`, a quarter of T, at
//! least 1,000 tokens), and together they share the turn's budget (half of
//! T, at least that cap) fairly; the memory it is shown takes at most two
//! memory blocks' worth (the frozen block and an update,
//! [`super::render::memory_budget`]). A 20,000-character message went
//! whole into the request (folded messages joined in full), and on a
//! small-window model the extraction failed on its context, which was
//! only logged.

use botfleet_memory::Encoding;

use super::render::memory_budget;
use crate::engine::request_clip::Cut;
use crate::engine::request_clip::clip;
use crate::engine::request_clip::entry_cap;
use crate::engine::request_clip::fair_shares;
use crate::engine::turn_budget;
use crate::prompts::prompts;

/// The token bounds of one extraction request (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExtractBounds {
    /// Tokens one text may take.
    pub(crate) text_cap: u64,
    /// Tokens the texts take together.
    pub(crate) texts_budget: u64,
    /// Tokens of the shown memory's lines.
    pub(crate) shown_budget: u64,
    /// The provider's tokenizer.
    pub(crate) encoding: Encoding,
}

impl ExtractBounds {
    /// The bounds for a provider with threshold `compact_at_tokens`.
    pub(crate) fn of(compact_at_tokens: u64, encoding: Encoding) -> Self {
        let budget = turn_budget(compact_at_tokens);
        let text_cap = entry_cap(budget);
        Self {
            text_cap,
            texts_budget: budget.max(text_cap),
            shown_budget: memory_budget(compact_at_tokens).saturating_mul(2),
            encoding,
        }
    }

    /// The person's messages and the reply, each clipped to its share
    /// (its start and its end around a note, `prompts/extract_clipped.md`):
    /// what fits stays whole.
    pub(crate) fn texts(&self, user_texts: &[String], reply: &str) -> (Vec<String>, String) {
        let all: Vec<&str> = user_texts
            .iter()
            .map(String::as_str)
            .chain([reply])
            .collect();
        let sizes: Vec<u64> = all
            .iter()
            .map(|t| u64::from(self.encoding.count(t)))
            .collect();
        let shares = fair_shares(&sizes, self.texts_budget);
        let mut out: Vec<String> = all
            .iter()
            .zip(shares)
            .map(|(text, share)| {
                let limit = share.map_or(self.text_cap, |s| s.min(self.text_cap));
                clip(text, limit, self.encoding, &render_cut).unwrap_or_else(|| (*text).to_owned())
            })
            .collect();
        // `all` ends with the reply
        let reply = out.pop().unwrap_or_default();
        (out, reply)
    }

    /// The shown memory's lines that fit the bound, in order (the items
    /// after them are not offered for replacing or removing in the
    /// request; the blocks they came from are bounded, so this only cuts
    /// what an older version recorded).
    pub(crate) fn shown(&self, lines: Vec<String>) -> Vec<String> {
        let mut left = self.shown_budget;
        lines
            .into_iter()
            .take_while(|l| {
                let tokens = u64::from(self.encoding.count(l)) + 1;
                let fits = tokens <= left;
                left = left.saturating_sub(tokens);
                fits
            })
            .collect()
    }
}

fn render_cut(cut: Cut<'_>) -> String {
    prompts()
        .extract_clipped
        .render(&[
            ("head", cut.head),
            ("tail", cut.tail),
            ("cut", &cut.cut.to_string()),
            ("chars", &cut.chars.to_string()),
        ])
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "extract_bounds_tests.rs"]
mod tests;
