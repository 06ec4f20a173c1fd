//! Transcript entries: their content by kind, the entry to append, the
//! stored entry, and the change signal readers follow.

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use super::ApprovalStatus;
use super::ExpiryCause;
use super::TokenUsage;
use super::TurnStatus;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;

/// A tool call as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallBody {
    /// The model's id for the call.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as the raw JSON text the model produced.
    pub arguments: String,
}

/// The start of a chain of bot-to-bot messages: the input that set it
/// off (a person's message, a routine's run, a webhook's delivery, a
/// room's input). Every message of the chain carries it, so the chain's
/// start is known in one read, and its messages are counted under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChainOrigin {
    /// The session the input came in to.
    pub session: SessionId,
    /// The input's entry.
    pub entry: EntryId,
}

/// A question another bot asked, carried by an event that wakes the bot
/// asked without the question among the turn's inputs (an approval's
/// decision): who asked, where the answer goes, and when it was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskedBy {
    /// The bot that asked.
    pub bot: BotId,
    /// Its session the answer goes to (the question's `reply_session`).
    pub session: SessionId,
    /// When it asked (ms since the epoch).
    pub at: i64,
}

/// The content of a transcript entry, by kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EntryKind {
    /// A user's message to the bot (trusted input).
    UserMessage {
        /// The text.
        text: String,
    },
    /// A message from another bot (untrusted data to the recipient).
    AgentMessage {
        /// Sending bot.
        from: BotId,
        /// The text.
        text: String,
        /// Hops since the originating user message.
        #[serde(default)]
        hop: u32,
        /// The sender's session that replies go to (its conversation with
        /// the person who started the exchange), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_session: Option<SessionId>,
        /// The input that started the chain this message is part of (none
        /// in entries written before chains carried it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chain: Option<ChainOrigin>,
        /// Whether it answers the recipient: written in a turn over the
        /// recipient's message, or going where the recipient asked replies
        /// to go. An answer is owed no reply; a message that is not one
        /// is, and its recipient is reminded of it (entries written
        /// before this field: `false`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        answers: bool,
    },
    /// An event: a routine, a webhook, an approval's decision, a room's
    /// input, a parent's task or message to its subagent.
    Event {
        /// Where it came from, e.g. `routine:daily` or `hook:github`.
        origin: String,
        /// The text or payload.
        text: String,
        /// Whether the content is trusted instructions (routines the owner
        /// wrote) or untrusted data (webhook payloads, reports).
        trusted: bool,
        /// Hops since the originating user message, for an event that
        /// continues a chain between bots (a parent's task or message to
        /// its subagent); none for the others.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hop: Option<u32>,
        /// For an event that continues a chain between bots, the input
        /// that started the chain (none for the others, and in entries
        /// written before chains carried it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chain: Option<ChainOrigin>,
        /// On an approval's decision in a conversation with another bot:
        /// that bot's question the asking turn worked on, so the turn the
        /// decision wakes answers it where it was asked (QA: the answer
        /// went where the bot's newest message there, sent from another
        /// conversation, asked replies to go).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        asked: Option<AskedBy>,
    },
    /// Model output: internal text and tool calls.
    Assistant {
        /// Text the model produced (never shown to users as a message).
        text: String,
        /// Tool calls it asked for.
        #[serde(default)]
        tool_calls: Vec<ToolCallBody>,
        /// The model's thinking behind the calls (`reasoning_content`),
        /// kept only for a step with calls: thinking-mode servers want it
        /// back in the turn's later requests, a resumed turn's too. Never
        /// shown to people nor searched. `Some("")` when the model sent an
        /// empty one: DeepSeek refuses a later request whose tool-call
        /// message lacks the field, empty or not. `None` in older entries
        /// and from models that send none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    /// What a tool call returned to the model.
    ToolResult {
        /// The call this answers.
        call_id: String,
        /// Tool name.
        name: String,
        /// Text given to the model.
        content: String,
        /// Whether the tool failed.
        is_error: bool,
    },
    /// A message delivered to the session's people by SendMessage.
    Delivery {
        /// The text.
        text: String,
        /// Optional interactive card.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        card: Option<Value>,
        /// The tool call that delivered it.
        call_id: String,
    },
    /// A reaction on an entry.
    Reaction {
        /// Seq of the entry reacted to.
        target_seq: i64,
        /// The emoji.
        emoji: String,
        /// The tool call that reacted.
        call_id: String,
    },
    /// Text the runtime injected for the model (e.g. a delivery reminder).
    Reminder {
        /// What the model is told.
        text: String,
    },
    /// Something people should see about the bot's work (a failure, a
    /// pause), with an optional turn to retry.
    Notice {
        /// Machine-readable code, e.g. `turn_failed`.
        code: String,
        /// Human-readable text.
        text: String,
        /// A turn whose inputs can be retried.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_turn: Option<TurnId>,
    },
    /// The card of an approval a bot asked for (appended at each status
    /// change; clients render the newest state per `id`). People see it;
    /// the model does not (it learns of the request from its tool result
    /// and of the decision from an `approval` event).
    Approval {
        /// The approval (named so because the entry has its own `id`).
        approval: crate::ids::ApprovalId,
        /// Its status at this entry.
        status: ApprovalStatus,
        /// The tool that would run.
        tool: String,
        /// What would happen.
        summary: String,
        /// Why it needs a person's decision.
        reason: String,
        /// Until when it may be decided (pending) or used (approved), ms.
        expires_at: i64,
        /// Why it expired, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expired_by: Option<ExpiryCause>,
    },
    /// The end of a turn and which inputs it answered.
    TurnEnd {
        /// Final status.
        status: TurnStatus,
        /// Seqs of this session's inputs the turn consumed.
        inputs: Vec<i64>,
        /// Number of deliveries the turn made.
        deliveries: u32,
        /// Tokens the turn's model calls used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<TokenUsage>,
    },
    /// A summary of older entries (compaction): from here on the model sees
    /// the summary instead of the entries up to `covers_to_seq`.
    Summary {
        /// The summary.
        text: String,
        /// Last seq it covers.
        covers_to_seq: i64,
        /// The compaction epoch it starts.
        epoch: i64,
    },
}

