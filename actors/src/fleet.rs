//! The Fleet: root supervisor of a running fleet, and [`FleetHandle`], the
//! surface the host (HTTP API, CLI) drives it through.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::IndexerActor;
use botfleet_memory::Mutation;
use botfleet_memory::Store;
use botfleet_memory::TurnId;
use botfleet_memory::TurnRecord;
use botfleet_memory::TurnStatus;
use ractor::Actor;
use ractor::ActorCell;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::SupervisionEvent;

use crate::bot::BotStatus;
use crate::bot::CancelAnswer;
use crate::engine::unanswered::Removal;
use crate::error::ActorError;
use crate::error::Result;
use crate::router::RouterActor;
use crate::router::RouterArgs;
use crate::router::RouterMsg;
use crate::router::live::LiveBoard;
use crate::runtime::Runtime;

/// Bots made by CreateAgent and subagents brought in line with their
/// makers and parents at each start.
#[path = "fleet_derived.rs"]
pub(crate) mod derived;
#[path = "fleet_withheld.rs"]
mod withheld;

#[path = "fleet_claims.rs"]
pub(crate) mod claims;

/// A bot made by CreateAgent removed at its owner's request.
#[path = "bot_remove.rs"]
mod remove;

/// A person's retry of an ended turn.
#[path = "fleet_retry.rs"]
mod retry;

/// The root supervisor: it owns the router and restarts it if it fails.
#[derive(Debug, Clone, Copy, Default)]
pub struct FleetActor;

/// Messages of the fleet supervisor.
#[derive(Debug)]
pub enum FleetMsg {
    /// Wake every bot that has pending inputs or unfinished turns: those
    /// `found` as the fleet started (before it routed anything), or with
    /// `None` those the store lists now (after the router failed).
    Recover {
        /// Bots with work found before the message was sent.
        found: Option<Vec<BotId>>,
    },
    /// Start the transcript indexer again (after it failed, with backoff).
    RestartIndexer,
}

/// Start arguments of the fleet supervisor.
pub struct FleetArgs {
    /// Shared runtime.
    pub rt: Arc<Runtime>,
    /// The live board its routers file the active bots on.
    pub(crate) board: Arc<LiveBoard>,
}

/// State of the fleet supervisor.
pub struct FleetState {
    rt: Arc<Runtime>,
    board: Arc<LiveBoard>,
    /// Restarts of the indexer in a row (for its backoff).
    indexer_failures: u32,
    /// When the indexer last started.
    indexer_started: Option<std::time::Instant>,
}

/// How long a cancel waits for the bot's answer.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// How long a stopping fleet waits for the indexer's last commit.
const INDEX_FLUSH_AT_STOP: Duration = Duration::from_secs(5);

/// First wait before restarting a failed indexer; doubles per failure in a
/// row, up to [`INDEXER_BACKOFF_MAX`].
const INDEXER_BACKOFF: Duration = Duration::from_millis(200);
/// Longest wait before restarting a failed indexer.
const INDEXER_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// An indexer that ran this long before failing starts the backoff over.
const INDEXER_STABLE: Duration = Duration::from_secs(60);

impl FleetState {
    /// Starts the transcript indexer if the host set one up
    /// ([`Runtime::set_indexer`]); on failure, schedules a retry. Searches
    /// keep working on the last commit meanwhile, and the indexer catches
    /// up from the store when it starts.
    async fn start_indexer(&mut self, myself: &ActorRef<FleetMsg>) {
        let Some(args) = self.rt.indexer_args() else {
            return;
        };
        match Actor::spawn_linked(None, IndexerActor, args, myself.get_cell()).await {
            Ok((indexer, _)) => {
                self.rt.set_indexer_ref(Some(indexer));
                self.indexer_started = Some(std::time::Instant::now());
            }
            Err(error) => {
                tracing::error!(%error, "the transcript indexer did not start");
                self.rt.set_indexer_ref(None);
                self.schedule_indexer_restart(myself);
            }
        }
    }

