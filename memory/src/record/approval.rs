//! Approvals (issue 5): a person's decision on one exact action a bot's
//! auto-review asked about, and the review log.
//!
//! An approval is created `pending` with a TTL and the user-message epoch of
//! its session (the seq of the newest user message there when it was
//! asked). It ends `approved`, `denied` or `expired`; it expires when its
//! TTL passes or when a newer user message lands in its session. An
//! approved approval can be used once, by the same exact action (same
//! fingerprint), within a TTL of its decision.

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use crate::ids::ApprovalId;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;

/// Where an approval is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for the person.
    Pending,
    /// The person allowed the action (it may run once).
    Approved,
    /// The person refused the action.
    Denied,
    /// Nobody decided in time, a newer user message changed the
    /// conversation first, its subagent was stopped, or its subagent's
    /// task was a former owner's (see [`ExpiryCause`]).
    Expired,
}

impl ApprovalStatus {
    /// Stable text form (stored).
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Expired => "expired",
        }
    }

    /// Parses the stored text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => ApprovalStatus::Pending,
            "approved" => ApprovalStatus::Approved,
            "denied" => ApprovalStatus::Denied,
            "expired" => ApprovalStatus::Expired,
            _ => return None,
        })
    }
}

/// Why an approval expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiryCause {
    /// Its time to live passed.
    Ttl,
    /// A newer user message arrived in its session.
    UserMessage,
    /// The subagent that asked it was stopped by its parent: a stopped
    /// subagent takes no more work, so it never reads a decision or
    /// repeats the call (open approvals of a stopped subagent read so).
    SubagentStopped,
    /// The subagent that asked it works on a task delegated from work
    /// that is no longer its parent's owner's (fleet.toml gave the parent
    /// to another user: the task came from a DM of its former owner, or
    /// from a conversation with a bot that now belongs to someone else).
    /// Every turn of such a task ends `owner_changed` without running,
    /// so it never reads a decision or repeats the call (open approvals
    /// of such a subagent read so).
    OwnerChanged,
}

impl ExpiryCause {
    /// Stable text form (stored).
    pub fn as_str(self) -> &'static str {
        match self {
            ExpiryCause::Ttl => "ttl",
            ExpiryCause::UserMessage => "user_message",
            ExpiryCause::SubagentStopped => "subagent_stopped",
            ExpiryCause::OwnerChanged => "owner_changed",
        }
    }

    /// Parses the stored text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ttl" => ExpiryCause::Ttl,
            "user_message" => ExpiryCause::UserMessage,
            "subagent_stopped" => ExpiryCause::SubagentStopped,
            "owner_changed" => ExpiryCause::OwnerChanged,
            _ => return None,
        })
    }
}

/// A person's decision on a pending approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Let the action run (once).
    Approve,
    /// Refuse it.
    Deny,
}

impl ApprovalDecision {
    /// The status the decision leads to.
    pub fn status(self) -> ApprovalStatus {
        match self {
            ApprovalDecision::Approve => ApprovalStatus::Approved,
            ApprovalDecision::Deny => ApprovalStatus::Denied,
        }
    }
}

/// An approval to create ([`crate::Mutation::RequestApproval`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewApproval {
    /// Id of the approval if it is created.
    pub id: ApprovalId,
    /// The bot that wants to act.
    pub bot: BotId,
    /// The session the action was asked in (its card goes there).
    pub session: SessionId,
    /// The turn that asked.
    pub turn: Option<TurnId>,
    /// The tool call that asked.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Hex SHA-256 of the exact action (tool, canonical arguments, hashes of
    /// the scripts it runs).
    pub fingerprint: String,
    /// One line for people: what would happen.
    pub summary: String,
    /// Why the review asked.
    pub reason: String,
    /// The action's details for the card (tool arguments, resolved
    /// scripts with their hashes).
    pub action: Value,
    /// Time to live of the pending approval (ms).
    pub ttl_ms: i64,
    /// Most pending approvals the bot may have; the request is refused
    /// ([`ApprovalRequestOutcome::TooMany`]) when that many are pending.
    pub max_pending: u32,
}

