//! The writes a scope instance accepts ([`MemoryOp`]) and what they answer
//! ([`MemoryOpResult`], [`MemoryRefusal`]).

use super::Importance;
use super::Layer;
use super::MemoryId;
use super::MemoryItem;
use super::scope::MemoryScope;
use crate::ids::TurnId;

/// A new item to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMemory {
    /// Id (derive it from the call that writes it, so a retry is a no-op).
    pub id: MemoryId,
    /// Scope.
    pub scope: MemoryScope,
    /// Layer.
    pub layer: Layer,
    /// Text (whitespace is collapsed when stored).
    pub text: String,
    /// Importance.
    pub importance: Importance,
    /// Expiry (ms) — required for notes, refused for other layers.
    pub expires_at: Option<i64>,
    /// Who writes it.
    pub source: String,
}

/// One write to one scope instance, applied by the store writer (limits
/// are checked inside the transaction, so no two writers can both take the
/// last slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryOp {
    /// Add an item. An item with the same id and text, or with the same
    /// text in the same scope and layer, answers `Unchanged` (a note
    /// written again with a later expiry takes that expiry).
    Add(NewMemory),
    /// Replace the text (and optionally the importance) of an item.
    Replace {
        /// The item.
        id: MemoryId,
        /// The scope the caller believes it is in (refused if it is not).
        scope: MemoryScope,
        /// New text.
        text: String,
        /// New importance, or keep.
        importance: Option<Importance>,
        /// Who writes it.
        source: String,
    },
    /// Delete an item for good (its text is overwritten in the database
    /// pages, only its id is kept to answer a repeated forget).
    Remove {
        /// The item.
        id: MemoryId,
        /// The scope the caller believes it is in (refused if it is not).
        scope: MemoryScope,
    },
    /// Like `Remove`, and keeps which tool call forgot the item: a call
    /// run again after a crash finds what it already forgot
    /// ([`Store::memory_forgotten_by`](crate::Store::memory_forgotten_by))
    /// and answers as the first run did. Removes the item only if its
    /// text is still `text`, the one the caller read and matched: an item
    /// another writer replaced since is not what the caller meant, and
    /// answers `Unchanged` with the item as it is now.
    RemoveByCall {
        /// The item.
        id: MemoryId,
        /// The scope the caller believes it is in (refused if it is not).
        scope: MemoryScope,
        /// The call, e.g. `<turn>/<call id>`.
        call: String,
        /// The item's text as the caller read it.
        text: String,
    },
    /// Like `Add`, for a fact the extraction of `turn` drew from what was
    /// said in it: a Forget committed after the turn started wins over it.
    /// Answers `AlreadyForgotten` and adds nothing when its id was
    /// forgotten (the same extraction ran before, and its add was
    /// forgotten since), or when a Forget of its scope committed at or
    /// after the turn's start covers its text (a Forget by text whose
    /// text it contains, a Forget of an item with the same text). A turn
    /// the store does not know is checked against its id only. The item
    /// is set as of the turn's end, not when the extraction lands, so an
    /// earlier turn's fact landing late is not taken for the newer one.
    AddExtracted {
        /// The item.
        new: NewMemory,
        /// The turn whose extraction proposes it.
        turn: TurnId,
    },
    /// Like `Replace` (`remove: false`) or `Remove` (`remove: true`), for
    /// the extraction of `turn`: a change of the item committed after the
    /// turn ended wins (answers `Unchanged` with the item as it is), so an
    /// older extraction landing late does not overwrite a newer fact. A
    /// turn the store does not know, or not ended, is not checked. A
    /// replace is set as of the turn's end, as `AddExtracted` is.
    ChangeExtracted {
        /// The item.
        id: MemoryId,
        /// The scope the extractor read it in.
        scope: MemoryScope,
        /// New text (ignored for a removal).
        text: String,
        /// New importance, or keep.
        importance: Option<Importance>,
        /// Who writes it.
        source: String,
        /// Remove it instead of replacing it.
        remove: bool,
        /// The turn whose extraction proposes it.
        turn: TurnId,
    },
    /// Records a Forget by text in one scope, so that an extraction of a
    /// turn that started before it cannot add what it forgot
    /// (`AddExtracted`); removes nothing (the Forget's `RemoveByCall`s
    /// do). Answers `Purged` with the scope's expired notes purged on the
    /// way, as any op does.
    ForgetMatching {
        /// The scope.
        scope: MemoryScope,
        /// The text the Forget matched on (stored in comparison form).
        needle: String,
    },
    /// Delete the notes of a scope that expired before `before_ms`.
    PurgeExpired {
        /// The scope.
        scope: MemoryScope,
        /// Cut-off (ms).
        before_ms: i64,
    },
}

