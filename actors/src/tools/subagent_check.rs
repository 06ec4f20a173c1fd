//! CheckSubagent: a parent reads how its subagents do, all of them in a
//! list or one in detail: its status, its result, its last message (its
//! progress while it works, its report once done) and its latest steps.
//! It only reads: the subagents it shows go on as they were.

use async_trait::async_trait;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::SubagentRecord;
use botfleet_memory::SubagentStatus;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::super::Effect;
use super::super::Tool;
use super::super::ToolContext;
use super::super::ToolError;
use super::super::ToolOutput;
use super::super::parse_args;
use super::own_subagent;
use super::store_error;
use super::subagent_session;
use crate::model::ToolSpec;

/// Finished subagents the list shows, the latest ones: a bot that
/// delegates for months has thousands, and the list is read into its
/// context at every check. Running ones are all shown (at most
/// `runtime.max_subagents`).
const FINISHED_SHOWN: usize = 20;

/// Finished subagents whose ids the refusal of an unknown id names, the
/// latest ones ([`ids_to_use`]).
pub(super) const FINISHED_NAMED: usize = 5;

/// Shows the subagents (all, or one in detail).
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckSubagent;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckArgs {
    #[serde(default)]
    id: Option<String>,
}

#[async_trait]
impl Tool for CheckSubagent {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "CheckSubagent".into(),
            description: "Show your delegated tasks and their status, or one subagent's status and latest progress.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Internal
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: CheckArgs = parse_args("CheckSubagent", args)?;
        let Some(id) = args.id else {
            let (mut list, left_out) = ctx
                .store()
                .subagents_listed(&ctx.bot.id, FINISHED_SHOWN)
                .await
                .map_err(store_error)?;
            as_of_step(ctx, &mut list).await?;
            if list.is_empty() {
                return Ok(ToolOutput::text(if ctx.may_use("Task") {
                    "you have not delegated anything (start with Task)"
                } else {
                    "you have not delegated anything"
                }));
            }
            return Ok(ToolOutput::text(task_list(&list, left_out)));
        };
        let mut sub = own_subagent(ctx, &id).await?;
        // its own status changes of the step only (no other subagent read)
        for m in ctx.step_effects.iter().flat_map(Mutation::within_limits) {
            if let Mutation::SetSubagentStatus { id, status, result } = m
                && *id == sub.id
            {
                given_status(&mut sub, *status, result.as_ref());
            }
        }
        let session = subagent_session(&sub.id, &ctx.bot.id).id();
        let mut recent = ctx
            .store()
            .tail_entries(session, 64)
            .await
            .map_err(store_error)?;
        // a task its owner reads from a change of owner on (given in the
        // former owner's DM): what came before is not theirs, nor their
        // bot's to quote (review: CheckSubagent quoted the task the
        // session's floor hid)
        if let Some((from, _)) = ctx
            .store()
            .session_floor(session, &ctx.bot.owner)
            .await
            .map_err(store_error)?
        {
            recent.retain(|e| e.seq >= from);
        }
        // its last message: progress while it works, its report once done
        let last_message = recent.iter().rev().find_map(|e| match &e.kind {
            EntryKind::Delivery { text, .. } => Some(text.chars().take(300).collect::<String>()),
            _ => None,
        });
        let progress: Vec<String> = recent
            .iter()
            .skip(recent.len().saturating_sub(8))
            .filter_map(|e| match &e.kind {
                EntryKind::Assistant {
                    text, tool_calls, ..
                } if !text.is_empty() || !tool_calls.is_empty() => {
                    let text: String = text.chars().take(200).collect();
                    let calls: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
                    let calls = calls.join(" ");
                    // the parts it has, one space between (a step of calls
                    // alone read `#2  SendMessage`)
                    let parts: Vec<&str> = [text.as_str(), calls.as_str()]
                        .into_iter()
                        .filter(|p| !p.is_empty())
                        .collect();
                    Some(format!("#{} {}", e.seq, parts.join(" ")))
                }
                // its task and the work given to it since (MessageSubagent:
                // `message from <parent>`): where a run begins, told apart
                // from the last run's steps
                EntryKind::Event { origin, text, .. } => Some(format!(
                    "#{} {origin}: {}",
                    e.seq,
                    text.chars().take(200).collect::<String>()
                )),
                EntryKind::Delivery { text, .. } => Some(format!(
                    "#{} reported: {}",
                    e.seq,
                    text.chars().take(300).collect::<String>()
                )),
                _ => None,
            })
            .collect();
        Ok(ToolOutput::text(format!(
            "subagent {} [{}]: {}\nresult: {}\nlast message: {}\nlatest progress:\n{}",
            sub.id,
            sub.status.as_str(),
            sub.description,
            // a stopped one reports nothing: "(none yet)" read as if a
            // result might still come (QA, 2026-12-05)
            sub.result.as_deref().unwrap_or(match sub.status {
                SubagentStatus::Stopped => "(none: it was stopped, and reports nothing)",
                _ => "(none yet)",
            }),
            last_message.as_deref().unwrap_or("(none yet)"),
            if progress.is_empty() {
                "(nothing yet)".to_owned()
            } else {
                progress.join("\n")
            }
        )))
    }
}

