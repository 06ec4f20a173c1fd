//! [`Mutation::RequeueInputs`](crate::store::mutation::Mutation): a
//! finished turn's inputs back in the inbox, refused once a later turn of
//! its conversation had them before the model. `impl Writer`, split from
//! `writer_apply.rs`.

use std::collections::HashSet;

use rusqlite::OptionalExtension;
use rusqlite::params;

use super::super::Touched;
use super::super::Writer;
use crate::error::Result;
use crate::error::StoreError;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::record::TurnStatus;
use crate::store::mutation::MutationResult;

/// One of the turn's inputs it still holds.
struct Held {
    gid: i64,
    seq: i64,
}

/// A later turn of the conversation whose context held the inputs.
struct Later {
    turn: String,
    running: bool,
    /// How it ended (`completed`, `undelivered`, …), once it has.
    status: String,
}

impl Writer {
    /// Puts the inputs `turn` still holds back in the inbox, answering
    /// their count. Refused while the turn runs, for a completed turn, and
    /// once a later turn of the same bot and session (its inputs come
    /// after these, so its context held them) runs or had the model
    /// answer: the retried turn's context ends at its own inputs
    /// (`ContextBound`), so it would answer them again without the rest
    /// of the conversation. Read in the transaction of the requeue, so a
    /// later turn's first step committed before it is seen.
    pub(super) fn requeue_inputs(
        &mut self,
        turn: TurnId,
        touched: &mut Touched,
    ) -> Result<MutationResult> {
        let row: Option<(String, String, String, String)> = self
            .conn
            .prepare_cached("SELECT bot_id, session_id, inputs, status FROM turns WHERE id = ?1")?
            .query_row(params![turn.to_string()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()?;
        let Some((bot, session, inputs, status)) = row else {
            return Err(StoreError::NotFound {
                what: "turn",
                id: turn.to_string(),
            });
        };
        if status == TurnStatus::Running.as_str() {
            return Err(StoreError::Rejected(format!(
                "turn {turn} is still running; wait for it to end before retrying"
            )));
        }
        if status == TurnStatus::Completed.as_str() {
            return Err(StoreError::Rejected(format!(
                "turn {turn} completed: its inputs were answered"
            )));
        }
        let gids = parse_inputs(&inputs)?;
        let turn = turn.to_string();
        // only inputs this turn still holds: one queued again or claimed
        // by a later turn since is not this turn's to retry (the caller
        // says so when none is left)
        let mut held = Vec::with_capacity(gids.len());
        {
            let mut read = self.conn.prepare_cached(
                "SELECT seq FROM inbox WHERE gid = ?2 AND bot_id = ?1 AND turn_id = ?3",
            )?;
            for &gid in &gids {
                if let Some(seq) = read
                    .query_row(params![bot, gid, turn], |r| r.get(0))
                    .optional()?
                {
                    held.push(Held { gid, seq });
                }
            }
        }
        let Some(first) = held.iter().min_by_key(|h| h.gid) else {
            // none held: named where they are now, so the person retries
            // the turn that has them (QA: "already retried or taken by a
            // later turn" left them to find it)
            if let Some(holder) = self.holder(&bot, &gids)? {
                return Err(StoreError::Rejected(holder));
            }
            return Ok(MutationResult::Count(0));
        };
        // an interrupted turn requeues its own inputs in the batch that
        // ends it (a person's retry finds none held after that): its end
        // must not fail on this check, and no later turn can have run
        // while it did
        if status != TurnStatus::Interrupted.as_str()
            && let Some(later) = self.later_turn(&bot, &session, &turn, first, &held)?
        {
            let kind: Option<String> = self
                .conn
                .prepare_cached("SELECT kind FROM sessions WHERE id = ?1")?
                .query_row(params![session], |r| r.get(0))
                .optional()?;
            return Err(StoreError::Rejected(later_message(&later, kind.as_deref())));
        }
        let mut requeue = self.conn.prepare_cached(
            "UPDATE inbox SET turn_id = NULL WHERE gid = ?2 AND bot_id = ?1 AND turn_id = ?3",
        )?;
        let mut n = 0;
        for h in &held {
            n += requeue.execute(params![bot, h.gid, turn])?;
        }
        if n > 0 {
            // a retry writes no entry, and nothing told the other clients
            // of the conversation that the bot works on it again until the
            // retried turn stored its first step (QA: another tab of the
            // page showed it idle, with no Stop, through a slow first
            // model call): its change stream signals the session at its
            // latest seq, and a client reading after it finds nothing new
            // but reads the bot again
            let last: i64 = self
                .conn
                .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM entries WHERE session_id = ?1")?
                .query_row(params![session], |r| r.get(0))?;
            let at = touched.entry(session.parse::<SessionId>()?).or_insert(0);
            *at = (*at).max(last);
        }
        Ok(MutationResult::Count(n))
    }

    /// Where the first of `gids` (inputs of a turn that holds none of
    /// them now) is: queued again, or the turn that took it and how that
    /// one went, said as what to do; `None` when the inbox keeps no row.
    fn holder(&mut self, bot: &str, gids: &[i64]) -> Result<Option<String>> {
        let Some(&gid) = gids.iter().min() else {
            return Ok(None);
        };
        let row: Option<Option<String>> = self
            .conn
            .prepare_cached("SELECT turn_id FROM inbox WHERE gid = ?2 AND bot_id = ?1")?
            .query_row(params![bot, gid], |r| r.get(0))
            .optional()?;
        let Some(holder) = row else {
            return Ok(None);
        };
        let Some(other) = holder else {
            return Ok(Some(
                "its inputs were retried already and wait to be answered: nothing to retry"
                    .to_owned(),
            ));
        };
        let status: Option<String> = self
            .conn
            .prepare_cached("SELECT status FROM turns WHERE id = ?1")?
            .query_row(params![other], |r| r.get(0))
            .optional()?;
        Ok(Some(match status.as_deref() {
            Some("completed") => {
                format!(
                    "its inputs were taken by turn {other}, which answered them: nothing to retry"
                )
            }
            Some("failed" | "cancelled" | "undelivered") => format!(
                "its inputs were taken by turn {other}, which ended {}: retry that turn instead",
                status.as_deref().unwrap_or_default()
            ),
            // running (stored or on its first model call), interrupted
            // (its inputs go back with its end)
            _ => format!(
                "its inputs were taken by turn {other}, which is answering them: wait for it to end"
            ),
        }))
    }

    /// A turn of `bot` in `session` other than `turn` over an input after
    /// `first` (so its context held `first`) that `turn` does not hold,
    /// running or one in which the model answered (it wrote an assistant
    /// entry). A turn over only inputs `turn` holds is an earlier attempt
    /// at them (interrupted by a newer message, which `turn` holds too):
    /// its context ended before what `turn` holds, and it was named "a
    /// later turn" when its inputs were more than one (QA, 2026-12-05:
    /// such a failed turn could not be retried, its messages left
    /// unanswered).
    fn later_turn(
        &mut self,
        bot: &str,
        session: &str,
        turn: &str,
        first: &Held,
        held: &[Held],
    ) -> Result<Option<Later>> {
        let after_ours = |inputs: &[i64]| {
            inputs
                .iter()
                .any(|g| *g > first.gid && !held.iter().any(|h| h.gid == *g))
        };
        // a running turn is stored from its first step on; one running
        // before that is the caller's to check (the bot knows it)
        let running: Vec<(String, String)> = self
            .conn
            .prepare_cached(
                "SELECT id, inputs FROM turns INDEXED BY turns_open
                 WHERE bot_id = ?1 AND status = 'running' AND session_id = ?2 AND id != ?3",
            )?
            .query_map(params![bot, session, turn], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (id, inputs) in running {
            if after_ours(&parse_inputs(&inputs)?) {
                return Ok(Some(Later {
                    turn: id,
                    running: true,
                    status: "running".to_owned(),
                }));
            }
        }
        // the model's answers after the input, read by the session's
        // (session, seq) index; a turn is looked at once
        let answered: Vec<String> = self
            .conn
            .prepare_cached(
                "SELECT turn_id FROM entries
                 WHERE session_id = ?1 AND seq > ?2 AND kind = 'assistant' AND author = ?3
                   AND turn_id IS NOT NULL AND turn_id != ?4
                 ORDER BY seq",
            )?
            .query_map(params![session, first.seq, bot, turn], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let mut seen = HashSet::new();
        let mut read = self
            .conn
            .prepare_cached("SELECT inputs, status FROM turns WHERE id = ?1 AND session_id = ?2")?;
        for id in answered {
            if !seen.insert(id.clone()) {
                continue;
            }
            let Some((inputs, status)) = read
                .query_row(params![id, session], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .optional()?
            else {
                continue;
            };
            // an earlier turn retried since answers after these inputs
            // too, but over its own older inputs: its context stops
            // before these, and the retried turn sees its answer
            if after_ours(&parse_inputs(&inputs)?) {
                return Ok(Some(Later {
                    turn: id,
                    running: false,
                    status,
                }));
            }
        }
        Ok(None)
    }
}

/// A turn's stored `inputs` (gids).
fn parse_inputs(inputs: &str) -> Result<Vec<i64>> {
    serde_json::from_str(inputs).map_err(|e| StoreError::Corrupt {
        table: "turns",
        detail: e.to_string(),
    })
}

/// Why a later turn blocks the retry, and what to do instead, for a
/// session of `kind`. Nobody sends a message into a routine's or a
/// webhook's session, and a routine's later run does not hold a failed
/// run's prompt (it runs the routine's prompt in its place, docs/
/// operations.md): "had these messages in its context … send a new
/// message instead" was false there, and could not be followed (QA).
fn later_message(later: &Later, kind: Option<&str>) -> String {
    let turn = &later.turn;
    match (kind, later.running) {
        (Some("routine"), true) => {
            return format!(
                "a later run of this routine ({turn}) is running in this run's place (a \
                 routine's next run takes the place of the runs that failed before it): wait \
                 for it to end; if it fails, retry that one"
            );
        }
        (Some("routine"), false) => {
            return format!(
                "a later run of this routine ({turn}) ran in this run's place (a routine's next \
                 run takes the place of the runs that failed before it): there is nothing left \
                 to retry; retry the routine's last run if it failed, or wait for its next slot"
            );
        }
        (Some("hook"), true) => {
            return format!(
                "a later run of this webhook ({turn}) is running with this delivery in its \
                 context: wait for it to end; it answers this delivery too (a retry would answer \
                 it a second time, without what came after)"
            );
        }
        (Some("hook"), false) => {
            return format!(
                "a later run of this webhook ({turn}) had this delivery in its context and \
                 already answered: there is nothing left to retry (a retry would answer it a \
                 second time, without what came after)"
            );
        }
        _ => {}
    }
    if later.running {
        format!(
            "a later turn of this conversation ({}) is running with these messages in its context: wait for it to end; if it answers them, send a new message instead (a retry would answer them a second time, without what came after)",
            later.turn
        )
    } else if matches!(
        later.status.as_str(),
        "undelivered" | "failed" | "cancelled"
    ) {
        // it had them, and did not reply (QA, 2026-12-06: "already
        // answered" of an undelivered turn, whose retry did work)
        format!(
            "a later turn of this conversation ({turn}) had these messages in its context and ended {status}: retry that turn instead (`botfleet retry {turn}`), which answers them with what came after (a retry of this one would answer them without it)",
            turn = later.turn,
            status = later.status
        )
    } else {
        format!(
            "a later turn of this conversation ({}) had these messages in its context and already answered; a retry would answer them a second time, without what came after: send a new message instead",
            later.turn
        )
    }
}
