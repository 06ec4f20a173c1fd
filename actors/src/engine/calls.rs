//! The tool calls of a turn: which tools it is shown (from who runs it),
//! and each call through the gate (`tools/gate.rs`) to its recorded
//! outcome. `impl Runner`, split from `runner.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;

use botfleet_memory::ApprovalId;
use botfleet_memory::BotId;

use crate::engine::context::Replies;
use crate::engine::context::reports_of_own_subagents;
use crate::tools::ToolOutput;
use crate::tools::gate::TurnStop;

impl From<TurnStop> for Stop {
    fn from(stop: TurnStop) -> Self {
        match stop {
            TurnStop::Interrupted => Stop::Interrupted,
            TurnStop::Cancelled => Stop::Cancelled,
        }
    }
}

/// The result of a call the turn did not run because it stopped first.
fn not_run(stop: &Stop) -> String {
    let reason = match stop {
        Stop::Interrupted => "a new message from the person interrupted the turn",
        Stop::Cancelled => "the turn was cancelled",
    };
    prompts()
        .call_not_run
        .render(&[("reason", reason)])
        .unwrap_or_default()
}

impl Runner {
    /// The runner of a turn in `session`: a shared room's members run with
    /// the shared surface.
    pub(super) async fn runner_for(
        &self,
        session: &SessionRecord,
    ) -> Result<RunnerKind, StoreError> {
        if session.key.kind == SessionKind::Group {
            return self
                .rt
                .groups
                .member_runner(&self.rt.store, &session.key.peer)
                .await;
        }
        Ok(runner_of(session.key.kind))
    }

    /// The tool specs the model is shown (the bot's tools its runner may
    /// use, per [`surface::visible_tools`]) and the identity naming them.
    /// A tool left out is still refused by the gate if called. The titles
    /// of its subagents' tasks read so far in this tail stay (each is
    /// written once), while it has Task (`Runner::name_reports`).
    pub(super) fn show_tools(&mut self) {
        let policy = &self.rt.safety.surfaces;
        self.specs = self
            .bot
            .tools
            .iter()
            .filter(|name| surface::is_visible(self.scope.runner, name, policy))
            .filter_map(|name| self.rt.tools.spec(name).cloned())
            .collect();
        // a message from a bot names the tools to answer it with only if
        // shown; a report of its own subagent is told apart by the reader
        let shown = |tool: &str| self.specs.iter().any(|s| s.name == tool);
        // the owner's time zone: inputs' times and the identity name it
        let timezone = self.rt.settings.timezone_of(&self.bot.owner);
        let before = self.tail.context.agent_replies();
        let tasks = if self.names_tasks() && before.reader.as_ref() == Some(&self.bot.id) {
            before.tasks
        } else {
            Arc::default()
        };
        let replies = Replies {
            reader: Some(self.bot.id.clone()),
            send_to_agent: shown("SendToAgent"),
            message_subagent: shown("MessageSubagent"),
            timezone,
            tasks,
        };
        self.tail.context.set_agent_replies(replies);
        let index = self
            .specs
            .iter()
            .map(|s| format!("- {}: {}", s.name, s.description))
            .collect::<Vec<_>>()
            .join("\n");
        self.identity = prompts()
            .system
            .render(&[
                ("name", &self.bot.name),
                ("bot_id", self.bot.id.as_str()),
                ("owner", self.bot.owner.as_str()),
                ("timezone", timezone.name()),
                ("role", &self.bot.role),
                ("tools", if index.is_empty() { "(none)" } else { &index }),
            ])
            .unwrap_or_default();
    }

    /// Whether the bot's context names its subagents' tasks: only a bot
    /// with Task makes subagents, the others spare the reads (a report of
    /// one made before Task was taken away reads without its task's
    /// title, as in a compaction's transcript).
    pub(super) fn names_tasks(&self) -> bool {
        self.bot.tools.iter().any(|t| t == "Task")
    }