    /// Restarts the indexer after a backoff that grows while it keeps
    /// failing soon after starting.
    fn schedule_indexer_restart(&mut self, myself: &ActorRef<FleetMsg>) {
        if self
            .indexer_started
            .is_some_and(|t| t.elapsed() >= INDEXER_STABLE)
        {
            self.indexer_failures = 0;
        }
        let delay = INDEXER_BACKOFF
            .saturating_mul(1 << self.indexer_failures.min(8))
            .min(INDEXER_BACKOFF_MAX);
        self.indexer_failures = self.indexer_failures.saturating_add(1);
        self.indexer_started = None;
        myself.send_after(delay, || FleetMsg::RestartIndexer);
    }

    /// Starts a router (at the start, and after one failed).
    async fn start_router(&self, myself: &ActorRef<FleetMsg>) -> Result<(), ActorProcessingErr> {
        let args = RouterArgs {
            rt: self.rt.clone(),
            board: self.board.clone(),
        };
        let (router, _) = Actor::spawn_linked(None, RouterActor, args, myself.get_cell()).await?;
        self.rt.set_router(router);
        Ok(())
    }

    fn is_indexer(&self, cell: &ActorCell) -> bool {
        self.rt
            .indexer()
            .is_some_and(|i| i.get_id() == cell.get_id())
    }
}

impl Actor for FleetActor {
    type Msg = FleetMsg;
    type State = FleetState;
    type Arguments = FleetArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<FleetMsg>,
        args: FleetArgs,
    ) -> Result<FleetState, ActorProcessingErr> {
        let mut state = FleetState {
            rt: args.rt,
            board: args.board,
            indexer_failures: 0,
            indexer_started: None,
        };
        state.start_router(&myself).await?;
        crate::group::start_supervisor(&state.rt, myself.get_cell()).await?;
        state.start_indexer(&myself).await;
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<FleetMsg>,
        msg: FleetMsg,
        state: &mut FleetState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            FleetMsg::Recover { found } => {
                let bots = match found {
                    Some(bots) => bots,
                    None => state.rt.store.bots_with_work().await?,
                };
                if !bots.is_empty() {
                    tracing::info!(count = bots.len(), "waking bots with unfinished work");
                }
                let router = state.rt.router()?;
                for bot in bots {
                    let _ = router.cast(RouterMsg::Wake(bot));
                }
                // rooms with unfinished runs resume (their members' turns
                // resume with their bots, woken above)
                let _ = state.rt.groups.recover();
            }
            FleetMsg::RestartIndexer => state.start_indexer(&myself).await,
        }
        Ok(())
    }

    /// Before its children are killed (ractor kills them when a supervisor
    /// stops, so their own `post_stop` never runs): the indexer commits
    /// what it has, so a clean stop leaves the search index caught up, and
    /// is then stopped and waited for, so that its writer (and the index
    /// directory's lock) is let go before `shutdown` returns. Killed, it
    /// let go only when its task next ran, or after a batch it had in the
    /// blocking pool: a host started again at once in the same process
    /// found the lock taken and ran without an indexer until the retry.
    async fn post_stop(
        &self,
        _myself: ActorRef<FleetMsg>,
        state: &mut FleetState,
    ) -> Result<(), ActorProcessingErr> {
        let Some(indexer) = state.rt.indexer() else {
            return Ok(());
        };
        if let Err(error) = IndexerActor::flush(&indexer, INDEX_FLUSH_AT_STOP).await {
            tracing::warn!(%error, "the search index was not flushed at shutdown; the next start catches up");
        }
        state.rt.set_indexer_ref(None);
        if let Err(error) = indexer
            .stop_and_wait(Some("shutdown".into()), Some(INDEX_FLUSH_AT_STOP))
            .await
        {
            tracing::warn!(%error, "the search indexer did not stop in time at shutdown; it is killed");
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<FleetMsg>,
        event: SupervisionEvent,
        state: &mut FleetState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, error) if state.is_indexer(&cell) => {
                tracing::error!(actor = %cell.get_id(), %error, "transcript indexer failed; restarting it");
                state.rt.set_indexer_ref(None);
                state.schedule_indexer_restart(&myself);
            }
            SupervisionEvent::ActorFailed(cell, error) if state.rt.groups.is_supervisor(&cell) => {
                tracing::error!(actor = %cell.get_id(), %error, "rooms supervisor failed; restarting it");
                crate::group::start_supervisor(&state.rt, myself.get_cell()).await?;
                let _ = state.rt.groups.recover();
            }
            SupervisionEvent::ActorFailed(cell, error) => {
                tracing::error!(actor = %cell.get_id(), %error, "router failed; restarting it");
                state.start_router(&myself).await?;
                let _ = myself.cast(FleetMsg::Recover { found: None });
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                tracing::debug!(actor = %cell.get_id(), ?reason, "child of the fleet stopped");
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }
}

