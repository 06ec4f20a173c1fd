//! The records the store persists: bots, sessions, transcript entries,
//! admissions, turns and tool calls. This file is the whole vocabulary that
//! crosses the store, the actors and the API.

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use crate::digest::InputDigest;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::RoomId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;

mod approval;

pub use approval::ApprovalDecision;
pub use approval::ApprovalRecord;
pub use approval::ApprovalRequestOutcome;
pub use approval::ApprovalStatus;
pub use approval::ExpiryCause;
pub use approval::NewApproval;
pub use approval::ReviewRecord;

/// A registered bot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BotRecord {
    /// Stable id.
    pub id: BotId,
    /// Display name.
    pub name: String,
    /// The user who owns the bot.
    pub owner: UserId,
    /// Role text: who the bot is and what it does.
    pub role: String,
    /// Name of the model provider in the fleet config.
    pub provider: String,
    /// Names of the tools the bot may use.
    pub tools: Vec<String>,
    /// Further settings (free-form JSON, owned by the runtime).
    #[serde(default)]
    pub settings: Value,
    /// Where the bot came from: `config`, `api` or `agent:<id>`.
    pub origin: String,
    /// Creation time (ms since epoch).
    pub created_at: i64,
    /// Last change (ms since epoch).
    pub updated_at: i64,
}

/// What a session is a conversation with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// Direct messages between a user and the bot.
    Dm,
    /// Messages between the bot and another bot.
    Agent,
    /// The bot's private session inside a group room.
    Group,
    /// Runs of one routine.
    Routine,
    /// Deliveries of one webhook.
    Hook,
    /// A subagent's own session.
    Subagent,
    /// The public timeline of a group room. Its key is `{bot: <room id>,
    /// kind: Room, peer: "timeline"}`: the room id stands in the bot
    /// field (room ids follow the bot id rules), and the kind keeps it
    /// apart from any bot's own sessions.
    Room,
}

impl SessionKind {
    /// Stable text form (stored).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Dm => "dm",
            SessionKind::Agent => "agent",
            SessionKind::Group => "group",
            SessionKind::Routine => "routine",
            SessionKind::Hook => "hook",
            SessionKind::Subagent => "subagent",
            SessionKind::Room => "room",
        }
    }

    /// Parses the stored text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "dm" => SessionKind::Dm,
            "agent" => SessionKind::Agent,
            "group" => SessionKind::Group,
            "routine" => SessionKind::Routine,
            "hook" => SessionKind::Hook,
            "subagent" => SessionKind::Subagent,
            "room" => SessionKind::Room,
            _ => return None,
        })
    }
}

/// Identifies a session without its id: bot, kind and peer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionKey {
    /// The bot whose session it is.
    pub bot: BotId,
    /// What the session is with.
    pub kind: SessionKind,
    /// The peer: a user id, a bot id, a room, a routine or hook name.
    pub peer: String,
}

impl SessionKey {
    /// The derived session id.
    pub fn id(&self) -> SessionId {
        SessionId::derive(&self.bot, self.kind.as_str(), &self.peer)
    }
}

/// A session as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Id (derived from the key).
    pub id: SessionId,
    /// Bot, kind and peer.
    #[serde(flatten)]
    pub key: SessionKey,
    /// The user who may read the session.
    pub owner: UserId,
    /// Compaction epoch.
    pub epoch: i64,
    /// Seq of the newest entry (0 when empty).
    pub last_seq: i64,
    /// Creation time (ms).
    pub created_at: i64,
}

/// Priority class of an input in a bot's queue. Lower runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// A user's direct message: runs first and interrupts other work.
    UserDm = 0,
    /// Another bot's message.
    Bot = 1,
    /// Group rooms, routines, webhooks, subagent reports.
    Background = 2,
}

impl Priority {
    /// Stored integer.
    pub fn as_i64(self) -> i64 {
        self as i64
    }

