//! One turn, from plan to report.

use std::sync::Arc;

use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InboxItem;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::OwedExtraction;
use botfleet_memory::Priority;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::StoreError;
use botfleet_memory::SubagentStatus;
use botfleet_memory::TokenUsage;
use botfleet_memory::ToolCallBody;
use botfleet_memory::ToolCallStatus;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::budget::RunningUsage;
use super::compaction;
use super::state::TurnState;
use super::tail::ContextBound;
use super::tail::SessionTail;
use super::watch::LoopSink;
use crate::model::FinishReason;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::ToolCall;
use crate::model::ToolSpec;
use crate::prompts::prompts;
use crate::runtime::MemoryReach;
use crate::runtime::Runtime;
use crate::runtime::StateBlock;
use crate::safety::ToolCallLoopGuard;
use crate::safety::ToolLoopVerdict;
use crate::settings::ContextSettings;
use crate::tools::Effect;
use crate::tools::ReplyTo;
use crate::tools::Runner as RunnerKind;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::TurnScope;
use crate::tools::gate::Gate;
use crate::tools::gate::GateDecision;
use crate::tools::surface;
use crate::vault::BotSecrets;

/// The engine's memory hooks (state block within an epoch, extraction
/// after a turn), `impl Runner` in its own file.
#[path = "memory_hooks.rs"]
mod memory_hooks;

/// The tool calls of a turn (`impl Runner`).
#[path = "calls.rs"]
mod calls;

/// What a turn asked of other bots and subagents (`impl Runner`).
#[path = "asked.rs"]
mod asked;

/// The bots a turn owes a reply, its reminder and what tells them none
/// came (`impl Runner`).
#[path = "owed_replies.rs"]
mod owed_replies;

/// What a turn writes (`impl Runner`).
#[path = "persist.rs"]
mod persist;

/// Resuming a crashed turn (`impl Runner`).
#[path = "recovery.rs"]
mod recovery;

/// Setting up a turn: inputs, budget, the session tail (`impl Runner`).
#[path = "turn_setup.rs"]
mod turn_setup;
pub(crate) use turn_setup::BudgetPause;
pub(crate) use turn_setup::budget_pause;
pub use turn_setup::budget_paused_until;
pub(crate) use turn_setup::came_before_owner_change;
pub(crate) use turn_setup::origin_of;
pub use turn_setup::stored_budget_pause;
pub(crate) use turn_setup::task_from_is_former_owners;
pub(crate) use turn_setup::task_is_former_owners;

/// The model call of a step and its reminders (`impl Runner`).
#[path = "model_call.rs"]
mod model_call;

/// The step loop and how each step may end the turn (`impl Runner`).
#[path = "step_loop.rs"]
mod step_loop;

/// What a turn task is given and what it reports.
#[path = "turn_plan.rs"]
mod turn_plan;
pub(crate) use turn_plan::FirstStep;
pub(crate) use turn_plan::PlanKind;
pub(crate) use turn_plan::TurnPlan;
pub(crate) use turn_plan::TurnReport;

