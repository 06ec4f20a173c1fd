//! The model call of a step: the request from the session tail, the
//! loop watch on its stream, the token usage it adds to the turn, the
//! reminders that answer a looping output, an undelivered reply or a
//! tool call written as text, and what follows an answer cut off at the
//! token limit, a refusal, or a call that failed or a tool call repeated
//! after the guard's warning once the turn replied.
//! `impl Runner`, split from `runner.rs`.

use std::collections::HashSet;

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::model::ChatMessage;
use crate::model::call_usage::made_tokens;

/// A tool call written as text: the detector and the operator's warning
/// (`written_call.rs`).
#[path = "written_call.rs"]
mod written_call;
use written_call::warn_written_call;
use written_call::written_call;

impl Runner {
    /// What comes before a step's model request: the daily budget check
    /// (`Runner::budget_checkpoint`), a compaction when one is due, and
    /// the budget check again after it (a compaction's calls count toward
    /// the turn's usage). `Some` when the turn stopped there.
    pub(super) async fn before_request(&mut self) -> Result<Option<TurnStatus>, StoreError> {
        if let Some(status) = self.budget_checkpoint().await? {
            return Ok(Some(status));
        }
        if self.compaction_needed() {
            let keep_from = self.state.input_seqs.iter().min().copied();
            self.compact_now(keep_from).await;
            return self.budget_checkpoint().await;
        }
        Ok(None)
    }

    /// The model request of a step, over the session tail as it is (the
    /// step loop compacts first when it must, `Runner::compaction_needed`,
    /// checking the daily budget before each of the two).
    pub(super) async fn call_model(&mut self) -> Result<ModelResponse, ModelError> {
        self.shape_requests();
        let messages = self
            .tail
            .take_request(self.memory_update.as_deref(), &mut self.memory_update_at);
        let request = ModelRequest {
            purpose: Purpose::Turn,
            bot: self.bot.id.to_string(),
            messages,
            tools: std::mem::take(&mut self.specs),
            max_tokens: None,
        };
        let mut sink = LoopSink::new();
        // an error the server sent back may quote the host's credentials
        // (the ones tool results are scrubbed of): cleaned in the provider
        let mut result = self
            .model
            .complete_hiding(&request, &self.secrets.redactor, &mut sink, &self.soft)
            .await;
        // what an aborted stream had sent: the server took the request and
        // made these tokens, whoever cut it (QA: a bot whose model looped
        // at every call spent its tokens and never its daily budget)
        let aborted = match &result {
            Err(ModelError::Aborted { partial, .. }) => Some(partial.clone()),
            _ => None,
        };
        if let (Some(_), Some(what)) = (&aborted, sink.tripped.take()) {
            result = Err(ModelError::Aborted {
                reason: what,
                partial: String::new(),
            });
            self.looped = true;
        }
        if let Ok(response) = &mut result {
            unique_call_ids(&request.messages, response);
        }
        let update_at = self.memory_update.as_ref().and(self.memory_update_at);
        self.tail.restore_request(request.messages, update_at);
        self.specs = request.tools;
        // attempts the provider sent again after they broke off: the
        // server took each request and made what it streamed (QA: a
        // broken 820 KB answer, retried, never reached the bot's usage)
        for text in std::mem::take(&mut sink.voided) {
            self.account(&ModelResponse {
                text,
                ..ModelResponse::default()
            });
        }
        match &result {
            Ok(response) => self.account(response),
            // a refused or filtered answer is billed too (QA: its tokens
            // never reached the bot's usage nor its daily budget)
            Err(ModelError::Refused { refusal, usage }) => self.account(&ModelResponse {
                text: refusal.clone(),
                usage: *usage,
                ..ModelResponse::default()
            }),
            Err(ModelError::ContentFiltered { usage }) => self.account(&ModelResponse {
                usage: *usage,
                ..ModelResponse::default()
            }),
            // no usage comes before a stream's end: counted as sent and
            // as received so far (its calls and reasoning with its text)
            Err(ModelError::Aborted { .. }) => {
                let received = sink.take_received();
                self.account(&ModelResponse {
                    text: if received.is_empty() {
                        aborted.unwrap_or_default()
                    } else {
                        received
                    },
                    ..ModelResponse::default()
                });
            }
            // a call that failed, or was cancelled, after its answer had
            // begun: what it streamed was made (QA: an answer past
            // max_response_bytes, the runaway that limit is for, counted
            // nothing, and its bot's daily budget never tripped on it);
            // one that streamed nothing (refused, unreachable, an error
            // status) made nothing
            Err(_) => {
                let text = sink.take_received();
                if !text.is_empty() {
                    self.account(&ModelResponse {
                        text,
                        ..ModelResponse::default()
                    });
                }
            }
        }
        result
    }

