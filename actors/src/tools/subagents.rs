//! Subagents: Task starts a child bot with a fresh context and a narrower
//! tool set, returning its id at once; CheckSubagent, MessageSubagent and
//! StopSubagent observe, steer and stop it. A subagent is a bot (origin
//! `subagent:<parent>`) run by the same machinery as every bot: its turns
//! are checkpointed and resume after a crash, its transcript is its own
//! (searchable, never in the parent's context). Its SendMessage while it
//! works is progress, recorded in its session (CheckSubagent shows it);
//! when its turn ends, its last message is its report, delivered to the
//! parent's session as one message that wakes the parent (written with
//! the end of the turn: `engine/persist.rs`), one per task: a steering
//! message is sent only while the subagent still runs when it commits
//! (`WriteLimit::SubagentRunning`; one committed after the task ended is
//! refused as finished), and a turn that ends with one waiting leaves
//! the report to the turn over it (`Mutation::EndSubagentTask`). A user's
//! message that interrupts the parent does not touch it.
//!
//! A task and a message to a subagent are hops like a message to another
//! bot, and the report one more: a parent woken by a report that delegates
//! again continues the count of the person's request, so a chain of tasks
//! stops at `runtime.max_hops` like a chain of SendToAgent.
//!
//! `runtime.max_subagents` is checked twice: by the call (its refusal
//! names how many run), and by the store's writer as the call's outcome
//! commits (`WriteLimit::RunningSubagents`), where a person's retry of a
//! subagent's task committed since the call's read is counted too.

use async_trait::async_trait;
use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::Limit;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SubagentRecord;
use botfleet_memory::SubagentStatus;
use botfleet_memory::WriteLimit;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::Effect;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::agents::Cut;
use super::agents::TextProblem;
use super::agents::answer_budget_spent;
use super::agents::bounded;
use super::agents::chain_limit;
use super::agents::check_text;
use super::agents::hop_budget_spent;
use super::agents::refused_outcome;
use super::agents::text_problem;
use super::parse_args;
use crate::model::ToolSpec;
use crate::prompts::prompts;

/// StopSubagent.
#[path = "subagent_stop.rs"]
mod stop;
pub use stop::StopSubagent;

/// CheckSubagent.
#[path = "subagent_check.rs"]
mod check;
pub use check::CheckSubagent;

/// A subagent's id, derived from the Task call, and what a call does when
/// it is held.
#[path = "subagent_ids.rs"]
mod ids;
use ids::ChildId;

/// A subagent's display name, from its parent's and its task's title.
#[path = "subagent_names.rs"]
mod names;

/// Tools a subagent may have (of its parent's).
const SUBAGENT_TOOLS: &[&str] = &[
    "SendMessage",
    "Read",
    "Write",
    "Edit",
    "Shell",
    "SearchTranscript",
    "ReadTranscript",
];

/// Longest task description.
const MAX_DESCRIPTION_CHARS: usize = 200;

fn store_error(e: impl std::fmt::Display) -> ToolError {
    ToolError::new(
        format!("could not read the subagent records: {e}"),
        "try again",
    )
}

/// The role of a subagent of `parent` for the task titled `description`
/// (prompts/subagent_role.md): Task gives it, and a start gives it again
/// when it withholds or shows again the title (`fleet_withheld.rs`).
pub(crate) fn subagent_role(parent: &BotId, description: &str) -> String {
    prompts()
        .subagent_role
        .render(&[("parent", parent.as_str()), ("description", description)])
        .unwrap_or_default()
}

/// The subagent session of `child` (its conversation with its parent).
pub(crate) fn subagent_session(child: &BotId, parent: &BotId) -> SessionKey {
    SessionKey {
        bot: child.clone(),
        kind: SessionKind::Subagent,
        peer: parent.to_string(),
    }
}