/// Runs a turn to its end. Never panics on purpose; a panic is caught by
/// the bot and treated as a crash of the turn.
pub(crate) async fn run_turn(rt: Arc<Runtime>, plan: TurnPlan) -> TurnReport {
    let turn = plan.turn;
    let was_compact = matches!(plan.kind, PlanKind::Compact);
    // what the turn used and has not stored yet, for the budget checks of
    // the other bots of its family while it runs (`engine/budget.rs`)
    let running = RunningUsage::enter(&rt, &plan.bot);
    let mut runner = match Runner::new(rt, plan) {
        Ok(r) => r,
        Err(failed) => {
            let (tail, error) = *failed;
            return TurnReport {
                turn,
                status: None,
                requeue: Vec::new(),
                tail: Some(tail),
                error: Some(error),
                compaction_due: false,
                paused_until: None,
                paused_told: false,
                spent_until: None,
            };
        }
    };
    let result = runner.run().await;
    // its usage is stored with its end by now (or never): counted there
    drop(running);
    // a hold for this run's own entries ends with it (every run passes
    // here, a background compaction's too, so the next begins with none)
    runner.tail.end_turn_hold();
    let compaction_due = result.is_ok()
        && !was_compact
        && runner.model.answers(Purpose::Compact)
        && ((runner.tail.tokens() > runner.ctx_settings.background_compact_at_tokens
            && !runner.tail.compaction_held())
            || runner
                .tail
                .unsummarised_past(runner.rt.settings.context_entries));
    let (status, error) = match result {
        Ok(status) => (Some(status), runner.error.take()),
        // a planned stop: the turn stays running in the store and resumes
        Err(e @ StoreError::WriterGone) if runner.rt.store.is_closed() => {
            tracing::info!(bot = %runner.bot.id, turn = %turn, "turn cut off by the host's stop; the next start resumes it from its last step (one cut before its first step was not stored: its inputs start a new turn)");
            (None, Some(e.to_string()))
        }
        Err(e) => {
            tracing::error!(bot = %runner.bot.id, turn = %turn, error = %e, "turn could not be persisted");
            (None, Some(e.to_string()))
        }
    };
    // the turn's usage is committed with its end: the bot pauses as the
    // turn that spent its budget ends, not when the next one begins
    let spent_until = if status.is_some() && runner.paused_until.is_none() {
        runner.budget_spent_at_end().await
    } else {
        None
    };
    runner.extract_after(spent_until).await;
    TurnReport {
        turn,
        status,
        requeue: if status == Some(TurnStatus::Interrupted) {
            std::mem::take(&mut runner.inputs)
        } else {
            Vec::new()
        },
        tail: if status.is_some() {
            Some(runner.tail)
        } else {
            None
        },
        error,
        compaction_due,
        paused_until: runner.paused_until,
        paused_told: runner.pause_told,
        spent_until,
    }
}

struct Runner {
    rt: Arc<Runtime>,
    bot: Arc<BotRecord>,
    model: Arc<dyn Model>,
    specs: Vec<Arc<ToolSpec>>,
    identity: String,
    /// Token accounting and compaction settings of the bot's provider.
    ctx_settings: ContextSettings,
    /// Tokens this turn's model calls used.
    usage: TokenUsage,
    /// Messages of the context before this turn's new entries (the stable prefix).
    prefix_len: usize,
    /// A memory change inside the epoch, put after the turn's inputs in
    /// each of its requests.
    memory_update: Option<String>,
    /// Where the memory update goes in this turn's requests (set by the
    /// first one: `SessionTail::take_request`).
    memory_update_at: Option<usize>,
    /// The long-lived state block of this turn (memory snapshot).
    block: StateBlock,
    /// Set when the last model call was cut off by the loop detector.
    looped: bool,
    /// The question of the other bot of this conversation that the turn
    /// still owes a reply though it is not among its inputs (it handed it
    /// on to a third bot, whose answer woke it here), once looked for
    /// (`owed_replies.rs`): `None` until then.
    handed_on: Option<Option<Entry>>,
    /// Repeated identical tool calls in this turn.
    tool_guard: ToolCallLoopGuard,
    /// The step in which the turn was told to stop repeating a tool call,
    /// if it was.
    tool_loop_warned: Option<u32>,
    /// Set to end the turn at the next step (the same tool call repeated
    /// after its warning): failed, or `completed` after its reply
    /// (`Runner::cannot_go_on`).
    abort: Option<String>,
    /// The secrets the bot may use; every tool result is scrubbed of them.
    secrets: BotSecrets,
    /// Set when the bot's token budget is spent (the turn did not run).
    paused_until: Option<i64>,
    /// Whether the pause of `paused_until` was told to the session's
    /// people (a `budget_exhausted` notice written, or one already there):
    /// only a person's input is told.
    pause_told: bool,
    turn: TurnId,
    session: SessionId,
    kind: Option<PlanKind>,
    tail: SessionTail,
    state: TurnState,
    inputs: Vec<InboxItem>,
    /// Session, runner, hops and reply target of the turn.
    scope: TurnScope,
    /// Text of the last message this turn delivered (a subagent's report).
    last_delivery: Option<String>,
    /// What fact extraction reads of this turn, gathered as it runs
    /// (`None` for a resumed turn: then it is read from the store).
    texts: Option<memory_hooks::TurnTexts>,
    /// The fact extraction the committed end of this turn recorded as
    /// owed, to start once the turn is over.
    owed: Option<OwedExtraction>,
    /// `StartTurn` not yet written (it goes with the first step): the
    /// time the turn began, which it records as its start.
    start_pending: Option<i64>,
    /// Starts of the turn at its current step, as stored: 1 for a new
    /// turn, the count after the bump for a resumed one. The resumed
    /// start's first step resets it (`step_batch`).
    attempts: i64,
    /// When the bot started the turn.
    started_at: i64,
    /// `TurnPlan::first_step`.
    first_step: Arc<FirstStep>,
    /// `TurnPlan::replaces_start`.
    replaces_start: bool,
    /// Calls of a resumed turn's last step that a clean stop of the host
    /// ended without an outcome (`ToolCallRecord::stopped`): their
    /// "outcome unknown" says the stop ended them, not a crash.
    stopped_calls: Vec<String>,
    /// `TurnPlan::floor`.
    floor: Option<i64>,
    soft: CancellationToken,
    hard: CancellationToken,
    error: Option<String>,
}