impl MemoryOp {
    /// The scope instance the op writes to.
    pub fn scope(&self) -> &MemoryScope {
        match self {
            MemoryOp::Add(n) | MemoryOp::AddExtracted { new: n, .. } => &n.scope,
            MemoryOp::Replace { scope, .. }
            | MemoryOp::Remove { scope, .. }
            | MemoryOp::RemoveByCall { scope, .. }
            | MemoryOp::ForgetMatching { scope, .. }
            | MemoryOp::ChangeExtracted { scope, .. }
            | MemoryOp::PurgeExpired { scope, .. } => scope,
        }
    }
}

/// What a memory op did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryOpResult {
    /// The item was added.
    Added(MemoryItem),
    /// Nothing changed: the item already says this (a retried write, or
    /// the same text already in that scope and layer; a note's expiry
    /// may have moved later), as it is now.
    Unchanged(MemoryItem),
    /// The item's text changed.
    Replaced {
        /// As it was.
        before: MemoryItem,
        /// As it is now.
        after: MemoryItem,
    },
    /// The item was deleted.
    Removed(MemoryItem),
    /// The item had already been forgotten.
    AlreadyForgotten(MemoryId),
    /// Expired notes deleted.
    Purged(usize),
    /// Refused; nothing changed. The refusal says what to do.
    Refused(MemoryRefusal),
}

/// Why a write was refused. Each message says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryRefusal {
    /// The text is empty after trimming.
    #[error("the text is empty; give the fact to remember")]
    Empty,
    /// The text is longer than one item of its layer may be.
    #[error(
        "the text has {chars} characters, more than the {max} one {layer} item may have; shorten it or split it into several"
    )]
    TooLong {
        /// Layer.
        layer: Layer,
        /// Characters given.
        chars: usize,
        /// Limit.
        max: usize,
    },
    /// The profile has no room.
    #[error(
        "the profile of {scope} is full ({count}/{max_facts} facts, {chars}/{max_chars} characters; this needs {needed} characters); make room by replacing or forgetting suggested facts"
    )]
    ProfileFull {
        /// Scope.
        scope: MemoryScope,
        /// Facts in it.
        count: usize,
        /// Characters in it.
        chars: usize,
        /// Fact limit.
        max_facts: usize,
        /// Character limit.
        max_chars: usize,
        /// Characters the write needs.
        needed: usize,
        /// Facts worth replacing: lowest importance, then least recently
        /// changed.
        suggestion: Vec<(MemoryId, String)>,
    },
    /// The log has no room.
    #[error(
        "the log of {scope} is full ({count}/{max} entries); forget old entries first (suggested: the least important and oldest)"
    )]
    LogFull {
        /// Scope.
        scope: MemoryScope,
        /// Entries in it.
        count: usize,
        /// Limit.
        max: usize,
        /// Entries worth forgetting.
        suggestion: Vec<(MemoryId, String)>,
    },
    /// Too many live notes.
    #[error(
        "{scope} has {count}/{max} live notes; forget a note that is done, or wait for notes to expire"
    )]
    NotesFull {
        /// Scope.
        scope: MemoryScope,
        /// Live notes.
        count: usize,
        /// Limit.
        max: usize,
        /// Notes that expire first.
        suggestion: Vec<(MemoryId, String)>,
    },
    /// Notes need an expiry in the future; other layers take none.
    #[error("{0}")]
    BadExpiry(String),
    /// No item has this id.
    #[error("no memory item {0}; list what is remembered (the ids are shown beside each fact)")]
    UnknownId(MemoryId),
    /// The item exists in another scope than the caller named.
    #[error("memory item {id} belongs to {actual}, not to the scope named")]
    WrongScope {
        /// The item.
        id: MemoryId,
        /// Its scope.
        actual: MemoryScope,
    },
    /// The id is used by another item.
    #[error("the id {0} is already used by another item; write with a new id")]
    IdTaken(MemoryId),
    /// A replacement's text is what another item of the scope and layer
    /// already holds: the scope would hold one fact twice.
    #[error(
        "memory item {twin} already holds this text in {scope} ({layer}), so {replaced} was not changed: one fact is kept once"
    )]
    Twin {
        /// The item that holds the text.
        twin: MemoryId,
        /// The item the call would have changed.
        replaced: MemoryId,
        /// Their scope.
        scope: MemoryScope,
        /// Their layer.
        layer: Layer,
    },
}

impl MemoryRefusal {
    /// Items the refusal suggests replacing or forgetting.
    pub fn suggestion(&self) -> &[(MemoryId, String)] {
        match self {
            MemoryRefusal::ProfileFull { suggestion, .. }
            | MemoryRefusal::LogFull { suggestion, .. }
            | MemoryRefusal::NotesFull { suggestion, .. } => suggestion,
            MemoryRefusal::Empty
            | MemoryRefusal::TooLong { .. }
            | MemoryRefusal::BadExpiry(_)
            | MemoryRefusal::UnknownId(_)
            | MemoryRefusal::WrongScope { .. }
            | MemoryRefusal::IdTaken(_)
            | MemoryRefusal::Twin { .. } => &[],
        }
    }
}
