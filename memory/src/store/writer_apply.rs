//! The writer's mutation dispatch: each [`Mutation`] applied to the open
//! transaction, turns, tool calls, usage, secrets, subagents and the
//! ledger inline, the rest through their topic's helpers. `impl Writer`.

use rusqlite::OptionalExtension;
use rusqlite::params;

use super::Touched;
use super::Writer;
use super::set_meta;
use crate::error::Result;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::TurnId;
use crate::record::AdmitOutcome;
use crate::record::SubagentStatus;
use crate::record::TurnStatus;
use crate::store::chains;
use crate::store::extractions;
use crate::store::mutation::Mutation;
use crate::store::mutation::MutationResult;
use crate::store::rooms;
use crate::store::routines;
use crate::store::signatures;

#[path = "writer_requeue.rs"]
mod requeue;

impl Writer {
    pub(super) fn apply(
        &mut self,
        mutation: &Mutation,
        touched: &mut Touched,
    ) -> Result<MutationResult> {
        let now = self.clock.now_ms();
        match mutation {
            Mutation::UpsertBot(bot) => {
                self.upsert_bot(bot, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::CreateBot(bot) => {
                self.create_bot(bot, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::EnsureSession(session) => {
                self.ensure_session(session, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::Admit(req) => self
                .admit(req, now, touched, true)
                .map(MutationResult::Admitted),
            Mutation::Append(entry) => {
                let (id, seq, gid, created_at) = self.append(entry, now, touched)?;
                Ok(MutationResult::Appended {
                    id,
                    seq,
                    gid,
                    created_at,
                })
            }
            Mutation::TellChain { origin, notice } => {
                if !chains::mark_told(&self.conn, origin, now)? {
                    return Ok(MutationResult::Done);
                }
                let (id, seq, gid, created_at) = self.append(notice, now, touched)?;
                Ok(MutationResult::Appended {
                    id,
                    seq,
                    gid,
                    created_at,
                })
            }
            Mutation::StartTurn {
                turn,
                bot,
                session,
                inputs,
                checkpoint,
                started_at,
            } => {
                let inputs_json = serde_json::to_string(inputs).unwrap_or_else(|_| "[]".into());
                self.conn
                    .prepare_cached(
                        "INSERT INTO turns (id, bot_id, session_id, status, inputs, checkpoint, attempts, started_at)
                         VALUES (?1, ?2, ?3, 'running', ?4, ?5, 1, ?6)",
                    )?
                    .execute(params![
                        turn.to_string(),
                        bot.as_str(),
                        session.to_string(),
                        inputs_json,
                        checkpoint.to_string(),
                        started_at
                    ])?;
                // the stored turn counts its own starts (`attempts`): the
                // inputs' count of starts before it is over
                let mut consume = self.conn.prepare_cached(
                    "UPDATE inbox SET turn_id = ?1, starts = 0
                     WHERE gid = ?2 AND bot_id = ?3 AND turn_id IS NULL",
                )?;
                for gid in inputs {
                    consume.execute(params![turn.to_string(), *gid, bot.as_str()])?;
                }
                Ok(MutationResult::Done)
            }
            Mutation::Checkpoint { turn, checkpoint } => {
                let n = self
                    .conn
                    .prepare_cached("UPDATE turns SET checkpoint = ?2 WHERE id = ?1")?
                    .execute(params![turn.to_string(), checkpoint.to_string()])?;
                expect_row(n, "turn", *turn)?;
                Ok(MutationResult::Done)
            }
            Mutation::BumpAttempts { turn } => {
                let attempts: Option<i64> = self
                    .conn
                    .prepare_cached(
                        "UPDATE turns SET attempts = attempts + 1 WHERE id = ?1 RETURNING attempts",
                    )?
                    .query_row(params![turn.to_string()], |r| r.get(0))
                    .optional()?;
                match attempts {
                    Some(a) => Ok(MutationResult::Attempts(a)),
                    None => Err(StoreError::NotFound {
                        what: "turn",
                        id: turn.to_string(),
                    }),
                }
            }
            Mutation::ResetAttempts { turn } => {
                let n = self
                    .conn
                    .prepare_cached("UPDATE turns SET attempts = 1 WHERE id = ?1")?
                    .execute(params![turn.to_string()])?;
                expect_row(n, "turn", *turn)?;
                Ok(MutationResult::Done)
            }
            Mutation::CountStart { bot, inputs } => self.count_start(bot, inputs),
            Mutation::ToolStarted {
                turn,
                call_id,
                ordinal,
                name,
                arguments,
            } => {
                let n = self
                    .conn
                    .prepare_cached(
                        "INSERT INTO tool_calls (turn_id, call_id, ordinal, name, arguments, status, started_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, 'started', ?6)
                         ON CONFLICT (turn_id, call_id) DO NOTHING",
                    )?
                    .execute(params![turn.to_string(), call_id, ordinal, name, arguments, now])?;
                if n == 0 {
                    return Err(StoreError::Rejected(format!(
                        "tool call {call_id} of turn {turn} was already started"
                    )));
                }
                Ok(MutationResult::Done)
            }
            Mutation::ToolFinished {
                turn,
                call_id,
                outcome,
                is_error,
            } => {
                let n = self
                    .conn
                    .prepare_cached(
                        "UPDATE tool_calls SET status = 'done', outcome = ?3, is_error = ?4, ended_at = ?5
                         WHERE turn_id = ?1 AND call_id = ?2 AND status != 'done'",
                    )?
                    .execute(params![turn.to_string(), call_id, outcome, is_error, now])?;
                if n == 0 {
                    return Err(StoreError::Rejected(format!(
                        "tool call {call_id} of turn {turn} is unknown or already done"
                    )));
                }
                Ok(MutationResult::Done)
            }
            Mutation::EndTurn {
                turn,
                status,
                error,
            } => {
                let before: Option<(String, String)> = self
                    .conn
                    .prepare_cached("SELECT bot_id, status FROM turns WHERE id = ?1")?
                    .query_row(params![turn.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                let Some((bot, was)) = before else {
                    return Err(StoreError::NotFound {
                        what: "turn",
                        id: turn.to_string(),
                    });
                };
                self.conn
                    .prepare_cached(
                        "UPDATE turns SET status = ?2, error = ?3, ended_at = ?4 WHERE id = ?1",
                    )?
                    .execute(params![turn.to_string(), status.as_str(), error, now])?;
                self.count_turn_end(&bot, &was, *status)?;
                Ok(MutationResult::Done)
            }
            Mutation::RequeueInputs { turn } => self.requeue_inputs(*turn, touched),
            Mutation::Limited(limited) => self.apply_limited(limited, touched),
            Mutation::RequeueSubagentTask { turn, max_running } => {
                self.requeue_subagent_task(*turn, *max_running, touched)
            }
            Mutation::AddUsage {
                bot,
                day,
                turns,
                usage,
            } => {
                self.conn
                    .prepare_cached(
                        "INSERT INTO bot_usage (bot_id, day, turns, calls, prompt_tokens, prefix_tokens, cached_tokens, completion_tokens)
                         VALUES (?1, ?2, ?8, ?3, ?4, ?5, ?6, ?7)
                         ON CONFLICT (bot_id, day) DO UPDATE SET turns = turns + excluded.turns, calls = calls + excluded.calls,
                           prompt_tokens = prompt_tokens + excluded.prompt_tokens,
                           prefix_tokens = prefix_tokens + excluded.prefix_tokens,
                           cached_tokens = cached_tokens + excluded.cached_tokens,
                           completion_tokens = completion_tokens + excluded.completion_tokens",
                    )?
                    .execute(params![
                        bot.as_str(),
                        day,
                        usage.calls,
                        stored_count(usage.prompt_tokens),
                        stored_count(usage.prefix_tokens),
                        stored_count(usage.cached_tokens),
                        stored_count(usage.completion_tokens),
                        turns
                    ])?;
                Ok(MutationResult::Done)
            }
            Mutation::OweExtraction(owed) => {
                extractions::owe(&self.conn, owed, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::ClearExtraction { turn } => {
                extractions::clear(&self.conn, *turn).map(MutationResult::Count)
            }
            Mutation::BumpExtraction { turn } => {
                extractions::bump(&self.conn, *turn).map(MutationResult::Attempts)
            }
            Mutation::SetEpoch { session, epoch } => {
                self.conn
                    .prepare_cached("UPDATE sessions SET epoch = ?2 WHERE id = ?1")?
                    .execute(params![session.to_string(), epoch])?;
                Ok(MutationResult::Done)
            }
            Mutation::SetSecret { owner, name, value } => {
                // a new name past the limit is refused, in the writer:
                // checked before, concurrent writes of new names passed it
                let stored: i64 = self
                    .conn
                    .prepare_cached("SELECT count(*) FROM user_secrets WHERE owner = ?1")?
                    .query_row(params![owner.as_str()], |r| r.get(0))?;
                let stored = usize::try_from(stored).unwrap_or(usize::MAX);
                if stored >= crate::store::MAX_SECRETS_PER_USER {
                    let known = self
                        .conn
                        .prepare_cached(
                            "SELECT 1 FROM user_secrets WHERE owner = ?1 AND name = ?2",
                        )?
                        .exists(params![owner.as_str(), name])?;
                    if !known {
                        return Ok(MutationResult::SecretLimit { stored });
                    }
                }
                self.conn
                    .prepare_cached(
                        "INSERT INTO user_secrets (owner, name, value, updated_at) VALUES (?1, ?2, ?3, ?4)
                         ON CONFLICT (owner, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    )?
                    .execute(params![owner.as_str(), name, value.expose(), now])?;
                Ok(MutationResult::Done)
            }
            Mutation::DeleteSecret { owner, name } => {
                let n = self
                    .conn
                    .prepare_cached("DELETE FROM user_secrets WHERE owner = ?1 AND name = ?2")?
                    .execute(params![owner.as_str(), name])?;
                Ok(MutationResult::Count(n))
            }
            Mutation::CreateSubagent(sub) => {
                // who gave the task, and where in the session it came
                // from (migration 33): whether a new owner of the bot may
                // read it (`floor_task_of_unread_origin`)
                self.conn
                    .prepare_cached(
                        "INSERT INTO subagents (id, parent, parent_session, description, status, result, created_at, updated_at,
                                                given_by, given_seq)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7,
                                 (SELECT owner FROM sessions WHERE id = ?3),
                                 (SELECT MAX(seq) FROM entries WHERE session_id = ?3))",
                    )?
                    .execute(params![
                        sub.id.as_str(),
                        sub.parent.as_str(),
                        sub.parent_session.to_string(),
                        sub.description,
                        sub.status.as_str(),
                        sub.result,
                        now
                    ])?;
                Ok(MutationResult::Done)
            }
            Mutation::SetSubagentStatus { id, status, result } => {
                set_subagent_status(&self.conn, id, *status, result.as_deref(), now)?;
                Ok(MutationResult::Done)
            }
            Mutation::WithholdSubagentTask {
                id,
                description,
                result,
            } => {
                // (the right-hand sides read the row as it was)
                self.conn
                    .prepare_cached(
                        "UPDATE subagents SET description = ?2,
                           result = CASE WHEN result IS NULL THEN NULL ELSE ?3 END,
                           withheld_description = COALESCE(withheld_description, description),
                           withheld_result = CASE WHEN withheld_description IS NULL
                             THEN result ELSE withheld_result END
                         WHERE id = ?1",
                    )?
                    .execute(params![id.as_str(), description, result])?;
                Ok(MutationResult::Done)
            }
            Mutation::RestoreSubagentTask {
                id,
                withheld_result,
            } => {
                self.conn
                    .prepare_cached(
                        "UPDATE subagents SET description = withheld_description,
                           result = CASE WHEN result = ?2 THEN withheld_result ELSE result END,
                           withheld_description = NULL, withheld_result = NULL
                         WHERE id = ?1 AND withheld_description IS NOT NULL",
                    )?
                    .execute(params![id.as_str(), withheld_result])?;
                Ok(MutationResult::Done)
            }
            Mutation::StopSubagent { id, call } => self.stop_subagent(id, call, now, touched),
            Mutation::EndSubagentTask {
                id,
                status,
                result,
                report,
            } => self.end_subagent_task(
                id,
                *status,
                result.as_deref(),
                report.as_deref(),
                now,
                touched,
            ),
            Mutation::PutRoutine(r) => {
                routines::put(&self.conn, r)?;
                Ok(MutationResult::Done)
            }
            Mutation::DeleteRoutine { bot, name } => {
                routines::delete(&self.conn, bot, name).map(MutationResult::Count)
            }
            Mutation::AdvanceRoutine {
                bot,
                name,
                slot_ms,
                fired,
                next_fire_ms,
            } => {
                routines::advance(&self.conn, bot, name, *slot_ms, *fired, *next_fire_ms)?;
                Ok(MutationResult::Done)
            }
            Mutation::CreateRoom(room) => {
                rooms::create_room(&self.conn, room)?;
                // a new room signals its (empty) timeline with seq 0, so
                // that its owner's open lists learn of it; an append in
                // the same group raises it to that entry's seq
                touched.entry(room.timeline().id()).or_insert(0);
                Ok(MutationResult::Done)
            }
            Mutation::AdmitToRoom {
                request,
                room,
                poster,
                members,
                shared,
                state,
                notices,
            } => {
                let outcome = self.admit(request, now, touched, false)?;
                // a key the ledger cannot judge, to a room no message can
                // reach now (closed, its members changed): refused as a
                // new key would be, not `unknown` ("send with a new key",
                // which is refused the same way: QA, 2026-12-06)
                if let AdmitOutcome::Unknown { .. } = &outcome {
                    rooms::ensure_postable(&self.conn, room, poster, members, *shared)?;
                }
                if let AdmitOutcome::Accepted(rec) = &outcome {
                    rooms::ensure_postable(&self.conn, room, poster, members, *shared)?;
                    rooms::insert_run(&self.conn, room, rec.seq, state, now)?;
                    for notice in notices {
                        self.append(notice, now, touched)?;
                    }
                }
                Ok(MutationResult::Admitted(outcome))
            }
            Mutation::SetRoomMembers {
                room,
                from,
                to,
                shared,
                notice,
                fresh_start,
            } => {
                let changed = rooms::set_members(&self.conn, room, from, to, *shared, now)?;
                if changed {
                    let (_, seq, _, _) = self.append(notice, now, touched)?;
                    let change = newcomers::Change { room, from, to };
                    self.welcome_newcomers(&change, seq, fresh_start.as_deref(), now, touched)?;
                }
                Ok(MutationResult::Count(usize::from(changed)))
            }
            Mutation::CloseRoom { room, notice } => {
                let closed = rooms::close_room(&self.conn, room, now)?;
                if closed {
                    self.append(notice, now, touched)?;
                }
                Ok(MutationResult::Count(usize::from(closed)))
            }
            Mutation::SaveRoomRun {
                room,
                trigger_seq,
                status,
                state,
            } => {
                rooms::save_run(&self.conn, room, *trigger_seq, *status, state, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::RequestApproval(new) => self
                .request_approval(new, now, touched)
                .map(|o| MutationResult::ApprovalRequested(Box::new(o))),
            Mutation::DecideApproval { id, decision, by } => self
                .decide_approval(*id, *decision, by, now, touched)
                .map(|r| MutationResult::ApprovalChanged(Box::new(r))),
            Mutation::ConsumeApproval { id } => self
                .consume_approval(*id, now)
                .map(|r| MutationResult::ApprovalChanged(Box::new(r))),
            Mutation::ExpireApprovals { bot } => self
                .expire_approvals(bot.as_ref(), now, touched)
                .map(MutationResult::Count),
            Mutation::RecordReview(review) => {
                self.record_review(review, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::Memory(op) => crate::layers::apply(&self.conn, op, now)
                .map(|r| MutationResult::Memory(Box::new(r))),
            Mutation::PruneChains { before_ms, origins } => Ok(MutationResult::Count(
                chains::prune(&self.conn, *before_ms, origins)?,
            )),
            Mutation::RememberSignature {
                source,
                signature,
                delivery,
                digest,
                until_ms,
                max_kept,
            } => {
                let signed = signatures::Signed {
                    source,
                    signature,
                    delivery,
                    digest,
                    until_ms: *until_ms,
                    max_kept: *max_kept,
                };
                signatures::remember(&self.conn, &signed, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::PruneLedger { before_ms } => {
                let before_ms = *before_ms;
                signatures::prune_expired(&self.conn, now)?;
                // A row goes when both its admission and its key's own time
                // (a UUIDv7's) are past the new horizon. A key stamped ahead
                // of this host's clock (a sender's clock running fast) is
                // kept until the admission guard answers `unknown` for it,
                // so its retry is a duplicate, never admitted again.
                let n = self
                    .conn
                    .prepare_cached(
                        "DELETE FROM ledger
                         WHERE created_at < ?1 AND (nonce_ms IS NULL OR nonce_ms < ?1)",
                    )?
                    .execute(params![before_ms])?;
                // `>=`: a replay of the same prune after its transaction
                // was rolled back (its group had a failing batch) found the
                // horizon raised in memory and wrote no meta row, so a
                // restart forgot it (audit)
                if before_ms >= self.horizon_ms {
                    self.horizon_ms = before_ms;
                    set_meta(
                        &self.conn,
                        "ledger_pruned_before_ms",
                        &before_ms.to_string(),
                    )?;
                }
                Ok(MutationResult::Count(n))
            }
            Mutation::LedgerHorizon { at_ms } => {
                if *at_ms >= self.horizon_ms {
                    self.horizon_ms = *at_ms;
                    // read back at the next start as a restore's is
                    set_meta(&self.conn, "restored_at_ms", &at_ms.to_string())?;
                }
                Ok(MutationResult::Done)
            }
            Mutation::Probe { at } => {
                set_meta(&self.conn, "store_probe_ms", &at.to_string())?;
                Ok(MutationResult::Done)
            }
        }
    }
}

pub(super) fn set_subagent_status(
    conn: &rusqlite::Connection,
    id: &BotId,
    status: SubagentStatus,
    result: Option<&str>,
    now: i64,
) -> Result<()> {
    // running again (given more work, its task retried) without a result
    // yet: the last run's result is no answer to the new work (CheckSubagent
    // showed it as the result of the run under way; QA)
    let n = conn
        .prepare_cached(
            "UPDATE subagents SET status = ?2, \
             result = CASE WHEN ?2 = 'running' THEN ?3 ELSE COALESCE(?3, result) END, \
             updated_at = ?4 WHERE id = ?1",
        )?
        .execute(params![id.as_str(), status.as_str(), result, now])?;
    if n == 0 {
        return Err(StoreError::NotFound {
            what: "subagent",
            id: id.to_string(),
        });
    }
    Ok(())
}

impl Writer {
    /// Moves an ended turn between the counts of `turn_counts` (migration
    /// 11): the ended turns of each bot per status, read by the bot list
    /// in one lookup. Ending a turn is the one write that changes its
    /// status (it starts running, and running turns are counted in
    /// `turns_open`), so the counts stay exact in the transaction that
    /// ends it. About 4-6 µs of writer time per turn; an index on
    /// turns(bot_id, status) or triggers cost more (the migration says
    /// why). A new write that changes a turn's status must count it here.
    fn count_turn_end(&self, bot: &str, was: &str, status: TurnStatus) -> Result<()> {
        if was == status.as_str() {
            return Ok(());
        }
        if was != TurnStatus::Running.as_str() {
            self.conn
                .prepare_cached(
                    "UPDATE turn_counts SET n = n - 1 WHERE bot_id = ?1 AND status = ?2",
                )?
                .execute(params![bot, was])?;
        }
        if status != TurnStatus::Running {
            self.conn
                .prepare_cached(
                    "INSERT INTO turn_counts (bot_id, status, n) VALUES (?1, ?2, 1)
                     ON CONFLICT (bot_id, status) DO UPDATE SET n = n + 1",
                )?
                .execute(params![bot, status.as_str()])?;
        }
        Ok(())
    }

    /// [`Mutation::CountStart`]: one more start of a turn over each of
    /// `inputs` still pending, unless this writer counted it already
    /// (once per process); the count of each.
    fn count_start(&self, bot: &BotId, inputs: &[i64]) -> Result<MutationResult> {
        let mut bump = self.conn.prepare_cached(
            "UPDATE inbox SET starts = starts + 1
             WHERE gid = ?1 AND bot_id = ?2 AND turn_id IS NULL RETURNING starts",
        )?;
        let mut read = self.conn.prepare_cached(
            "SELECT starts FROM inbox WHERE gid = ?1 AND bot_id = ?2 AND turn_id IS NULL",
        )?;
        let mut counts = Vec::with_capacity(inputs.len());
        for gid in inputs {
            let stmt = if self.counted_start(*gid) {
                &mut read
            } else {
                &mut bump
            };
            let starts: Option<i64> = stmt
                .query_row(params![gid, bot.as_str()], |r| r.get(0))
                .optional()?;
            if let Some(starts) = starts {
                counts.push((*gid, starts));
            }
        }
        Ok(MutationResult::StartCounts(counts))
    }
}

fn expect_row(n: usize, what: &'static str, id: TurnId) -> Result<()> {
    if n == 0 {
        Err(StoreError::NotFound {
            what,
            id: id.to_string(),
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
#[path = "subagent_end_tests.rs"]
mod subagent_end_tests;

/// A change of members that gives users a room (`Mutation::SetRoomMembers`).
#[path = "writer_newcomers.rs"]
mod newcomers;

/// A token count as SQLite stores it: past `i64::MAX` it is that (an `as`
/// cast went negative, and a negative day's usage turned the bot's daily
/// budget off: QA).
fn stored_count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