/// The hop of the parent's input to its subagent: one more than the
/// parent's turn, like a message to another bot. The subagent's report is
/// one hop more and must fit in the budget too (a parent that delegated
/// counts on it), so an input whose report could not come back is not
/// sent: the hop-budget refusal. With it, the chain's bound on its
/// breadth for the call of `tool` (the input and its report must fit),
/// which the writer checks. `cut` is what a refusal cuts off: a new
/// subagent's task ([`Cut::Task`]: the person's notice names the task,
/// the subagent is never made) or more work for one ([`Cut::Work`]).
async fn hop_to_child(
    ctx: &ToolContext<'_>,
    tool: &str,
    child: &BotId,
    cut: Cut<'_>,
    next_step: &str,
) -> Result<(u32, Option<Limit>), ToolError> {
    let hop = ctx.scope.hop.saturating_add(1);
    if hop.saturating_add(1) > ctx.rt.settings.max_hops {
        return Err(hop_budget_spent(ctx, child, hop, cut, next_step).await);
    }
    // in a conversation another bot started, this bot owes it an answer,
    // one hop after the report
    if ctx.scope.session.key.kind == SessionKind::Agent
        && hop.saturating_add(2) > ctx.rt.settings.max_hops
    {
        return Err(answer_budget_spent(ctx, child, hop, cut, next_step).await);
    }
    Ok((hop, chain_limit(ctx, tool, child, cut, next_step).await))
}

/// A parent's input to its subagent (the task or a steering message) at
/// `hop`.
fn input_to_child(
    ctx: &ToolContext<'_>,
    child: &BotId,
    origin: String,
    text: &str,
    part: &str,
    hop: u32,
) -> Mutation {
    let key = subagent_session(child, &ctx.bot.id);
    Mutation::Admit(Box::new(AdmitRequest {
        source: format!("bot:{}", ctx.bot.id),
        nonce: format!("{}:{}:{part}", ctx.turn, ctx.call_id),
        nonce_time_ms: None,
        digest: InputDigest::of_parts([
            part.as_bytes(),
            child.as_str().as_bytes(),
            text.as_bytes(),
        ]),
        entry: NewEntry {
            id: EntryId::derive(ctx.turn, ctx.call_id, part),
            session: key.id(),
            author: ctx.bot.id.to_string(),
            turn: None,
            kind: EntryKind::Event {
                origin,
                text: text.to_owned(),
                trusted: true,
                hop: Some(hop),
                chain: ctx.scope.chain,
                asked: None,
            },
        },
        session: key,
        owner: ctx.bot.owner.clone(),
        // the parent is the subagent's person: its inputs owe a report
        priority: Priority::UserDm,
    }))
}

/// The caller's subagent `id`: one an earlier call of this step starts
/// (Task, not committed yet), or one in the store. A MessageSubagent to a
/// subagent whose Task was in the same step was told "you have no
/// subagent" (QA, 2026-12-05).
async fn own_subagent(ctx: &ToolContext<'_>, id: &str) -> Result<SubagentRecord, ToolError> {
    if let Some(made) = made_in_step(ctx, id) {
        return Ok(made);
    }
    let store = ctx.store();
    if let Some(sub) = store
        .subagent_of(&ctx.bot.id, id.trim())
        .await
        .map_err(store_error)?
    {
        return Ok(sub);
    }
    let (known, left_out) = store
        .subagents_listed(&ctx.bot.id, check::FINISHED_NAMED)
        .await
        .map_err(store_error)?;
    // (QA: an empty `id` was told `you have no subagent ""`)
    let problem = if id.trim().is_empty() {
        "`id` is empty: give the id of one of your subagents (Task returned it)".to_owned()
    } else {
        format!("you have no subagent {id:?}")
    };
    let error = ToolError::new(problem, check::ids_to_use(&known, left_out));
    Err(if known.is_empty() {
        error.or_without("Task", "you have no subagents: tell your person instead")
    } else {
        error
    })
}

/// The subagent `id` of the caller's that an earlier call of this step
/// starts (Task), not committed yet.
fn made_in_step(ctx: &ToolContext<'_>, id: &str) -> Option<SubagentRecord> {
    let id = id.trim();
    ctx.step_effects
        .iter()
        .flat_map(Mutation::within_limits)
        .find_map(|m| match m {
            Mutation::CreateSubagent(s) if s.id.as_str() == id && s.parent == ctx.bot.id => {
                Some(s.clone())
            }
            _ => None,
        })
}

