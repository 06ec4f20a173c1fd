//! Sessions: what a conversation is with, its key and its stored record,
//! and the key of a room's public timeline.

use serde::Deserialize;
use serde::Serialize;

use crate::ids::BotId;
use crate::ids::RoomId;
use crate::ids::SessionId;
use crate::ids::UserId;

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

    /// Whether this is a DM with a person other than `owner`, the bot's
    /// owner now: the DM of a former owner (the owner changed in
    /// fleet.toml; the DM stays that person's to read). Nothing runs or
    /// lands there with the bot's private surface: its turns end
    /// unanswered, approvals there cannot be decided, and a subagent's
    /// report goes to the bot's own session with the subagent instead.
    pub fn is_former_owners_dm(&self, owner: &UserId) -> bool {
        self.kind == SessionKind::Dm && self.peer != owner.as_str()
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

/// What a turn's context is built from, read in one transaction so the
/// parts agree: a session's record, its latest summary, and its newest
/// entries after that summary ([`crate::Store::session_view`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionView {
    /// The record (`None`: no such session).
    pub record: Option<SessionRecord>,
    /// The latest compaction summary, if any.
    pub summary: Option<crate::record::Entry>,
    /// The newest entries the summary does not cover, oldest first.
    pub entries: Vec<crate::record::Entry>,
    /// The seq its owner reads it from, when it came to them with its bot
    /// after it began (`session_floors`): entries before it are not the
    /// bot's context, but for a turn's own inputs and steps.
    pub floor: Option<i64>,
}

impl SessionView {
    /// The last seq the summary covers (0: no summary).
    pub fn covers_to_seq(&self) -> i64 {
        covers_to_seq(self.summary.as_ref())
    }
}

/// The last seq a summary entry covers (0: none, or not a summary).
pub fn covers_to_seq(summary: Option<&crate::record::Entry>) -> i64 {
    match summary.map(|e| &e.kind) {
        Some(crate::record::EntryKind::Summary { covers_to_seq, .. }) => *covers_to_seq,
        _ => 0,
    }
}

/// Peer of every room timeline's session key.
pub const ROOM_TIMELINE_PEER: &str = "timeline";

/// The key of a room's public timeline session.
pub fn room_timeline(room: &RoomId) -> SessionKey {
    SessionKey {
        bot: room.as_bot(),
        kind: SessionKind::Room,
        peer: ROOM_TIMELINE_PEER.to_owned(),
    }
}
