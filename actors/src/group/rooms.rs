//! The rooms supervisor and the registry the runtime holds.
//!
//! [`RoomsActor`] is a child of the fleet. It activates a [`GroupActor`]
//! per room on demand (`spawn_linked`, so it supervises it), passivates it
//! when it reports idle and nothing was sent to it since (the router's
//! counter handshake), and revives a failed one (at most 5 times a minute).
//!
//! It also owns the one subscription to the store's change signals that
//! every room shares: a member's turn is watched by session id in the
//! registry's table, and the dispatcher forwards only the changes of
//! watched sessions, so N active rooms cost one receiver, not N.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::RoomId;
use botfleet_memory::SessionId;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use dashmap::DashMap;
use parking_lot::RwLock;
use ractor::Actor;
use ractor::ActorCell;
use ractor::ActorId;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::SupervisionEvent;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::actor::GroupActor;
use super::actor::GroupArgs;
use super::actor::GroupMsg;
use crate::error::ActorError;
use crate::runtime::Runtime;
use crate::tools::Runner;

/// Restarts of one room's actor allowed per minute.
const MAX_RESTARTS_PER_MINUTE: u32 = 5;

/// Sessions watched for the room waiting on them.
pub(crate) type Watches = Arc<DashMap<SessionId, ActorRef<GroupMsg>>>;

/// The rooms part of the runtime: the supervisor's handle and the table of
/// watched member sessions.
#[derive(Default)]
pub struct GroupRegistry {
    supervisor: RwLock<Option<ActorRef<RoomsMsg>>>,
    watches: Watches,
    /// Whether a room's member turns run with the shared surface, by room
    /// id. Members' owners change only in fleet.toml (the start writes the
    /// room's new `shared` with the bots, before this registry exists);
    /// members change through their owner ([`GroupRegistry::note_shared`],
    /// by the change and by the coordinator when it takes up a
    /// discussion).
    shared: DashMap<RoomId, bool>,
    /// Whether the discussion a room's coordinator took up last runs
    /// with the shared surface ([`GroupRegistry::note_run_shared`]): a
    /// member turn gets the shared surface if this or `shared` says so,
    /// so a change that makes the room private does not open the
    /// private surface to a discussion of another user's message.
    run_shared: DashMap<RoomId, bool>,
}

impl std::fmt::Debug for GroupRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupRegistry")
            .field("watches", &self.watches.len())
            .finish()
    }
}

impl GroupRegistry {
    pub(crate) fn set_supervisor(&self, rooms: ActorRef<RoomsMsg>) {
        *self.supervisor.write() = Some(rooms);
    }

    /// Whether `cell` is the rooms supervisor (for the fleet's supervision).
    pub(crate) fn is_supervisor(&self, cell: &ActorCell) -> bool {
        self.supervisor
            .read()
            .as_ref()
            .is_some_and(|s| s.get_id() == cell.get_id())
    }

    fn supervisor(&self) -> Result<ActorRef<RoomsMsg>, ActorError> {
        self.supervisor
            .read()
            .clone()
            .ok_or(ActorError::ActorGone("rooms"))
    }

    /// Makes sure a room's coordinator is active and looks for work.
    pub fn wake(&self, room: RoomId) -> Result<(), ActorError> {
        Ok(self.supervisor()?.cast(RoomsMsg::Wake(room))?)
    }

    /// Wakes every room with unfinished runs (after a start or restart).
    pub fn recover(&self) -> Result<(), ActorError> {
        Ok(self.supervisor()?.cast(RoomsMsg::Recover)?)
    }

    pub(crate) fn watches(&self) -> &Watches {
        &self.watches
    }

    /// Sets whether member turns in `room` run with the shared surface,
    /// from now on (its members changed, or its coordinator took up a
    /// discussion whose members make it so).
    pub(crate) fn note_shared(&self, room: &RoomId, shared: bool) {
        self.shared.insert(room.clone(), shared);
    }

    /// Sets whether the discussion `room`'s coordinator takes up runs
    /// with the shared surface (its message came from another user or a
    /// shared room, or its members make it so), until the next one.
    pub(crate) fn note_run_shared(&self, room: &RoomId, shared: bool) {
        self.run_shared.insert(room.clone(), shared);
    }