/// An approval as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// Id.
    pub id: ApprovalId,
    /// The bot that wants to act.
    pub bot: BotId,
    /// The session it was asked in.
    pub session: SessionId,
    /// The user who decides (the session's owner).
    pub owner: UserId,
    /// The turn that asked.
    pub turn: Option<TurnId>,
    /// The tool call that asked.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Hex SHA-256 of the exact action.
    pub fingerprint: String,
    /// What would happen.
    pub summary: String,
    /// Why the review asked.
    pub reason: String,
    /// The action's details.
    pub action: Value,
    /// Seq of the newest user message of the session when it was asked
    /// (0 if none): a user message with a higher seq expires it.
    pub epoch: i64,
    /// Status (as of the read; see [`ApprovalRecord::effective`]).
    pub status: ApprovalStatus,
    /// Why it expired, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_by: Option<ExpiryCause>,
    /// Created (ms).
    pub created_at: i64,
    /// Until when it may be decided (pending) or used (approved), ms.
    pub expires_at: i64,
    /// When the person decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<i64>,
    /// Who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<UserId>,
    /// When the approved action ran (an approval is used once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_at: Option<i64>,
}

impl ApprovalRecord {
    /// The status as of `now`, given whether a user message newer than the
    /// epoch arrived in its session: a stored `pending` past its TTL or
    /// behind a newer user message is expired, and so is an unused
    /// `approved` past its use window. Reads report this, and the writer
    /// persists it lazily ([`crate::Mutation::ExpireApprovals`]).
    pub fn effective(
        &self,
        now: i64,
        newer_user_message: bool,
    ) -> (ApprovalStatus, Option<ExpiryCause>) {
        match self.status {
            ApprovalStatus::Pending if newer_user_message => {
                (ApprovalStatus::Expired, Some(ExpiryCause::UserMessage))
            }
            ApprovalStatus::Pending if now >= self.expires_at => {
                (ApprovalStatus::Expired, Some(ExpiryCause::Ttl))
            }
            ApprovalStatus::Approved if self.consumed_at.is_none() && now >= self.expires_at => {
                (ApprovalStatus::Expired, Some(ExpiryCause::Ttl))
            }
            ApprovalStatus::Pending
            | ApprovalStatus::Approved
            | ApprovalStatus::Denied
            | ApprovalStatus::Expired => (self.status, self.expired_by),
        }
    }

    /// Whether it still waits for a decision.
    pub fn is_pending(&self) -> bool {
        self.status == ApprovalStatus::Pending
    }

    /// Whether it was approved and not used yet.
    pub fn is_usable(&self) -> bool {
        self.status == ApprovalStatus::Approved && self.consumed_at.is_none()
    }
}

/// The answer to [`crate::Mutation::RequestApproval`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ApprovalRequestOutcome {
    /// A new pending approval (its card was appended to the session).
    Created(ApprovalRecord),
    /// The same action (same fingerprint) is already pending: that one.
    Existing(ApprovalRecord),
    /// The bot already has the most pending approvals allowed; nothing
    /// was written.
    TooMany {
        /// The pending approvals, oldest first.
        pending: Vec<ApprovalRecord>,
    },
}

/// One review decision worth keeping ([`crate::Mutation::RecordReview`]):
/// what auto-review would have blocked or asked about, in shadow or
/// enforce mode. Allowed actions are not logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRecord {
    /// The bot.
    pub bot: BotId,
    /// The session of the turn.
    pub session: SessionId,
    /// The turn.
    pub turn: Option<TurnId>,
    /// The tool call.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The review surface (`shell`, `file_write`, ...).
    pub surface: String,
    /// The mode it was reviewed in (`shadow`, `enforce`).
    pub mode: String,
    /// The decision (`ask`, `deny`).
    pub decision: String,
    /// Why.
    pub reason: String,
    /// Hex SHA-256 of the exact action.
    pub fingerprint: String,
    /// When (ms; set by the store).
    #[serde(default)]
    pub at: i64,
}
