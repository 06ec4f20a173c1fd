//! One turn, from plan to report.

use std::sync::Arc;

use botfleet_memory::AdmitOutcome;
use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InboxItem;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::StoreError;
use botfleet_memory::ToolCallBody;
use botfleet_memory::ToolCallStatus;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::state::TurnState;
use super::tail::SessionTail;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::ToolCall;
use crate::model::ToolSpec;
use crate::prompts::prompts;
use crate::runtime::Runtime;
use crate::tools::Effect;
use crate::tools::ReplyTo;
use crate::tools::Runner as RunnerKind;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::TurnScope;

/// What kind of turn to run.
#[derive(Debug)]
pub(crate) enum PlanKind {
    /// A new turn over these inputs (all of one session, oldest first).
    New {
        /// The inputs, with their entries when the bot has them.
        inputs: Vec<(InboxItem, Option<Entry>)>,
    },
    /// Continue a turn that was running when the host or the turn crashed.
    /// `inputs` are the inputs the bot gave it, used if the turn never
    /// reached the store (then it simply starts over).
    Resume {
        /// Inputs of the crashed run (empty after a host restart).
        inputs: Vec<(InboxItem, Option<Entry>)>,
    },
    /// Record that the turn failed for good.
    Fail {
        /// Why.
        error: String,
        /// Inputs of the crashed run (as for `Resume`).
        inputs: Vec<(InboxItem, Option<Entry>)>,
    },
}

/// Everything a turn task needs.
pub(crate) struct TurnPlan {
    pub turn: TurnId,
    pub session: SessionId,
    pub bot: Arc<BotRecord>,
    pub kind: PlanKind,
    pub tail: SessionTail,
    /// Interrupt: stop at the next safe point.
    pub soft: CancellationToken,
    /// Cancel: stop now, kill running tools.
    pub hard: CancellationToken,
}

/// How a turn ended, for its bot.
#[derive(Debug)]
pub(crate) struct TurnReport {
    pub turn: TurnId,
    /// Final status, or `None` when the turn could not be persisted (it
    /// stays `running` in the store and resumes later).
    pub status: Option<TurnStatus>,
    /// Inputs to queue again (an interrupted turn's).
    pub requeue: Vec<InboxItem>,
    /// The session tail, to keep for the next turn.
    pub tail: Option<SessionTail>,
    /// Error text, if any.
    pub error: Option<String>,
}

/// Runs a turn to its end. Never panics on purpose; a panic is caught by
/// the bot and treated as a crash of the turn.
pub(crate) async fn run_turn(rt: Arc<Runtime>, plan: TurnPlan) -> TurnReport {
    let turn = plan.turn;
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
            };
        }
    };
    let result = runner.run().await;
    let (status, error) = match result {
        Ok(status) => (Some(status), runner.error.take()),
        Err(e) => {
            tracing::error!(bot = %runner.bot.id, turn = %turn, error = %e, "turn could not be persisted");
            (None, Some(e.to_string()))
        }
    };
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
    }
}

struct Runner {
    rt: Arc<Runtime>,
    bot: Arc<BotRecord>,
    model: Arc<dyn Model>,
    tools: Vec<Arc<dyn Tool>>,
    specs: Vec<ToolSpec>,
    system: String,
    turn: TurnId,
    session: SessionId,
    kind: Option<PlanKind>,
    tail: SessionTail,
    state: TurnState,
    inputs: Vec<InboxItem>,
    /// Session, runner, hops and reply target of the turn.
    scope: TurnScope,
    /// `StartTurn` not yet written (it goes with the first step).
    start_pending: bool,
    soft: CancellationToken,
    hard: CancellationToken,
    error: Option<String>,
}

