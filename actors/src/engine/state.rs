//! The engine's checkpoint: what a turn must remember to resume.

use botfleet_memory::TokenUsage;
use serde::Deserialize;
use serde::Serialize;

/// Turn state stored with every step (the `checkpoint` of the turn row).
/// The conversation itself is in the transcript; this is only the
/// bookkeeping the engine needs on top of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TurnState {
    /// Model steps persisted so far.
    pub step: u32,
    /// Whether a person is owed a reply.
    pub owes_delivery: bool,
    /// Messages delivered by this turn.
    pub delivered: u32,
    /// Whether the delivery reminder was injected.
    pub reminded: bool,
    /// Whether the turn was told that a call it wrote as text did not run
    /// (prompts/written_call_reminder.md; once a turn, apart from the
    /// delivery reminder).
    #[serde(default)]
    pub written_call_reminded: bool,
    /// Whether the turn was reminded to answer the bots it owes a reply
    /// (prompts/agent_reply_reminder.md; once a turn, `owed_replies.rs`).
    #[serde(default)]
    pub agent_reminded: bool,
    /// Seqs of the inputs the turn answers (in its session).
    pub input_seqs: Vec<i64>,
    /// Whether a loop in the model's output was already retried once.
    #[serde(default)]
    pub loop_retried: bool,
    /// Whether an answer cut off at the token limit was already retried.
    #[serde(default)]
    pub cut_off_retried: bool,
    /// The tokens of the model calls whose steps are stored (written with
    /// each step: `Runner::checkpoint`), so a turn resumed after a crash
    /// still counts them, in its end's usage, the bot's and its budget.
    #[serde(default)]
    pub usage: TokenUsage,
    /// What the turn asked of other bots and subagents, whose answers
    /// wake the bot in a later turn (`asked.rs`).
    #[serde(default)]
    pub asked: Vec<String>,
    /// Whether a call of the turn waits for its owner's approval, whose
    /// decision wakes the bot in a later turn (as an answer it asked for
    /// does): a reply the turn owes another bot is owed there, not now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaits_approval: bool,
}

impl TurnState {
    /// As stored.
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// From the stored checkpoint (a damaged one restarts bookkeeping).
    pub(crate) fn from_value(v: &serde_json::Value) -> Self {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }
}
