//! Admission: a request through the idempotency ledger, the ledger's
//! answer, and the bot's queue (inbox) with its priority classes.

use serde::Deserialize;
use serde::Serialize;

use super::NewEntry;
use super::SessionKey;
use crate::digest::InputDigest;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::SessionId;
use crate::ids::UserId;

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