/// Starts a subagent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Task;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskArgs {
    description: String,
    prompt: String,
}

#[async_trait]
impl Tool for Task {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Task".into(),
            description: "Delegate a task to a new subagent with a fresh context. Returns its id at once; its report arrives later as a new message that wakes you.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A short title of the task: one line of plain text (it names the subagent)."},
                    "prompt": {"type": "string", "description": "Everything the subagent needs to know to do it."}
                },
                "required": ["description", "prompt"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Internal
    }

    fn idempotent(&self) -> bool {
        false
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: TaskArgs = parse_args("Task", args)?;
        let description = args.description.trim();
        if let Some((_, problem)) =
            text_problem("description", &args.description, MAX_DESCRIPTION_CHARS)
        {
            return Err(ToolError::new(
                problem,
                "give the task a short title and put the details in `prompt`",
            ));
        }
        let name = names::subagent_name(&ctx.bot.name, description)?;
        let prompt = check_text(
            "Task",
            "prompt",
            "everything the subagent needs to know to do the task",
            &args.prompt,
            ctx.limits().max_message_chars,
        )
        .map_err(|e| match e.kind {
            // split over several calls, a task would be several subagents,
            // each with a part of it (QA)
            TextProblem::TooLong => ToolError::new(
                e.error.message,
                "shorten `prompt`: Write the long material to a file of the workspace (the \
                 subagent reads the same files) and name the file in the prompt",
            )
            .or_without(
                "Write",
                "shorten `prompt` to what the task needs, naming the files of the workspace the \
                 subagent should read",
            ),
            TextProblem::Empty => e.error,
        })?;
        let started = |id: &BotId| {
            format!(
                "{STARTED}{id} for {description:?}; it works on its own and its report will arrive later as a new message. Check it with CheckSubagent."
            )
        };
        let id = match ids::child_id(ctx).await? {
            ChildId::Free(id) => id,
            // this call made it before a crash cut the turn off
            ChildId::Made(id) => return Ok(ToolOutput::text(started(&id))),
        };
        let (hop, chain) = hop_to_child(
            ctx,
            "Task",
            &id,
            Cut::Task(description),
            "answer the person with SendMessage with what you have instead of delegating more",
        )
        .await?;
        let more = "wait for their reports, or stop one with StopSubagent";
        check_room_for_one_more(ctx, more).await?;
        let limits = chain
            .into_iter()
            .chain([subagent_limit(ctx, "Task", &id, more)])
            .collect();
        let role = subagent_role(&ctx.bot.id, description);
        let now = ctx.rt.store.clock().now_ms();
        let tools: Vec<String> = ctx
            .bot
            .tools
            .iter()
            .filter(|t| SUBAGENT_TOOLS.contains(&t.as_str()))
            .cloned()
            .collect();
        let child = BotRecord {
            id: id.clone(),
            name,
            owner: ctx.bot.owner.clone(),
            role,
            provider: ctx.bot.provider.clone(),
            tools: if tools.iter().any(|t| t == "SendMessage") {
                tools
            } else {
                std::iter::once("SendMessage".to_owned())
                    .chain(tools)
                    .collect()
            },
            settings: json!({
                "parent": ctx.bot.id,
                (ids::CREATED_BY_CALL): ids::creating_call(ctx),
            }),
            origin: format!("subagent:{}", ctx.bot.id),
            created_at: now,
            updated_at: now,
        };
        let record = SubagentRecord {
            id: id.clone(),
            parent: ctx.bot.id.clone(),
            parent_session: ctx.session(),
            description: description.to_owned(),
            status: SubagentStatus::Running,
            result: None,
            created_at: now,
            updated_at: now,
        };
        let task = input_to_child(
            ctx,
            &id,
            format!("task from {}", ctx.bot.id),
            &prompt,
            "task",
            hop,
        );
        Ok(ToolOutput {
            content: started(&id),
            effects: bounded(
                vec![
                    // never an upsert: a bot that took the id since it was
                    // read is not taken over (the step fails to commit, and
                    // its call, run again, takes the next id)
                    Mutation::CreateBot(child),
                    Mutation::CreateSubagent(record),
                    task,
                ],
                limits,
            ),
            delivered: false,
        })
    }
}

