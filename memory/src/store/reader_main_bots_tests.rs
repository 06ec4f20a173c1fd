//! An owner's bots other than subagents, and the bot list without the
//! finished subagents past the latest few of each parent: read through
//! index `bots_owner_main` (migration 26) and the subagents' indexes by
//! parent, never every bot record of the owner nor a sort of every
//! finished subagent it has, as `GET /v1/bots`, CreateAgent's count,
//! SendToAgent's likely meant and forgetting a project's note did.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use pretty_assertions::assert_eq;
use rusqlite::Connection;
use rusqlite::params;

use super::*;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// No scan of a table, no sort of what the search found.
fn clean(plan: &[String]) -> bool {
    plan.iter()
        .all(|step| !step.starts_with("SCAN") && !step.contains("TEMP B-TREE"))
}

fn insert_bot(conn: &Connection, id: &str, owner: &str, origin: &str, settings: &str) {
    conn.execute(
        "INSERT INTO bots (id, name, owner, role, provider, tools, settings, origin,
                           created_at, updated_at)
         VALUES (?1, ?1, ?2, '', 'main', '[]', ?3, ?4, 0, 0)",
        params![id, owner, settings, origin],
    )
    .unwrap();
}

/// A subagent of `parent` (its bot record too, `owner`'s), `status`,
/// created at `at`.
fn insert_subagent(conn: &Connection, id: &str, parent: &str, owner: &str, status: &str, at: i64) {
    insert_bot(
        conn,
        id,
        owner,
        &format!("subagent:{parent}"),
        &format!(r#"{{"parent":"{parent}"}}"#),
    );
    conn.execute(
        "INSERT INTO subagents (id, parent, parent_session, description, status, result,
                                created_at, updated_at)
         VALUES (?1, ?2, ?3, 'task', ?4, ?5, ?6, ?6)",
        params![
            id,
            parent,
            crate::ids::SessionId::derive(&BotId::new(parent).unwrap(), "dm", owner).to_string(),
            status,
            "report ".repeat(50),
            at,
        ],
    )
    .unwrap();
}

