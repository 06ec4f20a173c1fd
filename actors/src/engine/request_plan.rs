//! The plan of a step's request: what it sends for the context's
//! messages it does not send as they are (clips, stubs), made once for the
//! compaction check ([`SessionTail::sent_tokens`]) and the request
//! ([`SessionTail::take_request`]) while the context stays the same (the
//! request clipped every huge message a second time), and the tokens the
//! last request sent.

use std::collections::HashMap;

use botfleet_memory::Encoding;

use super::Sent;
use super::SessionTail;
use super::TurnCut;
use super::clip::plan_clips;
use super::plan_cuts;

/// The plan of the step's request, kept from the compaction check for the
/// request itself ([`SessionTail::sent_tokens`], then
/// [`SessionTail::take_request`]), and the tokens of the last request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Shaping {
    pub(super) planned: Option<Planned>,
    /// Tokens of the messages the last request sent (what a provider that
    /// reports no usage is counted for).
    pub(super) last_sent: u64,
    /// Tokens the last request sent for the messages it did not send as
    /// they are (clips, stubs), by index: what its prefix's count takes.
    pub(super) last_replaced: HashMap<usize, u32>,
}

/// One plan and what it was made from.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    key: PlanKey,
    pub(super) sent: HashMap<usize, Sent>,
    /// The turn's watermark once this plan is sent ([`TurnCut::through`]).
    pub(super) through: Option<i64>,
}

/// What a plan depends on: the same key, the same plan. The messages are
/// known by their seqs and token counts (a message's text changes only
/// with its count: a refused call's arguments cut; the system prompt,
/// whose text may change alone, is never clipped or cut).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PlanKey {
    seqs: Vec<i64>,
    counted: Vec<u32>,
    cap: u64,
    cut: Option<TurnCut>,
    encoding: Encoding,
}

impl SessionTail {
    /// Tokens of the messages the last request ([`SessionTail::take_request`])
    /// sent: clips, stubs and the memory update as sent (the joins of
    /// roles aside). What a call whose provider reports no usage counts
    /// as its prompt; the context's whole count counted every clipped
    /// message whole at every step.
    pub(crate) fn last_request_tokens(&self) -> u64 {
        self.shaping.last_sent
    }

    /// Tokens of the first `n` messages as the last request sent them:
    /// a clipped message counts as its clip. (The stable prefix's count,
    /// `prefix_tokens`: the context's whole counts made it larger than the
    /// whole request once a huge tool result was clipped: QA.)
    pub(crate) fn sent_tokens_of_first(&mut self, n: usize) -> u64 {
        if self.shaping.last_replaced.is_empty() {
            // nothing clipped or stubbed (most requests): the counts as
            // they are, without a lookup per message
            return self.tokens_of_first(n);
        }
        self.tokens();
        self.counted
            .iter()
            .take(n)
            .enumerate()
            .map(|(i, &count)| {
                u64::from(self.shaping.last_replaced.get(&i).copied().unwrap_or(count))
            })
            .sum()
    }

    /// Tokens of what the next request sends of the context: the running
    /// turn's older results as their stubs and every message over its
    /// budget clipped, as [`SessionTail::take_request`] will send them (the
    /// memory update and the joins of roles aside). What the compaction
    /// check compares with `compact_at_tokens`: the context's whole count
    /// kept asking a long turn for a compaction at each step, and a
    /// compaction keeps the running turn, so it could not bring that count
    /// down. The plan is kept for the request (nothing moves until it is
    /// sent).
    pub(crate) fn sent_tokens(&mut self) -> u64 {
        self.plan();
        match &self.shaping.planned {
            Some(planned) => self.sent_with(&planned.sent),
            None => self.counted.iter().map(|&t| u64::from(t)).sum(),
        }
    }

    /// The context's counts with those of `sent` in place of its own.
    pub(super) fn sent_with(&self, sent: &HashMap<usize, Sent>) -> u64 {
        self.counted
            .iter()
            .enumerate()
            .map(|(i, &count)| u64::from(sent.get(&i).map_or(count, |s| s.tokens)))
            .sum()
    }

    /// Makes sure the kept plan is that of the context as it is now
    /// ([`PlanKey`]); plans it again when not.
    pub(super) fn plan(&mut self) {
        // every message counted (the compaction check did already)
        self.tokens();
        let key = PlanKey {
            seqs: self.context.seqs().to_vec(),
            counted: self.counted.clone(),
            cap: self.entry_cap,
            cut: self.turn_cut.clone(),
            encoding: self.encoding,
        };
        if self.shaping.planned.as_ref().is_some_and(|p| p.key == key) {
            return;
        }
        let (sent, through) = self.replacements();
        #[cfg(test)]
        tests::PLANS.with(|n| n.set(n.get() + 1));
        self.shaping.planned = Some(Planned { key, sent, through });
    }

    /// What a request sends for the context's messages it does not send
    /// as they are, by index: the clips of messages over their budget
    /// (the running turn's user-side messages share one), then the stubs
    /// of the running turn's older results (a stub wins over a clip),
    /// planned on the clipped counts; and the turn's watermark once it is
    /// sent ([`TurnCut::through`]; the turn's own stays until then).
    fn replacements(&self) -> (HashMap<usize, Sent>, Option<i64>) {
        let messages = self.context.messages();
        let seqs = self.context.seqs();
        let head = self.context.head();
        let turn_start = self
            .turn_cut
            .as_ref()
            .and_then(|cut| (head..messages.len()).find(|&i| seqs.get(i) >= Some(&cut.from_seq)));
        let mut sent = plan_clips(
            messages,
            seqs,
            &self.counted,
            self.entry_cap,
            turn_start,
            self.encoding,
        );
        let Some(cut) = self.turn_cut.as_ref() else {
            return (sent, None);
        };
        let counts: Vec<u32> = self
            .counted
            .iter()
            .enumerate()
            .map(|(i, &count)| sent.get(&i).map_or(count, |s| s.tokens))
            .collect();
        let mut looked = cut.clone();
        let stubs = plan_cuts(messages, seqs, &counts, head, &mut looked, self.encoding);
        for (i, stub) in stubs {
            sent.insert(i, Sent::text(stub, self.encoding));
        }
        (sent, Some(looked.through))
    }
}

#[cfg(test)]
#[path = "request_plan_tests.rs"]
mod tests;