/// Handle to a running fleet; cheap to clone.
#[derive(Clone)]
pub struct FleetHandle {
    rt: Arc<Runtime>,
    fleet: ActorRef<FleetMsg>,
    /// What the active bots are doing, as they publish it.
    board: Arc<LiveBoard>,
}

impl std::fmt::Debug for FleetHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetHandle").field("rt", &self.rt).finish()
    }
}

impl FleetHandle {
    /// Registers the configured bots, starts the supervisor tree and wakes
    /// every bot with unfinished work (crash recovery).
    ///
    /// A bot of an earlier config that `bots` no longer lists is marked
    /// removed ([`BotRecord::removed_at`]): it takes no more messages and
    /// runs no turns, what it was sent stays in its inbox and its sessions
    /// stay readable, until a config lists it again. Its subagents are
    /// removed with it; every subagent keeps only the tools its parent
    /// has and runs on its parent's provider, and every bot made by
    /// CreateAgent only the tools its maker has (`fleet_derived.rs`).
    pub async fn start(rt: Runtime, bots: Vec<BotRecord>) -> Result<Self> {
        let rt = Arc::new(rt);
        let listed: HashSet<BotId> = bots.iter().map(|b| b.id.clone()).collect();
        let now = rt.store.clock().now_ms();
        let mut writes: Vec<Mutation> = bots.iter().cloned().map(Mutation::UpsertBot).collect();
        // every bot as it is once this config applies: the stored ones,
        // the config's, and those the config dropped marked removed
        let mut all: HashMap<BotId, BotRecord> = HashMap::new();
        // every stored bot as it was before this config applies
        let mut before: HashMap<BotId, BotRecord> = HashMap::new();
        let stored = rt.store.list_bots(None).await?;
        for note in claims::check_fleet_file_bots(&stored, &bots)? {
            tracing::warn!("{note}");
        }
        let ids: Vec<String> = bots.iter().map(|b| b.id.to_string()).collect();
        for note in claims::room_id_clashes(&rt.store.rooms_holding(&ids).await?) {
            tracing::warn!("{note}");
        }
        let rooms = rt.store.open_rooms().await?;
        for note in claims::room_member_clashes(&rooms, &stored, &bots)? {
            tracing::warn!("{note}");
        }
        for b in stored {
            before.insert(b.id.clone(), b.clone());
            if listed.contains(&b.id) {
                continue;
            }
            let b = if b.from_config() && b.removed_at().is_none() {
                tracing::warn!(bot = %b.id, "bot is no longer in the fleet's config: it takes no more messages; its sessions are kept");
                let removed = b.mark_removed(now);
                writes.push(Mutation::UpsertBot(removed.clone()));
                removed
            } else {
                b
            };
            all.insert(b.id.clone(), b);
        }
        // a bot its owner no longer shares leaves the rooms of other
        // users, in the same transaction (`group/unshared.rs`)
        writes.extend(crate::group::withdraw_unshared(&rt.store, &before, &bots).await?);
        // a member given to another user makes a room of one owner shared:
        // a new audience, from a notice, with a new context epoch in each
        // member's session of it, in the same transaction (`group/given.rs`)
        writes.extend(crate::group::share_given_rooms(&rt.store, &before, &bots).await?);
        all.extend(bots.into_iter().map(|b| (b.id.clone(), b)));
        // bots made by CreateAgent of a user the config dropped run no
        // more, until the user is listed again
        for w in derived::hold_for_absent_owners(&all, &rt.settings.user_ids, now) {
            if let Mutation::UpsertBot(b) = &w {
                all.insert(b.id.clone(), b.clone());
            }
            writes.push(w);
        }
        // bots made by CreateAgent keep only their makers' tools, and
        // subagents follow their parents (removed with them, their tools
        // and provider), written after the config's bots
        let follow = derived::follow_origins(&all, now);
        for w in &follow {
            if let Mutation::UpsertBot(b) = w {
                all.insert(b.id.clone(), b.clone());
            }
        }
        writes.extend(follow);
        let providers: HashSet<&str> = rt.models.keys().map(String::as_str).collect();
        derived::warn_missing_providers(all.values(), &providers);
        if !writes.is_empty() {
            rt.store.write(writes).await?;
        }
        // tasks given in a conversation that stays a former owner's: their
        // titles and reports are withheld from the new owner, once the
        // writes above set their sessions' floors (`fleet_withheld.rs`)
        let withhold = withheld::withhold_given_tasks(&rt.store, now).await?;
        if !withhold.is_empty() {
            rt.store.write(withhold).await?;
        }
        let board = Arc::new(LiveBoard::default());
        let args = FleetArgs {
            rt: rt.clone(),
            board: board.clone(),
        };
        let (fleet, _) =
            Actor::spawn(None, FleetActor, args)
                .await
                .map_err(|e| ActorError::Spawn {
                    what: "fleet",
                    detail: e.to_string(),
                })?;
        // the work of before this start, read before it returns: read when
        // the message is handled (later, by then inputs were admitted and
        // routed), it woke the bots of those inputs too, and a wake of a
        // bot running a turn has it read its inbox again at the turn's
        // end, which queued an input committed since and not routed yet
        // ahead of one routed before it
        let found = rt.store.bots_with_work().await?;
        let _ = fleet.cast(FleetMsg::Recover { found: Some(found) });
        // fact extractions a crash or a stop cut off (background, bounded)
        drop(crate::memory::resume_owed_extractions(rt.clone()));
        let handle = Self { rt, fleet, board };
        // a bot whose message waits in the queue of a bot this config
        // dropped is told no answer comes, as when an owner removes a made
        // bot: else one that ended its turn waiting for the answer never
        // woke (its subagents, removed with it, the same way)
        for b in remove::newly_removed(all.values(), &before) {
            handle.tell_unanswered(b, Removal::FromConfig).await;
        }
        Ok(handle)
    }

