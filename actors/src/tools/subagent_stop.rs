//! StopSubagent: a parent stops its subagent for good. The stop is in the
//! store before the subagent's running turn is cancelled, so that turn
//! ends as the stop of a subagent (no report, no retry), never as a
//! person's cancel of its task (`engine/persist.rs`, `subagent_end`).
//! A subagent already stopped is left alone: the call says when it
//! stopped and its last result. A finished one (done, failed) is stopped
//! too — it may still be given work: a room it is a member of, an
//! approval that wakes it to repeat a call — and the answer says it had
//! finished, when, and its last result (kept: CheckSubagent shows it), so
//! that what became of its task is not lost in `[stopped]`. Which of
//! these it was is decided as the stop commits, not as the call read it:
//! a task that ended in between (its report gone out to the parent) is
//! answered as finished, and a task the stop caught reports nothing
//! (`Mutation::StopSubagent`, `Mutation::EndSubagentTask`): one outcome.
//!
//! The stop expires the subagent's open approvals (pending, or approved
//! and not used yet) in the same write, with their cards: a stopped
//! subagent takes no more work, so it never reads a decision or repeats
//! the call, and the person must not be asked to decide something moot
//! (every read already reports them `expired`, `subagent_stopped`:
//! memory `store/approvals.rs`).

use std::time::Duration;

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::Mutation;
use botfleet_memory::SubagentRecord;
use botfleet_memory::SubagentStatus;
use botfleet_memory::SubagentStop;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::super::Effect;
use super::super::Tool;
use super::super::ToolContext;
use super::super::ToolError;
use super::super::ToolOutput;
use super::super::parse_args;
use super::ids::creating_call;
use super::made_in_step;
use super::own_subagent;
use super::store_error;
use crate::model::ToolSpec;
use crate::router::RouterMsg;

/// Stops a subagent.
#[derive(Debug, Clone, Copy, Default)]
pub struct StopSubagent;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StopArgs {
    id: String,
}

#[async_trait]
impl Tool for StopSubagent {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "StopSubagent".into(),
            description:
                "Stop a subagent: its running step is cancelled and it takes no more work.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "additionalProperties": false
            }),
        }
    }

    /// External, not internal: the stop must be in the store before the
    /// subagent's turn is cancelled (a cancelled task turn that read its
    /// subagent still running would fail the task, report it to the
    /// parent and offer a retry, as for a person's cancel). So the call
    /// writes it itself, recorded as started first, and then cancels.
    fn effect(&self) -> Effect {
        Effect::External
    }

    /// A call cut off by a crash runs again. The stop's write records the
    /// call that stopped ([`Mutation::StopSubagent`]), so a call run again
    /// after its stop was written finds its own stop and answers what it
    /// did (before, it answered "already stopped …; nothing was done" of
    /// its own stop); else it stops the subagent. Its outcome is recorded
    /// once.
    fn idempotent(&self) -> bool {
        true
    }

    /// A stop takes work away and adds none: it never waits for a person
    /// deciding on an approval (`gate::is_side_effect`), as it did not
    /// when it was internal.
    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: StopArgs = parse_args("StopSubagent", args)?;
        if let Some(made) = made_in_step(ctx, &args.id) {
            // its Task commits with this step: there is nothing to stop
            // yet (it was told "you have no subagent", QA 2026-12-05)
            return Err(ToolError::new(
                format!(
                    "subagent {} is started by your Task call of this same step: it starts \
                     once this step's calls are done, so there is nothing to stop yet",
                    made.id
                ),
                "if you no longer want its task done, stop it with StopSubagent in your next step",
            ));
        }
        let sub = own_subagent(ctx, &args.id).await?;
        stop(ctx, &sub).await
    }
}