/// alice: config bots `p` (in project `x`), `q` and `r`, a bot `p` made
/// with CreateAgent, and subagents of `p` (many, some running, some made
/// in the same millisecond) and of `q` (a few); bob's bots and subagents
/// between them.
fn seeded() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    crate::store::schema::migrate(&mut conn).unwrap();
    insert_bot(&conn, "p", "alice", "config", r#"{"projects":["x"]}"#);
    insert_bot(&conn, "q", "alice", "config", "{}");
    insert_bot(&conn, "r", "alice", "config", r#"{"shareable":true}"#);
    insert_bot(&conn, "made", "alice", "agent:p", "{}");
    insert_bot(&conn, "b", "bob", "config", r#"{"projects":["y"]}"#);
    for i in 0..120_i64 {
        let status = match i % 7 {
            3 => "running",
            5 => "failed",
            6 => "stopped",
            _ => "done",
        };
        // pairs in one millisecond, their ids in creation order
        insert_subagent(&conn, &format!("p.sub-{i:04}"), "p", "alice", status, i / 2);
        insert_subagent(&conn, &format!("b.sub-{i:04}"), "b", "bob", "done", i);
        if i % 20 == 0 {
            let status = if i == 40 { "running" } else { "done" };
            insert_subagent(&conn, &format!("q.sub-{i:04}"), "q", "alice", status, i);
        }
    }
    conn
}

/// The old read (round 31): every finished subagent of the owner, sorted,
/// those past the `keep` latest of each parent left out of every bot
/// record of the owner.
fn listed_as_before(conn: &Connection, owner: &str, keep: usize) -> (Vec<String>, usize) {
    let rows: Vec<(String, String)> = conn
        .prepare(
            "SELECT s.id, s.parent FROM subagents s JOIN bots b ON b.id = s.id
             WHERE b.owner = ?1 AND s.status <> 'running'
             ORDER BY s.parent, s.created_at DESC, s.id DESC",
        )
        .unwrap()
        .query_map(params![owner], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let mut past = HashSet::new();
    let mut parent = String::new();
    let mut seen = 0;
    for (id, of) in rows {
        if of != parent {
            parent = of;
            seen = 0;
        }
        seen += 1;
        if seen > keep {
            past.insert(id);
        }
    }
    let listed = list_bots(conn, Some(&UserId::new(owner).unwrap()))
        .unwrap()
        .into_iter()
        .map(|b| b.id.to_string())
        .filter(|id| !past.contains(id))
        .collect();
    (listed, past.len())
}

/// Regression (round 32): the bot list is what the old read gave, for any
/// number kept, whichever the owner.
#[test]
fn the_bot_list_is_what_the_old_read_of_every_bot_gave() -> TestResult {
    let conn = seeded();
    for owner in ["alice", "bob", "carol"] {
        for keep in [0, 1, 5, 20, 59, 60, 1000] {
            let (bots, left_out) = bots_keeping(&conn, &UserId::new(owner)?, keep)?;
            let ids: Vec<String> = bots.iter().map(|b| b.id.to_string()).collect();
            assert_eq!(
                (ids, left_out),
                listed_as_before(&conn, owner, keep),
                "{owner}, keeping {keep}"
            );
        }
    }
    Ok(())
}

/// An owner's bots other than subagents are its bots whose origin is not
/// `subagent:`, by id, records as `list_bots` reads them.
#[test]
fn the_main_bots_are_the_owners_bots_but_subagents() -> TestResult {
    let conn = seeded();
    for owner in ["alice", "bob", "carol"] {
        let owner = UserId::new(owner)?;
        let expected: Vec<BotRecord> = list_bots(&conn, Some(&owner))?
            .into_iter()
            .filter(|b| !b.origin.starts_with("subagent:"))
            .collect();
        assert_eq!(main_bots_of(&conn, &owner)?, expected);
    }
    Ok(())
}

/// Regression (round 32): the main bots are a search of the partial index
/// `bots_owner_main`, in its order; the reads the bot list replaced (every
/// bot of the owner by id, and every finished subagent of the owner
/// sorted by parent and age) each sort what they find.
#[test]
fn the_main_bots_are_read_through_their_own_index() -> TestResult {
    let conn = seeded();
    let main = plan(
        &conn,
        &format!("SELECT id FROM bots {MAIN_BOTS_OF_OWNER}"),
        params!["alice"],
    );
    assert!(
        clean(&main) && main.iter().any(|s| s.contains("INDEX bots_owner_main")),
        "{main:?}"
    );
    // what the list read before: both fail the same check
    let every_bot = plan(
        &conn,
        "SELECT id FROM bots WHERE owner = ?1 ORDER BY id",
        params!["alice"],
    );
    assert!(!clean(&every_bot), "{every_bot:?}");
    let every_finished = plan(
        &conn,
        "SELECT s.id, s.parent FROM subagents s JOIN bots b ON b.id = s.id
         WHERE b.owner = ?1 AND s.status <> 'running'
         ORDER BY s.parent, s.created_at DESC, s.id DESC",
        params!["alice"],
    );
    assert!(!clean(&every_finished), "{every_finished:?}");
    Ok(())
}

/// Regression (round 32): the list reads no record of a subagent it
/// leaves out, where it read and decoded every bot record of the owner
/// (here one that cannot be decoded makes the old read fail).
#[test]
fn the_bot_list_reads_no_record_it_leaves_out() -> TestResult {
    let conn = seeded();
    let alice = UserId::new("alice")?;
    // p's oldest subagent, done: left out when keeping its latest 20
    conn.execute(
        "UPDATE bots SET tools = 'not json' WHERE id = 'p.sub-0000'",
        [],
    )?;
    let (bots, left_out) = bots_keeping(&conn, &alice, 20)?;
    assert!(!bots.iter().any(|b| b.id.as_str() == "p.sub-0000"));
    assert!(left_out > 0);
    assert!(main_bots_of(&conn, &alice).is_ok());
    assert!(list_bots(&conn, Some(&alice)).is_err());
    Ok(())
}