    /// From the stored integer.
    pub fn from_i64(v: i64) -> Option<Self> {
        Some(match v {
            0 => Priority::UserDm,
            1 => Priority::Bot,
            2 => Priority::Background,
            _ => return None,
        })
    }
}

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
    },
    /// A background event: routine, webhook, subagent report.
    Event {
        /// Where it came from, e.g. `routine:daily` or `hook:github`.
        origin: String,
        /// The text or payload.
        text: String,
        /// Whether the content is trusted instructions (routines the owner
        /// wrote) or untrusted data (webhook payloads, reports).
        trusted: bool,
    },
    /// Model output: internal text and tool calls.
    Assistant {
        /// Text the model produced (never shown to users as a message).
        text: String,
        /// Tool calls it asked for.
        #[serde(default)]
        tool_calls: Vec<ToolCallBody>,
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

/// A request to admit an input through the idempotency ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmitRequest {
    /// Ledger namespace of the sender, e.g. `user:alice`, `bot:r`.
    pub source: String,
    /// The client's nonce (idempotency key).
    pub nonce: String,
    /// When the client made the nonce, if the nonce says (UUIDv7 keys do).
    pub nonce_time_ms: Option<i64>,
    /// Digest of the input.
    pub digest: InputDigest,
    /// The session the input goes to (created if new).
    pub session: SessionKey,
    /// Owner of that session.
    pub owner: UserId,
    /// The entry to append.
    pub entry: NewEntry,
    /// Queue class for the bot.
    pub priority: Priority,
}

/// Where an admitted input landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmittedRecord {
    /// The target bot.
    pub bot: BotId,
    /// Session.
    pub session: SessionId,
    /// Seq in the session.
    pub seq: i64,
    /// Global order.
    pub gid: i64,
    /// Entry id.
    pub entry_id: EntryId,
    /// When it was first admitted (ms).
    pub admitted_at: i64,
}

/// The ledger's answer to an admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AdmitOutcome {
    /// New: persisted with its transcript entry, and routed.
    Accepted(AdmittedRecord),
    /// Same nonce and digest as an earlier input: this is that input.
    Duplicate(AdmittedRecord),
    /// Same nonce, different digest: refused.
    Conflict(AdmittedRecord),
    /// The ledger cannot prove whether this nonce was seen (pruned past
    /// retention, or restored from an older snapshot). Not admitted.
    Unknown {
        /// Why the ledger cannot tell.
        reason: String,
    },
}

/// An admitted input waiting in (or consumed by) a bot's queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxItem {
    /// The bot.
    pub bot: BotId,
    /// Global order of the entry.
    pub gid: i64,
    /// Session of the entry.
    pub session: SessionId,
    /// Seq of the entry.
    pub seq: i64,
    /// Queue class.
    pub priority: Priority,
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
    /// How many times the turn was started (1 + restarts).
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
}

/// A group room: a public timeline shared by up to six member bots that a
/// deterministic coordinator runs one at a time (actors/src/group).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomRecord {
    /// Stable id (bot id rules).
    pub id: RoomId,
    /// Display name.
    pub name: String,
    /// The user who created the room.
    pub owner: UserId,
    /// Members in the fixed order they speak in.
    pub members: Vec<BotId>,
    /// Whether the members belong to more than one user.
    pub shared: bool,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

/// Peer of every room timeline's session key.
pub const ROOM_TIMELINE_PEER: &str = "timeline";

impl RoomRecord {
    /// The key of the room's public timeline session:
    /// `{bot: <room id>, kind: Room, peer: "timeline"}`.
    pub fn timeline(&self) -> SessionKey {
        room_timeline(&self.id)
    }
}

/// The key of a room's public timeline session.
pub fn room_timeline(room: &RoomId) -> SessionKey {
    SessionKey {
        bot: room.as_bot(),
        kind: SessionKind::Room,
        peer: ROOM_TIMELINE_PEER.to_owned(),
    }
}

/// Progress of one run of a room (the work one user message started).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoomRunStatus {
    /// Not finished (or cut off by a crash: the coordinator resumes it).
    Running,
    /// Ended; its end is in the timeline.
    Done,
}

