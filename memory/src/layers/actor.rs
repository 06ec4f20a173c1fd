//! Memory actors: one [`ScopeActor`] per active scope instance, activated
//! on demand by the [`MemoryHub`] and passivated when idle.
//!
//! - Every write to a scope instance goes through its actor, which applies
//!   the ops one at a time (each a `Store::write`): the writes of one scope
//!   never interleave, so a bot's Remember and the fact extraction of
//!   another bot of the same user see each other's results in order. The
//!   limits themselves are checked by the store writer inside its
//!   transaction (`apply.rs`), which holds whatever path a write takes.
//!   The one exception is [`MemoryHub::apply_all`]: ops that must commit
//!   together (Forget by text, across scopes) go to the store in one write.
//! - Reads do not go through the actors (see `read.rs`).
//! - The hub keeps a registry (`DashMap` scope → actor). Activation is
//!   serialised by a small async lock so one scope never gets two actors.
//!   An actor stops itself after `idle` without messages and removes its
//!   own registry entry; a caller that finds the actor gone (stopped
//!   between lookup and send, or crashed) drops the entry and activates a
//!   fresh one, once. Retrying is safe: ops carry their ids, so an op that
//!   did land answers `Unchanged` or `AlreadyForgotten` the second time.
//! - Actors hold a `Weak` reference to the hub's registry: the registry
//!   holds the actors, a strong reference back would be a cycle.

use std::sync::Arc;
use std::sync::Weak;
use std::time::Duration;

use dashmap::DashMap;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::RpcReplyPort;
use ractor::rpc::CallResult;
use tokio::time::Instant;

use super::read::MemoryLookup;
use super::types::MemoryId;
use super::types::MemoryOp;
use super::types::MemoryOpResult;
use super::types::MemoryRefusal;
use super::types::MemoryScope;
use crate::error::StoreError;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;

/// How long an idle scope actor lives by default.
pub const DEFAULT_SCOPE_IDLE: Duration = Duration::from_secs(120);
/// How long a caller waits for a scope actor's answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What a memory write can fail with (a refusal is not a failure: it is
/// an `Ok(MemoryOpResult::Refused(..))`).
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The scope actor stopped before it answered (the host is shutting
    /// down).
    #[error("the memory actor of {0} is gone; the host is shutting down or restarting it")]
    ActorGone(MemoryScope),
    /// The scope actor did not answer in time.
    #[error("the memory actor of {0} did not answer in time; retry")]
    Timeout(MemoryScope),
    /// A scope actor could not be started.
    #[error("could not start the memory actor of {scope}: {detail}")]
    Spawn {
        /// Scope.
        scope: MemoryScope,
        /// Why.
        detail: String,
    },
}

impl MemoryError {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            MemoryError::Store(e) => e.is_retryable(),
            MemoryError::ActorGone(_) | MemoryError::Timeout(_) | MemoryError::Spawn { .. } => true,
        }
    }
}

type Registry = DashMap<MemoryScope, ActorRef<ScopeMsg>>;

struct HubInner {
    store: Store,
    actors: Registry,
    activation: tokio::sync::Mutex<()>,
    idle: Duration,
}

/// Activates scope actors on demand and routes writes to them. Cheap to
/// clone.
#[derive(Clone)]
pub struct MemoryHub {
    inner: Arc<HubInner>,
}

impl std::fmt::Debug for MemoryHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryHub")
            .field("active", &self.inner.actors.len())
            .finish()
    }
}

impl MemoryHub {
    /// A hub over `store` whose actors passivate after
    /// [`DEFAULT_SCOPE_IDLE`].
    pub fn new(store: Store) -> Self {
        Self::with_idle(store, DEFAULT_SCOPE_IDLE)
    }