/// The runner of a turn in a session of this kind.
fn runner_of(kind: SessionKind) -> RunnerKind {
    match kind {
        SessionKind::Dm | SessionKind::Agent => RunnerKind::Main,
        SessionKind::Subagent => RunnerKind::Subagent,
        SessionKind::Group | SessionKind::Room => RunnerKind::GroupMember { shared: false },
        SessionKind::Routine => RunnerKind::Routine,
        SessionKind::Hook => RunnerKind::Hook,
    }
}

/// Why a turn stops early.
enum Stop {
    Interrupted,
    Cancelled,
}

impl Runner {
    fn new(rt: Arc<Runtime>, plan: TurnPlan) -> Result<Self, Box<(SessionTail, String)>> {
        let Some(model) = turn_setup::model_for(&rt, &plan) else {
            let error = format!(
                "bot {} uses provider {:?}, which is not configured",
                plan.bot.id, plan.bot.provider
            );
            return Err(Box::new((plan.tail, error)));
        };
        let bot_id = plan.bot.id.clone();
        let owner = plan.bot.owner.clone();
        let ctx_settings = rt.settings.context_for(&plan.bot.provider).clone();
        Ok(Self {
            rt,
            bot: plan.bot,
            model,
            specs: Vec::new(),
            identity: String::new(),
            ctx_settings,
            usage: TokenUsage::default(),
            prefix_len: 0,
            memory_update: None,
            memory_update_at: None,
            block: StateBlock::default(),
            paused_until: None,
            pause_told: false,
            looped: false,
            handed_on: None,
            tool_guard: ToolCallLoopGuard::default(),
            tool_loop_warned: None,
            abort: None,
            secrets: BotSecrets::default(),
            turn: plan.turn,
            session: plan.session,
            kind: Some(plan.kind),
            tail: plan.tail,
            state: TurnState::default(),
            inputs: Vec::new(),
            last_delivery: None,
            texts: None,
            owed: None,
            scope: TurnScope {
                session: SessionRecord {
                    id: plan.session,
                    key: SessionKey {
                        bot: bot_id.clone(),
                        kind: SessionKind::Dm,
                        peer: String::new(),
                    },
                    owner: owner.clone(),
                    epoch: 0,
                    last_seq: 0,
                    created_at: 0,
                },
                runner: RunnerKind::Main,
                hop: 0,
                reply_to: Vec::new(),
                chain: None,
            },
            start_pending: None,
            attempts: 1,
            soft: plan.soft,
            hard: plan.hard,
            started_at: plan.started_at,
            first_step: plan.first_step,
            replaces_start: plan.replaces_start,
            stopped_calls: Vec::new(),
            floor: plan.floor,
            error: None,
        })
    }

    /// Shows a beginning turn its input entries: they decide its memory
    /// texts and its hop origin, and go at the end of its tail. Inputs read
    /// back from the inbox (after a restart, a retry, a late arrival, a
    /// refused first write) come without their entry: the ones read from
    /// the store go into a tail loaded before them.
    fn take_inputs(&mut self, entries: &[Entry]) {
        self.texts = Some(memory_hooks::TurnTexts::of_inputs(&self.bot, entries));
        self.set_origin(entries);
        for e in entries {
            self.tail.push(e);
        }
    }