/// Steers a running subagent.
#[derive(Debug, Clone, Copy, Default)]
pub struct MessageSubagent;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageArgs {
    id: String,
    text: String,
}

#[async_trait]
impl Tool for MessageSubagent {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "MessageSubagent".into(),
            description: "Send a subagent more instructions; it takes them into account as soon as it can (a model call under way is cut short; a tool call already running, such as a Shell command, finishes first).".into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "string"}, "text": {"type": "string"}},
                "required": ["id", "text"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Internal
    }

    fn idempotent(&self) -> bool {
        false
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: MessageArgs = parse_args("MessageSubagent", args)?;
        let text = check_text(
            "MessageSubagent",
            "text",
            "the message to send",
            &args.text,
            ctx.limits().max_message_chars,
        )?;
        let sub = own_subagent(ctx, &args.id).await?;
        refuse_former_owners_task(ctx, &sub).await?;
        let more = "wait for their reports, or stop one with StopSubagent, before giving a \
                    finished subagent more work";
        let restart = match sub.status {
            SubagentStatus::Stopped => {
                return Err(ToolError::new(
                    format!("subagent {} was stopped", sub.id),
                    "start a new one with Task",
                )
                .or_without("Task", "tell your person instead"));
            }
            // a finished subagent runs again: it counts like a new one
            SubagentStatus::Done | SubagentStatus::Failed => {
                check_room_for_one_more(ctx, more).await?;
                Some(subagent_limit(ctx, "MessageSubagent", &sub.id, more))
            }
            // steering of the running task: only while it runs, which the
            // writer checks as the message commits (its task may end since
            // this read, its report written)
            SubagentStatus::Running => Some(Limit {
                bound: WriteLimit::SubagentRunning {
                    subagent: sub.id.clone(),
                },
                refused: vec![refused_outcome(
                    ctx,
                    "MessageSubagent",
                    &finished_meanwhile(&sub.id),
                )],
            }),
        };
        let (hop, chain) = hop_to_child(
            ctx,
            "MessageSubagent",
            &sub.id,
            Cut::Work,
            "answer the person with SendMessage with what you have instead of steering the subagent",
        )
        .await?;
        let msg = input_to_child(
            ctx,
            &sub.id,
            format!("message from {}", ctx.bot.id),
            &text,
            "steer",
            hop,
        );
        Ok(ToolOutput {
            content: format!("sent to subagent {}", sub.id),
            effects: bounded(
                vec![
                    msg,
                    Mutation::SetSubagentStatus {
                        id: sub.id,
                        status: SubagentStatus::Running,
                        result: None,
                    },
                ],
                chain.into_iter().chain(restart).collect(),
            ),
            delivered: false,
        })
    }
}

/// Refuses a message to a subagent whose task is a former owner's
/// (`engine::task_is_former_owners`): every turn of it ends
/// `owner_changed` without running. Recorded in its task session, the
/// message was read by the former owner once the bot was given back to
/// them, with the task session whole again (review: the new owner's
/// steering, with what their bot put in it, was theirs to read and
/// search).
async fn refuse_former_owners_task(
    ctx: &ToolContext<'_>,
    sub: &SubagentRecord,
) -> Result<(), ToolError> {
    if !crate::engine::task_is_former_owners(ctx.store(), sub, ctx.bot)
        .await
        .map_err(store_error)?
    {
        return Ok(());
    }
    Err(ToolError::new(
        format!(
            "subagent {}'s task was given while this bot had another owner, and it is theirs: it \
             does not run for your owner, and the message was not sent",
            sub.id
        ),
        "start a new subagent with Task for this work",
    )
    .or_without("Task", "tell your person instead"))
}

