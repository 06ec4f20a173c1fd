//! The Router: routes admitted inputs to bot actors, activating a bot on its
//! first input and passivating it when it reports idle.
//!
//! Admission itself happens in the store (ledger row, transcript entry and
//! inbox row in one transaction); the store's post-commit continuation sends
//! the router a `Route` in commit order, so a bot sees its inputs in the
//! order they were committed without anyone waiting on a commit.
//!
//! The router never waits for a bot inside its handler: one busy bot would
//! hold up every user's routing behind it. Bots publish what they are doing
//! on the live board (`router_live.rs`), which status questions read
//! without messaging anyone, and a cancel is handed to the bot with the
//! caller's reply port, for the bot to answer the caller itself.

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
use crate::bot::CancelAnswer;
use crate::bot_queue::QueuedInput;
use crate::runtime::Runtime;

/// What the active bots are doing, published by the bots themselves.
#[path = "router_live.rs"]
pub(crate) mod live;

use live::LiveBoard;
use live::LiveCell;

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;

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
    /// Cancel a bot's running turn; answers what the cancel did. The bot
    /// answers `reply` itself: the router only hands it on.
    Cancel {
        /// The bot.
        bot: BotId,
        /// Answer.
        reply: RpcReplyPort<CancelAnswer>,
    },
    /// A cancel for a bot that was not active and has unfinished turns in
    /// the store (the router sends it to itself once a task read them):
    /// the bot is started, resumes them, and then reads the cancel.
    CancelOpen {
        /// The bot.
        bot: BotId,
        /// Answer.
        reply: RpcReplyPort<CancelAnswer>,
    },
    /// A bot's record changed in the store.
    Reload(BotId),
}

struct Slot {
    actor: ActorRef<BotMsg>,
    routed: u64,
    /// The actor's cell on the live board.
    live: Arc<LiveCell>,
}

/// Start arguments of the router.
pub struct RouterArgs {
    /// Shared runtime.
    pub rt: Arc<Runtime>,
    /// Where the bots the router starts publish their status.
    pub(crate) board: Arc<LiveBoard>,
}

/// State of the router.
pub struct RouterState {
    rt: Arc<Runtime>,
    board: Arc<LiveBoard>,
    bots: HashMap<BotId, Slot>,
    by_actor: HashMap<ActorId, BotId>,
    restarts: HashMap<BotId, (Instant, u32)>,
}