    async fn run(&mut self) -> Result<TurnStatus, StoreError> {
        let window = self.rt.settings.context_entries;
        // a new turn sees the session up to its last input (a resumed one
        // is bounded once its record is read, below)
        let bound = match &self.kind {
            Some(PlanKind::New { inputs }) => ContextBound::of_inputs(
                inputs
                    .iter()
                    .filter(|(i, _)| i.session == self.session)
                    .map(|(i, _)| i.seq),
                None,
            ),
            // a run without inputs of its own yet loads no input that no
            // turn claimed (`ContextBound::claimed_only`)
            Some(PlanKind::Resume { .. } | PlanKind::Compact | PlanKind::Fail { .. }) | None => {
                Some(ContextBound::claimed_only())
            }
        };
        // a summary another writer stored moved the session's epoch past
        // the loaded tail's: a room that became shared cut its members'
        // sessions (group/admin.rs, the store's writer_newcomers.rs), so
        // nothing the tail holds from before may be sent (or trimmed to)
        // again; it is read from the store, from that summary on
        let cut_elsewhere = self
            .tail
            .record
            .as_ref()
            .is_some_and(|r| r.key.kind == SessionKind::Group)
            && self
                .rt
                .store
                .get_session(self.session)
                .await?
                .is_some_and(|stored| stored.epoch > self.tail.epoch);
        // a tail holding messages after the turn's last input (a retried
        // input) is read again, up to that input
        let past_inputs = bound
            .as_ref()
            .is_some_and(|b| self.tail.holds_input_after(b.upto));
        // a tail to (re)load is read first, in one read: its record says
        // who runs the turn, before the identity that names the tools
        let view = if past_inputs
            || cut_elsewhere
            || (self.tail.needs_load(window) && !self.tail.can_trim(window))
        {
            Some(
                self.rt
                    .store
                    .session_view(self.session, window as i64, bound.as_ref().map(|b| b.from))
                    .await?,
            )
        } else {
            None
        };
        let record = view
            .as_ref()
            .and_then(|v| v.record.clone())
            .or_else(|| self.tail.record.clone())
            .ok_or_else(|| StoreError::NotFound {
                what: "session",
                id: self.session.to_string(),
            })?;
        // a DM whose person no longer owns the bot, or a conversation with
        // a bot of another owner (an owner changed in fleet.toml): checked
        // as the turn starts and as it resumes, before the new owner's
        // identity, memory, secrets or tools are read
        if let Some(why) = self.owner_changed(&record).await? {
            return self.end_for_former_owner(record, why).await;
        }
        // who runs the turn decides which tools the model is shown
        self.scope.runner = self.runner_for(&record).await?;
        self.show_tools();
        // a new turn's inputs decide which memories are relevant
        let new_inputs = match &self.kind {
            Some(PlanKind::New { inputs }) => Some(self.input_entries(inputs).await?),
            _ => None,
        };
        // the reports of its subagents that the context will show name
        // their tasks (`context_input.rs`): those of the entries read and
        // of the turn's inputs, each read by its key
        let carried: Vec<Entry> = match &self.kind {
            Some(PlanKind::Resume { inputs } | PlanKind::Fail { inputs, .. }) => {
                inputs.iter().filter_map(|(_, e)| e.clone()).collect()
            }
            Some(PlanKind::New { .. } | PlanKind::Compact) | None => Vec::new(),
        };
        self.name_reports(
            view.iter()
                .flat_map(|v| v.entries.iter())
                .chain(new_inputs.iter().flatten())
                .chain(carried.iter()),
        )
        .await?;
        let input_text = new_inputs
            .as_ref()
            .map(|es| {
                es.iter()
                    .map(|e| e.kind.text())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let reach = match self.scope.runner {
            // a member's session is keyed by its room (`runner_for`)
            RunnerKind::GroupMember { shared: true } => {
                MemoryReach::SharedRoom(record.key.peer.clone())
            }
            RunnerKind::GroupMember { shared: false }
            | RunnerKind::Main
            | RunnerKind::Subagent
            | RunnerKind::Routine
            | RunnerKind::Hook => MemoryReach::All,
        };
        self.block = self.rt.state_block(&self.bot, &input_text, reach).await;
        self.secrets = self.rt.secrets_for(&self.bot).await?;
        if let Some(view) = view {
            self.fill_tail(view, bound).await?;
        } else if self.tail.can_trim(window)
            && self.tail.trim(
                window,
                bound.as_ref().map(|b| b.from),
                &self.identity,
                &self.block,
            )
        {
            // grown past its window: trimmed in memory to what a reload
            // would read, under a fresh state block (the prefix changes
            // here either way), never into the turn's own inputs
        } else {
            self.tail.set_identity(&self.identity);
            // memory changed inside the epoch: an update at the end, or a
            // refreshed system message when something shown was forgotten
            self.reconcile_state_block().await;
        }
        self.prefix_len = self.tail.len();
        let Some(record) = self.tail.record.clone() else {
            return Err(StoreError::NotFound {
                what: "session",
                id: self.session.to_string(),
            });
        };
        self.scope.session = record;
        if self.bot.origin.starts_with("subagent:")
            && let Some(sub) = self.rt.store.get_subagent(&self.bot.id).await?
            && sub.status == SubagentStatus::Stopped
        {
            // a stopped subagent takes no more work: its inputs end unanswered
            self.hard.cancel();
        }
        match self.kind.take() {
            Some(PlanKind::New { inputs }) => {
                let room = self.scope.session.key.kind == SessionKind::Group;
                // tell the people of the session, unless a notice already
                // follows its first input (the bot was restarted since)
                let notice = (turn_setup::plan_notice_needed(&inputs) && !room)
                    .then(|| inputs.iter().map(|(i, _)| i.seq).min())
                    .flatten();
                if let Some(pause) = self.budget_spent(notice).await? {
                    if room || self.scope.session.key.kind == SessionKind::Subagent {
                        // a discussion cannot wait for tomorrow: the member's
                        // turn fails now, saying why, and the room goes on;
                        // nor can a subagent's task (its parent's budget):
                        // it fails, and its report tells the parent why
                        self.begin(inputs);
                        return self.fail(pause.reason()).await;
                    }
                    self.inputs = inputs.into_iter().map(|(i, _)| i).collect();
                    return Ok(TurnStatus::Interrupted);
                }
                let entries = new_inputs.unwrap_or_default();
                self.take_inputs(&entries);
                let read_back = inputs.iter().any(|(_, e)| e.is_none());
                self.begin(inputs);
                if read_back && self.state.owes_delivery && self.answered_before()? {
                    // a retry of a turn that replied, then failed: the
                    // person has the reply; reminding the model that it
                    // sent nothing would make it send it again
                    self.state.owes_delivery = false;
                }
            }
            Some(PlanKind::Compact) => {
                // a message of the session no turn claimed yet stays out
                // of the summary: the turn that claims it shows it to the
                // model as it was said, after what came before it (a
                // small window had it summarised away before its turn)
                let unclaimed = self.unclaimed_seqs().await?.into_iter().min();
                self.compact_now(unclaimed).await;
                return Ok(TurnStatus::Completed);
            }
            Some(PlanKind::Resume { inputs }) => {
                if self.load_record().await? {
                    // hops and reply target come from its inputs, as when
                    // it began (a resumed turn started over from hop 0 and
                    // answered a bot in the default session)
                    let held: Vec<(InboxItem, Option<Entry>)> =
                        self.inputs.iter().map(|i| (i.clone(), None)).collect();
                    let entries = self.input_entries(&held).await?;
                    self.set_origin(&entries);
                    // its inputs and its own entries, not what was admitted
                    // since
                    if let Some(bound) = self.own_bound() {
                        self.load_tail(Some(bound)).await?;
                        self.prefix_len = self.tail.len();
                    }
                    if let Some(status) = self.resume().await? {
                        return Ok(status);
                    }
                } else {
                    // its start never reached the store (the store refused
                    // its first write: `bot_store_wait.rs`): it begins as a
                    // new turn over its inputs, which the context was
                    // loaded without (`claimed_only`). (QA: the model was
                    // asked with the system prompt alone, and its answer
                    // to nothing was stored as the reply to the message.)
                    let entries = self.input_entries(&inputs).await?;
                    self.take_inputs(&entries);
                    self.begin(inputs);
                }
            }
            Some(PlanKind::Fail {
                error,
                inputs,
                after_store,
            }) => {
                // the wording of a call left without a result
                // (`outcome_unknown_text`)
                self.replaces_start = after_store;
                // hops and chain come from its inputs, as for a resumed
                // turn: a subagent's task failed after its crashes wrote
                // its report at hop 1 and with no chain, so the parent's
                // next turn ran under a budget started over and without
                // the chain's limit (audit, 2026-12-07)
                let entries = self.input_entries(&inputs).await?;
                self.set_origin(&entries);
                if !self.load_record().await? {
                    self.begin(inputs);
                } else {
                    self.close_started_calls().await?;
                    // after its reply the person has their answer: it ends
                    // as any turn that cannot go on after it delivered, with
                    // no retry (as recovery's crash limit does)
                    self.count_deliveries().await?;
                    if self.reply_stands() {
                        return self.end_after_reply(error, Vec::new()).await;
                    }
                }
                return self.fail(error).await;
            }
            None => {}
        }
        self.step_loop().await
    }
}
