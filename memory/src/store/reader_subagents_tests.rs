//! The reads of a parent's subagents by its tools (Task, CheckSubagent,
//! MessageSubagent, StopSubagent): the one named, by its key; the running
//! ones, by index `subagents_running`; the latest finished ones and their
//! count, by index `subagents_parent`. None reads every subagent the
//! parent ever had with its report, as each call did.
#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;
use rusqlite::Connection;
use rusqlite::params;

use super::*;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn select(filter: &str) -> String {
    format!("SELECT id, status, result, created_at, rowid FROM subagents {filter}")
}

/// `n` subagents of `p`, `p.sub-0` … (pairs created at the same time),
/// each with a long report; those `running` accepts run.
fn subagents(conn: &Connection, n: usize, running: impl Fn(usize) -> bool) {
    for i in 0..n {
        let status = if running(i) { "running" } else { "done" };
        conn.execute(
            "INSERT INTO subagents (id, parent, parent_session, description, status, result,
                                    created_at, updated_at)
             VALUES (?1, 'p', ?2, ?3, ?4, ?5, ?6, ?6)",
            params![
                format!("p.sub-{i}"),
                crate::ids::SessionId::derive(&BotId::new("p").unwrap(), "dm", "alice").to_string(),
                format!("task {i}"),
                status,
                "report ".repeat(200),
                i64::try_from(i / 2).unwrap(),
            ],
        )
        .unwrap();
        // another parent's, interleaved
        conn.execute(
            "INSERT INTO subagents (id, parent, parent_session, description, status, result,
                                    created_at, updated_at)
             VALUES (?1, 'q', ?2, 't', 'running', NULL, 0, 0)",
            params![
                format!("q.sub-{i}"),
                crate::ids::SessionId::derive(&BotId::new("p").unwrap(), "dm", "alice").to_string()
            ],
        )
        .unwrap();
    }
}

/// Regression (round 31): every Task, CheckSubagent, MessageSubagent and
/// StopSubagent call read every subagent its parent ever had, each with
/// its report, to find one or to count the running ones. Each read is
/// now an index search, none a scan or a sort: the running ones through
/// the partial index `subagents_running` (before migration 25 the count
/// went through every subagent row of the parent to read its status),
/// the count through `subagents_parent` alone.
#[test]
fn the_tools_reads_search_indexes_and_never_read_every_subagent() -> TestResult {
    let mut conn = Connection::open_in_memory()?;
    crate::store::schema::migrate(&mut conn)?;
    subagents(&conn, 50, |i| i % 10 == 3);
    let clean = |plan: &[String]| {
        plan.iter()
            .all(|step| !step.starts_with("SCAN") && !step.contains("TEMP B-TREE"))
    };
    let one = plan(&conn, &select(SUBAGENT_OF), params!["p.sub-3", "p"]);
    assert!(
        clean(&one)
            && one
                .iter()
                .any(|s| s.contains("sqlite_autoindex_subagents_1")),
        "{one:?}"
    );
    let running = plan(&conn, &select(SUBAGENTS_RUNNING_OF), params!["p"]);
    assert!(
        clean(&running)
            && running
                .iter()
                .any(|s| s.contains("INDEX subagents_running")),
        "{running:?}"
    );
    let latest = plan(&conn, &select(SUBAGENTS_FINISHED_LATEST), params!["p", 5]);
    assert!(
        clean(&latest) && latest.iter().any(|s| s.contains("INDEX subagents_parent")),
        "{latest:?}"
    );
    let count = plan(&conn, SUBAGENTS_COUNT_OF, params!["p"]);
    assert!(
        clean(&count)
            && count
                .iter()
                .any(|s| s.contains("COVERING INDEX subagents_parent")),
        "{count:?}"
    );
    Ok(())
}

/// What the old reads gave: every subagent of `p` in creation order,
/// filtered to the running ones and the `finished` latest finished ones.
fn listed_as_before(conn: &Connection, finished: usize) -> (Vec<String>, usize) {
    // the old read of every subagent of `p` (Store::subagents_of, gone)
    let all: Vec<SubagentRecord> =
        query_subagents(conn, "WHERE parent = ?1 ORDER BY created_at", params!["p"]).unwrap();
    let done = all
        .iter()
        .filter(|s| s.status != SubagentStatus::Running)
        .count();
    let left_out = done.saturating_sub(finished);
    let mut skipped = 0;
    let mut shown = Vec::new();
    for s in all {
        if s.status != SubagentStatus::Running && skipped < left_out {
            skipped += 1;
            continue;
        }
        shown.push(s.id.to_string());
    }
    (shown, left_out)
}

/// The list (running ones and the latest finished ones, creation order,
/// ties as the old read ordered them) and the count left out are what the
/// old read of every subagent gave, without reading any report; the one
/// named is found by id among the parent's only.
#[test]
fn the_list_and_the_one_named_are_what_the_old_reads_gave() -> TestResult {
    let mut conn = Connection::open_in_memory()?;
    crate::store::schema::migrate(&mut conn)?;
    let p = BotId::new("p")?;
    let (list, left_out) = subagents_listed(&conn, &p, 20)?;
    assert!(list.is_empty() && left_out == 0);
    subagents(&conn, 300, |i| matches!(i, 0 | 5 | 150 | 151 | 299));
    for finished in [0, 1, 5, 20, 400] {
        let (list, left_out) = subagents_listed(&conn, &p, finished)?;
        assert!(list.iter().all(|s| s.result.is_none()));
        let ids: Vec<String> = list.iter().map(|s| s.id.to_string()).collect();
        assert_eq!((ids, left_out), listed_as_before(&conn, finished));
    }
    let one = subagent_of(&conn, &p, "p.sub-7")?.unwrap();
    assert_eq!(one.description, "task 7");
    assert!(one.result.is_some());
    assert!(subagent_of(&conn, &p, "q.sub-7")?.is_none());
    assert!(subagent_of(&conn, &BotId::new("q")?, "p.sub-7")?.is_none());
    Ok(())
}