/// Stops `sub`, the caller's subagent as the call read it: its task may
/// have ended since (its report written), or it may have been stopped by
/// this very call before a crash cut the call off. What the answer says
/// is what the stop recorded as it committed ([`SubagentStop`]), never
/// what the read found.
async fn stop(ctx: &ToolContext<'_>, sub: &SubagentRecord) -> Result<ToolOutput, ToolError> {
    let call = creating_call(ctx);
    if sub.status != SubagentStatus::Stopped {
        // one transaction: decided on its status as it commits, its
        // approvals expired, how it was stopped recorded
        ctx.store()
            .write(vec![Mutation::StopSubagent {
                id: sub.id.clone(),
                call: call.clone(),
            }])
            .await
            .map_err(|e| {
                ToolError::new(
                    format!("could not stop subagent {}: {e}", sub.id),
                    "try again",
                )
            })?;
    }
    let recorded = ctx
        .store()
        .subagent_stop(&sub.id)
        .await
        .map_err(store_error)?;
    // as it is now: its result is its task's, if that ended meanwhile
    let now = ctx
        .store()
        .get_subagent(&sub.id)
        .await
        .map_err(store_error)?
        .unwrap_or_else(|| sub.clone());
    let Some(stop) = recorded.filter(|s| s.call == call) else {
        // stopped before (by an earlier call): nothing to write or
        // cancel. Saying "stopped" read as if this call had stopped it.
        return Ok(ToolOutput::text(already_stopped(&now)));
    };
    if let Ok(router) = ctx.rt.router() {
        let bot = sub.id.clone();
        // best effort: a subagent that is not active has nothing to
        // cancel, and one that starts later is cancelled as it starts
        let _ = router
            .call(
                |reply| RouterMsg::Cancel { bot, reply },
                Some(Duration::from_secs(5)),
            )
            .await;
    }
    let mut answer = stopped(&sub.id, stop.expired);
    match stop.from {
        SubagentStatus::Done | SubagentStatus::Failed => {
            answer.push_str(&had_finished(&now, &stop));
        }
        SubagentStatus::Running | SubagentStatus::Stopped => {}
    }
    Ok(ToolOutput::text(answer))
}

/// The answer to a stop: the subagent, and how many of its approvals the
/// stop's write expired (a person was asked to decide them; they are
/// void now).
fn stopped(id: &BotId, expired: usize) -> String {
    match expired {
        0 => format!("stopped subagent {id}"),
        1 => format!(
            "stopped subagent {id}; 1 approval it asked for is expired now: its action will not run"
        ),
        n => format!(
            "stopped subagent {id}; {n} approvals it asked for are expired now: their actions will not run"
        ),
    }
}

/// Most characters of a stopped subagent's last result (report or error)
/// quoted in the answer to another stop (CheckSubagent shows it whole).
const RESULT_CHARS: usize = 300;

/// The answer to a stop of a subagent that is stopped already: since when
/// (its record's last change is the stop: a stopped subagent's record
/// changes no more) and its last result (report or error), if any.
fn already_stopped(sub: &SubagentRecord) -> String {
    format!(
        "subagent {} ({:?}) was already stopped at {}; nothing was done. Final state: stopped, {}",
        sub.id,
        sub.description,
        when(sub),
        last_result(sub)
    )
}

/// What the answer to a stop adds for a subagent that had finished its
/// task (done or failed) when the stop committed: when (its record's last
/// change before the stop was its end), how, and its last result, which
/// the stop keeps.
fn had_finished(sub: &SubagentRecord, stop: &SubagentStop) -> String {
    format!(
        ". It had finished its task ({:?}) at {}: {}, {}; now it takes no more work",
        sub.description,
        minute(stop.since),
        stop.from.as_str(),
        last_result(sub)
    )
}

/// The minute of a subagent record's last change.
fn when(sub: &SubagentRecord) -> String {
    minute(sub.updated_at)
}

/// The minute of `ms`.
fn minute(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| format!("{ms} ms"))
}

/// A subagent's last result (report or error), quoted short, or that it
/// never reported.
fn last_result(sub: &SubagentRecord) -> String {
    match sub.result.as_deref().map(str::trim) {
        Some(r) if !r.is_empty() => {
            let mut quoted: String = r.chars().take(RESULT_CHARS).collect();
            if r.chars().count() > RESULT_CHARS {
                quoted.push_str("… (CheckSubagent shows it whole)");
            }
            format!("last result: {quoted}")
        }
        Some(_) | None => "no result (it never reported)".to_owned(),
    }
}

#[cfg(test)]
#[path = "subagent_stop_tests.rs"]
mod tests;
