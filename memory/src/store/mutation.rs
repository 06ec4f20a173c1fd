//! The write vocabulary: a batch of mutations is applied atomically.

use serde_json::Value;

use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::TurnId;
use crate::record::AdmitOutcome;
use crate::record::AdmitRequest;
use crate::record::BotRecord;
use crate::record::NewEntry;
use crate::record::SessionRecord;
use crate::record::TurnStatus;

/// One change to the store. A `Vec<Mutation>` submitted together commits
/// together or not at all.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Create or replace a bot.
    UpsertBot(BotRecord),
    /// Create a session if it does not exist (its record is left unchanged
    /// if it does).
    EnsureSession(SessionRecord),
    /// Admit an input through the idempotency ledger: on `accepted`, the
    /// ledger row, the session, the transcript entry and the inbox row are
    /// written together.
    Admit(Box<AdmitRequest>),
    /// Append an entry to an existing session (gets the next seq).
    Append(Box<NewEntry>),
    /// Start a turn: create its record and mark its inputs consumed.
    StartTurn {
        /// Turn id.
        turn: TurnId,
        /// Bot.
        bot: BotId,
        /// Session the turn works in.
        session: crate::ids::SessionId,
        /// Inbox gids it consumes.
        inputs: Vec<i64>,
        /// Initial checkpoint.
        checkpoint: Value,
    },
    /// Replace a turn's checkpoint.
    Checkpoint {
        /// Turn.
        turn: TurnId,
        /// New engine state.
        checkpoint: Value,
    },
    /// Count one more start of a turn (after a crash or restart).
    BumpAttempts {
        /// Turn.
        turn: TurnId,
    },
    /// Record that a tool call with an external effect is starting. Calls
    /// with only internal effects are not recorded here: their outcome and
    /// effects commit together, and the transcript says whether they ran.
    ToolStarted {
        /// Turn.
        turn: TurnId,
        /// Call id.
        call_id: String,
        /// Order in the turn.
        ordinal: i64,
        /// Tool name.
        name: String,
        /// Raw JSON arguments.
        arguments: String,
    },
    /// Record the outcome of a started tool call.
    ToolFinished {
        /// Turn.
        turn: TurnId,
        /// Call id.
        call_id: String,
        /// What the model is told.
        outcome: String,
        /// Whether it is an error.
        is_error: bool,
    },
    /// End a turn.
    EndTurn {
        /// Turn.
        turn: TurnId,
        /// Final status.
        status: TurnStatus,
        /// Error text for a failed turn.
        error: Option<String>,
    },
    /// Put a finished turn's inputs back in the inbox (user retry).
    RequeueInputs {
        /// The turn whose inputs are retried.
        turn: TurnId,
    },
    /// Drop ledger rows older than `before_ms`; later lookups of nonces
    /// from before that time answer `unknown`.
    PruneLedger {
        /// Cut-off time (ms).
        before_ms: i64,
    },
}

/// What one mutation produced.
#[derive(Debug, Clone, PartialEq)]
pub enum MutationResult {
    /// Applied; nothing to report.
    Done,
    /// The ledger's answer.
    Admitted(AdmitOutcome),
    /// Where an appended entry landed.
    Appended {
        /// Entry id.
        id: EntryId,
        /// Seq in its session.
        seq: i64,
        /// Global order.
        gid: i64,
        /// Time written.
        created_at: i64,
    },
    /// The attempt count after a bump.
    Attempts(i64),
    /// How many rows a maintenance mutation touched.
    Count(usize),
}