    /// The shared runtime.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.rt.store
    }

    fn router(&self) -> Result<ActorRef<RouterMsg>> {
        self.rt.router()
    }

    /// Admits an input (see [`Runtime::admit`]).
    pub async fn admit(&self, req: AdmitRequest) -> Result<AdmitOutcome> {
        self.rt.admit(req).await
    }

    /// Cancels a bot's running turn; `true` once this request stopped it
    /// and its end is recorded, `false` when nothing was running (or it was
    /// being cancelled already). The bot answers (the router hands the
    /// question on without waiting): a bot that stops before it reads the
    /// cancel cancelled nothing, one that does not answer within 10 s is a
    /// [`ActorError::Timeout`] (the cancel stays in its mailbox and is done
    /// when it gets to it), and a turn stopped whose end the store refused
    /// to record is [`ActorError::CancelNotRecorded`].
    pub async fn cancel(&self, bot: &BotId) -> Result<bool> {
        let router = self.router()?;
        let answer = router
            .call(
                |reply| RouterMsg::Cancel {
                    bot: bot.clone(),
                    reply,
                },
                Some(CANCEL_WAIT),
            )
            .await
            .map_err(|_| ActorError::ActorGone("router"))?;
        match answer {
            ractor::rpc::CallResult::Success(CancelAnswer::Cancelled) => Ok(true),
            ractor::rpc::CallResult::Success(CancelAnswer::Nothing) => Ok(false),
            ractor::rpc::CallResult::Success(CancelAnswer::NotRecorded(error)) => {
                Err(ActorError::CancelNotRecorded(error))
            }
            ractor::rpc::CallResult::SenderError => Ok(false),
            ractor::rpc::CallResult::Timeout => Err(ActorError::Timeout("bot")),
        }
    }

    /// Wakes a bot so it reads its inbox (e.g. after its record changed).
    pub fn wake(&self, bot: BotId) -> Result<()> {
        Ok(self.router()?.cast(RouterMsg::Wake(bot))?)
    }

    /// Tells an active bot its record changed.
    pub fn reload(&self, bot: BotId) -> Result<()> {
        Ok(self.router()?.cast(RouterMsg::Reload(bot))?)
    }

    /// A turn's record: the stored one, or, for a turn of one of `bots`
    /// that is running but not stored yet (its record is written with its
    /// first step), what its bot knows of it, with status `running`.
    pub async fn turn_record(&self, turn: TurnId, bots: &[BotId]) -> Result<Option<TurnRecord>> {
        if let Some(record) = self.rt.store.get_turn(turn).await? {
            return Ok(Some(record));
        }
        for bot in bots {
            if let Some(running) = self.running_record(bot).await?
                && running.id == turn
            {
                return Ok(Some(running));
            }
        }
        Ok(None)
    }

    /// The record of the turn `bot` is running, as the bot knows it
    /// (status `running`, no checkpoint), if it is active and running one.
    pub async fn running_record(&self, bot: &BotId) -> Result<Option<TurnRecord>> {
        let Some(running) = self.status(bot).await?.and_then(|s| s.turn) else {
            return Ok(None);
        };
        Ok(Some(TurnRecord {
            id: running.turn,
            bot: bot.clone(),
            session: running.session,
            status: TurnStatus::Running,
            inputs: running.inputs,
            checkpoint: serde_json::Value::Null,
            attempts: 1,
            error: None,
            started_at: running.started_at,
            ended_at: None,
        }))
    }

    /// What `bot` is doing, if it is active, as it last published it (see
    /// [`FleetHandle::active`]).
    pub async fn status(&self, bot: &BotId) -> Result<Option<BotStatus>> {
        self.live_router()?;
        Ok(self.board.get(bot))
    }

    /// Changes each time a bot publishes its status (after each message it
    /// handles): wait on it for a status to come about, rather than
    /// looking again and again.
    pub fn status_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.board.changes()
    }

    /// What every active bot is doing, by id: read from what the bots
    /// publish after each message they handle, so it answers at once
    /// however busy they are, and lists every active bot (one whose actor
    /// is still starting says so: [`BotStatus::starting`]). Fails with
    /// [`ActorError::ActorGone`] while no router runs (it is restarting
    /// after a failure, or the fleet is stopping): then which bots are
    /// active is not known.
    pub async fn active(&self) -> Result<Vec<BotStatus>> {
        self.live_router()?;
        Ok(self.board.all())
    }

    /// The active bot running `turn`, if one is (its record may not be
    /// stored yet: it is written with the turn's first step).
    pub async fn bot_running(&self, turn: botfleet_memory::TurnId) -> Result<Option<BotId>> {
        self.live_router()?;
        Ok(self.board.running(turn))
    }

    /// Fails unless a router is running: the board lists the bots of the
    /// running router (a new one starts with none active and clears it).
    fn live_router(&self) -> Result<()> {
        match self.router()?.get_status() {
            // a starting router has cleared the board already
            ractor::ActorStatus::Starting
            | ractor::ActorStatus::Running
            | ractor::ActorStatus::Upgrading => Ok(()),
            ractor::ActorStatus::Unstarted
            | ractor::ActorStatus::Draining
            | ractor::ActorStatus::Stopping
            | ractor::ActorStatus::Stopped => Err(ActorError::ActorGone("router")),
        }
    }

    /// Stops every actor (running turns are cancelled and resume on the
    /// next start), waits a little for running fact extractions (the rest
    /// run again at the next start) and closes the store.
    pub async fn shutdown(&self) {
        let _ = self
            .fleet
            .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
            .await;
        self.rt
            .extractions
            .wait(crate::memory::EXTRACTION_SHUTDOWN_WAIT)
            .await;
        self.rt.memory.shutdown().await;
        self.rt.store.close().await;
    }
}