    /// Who runs a member's turn in room `room` (the peer of its group
    /// session): a member of a shared room, or of a discussion that runs
    /// with the shared surface, gets it (no private connectors, no
    /// state-changing tools; tools/surface.rs).
    pub async fn member_runner(&self, store: &Store, room: &str) -> Result<Runner, StoreError> {
        let Ok(id) = RoomId::new(room) else {
            return Ok(Runner::GroupMember { shared: false });
        };
        if self.run_shared.get(&id).is_some_and(|s| *s) {
            return Ok(Runner::GroupMember { shared: true });
        }
        if let Some(shared) = self.shared.get(&id) {
            return Ok(Runner::GroupMember { shared: *shared });
        }
        let shared = store.get_room(&id).await?.is_some_and(|r| r.shared);
        self.shared.insert(id, shared);
        Ok(Runner::GroupMember { shared })
    }
}

/// Starts the rooms supervisor as a child of `parent` (the fleet) and
/// registers it in the runtime.
pub(crate) async fn start_supervisor(
    rt: &Arc<Runtime>,
    parent: ActorCell,
) -> Result<ActorRef<RoomsMsg>, ractor::SpawnErr> {
    let (rooms, _) = Actor::spawn_linked(None, RoomsActor, rt.clone(), parent).await?;
    rt.groups.set_supervisor(rooms.clone());
    Ok(rooms)
}

/// The rooms supervisor.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoomsActor;

/// Messages of the rooms supervisor.
#[derive(Debug)]
pub enum RoomsMsg {
    /// Activate a room (if needed) and tell it to look for work.
    Wake(RoomId),
    /// Wake every room with unfinished runs.
    Recover,
    /// A room reports it has been idle since it received `seen` wakes.
    Idle {
        /// The room.
        room: RoomId,
        /// Wakes it had received when it went idle.
        seen: u64,
    },
}

struct Slot {
    actor: ActorRef<GroupMsg>,
    routed: u64,
}

/// State of the rooms supervisor.
pub struct RoomsState {
    rt: Arc<Runtime>,
    rooms: HashMap<RoomId, Slot>,
    by_actor: HashMap<ActorId, RoomId>,
    restarts: HashMap<RoomId, (Instant, u32)>,
    /// The change-signal dispatcher, running while any room is active.
    dispatcher: Option<JoinHandle<()>>,
}

impl Actor for RoomsActor {
    type Msg = RoomsMsg;
    type State = RoomsState;
    type Arguments = Arc<Runtime>;

