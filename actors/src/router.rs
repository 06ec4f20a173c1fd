//! The Router: routes admitted inputs to bot actors, activating a bot on its
//! first input and passivating it when it reports idle.
//!
//! Admission itself happens in the store (ledger row, transcript entry and
//! inbox row in one transaction); the store's post-commit continuation sends
//! the router a `Route` in commit order, so a bot sees its inputs in the
//! order they were committed without anyone waiting on a commit.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::BotId;
use ractor::Actor;
use ractor::ActorCell;
use ractor::ActorId;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::RpcReplyPort;
use ractor::SupervisionEvent;
use tokio::time::Instant;

use crate::bot::BotActor;
use crate::bot::BotArgs;
use crate::bot::BotMsg;
use crate::bot::BotStatus;
use crate::bot_queue::QueuedInput;
use crate::runtime::Runtime;

/// Restarts of one bot actor allowed per minute before the router stops
/// reviving it (its work stays in the store).
const MAX_RESTARTS_PER_MINUTE: u32 = 5;

/// The Router actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouterActor;

/// Messages of the router.
pub enum RouterMsg {
    /// An input already persisted: deliver it to its bot.
    Route(Box<QueuedInput>),
    /// Make sure a bot with pending work is active and has read its inbox.
    Wake(BotId),
    /// A bot reports it has been idle since it saw `seen` inputs.
    Idle {
        /// The bot.
        bot: BotId,
        /// Inputs it had received when it went idle.
        seen: u64,
    },
    /// Cancel a bot's running turn; answers whether one was running.
    Cancel {
        /// The bot.
        bot: BotId,
        /// Answer.
        reply: RpcReplyPort<bool>,
    },
    /// The status of every active bot.
    Active(RpcReplyPort<Vec<BotStatus>>),
    /// The status of one bot, if it is active.
    Status {
        /// The bot.
        bot: BotId,
        /// Answer.
        reply: RpcReplyPort<Option<BotStatus>>,
    },
    /// A bot's record changed in the store.
    Reload(BotId),
}

struct Slot {
    actor: ActorRef<BotMsg>,
    routed: u64,
}

/// State of the router.
pub struct RouterState {
    rt: Arc<Runtime>,
    bots: HashMap<BotId, Slot>,
    by_actor: HashMap<ActorId, BotId>,
    restarts: HashMap<BotId, (Instant, u32)>,
}

impl Actor for RouterActor {
    type Msg = RouterMsg;
    type State = RouterState;
    type Arguments = Arc<Runtime>;

