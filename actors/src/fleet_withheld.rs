//! A subagent's task that stays its former owner's words once fleet.toml
//! gives its bot to another user: its title (in its name and role too)
//! and its last report are withheld from the new owner.
//!
//! The task session of a subagent whose task was given in a conversation
//! that stays another person's (the former owner's DM with the bot) is
//! read by the new owner from the change on (a session floor, set by the
//! store as the owner changes: `Writer::floor_task_of_unread_origin`).
//! The subagent's record kept what came before: the task's title, shown
//! by CheckSubagent and in the subagent's name and role (`GET /v1/bots`,
//! the web page), and its last report (audit: "read my tax return" as a
//! title, and the summary as a report, read by the new owner). Each start
//! replaces them, after the config's writes that set the floors. The
//! former owner keeps their words in their DM (the Task call, the
//! reports); given back, the subagent keeps the withheld title.

use botfleet_memory::Mutation;
use botfleet_memory::Store;
use botfleet_memory::SubagentRecord;

use crate::error::Result;
use crate::prompts::prompts;

/// The writes that withhold the title and report of each subagent task
/// read from a change of owner on, not withheld yet, at `now_ms`.
pub(crate) async fn withhold_given_tasks(store: &Store, now_ms: i64) -> Result<Vec<Mutation>> {
    let p = prompts();
    let title = p.withheld_task.render(&[]).unwrap_or_default();
    let report = p.withheld_report.render(&[]).unwrap_or_default();
    let mut writes = Vec::new();
    for sub in store.subagents_of_floored_tasks().await? {
        if sub.description == title {
            continue;
        }
        let (Some(parent), Some(mut child)) = (
            store.get_bot(&sub.parent).await?,
            store.get_bot(&sub.id).await?,
        ) else {
            continue;
        };
        tracing::info!(subagent = %sub.id, parent = %sub.parent, owner = %child.owner, "subagent's task was given in a conversation of its bot's former owner: its title and report are withheld from the new owner");
        child.name = SubagentRecord::name_under(&parent.name, &title);
        child.role = p
            .subagent_role
            .render(&[("parent", parent.id.as_str()), ("description", &title)])
            .unwrap_or_default();
        child.updated_at = now_ms;
        // the record first: the bot's upsert names subagents after their
        // records' titles
        writes.push(Mutation::WithholdSubagentTask {
            id: sub.id,
            description: title.clone(),
            result: report.clone(),
        });
        writes.push(Mutation::UpsertBot(child));
    }
    Ok(writes)
}