/// The refusal of a message to a subagent whose task ended after the call
/// read it running: the message was not sent, its task's report is on its
/// way, and a new message gives it new work (as to any finished one).
fn finished_meanwhile(id: &BotId) -> ToolError {
    ToolError::new(
        format!(
            "subagent {id} had already finished its task when your message reached it: the \
             message was not sent. Its report (or why it could not finish) comes to you as a \
             new message"
        ),
        "read its report when it arrives; to give it more work, call MessageSubagent again \
         (it then runs again, counted against your running subagents)",
    )
}

/// Refuses one more running subagent of the caller when
/// `runtime.max_subagents` already run: those running in the store, and
/// those this step starts (new ones, finished ones given more work).
async fn check_room_for_one_more(ctx: &ToolContext<'_>, next_step: &str) -> Result<(), ToolError> {
    let store = ctx.store();
    // the running ones only: no finished subagent is read
    let running = store
        .running_subagents_of(&ctx.bot.id)
        .await
        .map_err(store_error)?;
    let mut starting = 0;
    for m in ctx.step_effects.iter().flat_map(Mutation::within_limits) {
        starting += match m {
            Mutation::CreateSubagent(_) => 1,
            // a finished subagent of the caller given more work
            Mutation::SetSubagentStatus {
                id,
                status: SubagentStatus::Running,
                ..
            } if !running.iter().any(|s| s.id == *id)
                && store
                    .subagent_of(&ctx.bot.id, id.as_str())
                    .await
                    .map_err(store_error)?
                    .is_some() =>
            {
                1
            }
            _ => 0,
        };
    }
    let running = running.len() + starting;
    let max = ctx.rt.settings.max_subagents;
    if running >= max {
        return Err(too_many(running, max, next_step));
    }
    Ok(())
}

/// The refusal of one more running subagent.
fn too_many(running: usize, max: usize, next_step: &str) -> ToolError {
    // nothing to wait for nor stop (QA: "you already have 0 running
    // subagents (the limit is 0)… wait for their reports")
    if max == 0 {
        return ToolError::new(
            "this host runs no subagents (runtime.max_subagents is 0)",
            "do the work yourself, or answer the person with SendMessage that delegating is \
             off on this host",
        );
    }
    ToolError::new(
        format!(
            "you already have {} (the limit is {max})",
            running_subagents(running)
        ),
        next_step,
    )
}

/// "1 running subagent", "3 running subagents".
pub(crate) fn running_subagents(n: usize) -> String {
    if n == 1 {
        "1 running subagent".to_owned()
    } else {
        format!("{n} running subagents")
    }
}

/// `runtime.max_subagents` for the writer to check as the outcome of the
/// call of `tool` that would run `subagent` commits: a person's retry of
/// another subagent's task may have taken the last place since
/// [`check_room_for_one_more`] read. Then the call is refused the same way
/// (its parent has the limit's count running: the writer lets no more
/// run).
fn subagent_limit(ctx: &ToolContext<'_>, tool: &str, subagent: &BotId, next_step: &str) -> Limit {
    let max = ctx.rt.settings.max_subagents;
    Limit {
        bound: WriteLimit::RunningSubagents {
            parent: ctx.bot.id.clone(),
            subagent: subagent.clone(),
            max,
        },
        refused: vec![refused_outcome(ctx, tool, &too_many(max, max, next_step))],
    }
}

/// How Task's result begins, before the id of the subagent it started.
const STARTED: &str = "started subagent ";

/// The id of the subagent a Task result `content` says it started: what
/// a turn asked is named by it, so that the subagent it then steers
/// (MessageSubagent) is not named a second time, and two tasks of one
/// title are two (QA).
pub(crate) fn started_in(content: &str) -> Option<&str> {
    content
        .strip_prefix(STARTED)?
        .split(' ')
        .next()
        .filter(|id| !id.is_empty())
}

#[cfg(test)]
#[path = "subagent_steer_race_tests.rs"]
mod steer_race_tests;

#[cfg(test)]
#[path = "subagent_message_race_tests.rs"]
mod message_race_tests;

#[cfg(test)]
#[path = "subagent_stop_crash_tests.rs"]
mod stop_crash_tests;
