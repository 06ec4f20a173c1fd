//! The step loop of a turn: before each step, a stop (interrupt or
//! cancel), an abort (the repeated-call guard, `calls.rs`) or the step
//! limit may end the turn; then the model call, whose failure, refusal,
//! loop or cut-off ends it or goes on with a reminder (`model_call.rs`);
//! a step without calls ends it (`completed` or `undelivered`) unless a
//! reminder is due; each call is run or, once the turn stops, skipped.
//! `impl Runner`, split from `runner.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Runner {
    /// Why the turn stops now, if it does: a cancel wins over an interrupt.
    pub(super) fn stop_reason(&self) -> Option<Stop> {
        if self.hard.is_cancelled() {
            Some(Stop::Cancelled)
        } else if self.soft.is_cancelled() {
            Some(Stop::Interrupted)
        } else {
            None
        }
    }

    /// Runs the turn's steps until one of them ends it.
    pub(super) async fn step_loop(&mut self) -> Result<TurnStatus, StoreError> {
        loop {
            match self.stop_reason() {
                Some(Stop::Cancelled) => return self.end(TurnStatus::Cancelled, None).await,
                Some(Stop::Interrupted) => return self.end(TurnStatus::Interrupted, None).await,
                None => {}
            }
            if let Some(reason) = self.abort.take() {
                // `completed` after the turn's reply, as a failed call is:
                // a retry would answer twice
                return self.cannot_go_on(reason).await;
            }
            if self.state.step >= self.rt.settings.max_steps {
                if self.state.delivered > 0 {
                    // the reply is out: the turn did its job, and a failure
                    // with retry advice would have a retry answer twice
                    tracing::info!(bot = %self.bot.id, turn = %self.turn, "step limit reached after the turn delivered: ending it completed");
                    return self.end(TurnStatus::Completed, None).await;
                }
                let error = format!(
                    "the turn took more than {} model steps, the most runtime.max_steps allows \
                     (a retry runs under the same limit: ask for less at a time, or have the \
                     fleet's operator raise it)",
                    self.rt.settings.max_steps
                );
                return self.fail(error).await;
            }
            if let Some(status) = self.before_request().await? {
                return Ok(status);
            }
            let response = match self.call_model().await {
                Ok(r) => r,
                Err(ModelError::Cancelled) => continue,
                Err(ModelError::Refused { refusal, .. }) => return self.refused(refusal).await,
                Err(ModelError::Aborted { reason, .. }) if std::mem::take(&mut self.looped) => {
                    if self.state.loop_retried {
                        return self.looped_again(&reason).await;
                    }
                    self.loop_reminder(&reason).await?;
                    continue;
                }
                Err(e) => return self.model_failed(e).await,
            };
            if response.finish == FinishReason::Length {
                match self.cut_off(&response).await? {
                    Some(status) => return Ok(status),
                    None => continue,
                }
            }
            let mut batch = self.step_batch(&response);
            if response.tool_calls.is_empty() {
                self.note_question_handed_on().await?;
                if let Some(reminder) = self.reminder_due(&response.text) {
                    self.commit(batch).await?;
                    self.remind(reminder).await?;
                    continue;
                }
                // a turn that asked others waits for their answers: it
                // completes (its notice says what it waits for), as a retry
                // would ask them again (`asked.rs`)
                let status = if self.state.owes_delivery
                    && self.state.delivered == 0
                    && !self.awaits_answers()
                {
                    TurnStatus::Undelivered
                } else {
                    TurnStatus::Completed
                };
                // the last step and the end of the turn commit together,
                // with word to the bots it still owes a reply
                let unanswered = self.no_reply_notices().await?;
                batch.extend(self.end_batch(status, None));
                batch.extend(unanswered);
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
}