/// The runner of a turn in a session of this kind.
fn runner_of(kind: SessionKind) -> RunnerKind {
    match kind {
        SessionKind::Dm | SessionKind::Agent => RunnerKind::Main,
        SessionKind::Subagent => RunnerKind::Subagent,
        SessionKind::Group => RunnerKind::GroupMember { shared: false },
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
        let Some(model) = rt.models.get(&plan.bot.provider).cloned() else {
            let error = format!(
                "bot {} uses provider {:?}, which is not configured",
                plan.bot.id, plan.bot.provider
            );
            return Err(Box::new((plan.tail, error)));
        };
        let tools: Vec<Arc<dyn Tool>> = plan
            .bot
            .tools
            .iter()
            .filter_map(|name| rt.tools.get(name).cloned())
            .collect();
        let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec()).collect();
        let index = specs
            .iter()
            .map(|s| format!("- {}: {}", s.name, s.description))
            .collect::<Vec<_>>()
            .join("\n");
        let system = prompts()
            .system
            .render(&[
                ("name", &plan.bot.name),
                ("bot_id", plan.bot.id.as_str()),
                ("owner", plan.bot.owner.as_str()),
                ("role", &plan.bot.role),
                ("tools", if index.is_empty() { "(none)" } else { &index }),
            ])
            .unwrap_or_default();
        let bot_id = plan.bot.id.clone();
        let owner = plan.bot.owner.clone();
        Ok(Self {
            rt,
            bot: plan.bot,
            model,
            tools,
            specs,
            system,
            turn: plan.turn,
            session: plan.session,
            kind: Some(plan.kind),
            tail: plan.tail,
            state: TurnState::default(),
            inputs: Vec::new(),
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
                reply_to: None,
            },
            start_pending: false,
            soft: plan.soft,
            hard: plan.hard,
            error: None,
        })
    }

    async fn run(&mut self) -> Result<TurnStatus, StoreError> {
        let window = self.rt.settings.context_entries;
        if self.tail.needs_load(window) {
            self.tail.load(&self.rt.store, &self.system, window).await?;
        } else {
            self.tail.context.set_system(&self.system);
        }
        let Some(record) = self.tail.record.clone() else {
            return Err(StoreError::NotFound {
                what: "session",
                id: self.session.to_string(),
            });
        };
        self.scope.runner = runner_of(record.key.kind);
        self.scope.session = record;
        match self.kind.take() {
            Some(PlanKind::New { inputs }) => {
                let entries = self.input_entries(&inputs).await?;
                self.set_origin(&entries);
                self.begin(inputs);
            }
            Some(PlanKind::Resume { inputs }) => {
                if self.load_record().await? {
                    if let Some(status) = self.resume().await? {
                        return Ok(status);
                    }
                } else {
                    self.begin(inputs);
                }
            }
            Some(PlanKind::Fail { error, inputs }) => {
                if !self.load_record().await? {
                    self.begin(inputs);
                }
                return self.fail(error).await;
            }
            None => {}
        }
        self.step_loop().await
    }

    /// The entries of the inputs (read from the store when the bot did not
    /// have them at hand).
    async fn input_entries(
        &self,
        inputs: &[(InboxItem, Option<Entry>)],
    ) -> Result<Vec<Entry>, StoreError> {
        let mut out = Vec::with_capacity(inputs.len());
        for (item, entry) in inputs {
            match entry {
                Some(e) => out.push(e.clone()),
                None => out.extend(
                    self.rt
                        .store
                        .entries_between(item.session, item.seq, item.seq)
                        .await?,
                ),
            }
        }
        Ok(out)
    }

    /// Hops and reply target from the turn's input entries.
    fn set_origin(&mut self, inputs: &[Entry]) {
        for e in inputs {
            if let EntryKind::AgentMessage {
                from,
                hop,
                reply_session,
                ..
            } = &e.kind
            {
                self.scope.hop = self.scope.hop.max(*hop);
                let session = reply_session.unwrap_or_else(|| {
                    SessionKey {
                        bot: from.clone(),
                        kind: SessionKind::Agent,
                        peer: self.bot.id.to_string(),
                    }
                    .id()
                });
                self.scope.reply_to = Some(ReplyTo {
                    bot: from.clone(),
                    session,
                });
            }
        }
    }

    /// Sets up a new turn over `inputs`; its start is written with the first step.
    fn begin(&mut self, inputs: Vec<(InboxItem, Option<Entry>)>) {
        self.state.owes_delivery = inputs.iter().any(|(i, _)| i.priority == Priority::UserDm);
        self.state.input_seqs = inputs.iter().map(|(i, _)| i.seq).collect();
        for (item, entry) in inputs {
            if let Some(e) = entry {
                self.tail.push(&e);
            }
            self.inputs.push(item);
        }
        self.start_pending = true;
    }

    /// Loads the stored turn; `false` if it never reached the store.
    async fn load_record(&mut self) -> Result<bool, StoreError> {
        let Some(record) = self.rt.store.get_turn(self.turn).await? else {
            return Ok(false);
        };
        self.state = TurnState::from_value(&record.checkpoint);
        self.inputs = record
            .inputs
            .iter()
            .zip(self.state.input_seqs.iter().chain(std::iter::repeat(&0)))
            .map(|(gid, seq)| InboxItem {
                bot: self.bot.id.clone(),
                gid: *gid,
                session: self.session,
                seq: *seq,
                priority: if self.state.owes_delivery {
                    Priority::UserDm
                } else {
                    Priority::Background
                },
            })
            .collect();
        Ok(true)
    }

    /// Picks a crashed turn up again. Returns a final status if it must not
    /// continue (too many attempts).
    ///
    /// The turn's progress is read back from the transcript: its steps are
    /// its assistant entries, its deliveries and reminder are entries too.
    /// Calls of its last step without a result entry are settled here: a
    /// call recorded as started (external effect) either runs again
    /// (idempotent tools) or is reported as "outcome unknown"; a call never
    /// started simply runs.
    async fn resume(&mut self) -> Result<Option<TurnStatus>, StoreError> {
        let attempts = match self
            .rt
            .store
            .write(vec![Mutation::BumpAttempts { turn: self.turn }])
            .await?
            .pop()
        {
            Some(MutationResult::Attempts(a)) => a,
            _ => 0,
        };
        tracing::info!(bot = %self.bot.id, turn = %self.turn, attempts, "resuming turn from its checkpoint");
        if attempts > self.rt.settings.max_turn_attempts {
            return self
                .fail(format!("the turn crashed {} times in a row", attempts - 1))
                .await
                .map(Some);
        }
        let from = self
            .state
            .input_seqs
            .iter()
            .min()
            .copied()
            .unwrap_or(1)
            .saturating_sub(1);
        let entries = self
            .rt
            .store
            .entries_after(self.session, from, i64::MAX)
            .await?;
        let mine: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.turn == Some(self.turn))
            .collect();
        let mut last_calls = Vec::new();
        let mut answered = std::collections::HashSet::new();
        self.state.step = 0;
        self.state.delivered = 0;
        for e in &mine {
            match &e.kind {
                EntryKind::Assistant { tool_calls, .. } => {
                    self.state.step += 1;
                    last_calls = tool_calls.clone();
                }
                EntryKind::ToolResult { call_id, .. } => {
                    answered.insert(call_id.clone());
                }
                EntryKind::Delivery { .. } => self.state.delivered += 1,
                EntryKind::Reminder { .. } => self.state.reminded = true,
                _ => {}
            }
        }
        let started: std::collections::HashMap<String, ToolCallStatus> = self
            .rt
            .store
            .tool_calls(self.turn)
            .await?
            .into_iter()
            .map(|c| (c.call_id, c.status))
            .collect();
        for (ordinal, body) in last_calls.iter().enumerate() {
            if answered.contains(&body.id) {
                continue;
            }
            let call = ToolCall {
                id: body.id.clone(),
                name: body.name.clone(),
                arguments: body.arguments.clone(),
            };
            if let Some(stop) = self.stop_reason() {
                self.skip_call(&call, &stop).await?;
                continue;
            }
            let was_started = matches!(started.get(&body.id), Some(ToolCallStatus::Started));
            match self.tool(&body.name) {
                Some(t) if was_started && !t.idempotent() => {
                    let text = prompts()
                        .outcome_unknown
                        .render(&[("tool", &body.name)])
                        .unwrap_or_default();
                    self.record_outcome(&call, text, true, Vec::new(), false, true)
                        .await?;
                }
                _ => self.execute(&call, ordinal, was_started).await?,
            }
        }
        Ok(None)
    }

    fn stop_reason(&self) -> Option<Stop> {
        if self.hard.is_cancelled() {
            Some(Stop::Cancelled)
        } else if self.soft.is_cancelled() {
            Some(Stop::Interrupted)
        } else {
            None
        }
    }

    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.spec().name == name).cloned()
    }

    async fn step_loop(&mut self) -> Result<TurnStatus, StoreError> {
        loop {
            match self.stop_reason() {
                Some(Stop::Cancelled) => return self.end(TurnStatus::Cancelled, None).await,
                Some(Stop::Interrupted) => return self.end(TurnStatus::Interrupted, None).await,
                None => {}
            }
            if self.state.step >= self.rt.settings.max_steps {
                let error = format!(
                    "the turn took more than {} model steps",
                    self.rt.settings.max_steps
                );
                return self.fail(error).await;
            }
            let response = match self.call_model().await {
                Ok(r) => r,
                Err(ModelError::Cancelled) => continue,
                Err(e) => return self.fail(e.to_string()).await,
            };
            let mut batch = self.step_batch(&response);
            if response.tool_calls.is_empty() {
                if self.state.owes_delivery && self.state.delivered == 0 && !self.state.reminded {
                    self.commit(batch).await?;
                    self.remind().await?;
                    continue;
                }
                let status = if self.state.owes_delivery && self.state.delivered == 0 {
                    TurnStatus::Undelivered
                } else {
                    TurnStatus::Completed
                };
                // the last step and the end of the turn commit together
                batch.extend(self.end_batch(status, None));
                self.commit(batch).await?;
                return Ok(status);
            }
            if self.stop_reason().is_none()
                && let Some(outcomes) = self.run_internal_calls(&response.tool_calls).await
            {
                // every call only writes to the store: the step and its
                // outcomes commit together, one commit instead of 1 + n
                batch.extend(outcomes);
                self.commit(batch).await?;
                continue;
            }
            self.commit(batch).await?;
            for (ordinal, call) in response.tool_calls.iter().enumerate() {
                match self.stop_reason() {
                    Some(stop) => self.skip_call(call, &stop).await?,
                    None => self.execute(call, ordinal, false).await?,
                }
            }
        }
    }

    async fn call_model(&mut self) -> Result<ModelResponse, ModelError> {
        self.tail.context.close_pending();
        let request = ModelRequest {
            purpose: Purpose::Turn,
            bot: self.bot.id.to_string(),
            messages: self.tail.context.take_messages(),
            tools: std::mem::take(&mut self.specs),
            max_tokens: None,
        };
        let result = self.model.complete(&request, &mut (), &self.soft).await;
        self.tail.context.restore_messages(request.messages);
        self.specs = request.tools;
        result
    }

    /// Commits a batch and feeds the entries it appended to the tail.
    async fn commit(
        &mut self,
        mut batch: Vec<Mutation>,
    ) -> Result<Vec<MutationResult>, StoreError> {
        if self.start_pending {
            batch.insert(
                0,
                Mutation::StartTurn {
                    turn: self.turn,
                    bot: self.bot.id.clone(),
                    session: self.session,
                    inputs: self.inputs.iter().map(|i| i.gid).collect(),
                    checkpoint: self.state.to_value(),
                },
            );
        }
        let appended: Vec<NewEntry> = batch
            .iter()
            .filter_map(|m| match m {
                Mutation::Append(e) => Some((**e).clone()),
                _ => None,
            })
            .collect();
        let admits: Vec<(Priority, NewEntry)> = batch
            .iter()
            .filter_map(|m| match m {
                Mutation::Admit(req) => Some((req.priority, req.entry.clone())),
                _ => None,
            })
            .collect();
        let results = self.rt.store.write(batch).await?;
        self.start_pending = false;
        if !admits.is_empty() {
            // inputs this turn handed to other bots: route them now that
            // they are committed (a crash before this leaves them in the
            // inbox, where recovery finds them)
            let mut admits = admits.into_iter();
            let mut accepted = Vec::new();
            for r in &results {
                if let MutationResult::Admitted(outcome) = r
                    && let Some((priority, entry)) = admits.next()
                    && let AdmitOutcome::Accepted(rec) = outcome
                {
                    accepted.push((rec.clone(), priority, entry));
                }
            }
            self.rt.route_committed(accepted);
        }
        let mut appended = appended.into_iter();
        for r in &results {
            if let MutationResult::Appended {
                seq,
                gid,
                created_at,
                ..
            } = r
                && let Some(ne) = appended.next()
            {
                self.tail.push(&Entry {
                    id: ne.id,
                    session: ne.session,
                    seq: *seq,
                    gid: *gid,
                    author: ne.author,
                    turn: ne.turn,
                    created_at: *created_at,
                    kind: ne.kind,
                });
            }
        }
        Ok(results)
    }

    fn entry(&self, id: EntryId, kind: EntryKind) -> Mutation {
        Mutation::Append(Box::new(NewEntry {
            id,
            session: self.session,
            author: self.bot.id.to_string(),
            turn: Some(self.turn),
            kind,
        }))
    }

    /// The writes of one model step: its assistant entry, its tool calls
    /// as pending, the checkpoint.
    fn step_batch(&mut self, response: &ModelResponse) -> Vec<Mutation> {
        let step = self.state.step;
        self.state.step += 1;
        let batch = vec![
            self.entry(
                EntryId::derive(self.turn, &format!("step-{step}"), "assistant"),
                EntryKind::Assistant {
                    text: response.text.clone(),
                    tool_calls: response
                        .tool_calls
                        .iter()
                        .map(|c| ToolCallBody {
                            id: c.id.clone(),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                },
            ),
        ];
        batch
    }

    async fn remind(&mut self) -> Result<(), StoreError> {
        self.state.reminded = true;
        let text = prompts().delivery_reminder.render(&[]).unwrap_or_default();
        let batch = vec![self.entry(
            EntryId::derive(self.turn, "reminder", "delivery"),
            EntryKind::Reminder { text },
        )];
        self.commit(batch).await.map(|_| ())
    }

    /// Runs one tool call and records its outcome. `already_started` is set
    /// when re-running an idempotent call cut off by a crash.
    async fn execute(
        &mut self,
        call: &ToolCall,
        ordinal: usize,
        already_started: bool,
    ) -> Result<(), StoreError> {
        let Some(tool) = self.tool(&call.name) else {
            let known: Vec<String> = self.specs.iter().map(|s| s.name.clone()).collect();
            let err = ToolError::new(
                format!("there is no tool {:?} for you", call.name),
                format!("use one of: {}", known.join(", ")),
            );
            return self
                .record_outcome(call, err.to_string(), true, Vec::new(), false, false)
                .await;
        };
        let raw = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        };
        let args: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                let err = ToolError::bad_args(
                    &call.name,
                    format!("the arguments are not valid JSON ({e})"),
                );
                return self
                    .record_outcome(call, err.to_string(), true, Vec::new(), false, false)
                    .await;
            }
        };
        let external = tool.effect() == Effect::External;
        if external && !already_started {
            self.commit(vec![Mutation::ToolStarted {
                turn: self.turn,
                call_id: call.id.clone(),
                ordinal: i64::from(self.state.step) * 1000 + ordinal as i64,
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            }])
            .await?;
        }
        let result = {
            let ctx = ToolContext {
                rt: &self.rt,
                bot: &self.bot,
                scope: &self.scope,
                turn: self.turn,
                call_id: &call.id,
                cancel: &self.hard,
            };
            tool.call(&ctx, args).await
        };
        match result {
            Ok(out) => {
                let delivered = out.delivered;
                self.record_outcome(call, out.content, false, out.effects, delivered, external)
                    .await
            }
            Err(e) => {
                self.record_outcome(call, e.to_string(), true, Vec::new(), false, external)
                    .await
            }
        }
    }

    async fn skip_call(&mut self, call: &ToolCall, stop: &Stop) -> Result<(), StoreError> {
        let reason = match stop {
            Stop::Interrupted => "a new message from the person interrupted the turn",
            Stop::Cancelled => "the turn was cancelled",
        };
        let text = prompts()
            .call_not_run
            .render(&[("reason", reason)])
            .unwrap_or_default();
        self.record_outcome(call, text, true, Vec::new(), false, false)
            .await
    }

    /// Runs the calls of a step in memory when every one of them is a known
    /// tool with only internal effects (its effect is store writes returned
    /// with its outcome). Returns the outcome writes, or `None` when any
    /// call needs the one-by-one path.
    async fn run_internal_calls(&mut self, calls: &[ToolCall]) -> Option<Vec<Mutation>> {
        let mut prepared = Vec::with_capacity(calls.len());
        for call in calls {
            let tool = self.tool(&call.name)?;
            if tool.effect() != Effect::Internal {
                return None;
            }
            let raw = if call.arguments.trim().is_empty() {
                "{}"
            } else {
                &call.arguments
            };
            let args: Value = serde_json::from_str(raw).ok()?;
            prepared.push((call, tool, args));
        }
        let mut out = Vec::new();
        for (call, tool, args) in prepared {
            let result = {
                let ctx = ToolContext {
                    rt: &self.rt,
                    bot: &self.bot,
                    scope: &self.scope,
                    turn: self.turn,
                    call_id: &call.id,
                    cancel: &self.hard,
                };
                tool.call(&ctx, args).await
            };
            let batch = match result {
                Ok(o) => {
                    let delivered = o.delivered;
                    self.outcome_batch(call, o.content, false, o.effects, delivered, false)
                }
                Err(e) => self.outcome_batch(call, e.to_string(), true, Vec::new(), false, false),
            };
            out.extend(batch);
        }
        Some(out)
    }

    /// Commits a call's result entry with its effects (and, for a call
    /// recorded as started, its outcome in `tool_calls`).
    async fn record_outcome(
        &mut self,
        call: &ToolCall,
        content: String,
        is_error: bool,
        effects: Vec<Mutation>,
        delivered: bool,
        started: bool,
    ) -> Result<(), StoreError> {
        let batch = self.outcome_batch(call, content, is_error, effects, delivered, started);
        self.commit(batch).await.map(|_| ())
    }

    fn outcome_batch(
        &mut self,
        call: &ToolCall,
        content: String,
        is_error: bool,
        effects: Vec<Mutation>,
        delivered: bool,
        started: bool,
    ) -> Vec<Mutation> {
        if delivered {
            self.state.delivered += 1;
        }
        let mut batch = Vec::with_capacity(2 + effects.len());
        if started {
            batch.push(Mutation::ToolFinished {
                turn: self.turn,
                call_id: call.id.clone(),
                outcome: content.clone(),
                is_error,
            });
        }
        batch.push(self.entry(
            EntryId::derive(self.turn, &call.id, "result"),
            EntryKind::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            },
        ));
        batch.extend(effects);
        batch
    }

    async fn fail(&mut self, error: String) -> Result<TurnStatus, StoreError> {
        tracing::warn!(bot = %self.bot.id, turn = %self.turn, %error, "turn failed");
        self.error = Some(error.clone());
        let turn = self.turn.to_string();
        let text = prompts()
            .turn_failed
            .render(&[("error", &error), ("turn", &turn)])
            .unwrap_or_default();
        let notice = self.entry(
            EntryId::derive(self.turn, "end", "failure"),
            EntryKind::Notice {
                code: "turn_failed".into(),
                text,
                retry_turn: Some(self.turn),
            },
        );
        self.end(TurnStatus::Failed, Some((error, notice))).await
    }

    async fn end(
        &mut self,
        status: TurnStatus,
        failure: Option<(String, Mutation)>,
    ) -> Result<TurnStatus, StoreError> {
        if self.start_pending && status == TurnStatus::Interrupted {
            // nothing was persisted: the inputs are still pending in the inbox
            return Ok(status);
        }
        let batch = self.end_batch(status, failure);
        self.commit(batch).await?;
        Ok(status)
    }

    /// The writes that end a turn: its status, notices, the turn_end entry
    /// (and, for an interrupted turn, its inputs back in the inbox).
    fn end_batch(
        &mut self,
        status: TurnStatus,
        failure: Option<(String, Mutation)>,
    ) -> Vec<Mutation> {
        let (error, failure_notice) = match failure {
            Some((e, n)) => (Some(e), Some(n)),
            None => (None, None),
        };
        let mut batch = vec![Mutation::EndTurn {
            turn: self.turn,
            status,
            error,
        }];
        batch.extend(failure_notice);
        if status == TurnStatus::Undelivered {
            let text = prompts().undelivered.render(&[]).unwrap_or_default();
            batch.push(self.entry(
                EntryId::derive(self.turn, "end", "undelivered"),
                EntryKind::Notice {
                    code: "undelivered".into(),
                    text,
                    retry_turn: Some(self.turn),
                },
            ));
        }
        batch.push(self.entry(
            EntryId::derive(self.turn, "end", "turn_end"),
            EntryKind::TurnEnd {
                status,
                inputs: self.state.input_seqs.clone(),
                deliveries: self.state.delivered,
            },
        ));
        if status == TurnStatus::Interrupted {
            batch.push(Mutation::RequeueInputs { turn: self.turn });
        }
        batch
    }
}
