//! A subagent's task that stays its former owner's words once fleet.toml
//! gives its bot to another user: its title (in its name and role too)
//! and its last report are withheld from the new owner, and shown again
//! once the bot is given back.
//!
//! The task session of a subagent whose task was given in a conversation
//! that stays another person's (the former owner's DM with the bot), or
//! where the new owner reads only from the change on (the runs of a
//! routine the former owner made through the API), is read by the new
//! owner from the change on (a session
//! floor, set by the store as the owner changes:
//! `Writer::floor_task_of_unread_origin`). The subagent's record kept
//! what came before: the task's title, shown by CheckSubagent and in the
//! subagent's name and role (`GET /v1/bots`, the web page), and its last
//! report (audit: "read my tax return" as a title, and the summary as a
//! report, read by the new owner). Each start withholds them, after the
//! config's writes that set the floors; the store keeps them, and a start
//! that finds the floor gone (the bot given back) shows them again. The
//! former owner keeps their words in their DM (the Task call, the
//! reports) meanwhile.

use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::Store;
use botfleet_memory::SubagentRecord;

use crate::error::Result;
use crate::prompts::prompts;

/// The writes that withhold the title and report of each subagent task
/// read from a change of owner on, and show again those of each task
/// read whole again, at `now_ms`.
pub(crate) async fn withhold_given_tasks(store: &Store, now_ms: i64) -> Result<Vec<Mutation>> {
    let p = prompts();
    let report = p.withheld_report.render(&[]).unwrap_or_default();
    let mut writes = Vec::new();
    for hold in store.subagent_task_holds().await? {
        let sub = hold.record;
        let (Some(parent), Some(child)) = (
            store.get_bot(&sub.parent).await?,
            store.get_bot(&sub.id).await?,
        ) else {
            continue;
        };
        // the record first: the bot's upsert names subagents after their
        // records' titles
        let title = match hold.withheld_description {
            None => {
                tracing::info!(subagent = %sub.id, parent = %sub.parent, owner = %child.owner, "subagent's task was given in a conversation its bot's new owner does not read: its title and report are withheld from them");
                let title = p
                    .withheld_task
                    .render(&[("id", sub.id.as_str())])
                    .unwrap_or_default();
                writes.push(Mutation::WithholdSubagentTask {
                    id: sub.id.clone(),
                    description: title.clone(),
                    result: report.clone(),
                });
                title
            }
            Some(title) => {
                tracing::info!(subagent = %sub.id, parent = %sub.parent, owner = %child.owner, "subagent's task is its owner's to read again: its title and report are shown again");
                writes.push(Mutation::RestoreSubagentTask {
                    id: sub.id.clone(),
                    withheld_result: report.clone(),
                });
                title
            }
        };
        writes.push(Mutation::UpsertBot(titled(child, &parent, &title, now_ms)));
    }
    Ok(writes)
}

/// `child`, a subagent of `parent`, named and given its role for the task
/// titled `title`, as Task makes them.
fn titled(mut child: BotRecord, parent: &BotRecord, title: &str, now_ms: i64) -> BotRecord {
    child.name = SubagentRecord::name_under(&parent.name, title);
    child.role = crate::tools::subagent_role(&parent.id, title);
    child.updated_at = now_ms;
    child
}
