//! The writer's [`Mutation::Limited`](crate::Mutation::Limited): its limits checked in the open
//! transaction, then the writes of the branch they allow applied. `impl
//! Writer`, split from `writer_apply.rs`.

use super::Touched;
use super::Writer;
use crate::error::Result;
use crate::store::chains;
use crate::store::mutation::Limited;
use crate::store::mutation::MutationResult;
use crate::store::mutation::WriteLimit;
use crate::store::reader;

impl Writer {
    /// [`Mutation::Limited`](crate::Mutation::Limited). What a limit reads holds until the batch
    /// commits (the writer applies one batch at a time), and the writes of
    /// the batch before it are counted: of two calls that fit only one at
    /// a time, the second is refused, in one step or in two steps committed
    /// together.
    pub(super) fn apply_limited(
        &mut self,
        limited: &Limited,
        touched: &mut Touched,
    ) -> Result<MutationResult> {
        let mut refused = None;
        for (i, limit) in limited.limits.iter().enumerate() {
            if !self.has_room(&limit.bound)? {
                refused = Some(i);
                break;
            }
        }
        let writes = match refused.and_then(|i| limited.limits.get(i)) {
            Some(limit) => &limit.refused,
            None => &limited.within,
        };
        let results = writes
            .iter()
            .map(|m| self.apply(m, touched))
            .collect::<Result<Vec<_>>>()?;
        Ok(MutationResult::Limited { refused, results })
    }

    /// Whether `bound` has room for the writes it bounds.
    fn has_room(&mut self, bound: &WriteLimit) -> Result<bool> {
        match bound {
            WriteLimit::ChainMessages {
                origin,
                max,
                needed,
            } => {
                let room = chains::has_room(&self.conn, origin, *max, *needed)?;
                if !room {
                    tracing::warn!(chain = %origin.entry, max, "chain message bound reached");
                }
                Ok(room)
            }
            WriteLimit::RunningSubagents {
                parent,
                subagent,
                max,
            } => self.subagent_has_room(parent, subagent, *max),
            WriteLimit::SubagentRunning { subagent } => self.subagent_running(subagent),
            WriteLimit::BotNotRemoved { bot } => {
                let stored = reader::get_bot(&self.conn, bot)?;
                let room = stored.is_none_or(|b| b.removed_at().is_none());
                if !room {
                    tracing::info!(%bot, "a write of a removed bot's record was refused");
                }
                Ok(room)
            }
        }
    }
}