    /// Adds a model call to the turn's usage.
    fn account(&mut self, response: &ModelResponse) {
        // as sent: a clipped message counts as its clip
        let prefix = self.tail.sent_tokens_of_first(self.prefix_len);
        self.usage.calls += 1;
        self.usage.prefix_tokens += prefix;
        match response.usage {
            Some(u) => {
                self.usage.prompt_tokens += u.prompt_tokens;
                self.usage.cached_tokens += u.cached_prompt_tokens;
                self.usage.completion_tokens += u.completion_tokens;
            }
            None => {
                // what this request sent (clipped, stubbed), not the
                // context's whole count
                self.usage.prompt_tokens += self.tail.last_request_tokens();
                self.usage.completion_tokens += made_tokens(response, self.tail.encoding());
            }
        }
    }

    /// One reminder after a looping output; the retry is marked in the
    /// checkpoint so a second loop (even after a restart) ends the turn.
    pub(super) async fn loop_reminder(&mut self, what: &str) -> Result<(), StoreError> {
        self.state.loop_retried = true;
        let text = prompts()
            .loop_reminder
            .render(&[("what", what)])
            .unwrap_or_default();
        let mut batch = vec![self.entry(
            EntryId::derive(self.turn, "loop", "reminder"),
            EntryKind::Reminder { text },
        )];
        if self.start_pending.is_none() {
            batch.push(Mutation::Checkpoint {
                turn: self.turn,
                checkpoint: self.checkpoint(),
            });
        }
        self.commit(batch).await.map(|_| ())
    }

    /// A step cut off at the output token limit (finish reason `length`):
    /// its text or its last call's arguments are incomplete, so it is not
    /// acted on. The first time in a turn, the step is recorded with each
    /// of its calls answered as not run (prompts/call_cut_off.md: running
    /// the start of an unfinished plan could do harm), or, without calls,
    /// followed by prompts/cut_off.md, and the turn goes on (`None`). The
    /// second time, the turn fails naming the limit. The retry is in the
    /// checkpoint, as a loop's is.
    pub(super) async fn cut_off(
        &mut self,
        response: &ModelResponse,
    ) -> Result<Option<TurnStatus>, StoreError> {
        if self.state.cut_off_retried {
            let error = "the model's answer was cut off at its output token limit (max tokens, \
                         finish reason length) a second time in this turn, so the turn stopped there"
                .to_owned();
            return self.cannot_go_on(error).await.map(Some);
        }
        self.state.cut_off_retried = true;
        let mut batch = self.step_batch(response);
        let not_run = prompts().call_cut_off.render(&[]).unwrap_or_default();
        for call in &response.tool_calls {
            let outcome = self.outcome_batch(call, not_run.clone(), true, Vec::new(), false, false);
            batch.extend(outcome);
        }
        if response.tool_calls.is_empty() {
            let text = prompts().cut_off.render(&[]).unwrap_or_default();
            batch.push(self.entry(
                EntryId::derive(self.turn, "cut_off", "reminder"),
                EntryKind::Reminder { text },
            ));
        }
        if self.start_pending.is_none() {
            batch.push(Mutation::Checkpoint {
                turn: self.turn,
                checkpoint: self.checkpoint(),
            });
        }
        self.commit(batch).await.map(|_| None)
    }

    /// Ends a turn whose model refused to answer: the refusal is kept as
    /// the step's text (later turns see that it declined) and shown to
    /// people in a `model_refused` notice with a retry; the turn fails.
    /// After the turn delivered, it ends `completed` instead, as after a
    /// failed call (`Runner::model_failed`): the person has the reply, and
    /// a retry would answer twice.
    pub(super) async fn refused(&mut self, refusal: String) -> Result<TurnStatus, StoreError> {
        let error = ModelError::Refused {
            refusal: refusal.clone(),
            usage: None,
        }
        .to_string();
        let step = self.step_batch(&ModelResponse {
            text: refusal.clone(),
            ..ModelResponse::default()
        });
        if self.reply_stands() {
            return self.end_after_reply(error, step).await;
        }
        tracing::warn!(bot = %self.bot.id, turn = %self.turn, %error, "turn failed");
        self.error = Some(error.clone());
        let mut batch = step;
        let turn = self.turn.to_string();
        let text = prompts()
            .model_refused
            .render(&[("refusal", &refusal), ("turn", &turn)])
            .unwrap_or_default();
        let notice = self.entry(
            EntryId::derive(self.turn, "end", "refused"),
            EntryKind::Notice {
                code: "model_refused".into(),
                text,
                retry_turn: Some(self.turn),
            },
        );
        // the step and the end of the turn commit together
        batch.extend(self.end_batch(TurnStatus::Failed, Some((error, notice))));
        self.commit(batch).await?;
        Ok(TurnStatus::Failed)
    }