    async fn pre_start(
        &self,
        _myself: ActorRef<RoomsMsg>,
        rt: Arc<Runtime>,
    ) -> Result<RoomsState, ActorProcessingErr> {
        Ok(RoomsState {
            rt,
            rooms: HashMap::new(),
            by_actor: HashMap::new(),
            restarts: HashMap::new(),
            dispatcher: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<RoomsMsg>,
        msg: RoomsMsg,
        state: &mut RoomsState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RoomsMsg::Wake(room) => state.wake(&myself, room).await,
            RoomsMsg::Recover => match state.rt.store.rooms_with_open_runs().await {
                Ok(rooms) => {
                    if !rooms.is_empty() {
                        tracing::info!(count = rooms.len(), "resuming rooms with unfinished runs");
                    }
                    for room in rooms {
                        state.wake(&myself, room).await;
                    }
                }
                Err(e) => tracing::error!(error = %e, "cannot list rooms with unfinished runs"),
            },
            RoomsMsg::Idle { room, seen } => {
                if state.rooms.get(&room).is_some_and(|s| s.routed == seen)
                    && let Some(slot) = state.rooms.remove(&room)
                {
                    state.by_actor.remove(&slot.actor.get_id());
                    tracing::debug!(%room, "passivating idle room");
                    slot.actor.stop(Some("idle".into()));
                    state.stop_dispatcher_if_idle();
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RoomsMsg>,
        event: SupervisionEvent,
        state: &mut RoomsState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                if let Some(room) = state.forget_actor(&cell) {
                    tracing::debug!(%room, ?reason, "room actor stopped");
                }
                state.stop_dispatcher_if_idle();
            }
            SupervisionEvent::ActorFailed(cell, error) => {
                if let Some(room) = state.forget_actor(&cell) {
                    tracing::error!(%room, %error, "room actor failed");
                    if state.may_restart(&room) {
                        let _ = myself.cast(RoomsMsg::Wake(room));
                    } else {
                        tracing::error!(%room, "room actor keeps failing; not restarting it until the next message");
                    }
                }
                state.stop_dispatcher_if_idle();
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<RoomsMsg>,
        state: &mut RoomsState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(d) = state.dispatcher.take() {
            d.abort();
        }
        state.rt.groups.watches().clear();
        Ok(())
    }
}

impl RoomsState {
    async fn wake(&mut self, myself: &ActorRef<RoomsMsg>, room: RoomId) {
        for _ in 0..2 {
            if !self.rooms.contains_key(&room) {
                self.ensure_dispatcher();
                let args = GroupArgs {
                    room: room.clone(),
                    rt: self.rt.clone(),
                    rooms: myself.clone(),
                };
                match Actor::spawn_linked(None, GroupActor, args, myself.get_cell()).await {
                    Ok((actor, _)) => {
                        self.by_actor.insert(actor.get_id(), room.clone());
                        self.rooms.insert(room.clone(), Slot { actor, routed: 0 });
                    }
                    Err(e) => {
                        tracing::error!(%room, error = %e, "could not activate room");
                        self.stop_dispatcher_if_idle();
                        return;
                    }
                }
            }
            let Some(slot) = self.rooms.get_mut(&room) else {
                return;
            };
            slot.routed += 1;
            if slot.actor.cast(GroupMsg::Wake).is_ok() {
                return;
            }
            // it died between its last message and now: start it again
            if let Some(slot) = self.rooms.remove(&room) {
                self.by_actor.remove(&slot.actor.get_id());
            }
        }
    }

    fn ensure_dispatcher(&mut self) {
        if self.dispatcher.as_ref().is_some_and(|d| !d.is_finished()) {
            return;
        }
        let mut rx = self.rt.store.subscribe();
        let watches = self.rt.groups.watches().clone();
        self.dispatcher = Some(tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(change) => {
                        if let Some(room) = watches.get(&change.session) {
                            let _ = room.cast(GroupMsg::Changed {
                                session: change.session,
                                seq: change.seq,
                            });
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!(
                            missed,
                            "room dispatcher fell behind; re-checking every watched session"
                        );
                        for w in watches.iter() {
                            let _ = w.value().cast(GroupMsg::Changed {
                                session: *w.key(),
                                seq: i64::MAX,
                            });
                        }
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        }));
    }

    fn stop_dispatcher_if_idle(&mut self) {
        if self.rooms.is_empty()
            && let Some(d) = self.dispatcher.take()
        {
            d.abort();
        }
    }

    fn forget_actor(&mut self, cell: &ActorCell) -> Option<RoomId> {
        let room = self.by_actor.remove(&cell.get_id())?;
        if self
            .rooms
            .get(&room)
            .is_some_and(|s| s.actor.get_id() == cell.get_id())
        {
            self.rooms.remove(&room);
        }
        self.rt
            .groups
            .watches()
            .retain(|_, a| a.get_id() != cell.get_id());
        Some(room)
    }

    fn may_restart(&mut self, room: &RoomId) -> bool {
        let now = Instant::now();
        let entry = self.restarts.entry(room.clone()).or_insert((now, 0));
        if now.duration_since(entry.0) > Duration::from_secs(60) {
            *entry = (now, 0);
        }
        entry.1 += 1;
        entry.1 <= MAX_RESTARTS_PER_MINUTE
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use botfleet_memory::BotId;
    use botfleet_memory::Mutation;
    use botfleet_memory::RoomRecord;
    use botfleet_memory::StoreOptions;
    use botfleet_memory::UserId;

    use super::*;

    #[tokio::test]
    async fn members_of_shared_rooms_get_the_shared_surface() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(StoreOptions::new(dir.path().join("db"))).unwrap();
        let room = |id: &str, shared| RoomRecord {
            id: RoomId::new(id).unwrap(),
            name: id.into(),
            owner: UserId::new("alice").unwrap(),
            members: vec![BotId::new("a").unwrap(), BotId::new("b").unwrap()],
            shared,
            created_at: 0,
            updated_at: 0,
            closed_at: None,
        };
        store
            .write(vec![
                Mutation::CreateRoom(Box::new(room("mine", false))),
                Mutation::CreateRoom(Box::new(room("mixed", true))),
            ])
            .await
            .unwrap();
        let registry = GroupRegistry::default();
        for _ in 0..2 {
            // the second pass answers from the cache
            assert_eq!(
                registry.member_runner(&store, "mixed").await.unwrap(),
                Runner::GroupMember { shared: true }
            );
            assert_eq!(
                registry.member_runner(&store, "mine").await.unwrap(),
                Runner::GroupMember { shared: false }
            );
        }
        assert_eq!(
            registry.member_runner(&store, "not a room").await.unwrap(),
            Runner::GroupMember { shared: false }
        );
        store.close().await;
    }
}