impl RoomRunStatus {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            RoomRunStatus::Running => "running",
            RoomRunStatus::Done => "done",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RoomRunStatus::Running,
            "done" => RoomRunStatus::Done,
            _ => return None,
        })
    }
}

/// One run of a room as stored: which user message started it and the
/// coordinator's checkpoint (owned by actors/src/group, like a turn's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomRunRecord {
    /// The room.
    pub room: RoomId,
    /// Seq of the user message in the room timeline that started the run.
    pub trigger_seq: i64,
    /// Progress.
    pub status: RoomRunStatus,
    /// The coordinator's state after its last step.
    pub state: Value,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
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

/// Status of a subagent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubagentStatus {
    /// Working on its task (or waiting for input).
    Running,
    /// Reported its result.
    Done,
    /// Its turn failed for good.
    Failed,
    /// Stopped by its parent.
    Stopped,
}

impl SubagentStatus {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            SubagentStatus::Running => "running",
            SubagentStatus::Done => "done",
            SubagentStatus::Failed => "failed",
            SubagentStatus::Stopped => "stopped",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => SubagentStatus::Running,
            "done" => SubagentStatus::Done,
            "failed" => SubagentStatus::Failed,
            "stopped" => SubagentStatus::Stopped,
            _ => return None,
        })
    }
}

/// A subagent: a child bot with a delegated task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubagentRecord {
    /// The child bot's id.
    pub id: BotId,
    /// The delegating bot.
    pub parent: BotId,
    /// The parent's session its reports go to.
    pub parent_session: SessionId,
    /// What it was asked to do.
    pub description: String,
    /// Where it is.
    pub status: SubagentStatus,
    /// Its last report or error.
    pub result: Option<String>,
    /// Created (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

/// What a routine does about slots it missed while the host was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Run once, late, for all the slots missed together; then follow the
    /// schedule again.
    #[default]
    Once,
    /// Do not run for missed slots; wait for the next one.
    Skip,
}

impl CatchUp {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Once => "once",
            CatchUp::Skip => "skip",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "once" => CatchUp::Once,
            "skip" => CatchUp::Skip,
            _ => return None,
        })
    }
}

/// Where a routine was defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutineOrigin {
    /// fleet.toml: registered again at every start, changed only there.
    Config,
    /// The HTTP API: persists until deleted.
    Api,
}

impl RoutineOrigin {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            RoutineOrigin::Config => "config",
            RoutineOrigin::Api => "api",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "config" => RoutineOrigin::Config,
            "api" => RoutineOrigin::Api,
            _ => return None,
        })
    }
}

/// A bot's routine as stored: a prompt bound to a cron schedule in a time
/// zone, with the schedule's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineRecord {
    /// The bot it wakes.
    pub bot: BotId,
    /// Name, unique per bot (also the peer of its session).
    pub name: String,
    /// Cron expression: 5 fields, or 6 with seconds first.
    pub cron: String,
    /// IANA time zone the expression is read in.
    pub timezone: String,
    /// What the bot is asked to do.
    pub prompt: String,
    /// Whether a run may end without reporting (SendMessage).
    pub silent_ok: bool,
    /// What to do about slots missed while the host was down.
    pub catch_up: CatchUp,
    /// Where it was defined.
    pub origin: RoutineOrigin,
    /// The next slot to fire (ms since epoch, UTC); `None` when the
    /// expression has no future slot.
    pub next_fire_ms: Option<i64>,
    /// The slot of the last fire (ms), if any.
    pub last_fire_ms: Option<i64>,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
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
    /// Adds another usage to this one.
    pub fn add(&mut self, other: &TokenUsage) {
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        self.prefix_tokens += other.prefix_tokens;
        self.cached_tokens += other.cached_tokens;
        self.completion_tokens += other.completion_tokens;
    }

    /// Every token counted (prompt + completion).
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// A secret value in a record: it never prints (Debug shows `[redacted]`)
/// and is not serialized.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that must use it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}