/// `list` as the step's earlier calls leave it, their writes not yet
/// committed: the subagents they start (Task) added, those they give
/// more work (MessageSubagent) running again. Before, a Task and a
/// CheckSubagent in one step listed no such task, and a finished subagent
/// given more work showed as done: a model could take its Task for
/// failed and delegate the work again (QA). A stop (StopSubagent) is
/// committed as it is called, so the store has it.
async fn as_of_step(
    ctx: &ToolContext<'_>,
    list: &mut Vec<SubagentRecord>,
) -> Result<(), ToolError> {
    for m in ctx.step_effects.iter().flat_map(Mutation::within_limits) {
        match m {
            Mutation::CreateSubagent(s)
                if s.parent == ctx.bot.id && !list.iter().any(|l| l.id == s.id) =>
            {
                list.push(s.clone());
            }
            Mutation::SetSubagentStatus { id, status, result } => {
                if let Some(l) = list.iter_mut().find(|l| l.id == *id) {
                    given_status(l, *status, result.as_ref());
                } else if let Some(mut s) = ctx
                    .store()
                    .subagent_of(&ctx.bot.id, id.as_str())
                    .await
                    .map_err(store_error)?
                {
                    // a finished one older than the list shows
                    given_status(&mut s, *status, result.as_ref());
                    list.push(s);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `sub` with a status the step gave it (and its result, if one came).
fn given_status(sub: &mut SubagentRecord, status: SubagentStatus, result: Option<&String>) {
    sub.status = status;
    if let Some(r) = result {
        sub.result = Some(r.clone());
    }
}

/// The list view: `list` (every running subagent and the
/// [`FINISHED_SHOWN`] latest finished ones, in creation order, as the
/// store lists them), and how many earlier finished ones are left out.
fn task_list(list: &[SubagentRecord], left_out: usize) -> String {
    let mut lines: Vec<String> = list
        .iter()
        .map(|s| format!("- {} [{}] {}", s.id, s.status.as_str(), s.description))
        .collect();
    if left_out > 0 {
        lines.push(format!(
            "({left_out} earlier finished tasks not shown; CheckSubagent with an id shows any of them)"
        ));
    }
    format!("your delegated tasks:\n{}", lines.join("\n"))
}

/// The next step of a call naming a subagent the caller does not have:
/// the ids it may have meant, every running subagent's and the
/// [`FINISHED_NAMED`] latest finished ones' (`list`, in creation order,
/// as the store lists them), and how many earlier ones (`left_out`) are
/// not named. The refusal stays in the parent's context for good: naming
/// every subagent ever made grew it by 23 KB after a thousand tasks, at
/// each mistyped id.
pub(super) fn ids_to_use(list: &[SubagentRecord], left_out: usize) -> String {
    if list.is_empty() {
        return "start one with Task".to_owned();
    }
    let running: Vec<&str> = list
        .iter()
        .filter(|s| s.status == SubagentStatus::Running)
        .map(|s| s.id.as_str())
        .collect();
    let finished: Vec<&str> = list
        .iter()
        .filter(|s| s.status != SubagentStatus::Running)
        .map(|s| s.id.as_str())
        .collect();
    let mut known = Vec::with_capacity(2);
    if !running.is_empty() {
        known.push(format!("running: {}", running.join(", ")));
    }
    if !finished.is_empty() {
        known.push(format!("latest finished: {}", finished.join(", ")));
    }
    let mut next = format!("use the id of one of your subagents ({})", known.join("; "));
    if left_out > 0 {
        next.push_str(&format!(
            "; {left_out} earlier finished ones are not named here: CheckSubagent without an id lists your tasks"
        ));
    }
    next
}

#[cfg(test)]
#[path = "subagent_check_tests.rs"]
mod tests;
