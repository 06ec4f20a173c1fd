//! A turn that was running when the host or the turn crashed: its record
//! and checkpoint are loaded and it continues where it stopped, never
//! running a finished tool call again. `impl Runner`, split from
//! `runner.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;

impl Runner {
    /// This turn's own entries in its session, in order (read from its
    /// first input on).
    pub(super) async fn own_entries(&self) -> Result<Vec<Entry>, StoreError> {
        let from = self
            .state
            .input_seqs
            .iter()
            .min()
            .copied()
            .unwrap_or(1)
            .saturating_sub(1);
        let mut entries = self
            .rt
            .store
            .entries_after(self.session, from, i64::MAX)
            .await?;
        entries.retain(|e| e.turn == Some(self.turn));
        Ok(entries)
    }

    /// Loads the stored turn; `false` if it never reached the store.
    pub(super) async fn load_record(&mut self) -> Result<bool, StoreError> {
        let Some(record) = self.rt.store.get_turn(self.turn).await? else {
            return Ok(false);
        };
        self.state = TurnState::from_value(&record.checkpoint);
        // what its stored steps' calls used: counted with its end as this
        // start's calls are (before, a crash lost it from every count)
        self.usage = self.state.usage;
        // the starts counted so far (a resume that replaces a start the
        // store refused to write goes on with them: `resume`)
        self.attempts = record.attempts;
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
    /// continue (more than `runtime.max_turn_attempts` starts at the same
    /// step).
    ///
    /// The turn's progress is read back from the transcript: its steps are
    /// its assistant entries, its deliveries and reminder are entries too.
    /// Calls of its last step without a result entry are settled here: a
    /// call recorded as started (external effect) either runs again
    /// (idempotent tools, unless the turn is being stopped) or is reported
    /// as "outcome unknown" — also when a person's message or a cancel
    /// stops the resumed turn, as it may have taken effect; a call never
    /// started simply runs, or is recorded as not run when the turn stops.
    ///
    /// A run after one the store refused to write (disk full:
    /// `TurnPlan::replaces_start`) is not one more start after a crash: it
    /// takes the refused run's place, and the count stays. (Before, each
    /// run during a full disk counted, and the turn failed as "crashed 3
    /// times in a row at the same step" once the disk had space again.)
    pub(super) async fn resume(&mut self) -> Result<Option<TurnStatus>, StoreError> {
        let replaces_start = self.replaces_start;
        let attempts = if replaces_start {
            self.attempts
        } else {
            match self
                .rt
                .store
                .write(vec![Mutation::BumpAttempts { turn: self.turn }])
                .await?
                .pop()
            {
                Some(MutationResult::Attempts(a)) => a,
                _ => 0,
            }
        };
        tracing::info!(bot = %self.bot.id, turn = %self.turn, attempts, replaces_start, "resuming turn from its checkpoint");
        self.attempts = attempts;
        let mine = self.own_entries().await?;
        self.asked_from(&mine);
        let mut last_calls = Vec::new();
        let mut answered = std::collections::HashSet::new();
        self.state.step = 0;
        let delivery_reminder = EntryId::derive(self.turn, "reminder", "delivery");
        for e in &mine {
            match &e.kind {
                EntryKind::Assistant { tool_calls, .. } => {
                    self.state.step += 1;
                    last_calls = tool_calls.clone();
                }
                EntryKind::ToolResult { call_id, .. } => {
                    answered.insert(call_id.clone());
                }
                // the delivery reminder only (the checkpoint has its flag
                // already; a loop's, a cut-off answer's or a written
                // call's reminder, taken for it, kept a resumed turn from
                // ever being reminded to reply: audit, 2026-12-07)
                EntryKind::Reminder { .. } if e.id == delivery_reminder => {
                    self.state.reminded = true;
                }
                _ => {}
            }
        }
        self.count_deliveries().await?;
        let calls = self.rt.store.tool_calls(self.turn).await?;
        self.note_stopped_calls(&calls);
        let started: std::collections::HashMap<String, ToolCallStatus> =
            calls.into_iter().map(|c| (c.call_id, c.status)).collect();
        if attempts > self.rt.settings.max_turn_attempts {
            // every start since the turn's last step was cut off by a
            // crash (a clean stop takes its start back, a step resets the
            // count): it would most likely crash there again
            self.close_started_calls().await?;
            let error = format!(
                "the turn crashed {} times in a row at the same step",
                attempts - 1
            );
            // after its reply the person has their answer: it ends as any
            // turn that cannot go on after it delivered, with no retry
            // (QA: it failed with a retry, the CLI exited 3 over a reply it
            // had printed, and a retry asked the model again)
            if self.reply_stands() {
                return self.end_after_reply(error, Vec::new()).await.map(Some);
            }
            return self.fail(error).await.map(Some);
        }
        for (ordinal, body) in last_calls.iter().enumerate() {
            if answered.contains(&body.id) {
                continue;
            }
            let call = ToolCall {
                id: body.id.clone(),
                name: body.name.clone(),
                arguments: body.arguments.clone(),
            };
            let was_started = matches!(started.get(&body.id), Some(ToolCallStatus::Started));
            let stop = self.stop_reason();
            let run_again = stop.is_none() && self.tool(&body.name).is_some_and(|t| t.idempotent());
            if was_started && !run_again {
                // it may have taken effect before the crash, whatever stops
                // the turn now: never "not run", and its row gets an outcome
                self.outcome_unknown(&call).await?;
            } else if let Some(stop) = stop {
                self.skip_call(&call, &stop).await?;
            } else {
                self.execute(&call, ordinal, was_started).await?;
            }
        }
        Ok(None)
    }

    /// Reads what the turn delivered so far into its state: its
    /// deliveries wherever they went (a webhook's or a routine's turn
    /// delivers to the owner's DM). Counted from its own session only, a
    /// resumed one that then hit max_steps read as "not delivered",
    /// failed, and a retry messaged the owner again.
    pub(super) async fn count_deliveries(&mut self) -> Result<(), StoreError> {
        let first_input = self.inputs.iter().map(|i| i.gid).min().unwrap_or(1);
        self.state.delivered = self
            .rt
            .store
            .deliveries_of_turn(self.turn, first_input.saturating_sub(1))
            .await?;
        Ok(())
    }

    /// Records the calls of the turn's last step that started and have no
    /// result as "outcome unknown", before the turn fails for its crashes:
    /// they may have taken effect, and their rows stayed `started` under a
    /// failed turn forever.
    pub(super) async fn close_started_calls(&mut self) -> Result<(), StoreError> {
        let mine = self.own_entries().await?;
        let answered: std::collections::HashSet<&str> = mine
            .iter()
            .filter_map(|e| match &e.kind {
                EntryKind::ToolResult { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        let last_calls = mine.iter().rev().find_map(|e| match &e.kind {
            EntryKind::Assistant { tool_calls, .. } => Some(tool_calls.clone()),
            _ => None,
        });
        let calls = self.rt.store.tool_calls(self.turn).await?;
        self.note_stopped_calls(&calls);
        let started: std::collections::HashSet<String> = calls
            .into_iter()
            .filter(|c| c.status == ToolCallStatus::Started)
            .map(|c| c.call_id)
            .collect();
        for body in last_calls.unwrap_or_default() {
            if answered.contains(body.id.as_str()) || !started.contains(&body.id) {
                continue;
            }
            let call = ToolCall {
                id: body.id,
                name: body.name,
                arguments: body.arguments,
            };
            self.outcome_unknown(&call).await?;
        }
        Ok(())
    }

    /// Records a call that started before a crash and is not run again
    /// as "outcome unknown" (prompts/outcome_unknown.md), closing its
    /// `started` row with that outcome.
    pub(super) async fn outcome_unknown(&mut self, call: &ToolCall) -> Result<(), StoreError> {
        let text = self.outcome_unknown_text(call);
        self.record_outcome(call, text, true, Vec::new(), false, true)
            .await
    }

    /// What the model is told of a call that started before a crash, or
    /// before the store refused the run's writes (a run after the store's
    /// wait, `replaces_start`: no restart happened), and whose outcome was
    /// not recorded.
    pub(super) fn outcome_unknown_text(&self, call: &ToolCall) -> String {
        let p = prompts();
        let template = if self.replaces_start {
            &p.outcome_unknown_store
        } else if self.stopped_calls.contains(&call.id) {
            &p.outcome_unknown_stopped
        } else {
            &p.outcome_unknown
        };
        template.render(&[("tool", &call.name)]).unwrap_or_default()
    }

    /// Notes which of the turn's `calls` a clean stop of the host ended
    /// without an outcome.
    fn note_stopped_calls(&mut self, calls: &[botfleet_memory::ToolCallRecord]) {
        self.stopped_calls = calls
            .iter()
            .filter(|c| c.stopped)
            .map(|c| c.call_id.clone())
            .collect();
    }
}
