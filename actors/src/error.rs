//! Errors of the actors crate.

use botfleet_memory::BotId;
use botfleet_memory::StoreError;

use crate::model::ModelError;

/// Result alias of this crate.
pub type Result<T, E = ActorError> = std::result::Result<T, E>;

/// What can go wrong in the runtime.
#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A model call failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// An actor stopped before it answered.
    #[error("the {0} actor is gone; the host is shutting down or restarting it")]
    ActorGone(&'static str),
    /// An actor did not answer in time.
    #[error("the {0} actor did not answer in time")]
    Timeout(&'static str),
    /// An actor could not be started.
    #[error("could not start the {what} actor: {detail}")]
    Spawn {
        /// Which actor.
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// No such bot.
    #[error("no bot \"{0}\"; list bots with `botfleet bots` or GET /v1/bots")]
    UnknownBot(BotId),
    /// A request was refused as invalid.
    #[error("{0}")]
    Invalid(String),
    /// A request that is valid, but not in the state its target is in
    /// (a retry of a turn that is running, completed, or retried already).
    #[error("{0}")]
    Conflict(String),
    /// A conflict with something running (a turn, the subagent limit):
    /// the same request may succeed once that ends, unlike a
    /// [`ActorError::Conflict`].
    #[error("{0}")]
    Busy(String),
    /// A cancel stopped the turn, but the store refused to record its end
    /// (the store's error): it does not run on while the host runs, and is
    /// recorded as failed once the store takes writes; a restart before
    /// that resumes it.
    #[error(
        "the turn stopped, but the store refused to record its cancel ({0}): it does not run on \
         while the host runs, and is recorded as failed once the store takes writes again; a \
         restart before then resumes it, so let the store write first (free its disk, or stop \
         what holds the database: docs/operations.md, \"When the disk fills\"), and cancel it \
         again if it ran on"
    )]
    CancelNotRecorded(String),
}

impl ActorError {
    /// Whether the same request may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        match self {
            ActorError::Store(e) => e.is_retryable(),
            ActorError::Model(e) => e.is_retryable(),
            ActorError::ActorGone(_) => true,
            ActorError::Timeout(_) => true,
            ActorError::Spawn { .. } => true,
            ActorError::UnknownBot(_) => false,
            ActorError::Invalid(_) | ActorError::Conflict(_) | ActorError::Busy(_) => false,
            // the store may take writes later; the message says what to do
            ActorError::CancelNotRecorded(_) => true,
        }
    }
}

impl<T> From<ractor::MessagingErr<T>> for ActorError {
    fn from(_: ractor::MessagingErr<T>) -> Self {
        ActorError::ActorGone("target")
    }
}