    /// Ends a turn whose model's output looped again after its loop
    /// reminder: it fails, with a retry; after it delivered, it ends
    /// `completed`, as after a failed call (`Runner::model_failed`).
    pub(super) async fn looped_again(&mut self, reason: &str) -> Result<TurnStatus, StoreError> {
        let error =
            format!("the model's output kept looping ({reason}), so the turn stopped there");
        self.cannot_go_on(error).await
    }

    /// The reminder a step without tool calls (its text `text`) is
    /// answered with, if any: once a turn, a call to one of its tools
    /// written as text (`written_call`) is told it did not run, in place of
    /// the delivery reminder; once a turn, a person owed a reply and sent
    /// none is reminded to send it. A call written as text is never run:
    /// its arguments were never checked against the tool's schema, and
    /// text the model meant as an example would run as well. Once a turn,
    /// bots owed a reply and sent none are reminded to answer them
    /// (`owed_replies.rs`).
    pub(super) fn reminder_due(&self, text: &str) -> Option<Reminder> {
        let tools: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
        if let Some(tool) = written_call(text, &tools) {
            warn_written_call(&self.bot.id.to_string(), &self.bot.provider, tool);
            if !self.state.written_call_reminded {
                return Some(Reminder::WrittenCall {
                    tool: tool.to_owned(),
                });
            }
        }
        if self.state.owes_delivery && self.state.delivered == 0 && !self.state.reminded {
            return Some(if self.awaits_answers() {
                Reminder::Awaiting
            } else {
                Reminder::Delivery
            });
        }
        self.agent_reply_reminder_due()
            .map(|bot| Reminder::AgentReply { bot: bot.clone() })
    }

    /// Injects `reminder` (its flag goes into the checkpoint with it, so a
    /// resumed turn does not send it twice) and the turn goes on.
    pub(super) async fn remind(&mut self, reminder: Reminder) -> Result<(), StoreError> {
        let (what, text) = match &reminder {
            Reminder::Delivery => {
                self.state.reminded = true;
                ("delivery", prompts().delivery_reminder.render(&[]))
            }
            Reminder::Awaiting => {
                self.state.reminded = true;
                let asked = self.asked_text();
                (
                    "delivery",
                    prompts()
                        .delivery_reminder_awaiting
                        .render(&[("asked", &asked)]),
                )
            }
            Reminder::AgentReply { bot } => {
                self.state.agent_reminded = true;
                (
                    "agent_reply",
                    prompts()
                        .agent_reply_reminder
                        .render(&[("bot", bot.as_str())]),
                )
            }
            Reminder::WrittenCall { tool } => {
                self.state.written_call_reminded = true;
                (
                    "written_call",
                    prompts().written_call_reminder.render(&[("tool", tool)]),
                )
            }
        };
        let mut batch = vec![self.entry(
            EntryId::derive(self.turn, "reminder", what),
            EntryKind::Reminder {
                text: text.unwrap_or_default(),
            },
        )];
        if self.start_pending.is_none() {
            batch.push(Mutation::Checkpoint {
                turn: self.turn,
                checkpoint: self.checkpoint(),
            });
        }
        self.commit(batch).await.map(|_| ())
    }

    /// Ends a turn whose model call failed for good (after the provider's
    /// retries). Before the turn delivered anything, it fails and the
    /// person is offered a retry (`Runner::fail`); after, it ends
    /// `completed` (`Runner::end_after_reply`).
    pub(super) async fn model_failed(
        &mut self,
        error: ModelError,
    ) -> Result<TurnStatus, StoreError> {
        self.cannot_go_on(error.to_string()).await
    }

    /// Ends a turn that cannot go on for `error` (its model call failed for
    /// good, its output looped or was cut off a second time, or it repeated
    /// a tool call after the guard's warning, `calls.rs`): `completed` after
    /// its reply (`reply_stands`, `end_after_reply`), else failed with a
    /// retry.
    pub(super) async fn cannot_go_on(&mut self, error: String) -> Result<TurnStatus, StoreError> {
        if self.reply_stands() {
            return self.end_after_reply(error, Vec::new()).await;
        }
        self.fail(error).await
    }