impl EntryKind {
    /// The chain a message between bots belongs to, if it carries one.
    pub fn chain(&self) -> Option<ChainOrigin> {
        match self {
            EntryKind::AgentMessage { chain, .. } | EntryKind::Event { chain, .. } => *chain,
            EntryKind::UserMessage { .. }
            | EntryKind::Assistant { .. }
            | EntryKind::ToolResult { .. }
            | EntryKind::Delivery { .. }
            | EntryKind::Reaction { .. }
            | EntryKind::Reminder { .. }
            | EntryKind::Notice { .. }
            | EntryKind::Approval { .. }
            | EntryKind::TurnEnd { .. }
            | EntryKind::Summary { .. } => None,
        }
    }

    /// Short name of the kind (as in the JSON `kind` field).
    pub fn name(&self) -> &'static str {
        match self {
            EntryKind::UserMessage { .. } => "user_message",
            EntryKind::AgentMessage { .. } => "agent_message",
            EntryKind::Event { .. } => "event",
            EntryKind::Assistant { .. } => "assistant",
            EntryKind::ToolResult { .. } => "tool_result",
            EntryKind::Delivery { .. } => "delivery",
            EntryKind::Reaction { .. } => "reaction",
            EntryKind::Reminder { .. } => "reminder",
            EntryKind::Notice { .. } => "notice",
            EntryKind::Approval { .. } => "approval",
            EntryKind::TurnEnd { .. } => "turn_end",
            EntryKind::Summary { .. } => "summary",
        }
    }

    /// The searchable text of the entry.
    pub fn text(&self) -> &str {
        match self {
            EntryKind::UserMessage { text }
            | EntryKind::AgentMessage { text, .. }
            | EntryKind::Event { text, .. }
            | EntryKind::Assistant { text, .. }
            | EntryKind::Delivery { text, .. }
            | EntryKind::Reminder { text }
            | EntryKind::Notice { text, .. }
            | EntryKind::Summary { text, .. } => text,
            EntryKind::ToolResult { content, .. } => content,
            EntryKind::Reaction { emoji, .. } => emoji,
            EntryKind::Approval { summary, .. } => summary,
            EntryKind::TurnEnd { .. } => "",
        }
    }

    /// The role the author plays, for search and rendering.
    pub fn role(&self) -> &'static str {
        match self {
            EntryKind::UserMessage { .. } => "user",
            EntryKind::AgentMessage { .. } => "agent",
            EntryKind::Event { .. } => "event",
            EntryKind::Assistant { .. }
            | EntryKind::Delivery { .. }
            | EntryKind::Reaction { .. } => "assistant",
            EntryKind::ToolResult { .. } => "tool",
            EntryKind::Reminder { .. }
            | EntryKind::Notice { .. }
            | EntryKind::Approval { .. }
            | EntryKind::TurnEnd { .. }
            | EntryKind::Summary { .. } => "system",
        }
    }
}

/// A transcript entry to append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEntry {
    /// Stable id.
    pub id: EntryId,
    /// Session it belongs to (must exist).
    pub session: SessionId,
    /// Who wrote it: a user id, a bot id, `system`.
    pub author: String,
    /// Turn that produced it, if any.
    pub turn: Option<TurnId>,
    /// Content.
    pub kind: EntryKind,
}

/// A stored transcript entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Stable id.
    pub id: EntryId,
    /// Session.
    pub session: SessionId,
    /// Per-session sequence number, strictly increasing from 1.
    pub seq: i64,
    /// Global insertion order (for the indexer).
    pub gid: i64,
    /// Author.
    pub author: String,
    /// Producing turn.
    pub turn: Option<TurnId>,
    /// Time written (ms since epoch).
    pub created_at: i64,
    /// Content.
    #[serde(flatten)]
    pub kind: EntryKind,
}

/// A payload-free change signal: `session` has entries up to `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Session that changed.
    pub session: SessionId,
    /// Its newest seq.
    pub seq: i64,
    /// The bot of the session.
    pub bot: BotId,
    /// The user who may read it.
    pub owner: UserId,
}
