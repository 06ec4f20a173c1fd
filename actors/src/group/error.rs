//! Errors of group rooms, shaped for the API: each variant says what is
//! wrong and what to do.

use botfleet_memory::StoreError;

use crate::error::ActorError;

/// What can go wrong creating, reading or posting to a room.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// The request is invalid (bad name, too many members, empty text…).
    #[error("{0}")]
    Invalid(String),
    /// No such room for this user (or no such bot to add).
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with what exists (a room id that is taken, a
    /// closed room).
    #[error("{0}")]
    Conflict(String),
    /// The user may see the room but not change it (a member's owner in a
    /// shared room: only the room's owner changes its members or closes
    /// it).
    #[error("{0}")]
    Forbidden(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The runtime failed (an actor is gone, the admission failed).
    #[error(transparent)]
    Actor(#[from] ActorError),
}

impl GroupError {
    /// Whether the same request may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        match self {
            GroupError::Invalid(_)
            | GroupError::NotFound(_)
            | GroupError::Conflict(_)
            | GroupError::Forbidden(_) => false,
            GroupError::Store(e) => e.is_retryable(),
            GroupError::Actor(e) => e.is_retryable(),
        }
    }
}
