//! The writer's subagent rules: the end of a task turn (its status and
//! its report, `Mutation::EndSubagentTask`), the limit on a parent's
//! running subagents: a retry of a subagent's task (the limit checked,
//! its inputs requeued and its status set back to `running`, in the one
//! transaction), and the check of a start (`WriteLimit::RunningSubagents`).
//! `impl Writer`, split from `writer_apply.rs`.

use rusqlite::OptionalExtension;
use rusqlite::params;

use super::Touched;
use super::Writer;
use super::apply::set_subagent_status;
use crate::error::Result;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::TurnId;
use crate::ids::display_name_problem;
use crate::record::AdmitRequest;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;
use crate::record::SubagentStop;
use crate::store::mutation::Mutation;
use crate::store::mutation::MutationResult;

impl Writer {
    /// [`Mutation::EndSubagentTask`]: the end of a turn of `id`'s task.
    ///
    /// A subagent its parent stopped, maybe since its turn read it, writes
    /// nothing (the stop is final, and it reports nothing): `Count(0)`.
    ///
    /// A task that has more work waiting, a message of its parent (or a
    /// person's retry of its task) committed while the turn ran and not
    /// taken by it, is not over: it stays `running`, with this turn's
    /// result, and does not report: the turn over that work does, as the
    /// task's one report (`Count(1)`). Reported here, the parent had two
    /// reports of one task: this one, without the message it had sent,
    /// then the next turn's. (The interrupt such a message sends the
    /// running turn comes too late when the turn's last model answer was
    /// already in.)
    ///
    /// Otherwise its status and result are written and its report
    /// admitted: `Admitted` (`Count(1)` with no report to send).
    pub(super) fn end_subagent_task(
        &mut self,
        id: &BotId,
        status: SubagentStatus,
        result: Option<&str>,
        report: Option<&AdmitRequest>,
        now: i64,
        touched: &mut Touched,
    ) -> Result<MutationResult> {
        let current: Option<(String, String)> = self
            .conn
            .prepare_cached("SELECT parent, status FROM subagents WHERE id = ?1")?
            .query_row(params![id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((parent, current)) = current else {
            return Err(StoreError::NotFound {
                what: "subagent",
                id: id.to_string(),
            });
        };
        if current == SubagentStatus::Stopped.as_str() {
            // stopped by its parent, maybe since its turn read it: final,
            // and it reports nothing
            return Ok(MutationResult::Count(0));
        }
        let task = SessionKey {
            bot: id.clone(),
            kind: SessionKind::Subagent,
            peer: parent,
        };
        let more_work: bool = self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM inbox
                 WHERE bot_id = ?1 AND session_id = ?2 AND turn_id IS NULL)",
            )?
            .query_row(params![id.as_str(), task.id().to_string()], |r| r.get(0))?;
        if more_work {
            set_subagent_status(&self.conn, id, SubagentStatus::Running, result, now)?;
            return Ok(MutationResult::Count(1));
        }
        set_subagent_status(&self.conn, id, status, result, now)?;
        match report {
            Some(req) => self
                .admit(req, now, touched, true)
                .map(MutationResult::Admitted),
            None => Ok(MutationResult::Count(1)),
        }
    }