    /// Reads the titles of the tasks of the bot's own subagents whose
    /// reports are among `entries` and not named yet, each by its key,
    /// before those entries are pushed: a turn read the task of every
    /// subagent the bot ever had (thousands, for a bot that delegates),
    /// though its context shows a few reports at most. Nothing is read
    /// before the turn set who reads its context (`show_tools`).
    pub(super) async fn name_reports<'a>(
        &mut self,
        entries: impl IntoIterator<Item = &'a Entry>,
    ) -> Result<(), StoreError> {
        let mut replies = self.tail.context.agent_replies();
        if !self.names_tasks() || replies.reader.as_ref() != Some(&self.bot.id) {
            return Ok(());
        }
        let mut ids: Vec<BotId> = Vec::new();
        for id in reports_of_own_subagents(entries, &self.bot.id) {
            if !replies.tasks.contains_key(id) && !ids.contains(id) {
                ids.push(id.clone());
            }
        }
        if ids.is_empty() {
            return Ok(());
        }
        let named = self.rt.store.subagent_tasks(&self.bot.id, ids).await?;
        Arc::make_mut(&mut replies.tasks).extend(named);
        self.tail.context.set_agent_replies(replies);
        Ok(())
    }

    /// What a tool call of this turn runs with.
    pub(super) fn tool_ctx<'a>(&'a self, call_id: &'a str) -> ToolContext<'a> {
        ToolContext {
            rt: &self.rt,
            bot: &self.bot,
            scope: &self.scope,
            turn: self.turn,
            call_id,
            cancel: &self.hard,
            interrupt: &self.soft,
            secrets: &self.secrets,
            step_effects: &[],
            delivered_before: self.state.delivered,
            turn_tokens: self.usage.total(),
            inputs: &self.state.input_seqs,
            result_cap_tokens: crate::engine::request_clip::entry_cap(crate::engine::turn_budget(
                self.ctx_settings.compact_at_tokens,
            )),
            memory_shown: crate::tools::ShownMemory {
                frozen: &self.tail.state_shown,
                update: if self.memory_update.is_some() {
                    &self.block.shown
                } else {
                    &[]
                },
            },
        }
    }

    pub(super) fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        // the bot's allowed tools, shown or not (the gate refuses the rest)
        if self.bot.tools.iter().any(|t| t == name) {
            self.rt.tools.get(name).cloned()
        } else {
            None
        }
    }

    /// Runs one tool call and records its outcome. `already_started` is set
    /// when re-running an idempotent call cut off by a crash.
    pub(super) async fn execute(
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
                .not_run_now(call, err.to_string(), already_started)
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
                    .not_run_now(call, err.to_string(), already_started)
                    .await;
            }
        };
        if let ToolLoopVerdict::Loop { repeats, .. } = self.tool_guard.observe(&call.name, &args) {
            // the same call again and again: refuse it; again in a later
            // step, after the model read the refusal, it ends the turn
            // (`step_loop`: failed, or `completed` after its reply). The
            // copies of it in the same answer are refused alike, but the
            // model gets its step to change course (QA: four identical
            // parallel Reads failed the turn on its first step)
            let text = prompts()
                .tool_loop
                .render(&[("repeats", &repeats.to_string())])
                .unwrap_or_default();
            self.not_run_now(call, text, already_started).await?;
            let step = self.state.step;
            match self.tool_loop_warned {
                Some(warned) if warned < step => {
                    self.abort = Some(format!(
                        "the model kept repeating the same {} call with the same arguments",
                        call.name
                    ));
                }
                Some(_) => {}
                None => self.tool_loop_warned = Some(step),
            }
            return Ok(());
        }
        // what the tool refuses before doing anything is refused before
        // anyone is asked about it (Tool::precheck)
        if !already_started {
            let refused = {
                let ctx = self.tool_ctx(&call.id);
                // a tool the runner may not use is refused as such first,
                // in the gate's words
                Gate::surface(&ctx, &call.name, &args)
                    .and_then(|()| tool.precheck(&ctx, &args).map_err(|e| e.for_caller(&ctx)))
            };
            if let Err(e) = refused {
                return self.not_run_now(call, e.to_string(), already_started).await;
            }
        }
        // surface → review → approval → locks (tools/gate.rs)
        let decision = {
            let ctx = self.tool_ctx(&call.id);
            Gate::check(&ctx, &call.name, tool.as_ref(), &args).await
        };
        let (locks, approval) = match decision {
            GateDecision::Run { locks, approval } => (locks, approval),
            GateDecision::Refuse(e) => {
                return self.not_run_now(call, e.to_string(), already_started).await;
            }
            GateDecision::AwaitApproval { message, .. } => {
                self.state.awaits_approval = true;
                return self.not_run_now(call, message, already_started).await;
            }
            // stopped while waiting for its lock: not started, so not run,
            // unless it is an idempotent call run again after a crash cut
            // it off (it may have taken effect before the crash)
            GateDecision::Stopped(_) if already_started => return self.outcome_unknown(call).await,
            GateDecision::Stopped(stop) => return self.skip_call(call, &stop.into()).await,
        };
        let external = tool.effect() == Effect::External;
        // an approved call with an external effect uses its approval up as
        // it starts, with its start record (which guards the effect): one
        // that never starts leaves it usable. One whose effects are store
        // writes uses it up in the commit of its outcome, with them: both
        // or neither. (It was used up one commit before them: a crash
        // between the two left it used for an action that never happened,
        // and the resumed turn asked the person a second time.)
        let mut start = Vec::new();
        if let Some(id) = approval.filter(|_| external) {
            start.push(Mutation::ConsumeApproval { id });
        }
        if external && !already_started {
            start.push(Mutation::ToolStarted {
                turn: self.turn,
                call_id: call.id.clone(),
                ordinal: i64::from(self.state.step) * 1000 + ordinal as i64,
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
        if !start.is_empty() {
            match (self.commit(start).await, approval) {
                (Ok(_), _) => {}
                (Err(StoreError::Rejected(why)), Some(id)) if external => {
                    // used by another call or expired since the gate saw it
                    drop(locks);
                    let lost = self.approval_lost(id, &why).await?;
                    return self.not_run_now(call, lost, already_started).await;
                }
                (Err(e), _) => return Err(e),
            }
        }
        let result = {
            let ctx = self.tool_ctx(&call.id);
            tool.call(&ctx, args).await.map_err(|e| e.for_caller(&ctx))
        };
        // a row written before a crash is closed too, whatever the tool's
        // effect is now
        let started = external || already_started;
        match result {
            Ok(out) => match approval.filter(|_| !external) {
                Some(id) => self.record_approved_outcome(call, id, out, started).await,
                None => {
                    let delivered = out.delivered;
                    self.record_outcome(call, out.content, false, out.effects, delivered, started)
                        .await
                }
            },
            // nothing happened: the approval of a call with only store
            // effects stays usable (an external one used it as it started)
            Err(e) => {
                self.record_outcome(call, e.to_string(), true, Vec::new(), false, started)
                    .await
            }
        }
    }

    /// Commits the outcome of a call with only store effects that ran with
    /// approval `id`, using the approval up in the same commit. When the
    /// writer refuses that use (another call used it, or it expired, since
    /// the gate saw it), nothing of what the call did is written: its
    /// result is the refusal.
    async fn record_approved_outcome(
        &mut self,
        call: &ToolCall,
        id: ApprovalId,
        out: ToolOutput,
        started: bool,
    ) -> Result<(), StoreError> {
        let deliveries = out.delivered.then(|| delivery_texts(&out.effects));
        let mut effects = Vec::with_capacity(1 + out.effects.len());
        effects.push(Mutation::ConsumeApproval { id });
        effects.extend(out.effects);
        let batch = self.outcome_writes(call, out.content, false, effects, started);
        match self.commit(batch).await {
            Ok(_) => {
                if let Some(texts) = deliveries {
                    self.count_delivery(texts);
                }
                Ok(())
            }
            Err(StoreError::Rejected(why)) if !self.approval_usable(id).await? => {
                let lost = self.approval_lost(id, &why).await?;
                self.not_run_now(call, lost, started).await
            }
            Err(e) => Err(e),
        }
    }

    /// The result of a call whose approval `id` the writer refused to use
    /// (`why`): used meanwhile by another call, which ran this exact
    /// action (made again it is refused as already run: nothing is left
    /// to do), or expired or no longer approved (made again it asks for a
    /// new approval).
    async fn approval_lost(&self, id: ApprovalId, why: &str) -> Result<String, StoreError> {
        let used = self
            .rt
            .store
            .approval(id)
            .await?
            .is_some_and(|a| a.consumed_at.is_some());
        let hint = if used {
            "another call already ran this exact action with that approval (an approval runs \
             an action once): use that call's result, earlier in this conversation; made again, \
             this call asks for a new approval only after the person's next message"
        } else {
            "call it again to ask for a new approval"
        };
        Ok(ToolError::new(format!("not run: {why}"), hint).to_string())
    }

    /// Whether approval `id` may still be used (approved, unused, within
    /// its window).
    async fn approval_usable(&self, id: ApprovalId) -> Result<bool, StoreError> {
        Ok(self
            .rt
            .store
            .approval(id)
            .await?
            .is_some_and(|a| a.is_usable()))
    }

    /// Records a call that is not run now, with `why` as its result. A
    /// call that had started before a crash (an idempotent one run again
    /// as its turn resumed, then refused by the gate, held for a person's
    /// approval, or found invalid) may have taken effect then: it is
    /// reported as outcome unknown, followed by why it did not run again,
    /// and its `started` row is closed with that text. (Before, the model
    /// was told only that it did not run, and the row stayed `started`.)
    async fn not_run_now(
        &mut self,
        call: &ToolCall,
        why: String,
        already_started: bool,
    ) -> Result<(), StoreError> {
        if !already_started {
            return self
                .record_outcome(call, why, true, Vec::new(), false, false)
                .await;
        }
        let text = format!("{}\n\n{why}", self.outcome_unknown_text(call));
        self.record_outcome(call, text, true, Vec::new(), false, true)
            .await
    }

    pub(super) async fn skip_call(
        &mut self,
        call: &ToolCall,
        stop: &Stop,
    ) -> Result<(), StoreError> {
        self.record_outcome(call, not_run(stop), true, Vec::new(), false, false)
            .await
    }

    /// Runs the calls of a step in memory when every one of them is a known
    /// tool with only internal effects (its effect is store writes returned
    /// with its outcome). Returns the outcome writes, or `None` when any
    /// call needs the one-by-one path.
    pub(super) async fn run_internal_calls(&mut self, calls: &[ToolCall]) -> Option<Vec<Mutation>> {
        let mut prepared = Vec::with_capacity(calls.len());
        // the loop guard sees these calls like any others (a reply sent
        // again and again is a loop): a call that would trip it goes the
        // slow way, where it is refused; the guard keeps what it saw only
        // when the fast way is taken
        let mut guard = self.tool_guard.clone();
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
            if let ToolLoopVerdict::Loop { .. } = guard.observe(&call.name, &args) {
                return None;
            }
            let ctx = self.tool_ctx(&call.id);
            if !Gate::passes_review_rules(&ctx, &call.name, &args).await {
                // review may ask a person or log the call: the step is
                // recorded first
                return None;
            }
            prepared.push((call, tool, args));
        }
        self.tool_guard = guard;
        let mut out = Vec::new();
        for (call, tool, args) in prepared {
            let result = {
                let ctx = ToolContext {
                    step_effects: &out,
                    ..self.tool_ctx(&call.id)
                };
                // internal, and not reviewed or allowed by review's rules
                // (above): the gate checks the surface, reviews again to
                // the same allow, and refuses a side effect while one of
                // the bot's approvals is pending; it uses no approval
                // (only an `ask` does) and asks nobody
                match Gate::check(&ctx, &call.name, tool.as_ref(), &args).await {
                    GateDecision::Run { .. } => tool
                        .call(&ctx, args)
                        .await
                        .map_err(|e| e.for_caller(&ctx).to_string()),
                    GateDecision::Refuse(e) => Err(e.to_string()),
                    GateDecision::AwaitApproval { message, .. } => {
                        self.state.awaits_approval = true;
                        Err(ToolError::new(message, "wait for the decision").to_string())
                    }
                    GateDecision::Stopped(stop) => Err(not_run(&stop.into())),
                }
            };
            let batch = match result {
                Ok(o) => {
                    let delivered = o.delivered;
                    self.outcome_batch(call, o.content, false, o.effects, delivered, false)
                }
                Err(text) => self.outcome_batch(call, text, true, Vec::new(), false, false),
            };
            out.extend(batch);
        }
        Some(out)
    }

    /// Commits a call's result entry with its effects (and, for a call
    /// recorded as started, its outcome in `tool_calls`).
    pub(super) async fn record_outcome(
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

    pub(super) fn outcome_batch(
        &mut self,
        call: &ToolCall,
        content: String,
        is_error: bool,
        effects: Vec<Mutation>,
        delivered: bool,
        started: bool,
    ) -> Vec<Mutation> {
        if delivered {
            self.count_delivery(delivery_texts(&effects));
        }
        self.note_asked(call, &content, is_error);
        self.outcome_writes(call, content, is_error, effects, started)
    }

    /// A delivery the turn made, with the texts of its `Delivery` entries.
    fn count_delivery(&mut self, texts: Vec<String>) {
        self.state.delivered += 1;
        for text in texts {
            if let Some(t) = &mut self.texts {
                t.delivered(&text);
            }
            self.last_delivery = Some(text);
        }
    }

    /// The writes of a call's outcome: its result entry (and, for a call
    /// recorded as started, its row's outcome) with its effects.
    fn outcome_writes(
        &self,
        call: &ToolCall,
        content: String,
        is_error: bool,
        effects: Vec<Mutation>,
        started: bool,
    ) -> Vec<Mutation> {
        // a tool may have printed a secret (Shell, Read of a file): the model,
        // the transcript and the logs only ever see it redacted. This is the
        // one scrub of a Read window. A part of one left where a tool cut
        // its output is not found here: a tool that cuts hides it itself
        // (Shell: `Redactor::scrub_cut`; Read: `Redactor::hide_cut_parts`)
        let content = if self.secrets.redactor.is_empty() {
            content
        } else {
            self.secrets.redactor.scrub(&content).into_owned()
        };
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
        within_limits(batch)
    }
}

/// The texts of the `Delivery` entries among a call's effects.
fn delivery_texts(effects: &[Mutation]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|m| match m {
            Mutation::Append(e) => match &e.kind {
                EntryKind::Delivery { text, .. } => Some(text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A call's outcome whose effects are bounded (`Mutation::Limited`: a
/// chain's breadth, a parent's running subagents), as one `Limited` with
/// the call's result and all its effects within every bound: the writer
/// writes them, or the refusal of the first bound without room as the
/// call's result and nothing else. (A refused SendMessage to a bot was
/// counted as delivered above: in a conversation with a bot nothing is
/// owed to a person.) Other outcomes as they are.
fn within_limits(batch: Vec<Mutation>) -> Vec<Mutation> {
    if !batch.iter().any(|m| matches!(m, Mutation::Limited(_))) {
        return batch;
    }
    let mut limits = Vec::new();
    let mut within = Vec::with_capacity(batch.len());
    let mut finished = None;
    for m in batch {
        if let Mutation::Limited(l) = m {
            let l = *l;
            limits.extend(l.limits);
            within.extend(l.within);
            continue;
        }
        if let Mutation::ToolFinished { turn, call_id, .. } = &m {
            finished = Some((*turn, call_id.clone()));
        }
        within.push(m);
    }
    if let Some((turn, call_id)) = finished {
        // a call recorded as started is closed with what it did
        for limit in &mut limits {
            let refusal = limit.refused.iter().find_map(|m| {
                if let Mutation::Append(e) = m
                    && let EntryKind::ToolResult { content, .. } = &e.kind
                {
                    Some(content.clone())
                } else {
                    None
                }
            });
            limit.refused.insert(
                0,
                Mutation::ToolFinished {
                    turn,
                    call_id: call_id.clone(),
                    outcome: refusal.unwrap_or_default(),
                    is_error: true,
                },
            );
        }
    }
    vec![Mutation::Limited(Box::new(botfleet_memory::Limited {
        limits,
        within,
    }))]
}

#[cfg(test)]
#[path = "calls_approval_tests.rs"]
mod approval_tests;

#[cfg(test)]
#[path = "calls_batched_tests.rs"]
mod batched_tests;