    /// Whether a turn that cannot go on (its model call failed for good,
    /// the model refused, its output looped or was cut off a second time,
    /// or it repeated a tool call after the guard's warning) ends
    /// `completed` rather than failed: it delivered, and it is not a
    /// subagent's task. A subagent's task still fails: its report then
    /// tells its parent the task is unfinished, with its last progress,
    /// where `completed` would report that progress as the result.
    pub(super) fn reply_stands(&self) -> bool {
        self.state.delivered > 0 && self.scope.session.key.kind != SessionKind::Subagent
    }

    /// Ends a turn that cannot go on after it delivered (`reply_stands`),
    /// with `batch` (a refusal's step) committed with its end. The person
    /// has its reply, and the step that went wrong is most often the one
    /// that would only have ended the turn: a failure offering a retry
    /// under a complete answer reads as if the answer were wrong, and the
    /// retry would answer twice. The turn ends `completed` (its obligation
    /// is met: clients, `botfleet send` and a room's discussion take it as
    /// answered), with `error` kept on the turn (`GET /v1/turns/{turn}`)
    /// and logged, and a notice without a retry
    /// (prompts/failed_after_reply.md) says the bot stopped there, so a
    /// reply that was only a first part (a progress message before more
    /// work) is not taken for all of it.
    pub(super) async fn end_after_reply(
        &mut self,
        error: String,
        mut batch: Vec<Mutation>,
    ) -> Result<TurnStatus, StoreError> {
        tracing::warn!(bot = %self.bot.id, turn = %self.turn, %error, "the turn's step after its reply went wrong: the reply stands, ending the turn completed without offering a retry");
        self.error = Some(error.clone());
        let text = prompts()
            .failed_after_reply
            .render(&[("error", &error)])
            .unwrap_or_default();
        let notice = self.entry(
            EntryId::derive(self.turn, "end", "failed_after_reply"),
            EntryKind::Notice {
                code: "failed_after_reply".into(),
                text,
                retry_turn: None,
            },
        );
        batch.extend(self.end_batch(TurnStatus::Completed, Some((error, notice))));
        self.commit(batch).await?;
        Ok(TurnStatus::Completed)
    }
}

/// A reminder that answers a step without tool calls
/// (`Runner::reminder_due`).
pub(super) enum Reminder {
    /// A person is owed a reply and the turn sent none
    /// (prompts/delivery_reminder.md).
    Delivery,
    /// The same, when the turn asked other bots or subagents for what the
    /// answer needs (`asked.rs`; prompts/delivery_reminder_awaiting.md).
    Awaiting,
    /// The bot that wrote the turn a message owed a reply got none
    /// (prompts/agent_reply_reminder.md, `owed_replies.rs`).
    AgentReply {
        /// That bot.
        bot: botfleet_memory::BotId,
    },
    /// The step wrote a call to the turn's tool `tool` as text
    /// (prompts/written_call_reminder.md).
    WrittenCall {
        /// The tool named in the text.
        tool: String,
    },
}

/// Gives each call of `response` an id that no call in `messages` (the
/// request: this turn's earlier steps and the session before them) and no
/// other call of the response has. A provider may repeat ids (`call_0` in
/// every step): the turn keys a call's start record, its result entry and
/// its recovery by (turn, id), so a repeated id would make a later call
/// look already started and never run, and strict servers refuse a
/// conversation with two calls of one id. A renamed call is stored and
/// answered under its new id, so the model sees one consistent id.
fn unique_call_ids(messages: &[ChatMessage], response: &mut ModelResponse) {
    if response.tool_calls.is_empty() {
        return;
    }
    // the response's ids are few (one to a handful) and the context's
    // calls many: each context call is compared with the response's ids
    // directly, which is cheaper than hashing every id of the context at
    // every model call (2.4% of fleet-load's samples when it hashed them)
    let given: Vec<&str> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
    let earlier: HashSet<String> = messages
        .iter()
        .flat_map(|m| match m {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            ChatMessage::System { .. } | ChatMessage::User { .. } | ChatMessage::Tool { .. } => &[],
        })
        .filter(|c| given.contains(&c.id.as_str()))
        .map(|c| c.id.clone())
        .collect();
    let mut taken: HashSet<String> = HashSet::with_capacity(response.tool_calls.len());
    for call in &mut response.tool_calls {
        if earlier.contains(&call.id) || !taken.insert(call.id.clone()) {
            let fresh = ToolCall::fresh_id();
            tracing::debug!(given = %call.id, %fresh, "repeated tool call id renamed");
            call.id = fresh;
            taken.insert(call.id.clone());
        }
    }
}