    /// [`Mutation::StopSubagent`]: `call` stops subagent `id`, from the
    /// status it has now. Its task may have ended since the call read it
    /// running (its report written): the stop records that it was `done`
    /// (or `failed`), so the call's answer says it had finished instead
    /// of "stopped" (before, the parent read "stopped" of a task whose
    /// report had gone out). One stopped already is left as it was
    /// (`Count(0)`): a stop is final, and its record says who stopped it.
    pub(super) fn stop_subagent(
        &mut self,
        id: &BotId,
        call: &str,
        now: i64,
        touched: &mut Touched,
    ) -> Result<MutationResult> {
        let current: Option<(String, i64)> = self
            .conn
            .prepare_cached("SELECT status, updated_at FROM subagents WHERE id = ?1")?
            .query_row(params![id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((status, since)) = current else {
            return Err(StoreError::NotFound {
                what: "subagent",
                id: id.to_string(),
            });
        };
        let from = SubagentStatus::parse(&status).ok_or_else(|| {
            StoreError::Rejected(format!("subagent {id} has an unknown status {status:?}"))
        })?;
        if from == SubagentStatus::Stopped {
            return Ok(MutationResult::Count(0));
        }
        set_subagent_status(&self.conn, id, SubagentStatus::Stopped, None, now)?;
        // after the status: an approval of a stopped subagent is expired
        // (`approvals.rs`)
        let expired = self.expire_approvals(Some(id), now, touched)?;
        let stop = SubagentStop {
            call: call.to_owned(),
            from,
            since,
            expired,
        };
        let json = serde_json::to_string(&stop)
            .map_err(|e| StoreError::Rejected(format!("cannot record the stop of {id}: {e}")))?;
        self.conn
            .prepare_cached("UPDATE subagents SET stop = ?2 WHERE id = ?1")?
            .execute(params![id.as_str(), json])?;
        Ok(MutationResult::Count(1))
    }

    /// [`Mutation::RequeueSubagentTask`]. The writer applies one batch at
    /// a time, so what this reads holds until its batch commits: of two
    /// retries at the limit only the first passes, and a new task of the
    /// parent committed before is counted.
    pub(super) fn requeue_subagent_task(
        &mut self,
        turn: TurnId,
        max_running: usize,
        touched: &mut Touched,
    ) -> Result<MutationResult> {
        let bot: Option<String> = self
            .conn
            .prepare_cached("SELECT bot_id FROM turns WHERE id = ?1")?
            .query_row(params![turn.to_string()], |r| r.get(0))
            .optional()?;
        let Some(bot) = bot else {
            return Err(StoreError::NotFound {
                what: "turn",
                id: turn.to_string(),
            });
        };
        let sub: Option<(String, String)> = self
            .conn
            .prepare_cached("SELECT parent, status FROM subagents WHERE id = ?1")?
            .query_row(params![bot], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((parent, status)) = sub else {
            return Err(StoreError::NotFound {
                what: "subagent",
                id: bot,
            });
        };
        if status == SubagentStatus::Stopped.as_str() {
            // its parent's stop is final: its turns are cancelled as they
            // start, a retried one too
            return Err(StoreError::Rejected(format!(
                "subagent {bot} was stopped by {parent} and takes no more work; ask {parent} to start a new task"
            )));
        }
        let was_running = status == SubagentStatus::Running.as_str();
        if !was_running {
            let running = self.running_besides(&parent, &bot)?;
            if running >= max_running {
                return Ok(MutationResult::SubagentLimit {
                    parent: BotId::new(parent)?,
                    running,
                });
            }
        }
        let requeued = self.apply(&Mutation::RequeueInputs { turn }, touched)?;
        if !was_running && requeued != MutationResult::Count(0) {
            // running again: counted by its parent's next Task, listed as
            // running by CheckSubagent, until the end of its turn sets it
            // done or failed (`EndSubagentTask`); the failed run's result
            // is not this run's
            self.conn
                .prepare_cached(
                    "UPDATE subagents SET status = ?2, result = NULL, updated_at = ?3 WHERE id = ?1",
                )?
                .execute(params![
                    bot,
                    SubagentStatus::Running.as_str(),
                    self.clock.now_ms()
                ])?;
        }
        Ok(requeued)
    }

    /// `WriteLimit::RunningSubagents`: whether `subagent` may run, read in
    /// the transaction that would start it (a new task, a finished one
    /// given more work): it runs already, or `parent` has fewer than `max`
    /// others running. Checked by the writer, so a start and a person's
    /// retry committed at the same moment cannot both pass the limit.
    pub(super) fn subagent_has_room(
        &mut self,
        parent: &BotId,
        subagent: &BotId,
        max: usize,
    ) -> Result<bool> {
        let status: Option<String> = self
            .conn
            .prepare_cached("SELECT status FROM subagents WHERE id = ?1")?
            .query_row(params![subagent.as_str()], |r| r.get(0))
            .optional()?;
        if status.as_deref() == Some(SubagentStatus::Running.as_str()) {
            return Ok(true);
        }
        Ok(self.running_besides(parent.as_str(), subagent.as_str())? < max)
    }

    /// `WriteLimit::SubagentRunning`: whether `subagent`'s status is
    /// `running`, read in the transaction that would give it a message.
    pub(super) fn subagent_running(&mut self, subagent: &BotId) -> Result<bool> {
        let status: Option<String> = self
            .conn
            .prepare_cached("SELECT status FROM subagents WHERE id = ?1")?
            .query_row(params![subagent.as_str()], |r| r.get(0))
            .optional()?;
        Ok(status.as_deref() == Some(SubagentStatus::Running.as_str()))
    }

    /// Names the subagents of `bot`, and `bot` itself when it is one,
    /// after their parents' names as stored now
    /// ([`SubagentRecord::name_under`]), in the transaction that upserts
    /// `bot`: a subagent's name holds its parent's (`Boss · audit the
    /// logs`), and a parent renamed (UpdateAgent, fleet.toml) left its
    /// subagents under the old name in the bot list, the web page and
    /// their conversations. Run at every upsert, as the owner's rule
    /// (`follow_owner`): a subagent's own write at a start, made from its
    /// record as read before its parent's, cannot put the old name back,
    /// and subagents of a parent renamed before this rule are named again
    /// at the next start. A name the rules of names would refuse (a
    /// room's speaker marker made of the two) is left as it was.
    pub(super) fn subagent_names_follow(&mut self, bot: &BotId, now: i64) -> Result<()> {
        let subs: Vec<(String, String, String, String)> = self
            .conn
            .prepare_cached(
                "SELECT s.id, s.description, b.name, p.name FROM subagents s
                 JOIN bots b ON b.id = s.id JOIN bots p ON p.id = s.parent
                 WHERE s.parent = ?1 OR s.id = ?1",
            )?
            .query_map(params![bot.as_str()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        for (id, description, name, parent_name) in subs {
            let want = SubagentRecord::name_under(&parent_name, &description);
            if want == name {
                continue;
            }
            if let Some(problem) = display_name_problem(&want) {
                tracing::warn!(bot = %id, %name, %want, %problem, "subagent keeps its name: its parent's name and its task's title make no name");
                continue;
            }
            self.conn
                .prepare_cached(
                    "UPDATE bots SET name = ?2, name_key = ?4, updated_at = ?3 WHERE id = ?1",
                )?
                .execute(params![id, want, now, crate::ids::name_key(&want)])?;
            tracing::info!(bot = %id, from = %name, to = %want, "subagent named after its parent's name");
        }
        Ok(())
    }

    /// Running subagents of `parent` other than `subagent`: a read of
    /// index `subagents_running` (migration 25; its `status = 'running'`
    /// is spelled out for SQLite to use it), not of every subagent the
    /// parent ever had.
    fn running_besides(&mut self, parent: &str, subagent: &str) -> Result<usize> {
        let running: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM subagents WHERE parent = ?1 AND status = 'running' AND id != ?2",
            )?
            .query_row(params![parent, subagent], |r| r.get(0))?;
        Ok(usize::try_from(running).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
#[path = "writer_subagents_tests.rs"]
mod tests;