    async fn pre_start(
        &self,
        _myself: ActorRef<RouterMsg>,
        rt: Arc<Runtime>,
    ) -> Result<RouterState, ActorProcessingErr> {
        Ok(RouterState {
            rt,
            bots: HashMap::new(),
            by_actor: HashMap::new(),
            restarts: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<RouterMsg>,
        msg: RouterMsg,
        state: &mut RouterState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RouterMsg::Route(input) => {
                let bot = input.item.bot.clone();
                let mut input = Some(input);
                // one retry: the actor may have died between its last message and now
                for _ in 0..2 {
                    let Some(slot) = state.activate(&myself, &bot).await else {
                        break;
                    };
                    slot.routed += 1;
                    let Some(i) = input.take() else { break };
                    match slot.actor.cast(BotMsg::Input(i)) {
                        Ok(()) => break,
                        Err(ractor::MessagingErr::SendErr(BotMsg::Input(i))) => {
                            input = Some(i);
                            state.forget(&bot);
                        }
                        Err(_) => {
                            state.forget(&bot);
                            break;
                        }
                    }
                }
            }
            RouterMsg::Wake(bot) => {
                if let Some(slot) = state.activate(&myself, &bot).await {
                    let _ = slot.actor.cast(BotMsg::Refresh);
                }
            }
            RouterMsg::Idle { bot, seen } => {
                if state.bots.get(&bot).is_some_and(|s| s.routed == seen)
                    && let Some(slot) = state.bots.remove(&bot)
                {
                    state.by_actor.remove(&slot.actor.get_id());
                    tracing::debug!(%bot, "passivating idle bot");
                    slot.actor.stop(Some("idle".into()));
                }
            }
            RouterMsg::Cancel { bot, reply } => match state.awake_for_cancel(&myself, &bot).await {
                Some(slot) => {
                    let answer = slot
                        .actor
                        .call(BotMsg::Cancel, Some(Duration::from_secs(5)))
                        .await
                        .ok()
                        .and_then(|r| r.success_or(()).ok())
                        .unwrap_or(false);
                    let _ = reply.send(answer);
                }
                None => {
                    let _ = reply.send(false);
                }
            },
            RouterMsg::Status { bot, reply } => {
                let status = match state.bots.get(&bot) {
                    Some(slot) => slot
                        .actor
                        .call(BotMsg::Status, Some(Duration::from_secs(2)))
                        .await
                        .ok()
                        .and_then(|r| r.success_or(()).ok()),
                    None => None,
                };
                let _ = reply.send(status);
            }
            RouterMsg::Active(reply) => {
                let mut out = Vec::with_capacity(state.bots.len());
                for slot in state.bots.values() {
                    if let Ok(ractor::rpc::CallResult::Success(s)) = slot
                        .actor
                        .call(BotMsg::Status, Some(Duration::from_secs(2)))
                        .await
                    {
                        out.push(s);
                    }
                }
                out.sort_by(|a, b| a.id.cmp(&b.id));
                let _ = reply.send(out);
            }
            RouterMsg::Reload(bot) => {
                if let Some(slot) = state.bots.get(&bot) {
                    let _ = slot.actor.cast(BotMsg::Reload);
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RouterMsg>,
        event: SupervisionEvent,
        state: &mut RouterState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                if let Some(bot) = state.forget_actor(&cell) {
                    tracing::debug!(%bot, ?reason, "bot actor stopped");
                }
            }
            SupervisionEvent::ActorFailed(cell, error) => {
                if let Some(bot) = state.forget_actor(&cell) {
                    tracing::error!(%bot, %error, "bot actor failed");
                    if state.may_restart(&bot) {
                        let _ = myself.cast(RouterMsg::Wake(bot));
                    } else {
                        tracing::error!(%bot, "bot actor keeps failing; not restarting it until new input arrives");
                    }
                }
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }
}

impl RouterState {
    /// The bot's actor, started if needed. `None` if it cannot start (an
    /// unknown bot or a store failure; logged).
    async fn activate(&mut self, myself: &ActorRef<RouterMsg>, bot: &BotId) -> Option<&mut Slot> {
        if !self.bots.contains_key(bot) {
            let args = BotArgs {
                id: bot.clone(),
                rt: self.rt.clone(),
                router: myself.clone(),
            };
            match Actor::spawn_linked(None, BotActor, args, myself.get_cell()).await {
                Ok((actor, _)) => {
                    self.by_actor.insert(actor.get_id(), bot.clone());
                    self.bots.insert(bot.clone(), Slot { actor, routed: 0 });
                }
                Err(e) => {
                    tracing::error!(%bot, error = %e, "could not activate bot");
                    return None;
                }
            }
        }
        self.bots.get_mut(bot)
    }

    /// The bot's actor for a cancel: an active bot's, or, for a bot with
    /// an unfinished turn in the store, one started now. Right after a
    /// restart a bot sleeps until the fleet's recovery wakes it to resume
    /// that turn; a cancel arriving first found no actor, answered that
    /// nothing ran, and the turn resumed after. Woken here, the bot resumes
    /// the turn as it starts, before it reads the cancel, which stops it.
    async fn awake_for_cancel(
        &mut self,
        myself: &ActorRef<RouterMsg>,
        bot: &BotId,
    ) -> Option<&mut Slot> {
        if !self.bots.contains_key(bot) {
            match self.rt.store.open_turns(bot).await {
                Ok(open) if open.is_empty() => return None,
                Ok(_) => {}
                Err(error) => {
                    tracing::error!(%bot, %error, "could not read the bot's unfinished turns for a cancel");
                    return None;
                }
            }
        }
        self.activate(myself, bot).await
    }

    fn forget(&mut self, bot: &BotId) {
        if let Some(slot) = self.bots.remove(bot) {
            self.by_actor.remove(&slot.actor.get_id());
        }
    }

    fn forget_actor(&mut self, cell: &ActorCell) -> Option<BotId> {
        let bot = self.by_actor.remove(&cell.get_id())?;
        if self
            .bots
            .get(&bot)
            .is_some_and(|s| s.actor.get_id() == cell.get_id())
        {
            self.bots.remove(&bot);
        }
        Some(bot)
    }

    fn may_restart(&mut self, bot: &BotId) -> bool {
        let now = Instant::now();
        let entry = self.restarts.entry(bot.clone()).or_insert((now, 0));
        if now.duration_since(entry.0) > Duration::from_secs(60) {
            *entry = (now, 0);
        }
        entry.1 += 1;
        entry.1 <= MAX_RESTARTS_PER_MINUTE
    }
}