impl Actor for RouterActor {
    type Msg = RouterMsg;
    type State = RouterState;
    type Arguments = RouterArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<RouterMsg>,
        args: RouterArgs,
    ) -> Result<RouterState, ActorProcessingErr> {
        // the bots of a router before this one stopped with it
        args.board.clear();
        Ok(RouterState {
            rt: args.rt,
            board: args.board,
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
                            drop(state.forget(&bot));
                        }
                        Err(_) => {
                            drop(state.forget(&bot));
                            break;
                        }
                    }
                }
            }
            RouterMsg::Wake(bot) => {
                // counted as an input is: an idle report the bot made
                // before it (still in this mailbox) must not stop the bot
                // with the wake-up unread in its own, which left the
                // inputs a retry requeued waiting for the next message or
                // a restart
                if let Some(slot) = state.activate(&myself, &bot).await
                    && slot.actor.cast(BotMsg::Woken).is_ok()
                {
                    slot.routed += 1;
                }
            }
            RouterMsg::Idle { bot, seen } => {
                if state.bots.get(&bot).is_some_and(|s| s.routed == seen) {
                    tracing::debug!(%bot, "passivating idle bot");
                    if let Some(slot) = state.forget(&bot) {
                        slot.actor.stop(Some("idle".into()));
                    }
                }
            }
            RouterMsg::Cancel { bot, reply } => {
                if state.bots.contains_key(&bot) {
                    state.hand_cancel(&bot, reply);
                } else {
                    state.cancel_asleep(&myself, bot, reply);
                }
            }
            RouterMsg::CancelOpen { bot, reply } => {
                if state.activate(&myself, &bot).await.is_some() {
                    state.hand_cancel(&bot, reply);
                } else {
                    let _ = reply.send(CancelAnswer::Nothing);
                }
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
            let live = self.board.new_cell();
            let args = BotArgs {
                id: bot.clone(),
                rt: self.rt.clone(),
                router: myself.clone(),
                live: live.clone(),
            };
            match Actor::spawn_linked(None, BotActor, args, myself.get_cell()).await {
                Ok((actor, _)) => {
                    self.by_actor.insert(actor.get_id(), bot.clone());
                    self.board.insert(bot.clone(), live.clone());
                    self.bots.insert(
                        bot.clone(),
                        Slot {
                            actor,
                            routed: 0,
                            live,
                        },
                    );
                }
                Err(e) => {
                    tracing::error!(%bot, error = %e, "could not activate bot");
                    return None;
                }
            }
        }
        self.bots.get_mut(bot)
    }

    /// Hands a cancel to `bot`'s active actor, which answers `reply`
    /// itself (the router does not wait for it). An actor that is gone
    /// cancels nothing.
    fn hand_cancel(&mut self, bot: &BotId, reply: RpcReplyPort<CancelAnswer>) {
        let Some(slot) = self.bots.get(bot) else {
            let _ = reply.send(CancelAnswer::Nothing);
            return;
        };
        match slot.actor.cast(BotMsg::Cancel(reply)) {
            Ok(()) => {}
            Err(ractor::MessagingErr::SendErr(BotMsg::Cancel(reply))) => {
                self.forget(bot);
                let _ = reply.send(CancelAnswer::Nothing);
            }
            // the port went with the message: dropped, it ends the
            // caller's wait with nothing cancelled (`FleetHandle::cancel`)
            Err(_) => {
                self.forget(bot);
            }
        }
    }

    /// A cancel for a bot that is not active: it has something to cancel
    /// only if it has an unfinished turn in the store. Right after a
    /// restart a bot sleeps until the fleet's recovery wakes it to resume
    /// that turn; a cancel arriving first found no actor, answered that
    /// nothing ran, and the turn resumed after. So the store is read (by a
    /// task: the router waits for no one) and, for a bot with an
    /// unfinished turn, [`RouterMsg::CancelOpen`] starts it: the bot
    /// resumes the turn as it starts, before it reads the cancel, which
    /// stops it.
    fn cancel_asleep(
        &self,
        myself: &ActorRef<RouterMsg>,
        bot: BotId,
        reply: RpcReplyPort<CancelAnswer>,
    ) {
        let rt = self.rt.clone();
        let router = myself.clone();
        tokio::spawn(async move {
            match rt.store.open_turns(&bot).await {
                Ok(open) if open.is_empty() => {
                    let _ = reply.send(CancelAnswer::Nothing);
                }
                Ok(_) => {
                    if let Err(ractor::MessagingErr::SendErr(RouterMsg::CancelOpen {
                        reply, ..
                    })) = router.cast(RouterMsg::CancelOpen { bot, reply })
                    {
                        let _ = reply.send(CancelAnswer::Nothing);
                    }
                }
                Err(error) => {
                    tracing::error!(%bot, %error, "could not read the bot's unfinished turns for a cancel");
                    let _ = reply.send(CancelAnswer::Nothing);
                }
            }
        });
    }

    /// Forgets `bot`'s actor (it stopped, or is being stopped) and takes
    /// its cell off the live board.
    fn forget(&mut self, bot: &BotId) -> Option<Slot> {
        let slot = self.bots.remove(bot)?;
        self.by_actor.remove(&slot.actor.get_id());
        self.board.remove(bot, &slot.live);
        Some(slot)
    }

    fn forget_actor(&mut self, cell: &ActorCell) -> Option<BotId> {
        let bot = self.by_actor.remove(&cell.get_id())?;
        if self
            .bots
            .get(&bot)
            .is_some_and(|s| s.actor.get_id() == cell.get_id())
            && let Some(slot) = self.bots.remove(&bot)
        {
            self.board.remove(&bot, &slot.live);
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