    /// A hub whose actors passivate after `idle`.
    pub fn with_idle(store: Store, idle: Duration) -> Self {
        Self {
            inner: Arc::new(HubInner {
                store,
                actors: DashMap::new(),
                activation: tokio::sync::Mutex::new(()),
                idle,
            }),
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Applies `op` through the actor of its scope.
    pub async fn apply(&self, op: MemoryOp) -> Result<MemoryOpResult, MemoryError> {
        let scope = op.scope().clone();
        let mut retried = false;
        loop {
            let actor = self.activate(&scope).await?;
            let sent = op.clone();
            match actor
                .call(
                    |reply| ScopeMsg::Apply(Box::new(sent), reply),
                    Some(CALL_TIMEOUT),
                )
                .await
            {
                Ok(CallResult::Success(result)) => return result.map_err(MemoryError::from),
                Ok(CallResult::Timeout) => return Err(MemoryError::Timeout(scope)),
                Ok(CallResult::SenderError) | Err(_) => {
                    self.inner
                        .actors
                        .remove_if(&scope, |_, a| a.get_id() == actor.get_id());
                    if retried {
                        return Err(MemoryError::ActorGone(scope));
                    }
                    retried = true;
                }
            }
        }
    }

    /// Applies `ops` in one store write: one transaction, so either all of
    /// them are applied or none (a crash cannot leave half of them done).
    /// The ops may span scopes, so they do not go through the scope
    /// actors: the store writer orders them with the actors' writes, and
    /// checks the limits inside the transaction as for any write. Answers
    /// one result per op, in order.
    pub async fn apply_all(&self, ops: Vec<MemoryOp>) -> Result<Vec<MemoryOpResult>, MemoryError> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let batch = ops
            .into_iter()
            .map(|op| Mutation::Memory(Box::new(op)))
            .collect();
        let results = self.inner.store.write(batch).await?;
        results
            .into_iter()
            .map(|r| match r {
                MutationResult::Memory(r) => Ok(*r),
                other => Err(unexpected(&other).into()),
            })
            .collect()
    }

    /// Forgets an item wherever it is: looks up its scope and removes it
    /// through that scope's actor. The caller checks that the asker may
    /// (see `bot_scopes`); an unknown id answers
    /// `Refused(UnknownId)`, an id already forgotten `AlreadyForgotten`.
    pub async fn forget(&self, id: &MemoryId) -> Result<MemoryOpResult, MemoryError> {
        match self.inner.store.memory_lookup(id).await? {
            MemoryLookup::Found(item) => {
                self.apply(MemoryOp::Remove {
                    id: id.clone(),
                    scope: item.scope,
                })
                .await
            }
            MemoryLookup::Forgotten(_) | MemoryLookup::Expired { .. } => {
                Ok(MemoryOpResult::AlreadyForgotten(id.clone()))
            }
            MemoryLookup::Unknown => Ok(MemoryOpResult::Refused(MemoryRefusal::UnknownId(
                id.clone(),
            ))),
        }
    }

    /// Scopes with a running actor.
    pub fn active_scopes(&self) -> Vec<MemoryScope> {
        let mut out: Vec<MemoryScope> = self.inner.actors.iter().map(|e| e.key().clone()).collect();
        out.sort();
        out
    }

    /// Stops every scope actor (each finishes the op it is applying).
    pub async fn shutdown(&self) {
        let actors: Vec<ActorRef<ScopeMsg>> = self
            .inner
            .actors
            .iter()
            .map(|e| e.value().clone())
            .collect();
        self.inner.actors.clear();
        for a in actors {
            a.stop(Some("memory hub shutdown".into()));
        }
    }

    async fn activate(&self, scope: &MemoryScope) -> Result<ActorRef<ScopeMsg>, MemoryError> {
        if let Some(a) = self.inner.actors.get(scope) {
            return Ok(a.clone());
        }
        let _guard = self.inner.activation.lock().await;
        if let Some(a) = self.inner.actors.get(scope) {
            return Ok(a.clone());
        }
        let args = ScopeArgs {
            store: self.inner.store.clone(),
            scope: scope.clone(),
            registry: Arc::downgrade(&self.inner),
            idle: self.inner.idle,
        };
        let (actor, _) =
            Actor::spawn(None, ScopeActor, args)
                .await
                .map_err(|e| MemoryError::Spawn {
                    scope: scope.clone(),
                    detail: e.to_string(),
                })?;
        self.inner.actors.insert(scope.clone(), actor.clone());
        tracing::debug!(%scope, "memory actor activated");
        Ok(actor)
    }
}

/// The actor of one scope instance; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScopeActor;

/// What a [`ScopeActor`] starts with.
pub struct ScopeArgs {
    store: Store,
    scope: MemoryScope,
    /// Weak: the hub's registry holds this actor (see the module docs).
    registry: Weak<HubInner>,
    idle: Duration,
}

/// Messages of [`ScopeActor`].
#[derive(Debug)]
pub enum ScopeMsg {
    /// Apply one op to this scope and answer after its commit.
    Apply(
        Box<MemoryOp>,
        RpcReplyPort<Result<MemoryOpResult, StoreError>>,
    ),
    /// The idle timer fired: stop if nothing arrived since.
    IdleCheck,
}

/// State of a running [`ScopeActor`].
pub struct ScopeState {
    args: ScopeArgs,
    last_activity: Instant,
}

impl Actor for ScopeActor {
    type Msg = ScopeMsg;
    type State = ScopeState;
    type Arguments = ScopeArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ScopeMsg>,
        args: ScopeArgs,
    ) -> Result<ScopeState, ActorProcessingErr> {
        // the timer task runs detached; dropping its handle does not stop it
        drop(myself.send_after(args.idle, || ScopeMsg::IdleCheck));
        Ok(ScopeState {
            args,
            last_activity: Instant::now(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<ScopeMsg>,
        message: ScopeMsg,
        state: &mut ScopeState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ScopeMsg::Apply(op, reply) => {
                state.last_activity = Instant::now();
                let result = if op.scope() == &state.args.scope {
                    write_op(&state.args.store, *op).await
                } else {
                    Err(StoreError::Rejected(format!(
                        "an op for {} reached the memory actor of {}",
                        op.scope(),
                        state.args.scope
                    )))
                };
                let _ = reply.send(result);
            }
            ScopeMsg::IdleCheck => {
                let idle_for = state.last_activity.elapsed();
                if idle_for >= state.args.idle {
                    myself.stop(Some("idle".into()));
                } else {
                    drop(myself.send_after(state.args.idle - idle_for, || ScopeMsg::IdleCheck));
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<ScopeMsg>,
        state: &mut ScopeState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(hub) = state.args.registry.upgrade() {
            hub.actors
                .remove_if(&state.args.scope, |_, a| a.get_id() == myself.get_id());
        }
        tracing::debug!(scope = %state.args.scope, "memory actor passivated");
        Ok(())
    }
}

/// Commits one op and unwraps its result.
async fn write_op(store: &Store, op: MemoryOp) -> Result<MemoryOpResult, StoreError> {
    let mut results = store.write(vec![Mutation::Memory(Box::new(op))]).await?;
    match results.pop() {
        Some(MutationResult::Memory(r)) => Ok(*r),
        other => Err(unexpected(&other)),
    }
}

fn unexpected(result: &dyn std::fmt::Debug) -> StoreError {
    StoreError::Rejected(format!("unexpected result of a memory write: {result:?}"))
}
