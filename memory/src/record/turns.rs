//! Turns and their tool calls, and the tokens their model calls used.

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;

/// Outcome class of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// In progress (or cut off by a crash: resumes on activation).
    Running,
    /// The model finished and every obligation was met.
    Completed,
    /// The turn owed a user a reply and ended without one.
    Undelivered,
    /// A user message interrupted it; the next turn continues.
    Interrupted,
    /// It failed for good; the inputs can be retried.
    Failed,
    /// Stopped by an operator.
    Cancelled,
}

impl TurnStatus {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Running => "running",
            TurnStatus::Completed => "completed",
            TurnStatus::Undelivered => "undelivered",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
            TurnStatus::Cancelled => "cancelled",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => TurnStatus::Running,
            "completed" => TurnStatus::Completed,
            "undelivered" => TurnStatus::Undelivered,
            "interrupted" => TurnStatus::Interrupted,
            "failed" => TurnStatus::Failed,
            "cancelled" => TurnStatus::Cancelled,
            _ => return None,
        })
    }
}

/// A turn as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// Id.
    pub id: TurnId,
    /// Bot.
    pub bot: BotId,
    /// Session the turn works in.
    pub session: SessionId,
    /// Status.
    pub status: TurnStatus,
    /// Inbox items (gids) it consumed.
    pub inputs: Vec<i64>,
    /// Engine state after the last step (owned by the engine).
    pub checkpoint: Value,
    /// How many starts of the turn worked on its current step: 1 when it
    /// started or finished a step, one more for each resume after a crash.
    /// Starts a clean stop cut off do not count.
    pub attempts: i64,
    /// Error text of a failed turn.
    pub error: Option<String>,
    /// Start time (ms).
    pub started_at: i64,
    /// End time (ms).
    pub ended_at: Option<i64>,
}

/// Progress of one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Asked for by the model, not started.
    Pending,
    /// Started; no outcome recorded yet.
    Started,
    /// Finished; outcome recorded.
    Done,
}

impl ToolCallStatus {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCallStatus::Pending => "pending",
            ToolCallStatus::Started => "started",
            ToolCallStatus::Done => "done",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => ToolCallStatus::Pending,
            "started" => ToolCallStatus::Started,
            "done" => ToolCallStatus::Done,
            _ => return None,
        })
    }
}

/// A tool call as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Turn.
    pub turn: TurnId,
    /// The model's call id.
    pub call_id: String,
    /// Position in the turn (order of execution).
    pub ordinal: i64,
    /// Tool name.
    pub name: String,
    /// Raw JSON arguments.
    pub arguments: String,
    /// Progress.
    pub status: ToolCallStatus,
    /// What the model was told, once done.
    pub outcome: Option<String>,
    /// Whether the outcome is an error.
    pub is_error: bool,
    /// A call still `started` that a clean stop of the host ended, with
    /// no outcome recorded (a Shell command's process group was killed
    /// with the stop, or its result came after the store closed): its
    /// outcome is unknown, as after a crash, but the host ended it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

/// Tokens used by model calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Model calls.
    pub calls: u32,
    /// Prompt tokens (as the provider reported, else counted).
    pub prompt_tokens: u64,
    /// Prompt tokens in the stable prefix (identity, memory snapshot and the
    /// history before this turn), counted with tiktoken.
    pub prefix_tokens: u64,
    /// Prompt tokens the provider served from its cache.
    pub cached_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

impl TokenUsage {
    /// Adds another usage to this one, saturating: counts come from model
    /// servers, and a sum past `u64::MAX` is no reason to fail a turn.
    pub fn add(&mut self, other: &TokenUsage) {
        self.calls = self.calls.saturating_add(other.calls);
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.prefix_tokens = self.prefix_tokens.saturating_add(other.prefix_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
    }

    /// Every token counted (prompt + completion), saturating.
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}
