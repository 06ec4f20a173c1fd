//! What a turn writes: each step, the calls' outcomes and the end of the
//! turn, committed through the store's single writer. `impl Runner`,
//! split from `runner.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Runner {
    /// Commits a batch and feeds the entries it appended to the tail.
    pub(super) async fn commit(
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
        let upserted: Vec<botfleet_memory::BotId> = batch
            .iter()
            .filter_map(|m| match m {
                Mutation::UpsertBot(b) => Some(b.id.clone()),
                _ => None,
            })
            .collect();
        let results = self.rt.store.write(batch).await?;
        self.start_pending = false;
        if let Ok(router) = self.rt.router() {
            for bot in upserted {
                // an active bot re-reads its record; an inactive one reads it on activation
                let _ = router.cast(crate::router::RouterMsg::Reload(bot));
            }
        }
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

    pub(super) fn entry(&self, id: EntryId, kind: EntryKind) -> Mutation {
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
    pub(super) fn step_batch(&mut self, response: &ModelResponse) -> Vec<Mutation> {
        let step = self.state.step;
        self.state.step += 1;
        if let Some(t) = &mut self.texts {
            t.assistant(&response.text);
        }
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

    pub(super) async fn fail(&mut self, error: String) -> Result<TurnStatus, StoreError> {
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

    pub(super) async fn end(
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
    pub(super) fn end_batch(
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
                usage: (self.usage.calls > 0).then_some(self.usage),
            },
        ));
        if status == TurnStatus::Interrupted {
            batch.push(Mutation::RequeueInputs { turn: self.turn });
        }
        if self.usage.calls > 0 {
            let day = self.rt.store.clock().now().format("%Y-%m-%d").to_string();
            batch.push(Mutation::AddUsage {
                bot: self.bot.id.clone(),
                day,
                turns: 1,
                usage: self.usage,
            });
        }
        if self.bot.origin.starts_with("subagent:") {
            let sub_status = match status {
                TurnStatus::Completed => Some(SubagentStatus::Done),
                TurnStatus::Failed | TurnStatus::Undelivered => Some(SubagentStatus::Failed),
                TurnStatus::Cancelled => Some(SubagentStatus::Stopped),
                TurnStatus::Running | TurnStatus::Interrupted => None,
            };
            if let Some(sub_status) = sub_status {
                batch.push(Mutation::SetSubagentStatus {
                    id: self.bot.id.clone(),
                    status: sub_status,
                    result: self.last_delivery.clone().or_else(|| self.error.clone()),
                });
            }
        }
        batch
    }
}
