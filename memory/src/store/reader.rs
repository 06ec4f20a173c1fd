//! The queries of read-only connections (the pool is in
//! `reader_pool.rs`): one file per table (`reader_*.rs`), re-exported
//! here, plus the row counts and meta values.

#[path = "reader_bots.rs"]
mod bots;

#[path = "reader_entries.rs"]
mod entries;

#[path = "reader_sessions.rs"]
mod sessions;

#[path = "reader_turns.rs"]
mod turns;

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

#[cfg(test)]
pub(crate) use bots::BOT_IDS_OF_OWNER;
#[cfg(test)]
pub(crate) use bots::BOTS_ANSWERING_TO;
pub(crate) use bots::bot_ids_of;
pub(crate) use bots::bot_usage;
pub(crate) use bots::bots_answering_to;
pub(crate) use bots::bots_keeping;
pub(crate) use bots::family_usage;
pub(crate) use bots::get_bot;
pub(crate) use bots::get_subagent;
pub(crate) use bots::list_bots;
pub(crate) use bots::main_bots_of;
pub(crate) use bots::running_subagents_of;
pub(crate) use bots::subagent_of;
pub(crate) use bots::subagent_stop;
pub(crate) use bots::subagent_task_holds;
pub(crate) use bots::subagent_tasks;
pub(crate) use bots::subagents_listed;
pub(crate) use bots::user_secrets;
pub(crate) use entries::ENTRY_COLUMNS;
pub(crate) use entries::collect_entries;
pub(crate) use entries::count_unseen_messages;
pub(crate) use entries::entries_after;
pub(crate) use entries::entries_after_gid;
pub(crate) use entries::entries_between;
pub(crate) use entries::latest_summary;
pub(crate) use entries::max_gid;
pub(crate) use entries::reply_session_of;
pub(crate) use entries::tail_entries;
pub(crate) use sessions::get_session;
pub(crate) use sessions::session_page;
pub(crate) use sessions::session_view;
pub(crate) use sessions::sessions_of_bot;
pub(crate) use sessions::sessions_of_owner;
pub(crate) use sessions::sessions_of_subagents;
pub(crate) use turns::bots_with_work;
pub(crate) use turns::get_turn;
pub(crate) use turns::open_turns;
pub(crate) use turns::pending_inbox;
pub(crate) use turns::tool_calls;
pub(crate) use turns::turn_status_counts;
pub(crate) use turns::turns_of_bot;

use crate::error::Result;
use crate::error::StoreError;

fn corrupt(table: &'static str, detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table,
        detail: detail.to_string(),
    }
}

pub(crate) fn count(conn: &Connection, table: &str) -> Result<i64> {
    let sql = match table {
        "entries" => "SELECT COUNT(*) FROM entries",
        "turns" => "SELECT COUNT(*) FROM turns",
        "bots" => "SELECT COUNT(*) FROM bots",
        "ledger" => "SELECT COUNT(*) FROM ledger",
        other => return Err(StoreError::Rejected(format!("no table {other}"))),
    };
    Ok(conn.prepare_cached(sql)?.query_row([], |r| r.get(0))?)
}

pub(crate) fn optional_meta(conn: &Connection, key: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row(params![key], |r| r.get(0))
        .optional()?)
}
