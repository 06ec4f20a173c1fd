//! The writer's limit on a parent's running subagents: a retry of a
//! subagent's task (the limit checked, its inputs requeued and its status
//! set back to `running`, in the one transaction), and the check of a
//! start (`WriteLimit::RunningSubagents`). `impl Writer`, split from
//! `writer_apply.rs`.

use rusqlite::OptionalExtension;
use rusqlite::params;

use super::Touched;
use super::Writer;
use crate::error::Result;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::TurnId;
use crate::record::SubagentStatus;
use crate::store::mutation::Mutation;
use crate::store::mutation::MutationResult;

impl Writer {
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
            // done or failed (`EndSubagentTask`)
            self.conn
                .prepare_cached("UPDATE subagents SET status = ?2, updated_at = ?3 WHERE id = ?1")?
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

    /// Running subagents of `parent` other than `subagent`.
    fn running_besides(&mut self, parent: &str, subagent: &str) -> Result<usize> {
        let running: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM subagents WHERE parent = ?1 AND status = ?2 AND id != ?3",
            )?
            .query_row(
                params![parent, SubagentStatus::Running.as_str(), subagent],
                |r| r.get(0),
            )?;
        Ok(usize::try_from(running).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
#[path = "writer_subagents_tests.rs"]
mod tests;
