//! Versioned migrations. `PRAGMA user_version` holds the number of applied
//! migrations; each migration runs once, in order, in its own transaction.

use rusqlite::Connection;

use crate::error::Result;
use crate::error::StoreError;

/// Migrations in order. Never edit a released one: append a new one.
/// Migrations in order, one file per feature (`migrations/NNNN_*.sql`).
/// Before the first release a file may still change; after it, never edit a
/// released one: append a new one.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_host.sql"),
    include_str!("migrations/0002_collaboration.sql"),
    include_str!("migrations/0003_memory.sql"),
    include_str!("migrations/0004_safety.sql"),
    include_str!("migrations/0005_context.sql"),
    include_str!("migrations/0006_subagents.sql"),
    include_str!("migrations/0007_secrets.sql"),
    include_str!("migrations/0008_summary_index.sql"),
    include_str!("migrations/0009_memory_forgotten_by.sql"),
    include_str!("migrations/0010_ledger_nonce_time.sql"),
    include_str!("migrations/0011_turn_counts.sql"),
    include_str!("migrations/0012_extractions_owed.sql"),
    include_str!("migrations/0013_room_closed.sql"),
    include_str!("migrations/0014_chains.sql"),
    include_str!("migrations/0015_memory_forget_marks.sql"),
    include_str!("migrations/0016_extractions_owed_owner.sql"),
    include_str!("migrations/0017_bots_id_folded.sql"),
    include_str!("migrations/0018_inbox_starts.sql"),
    include_str!("migrations/0019_room_audience.sql"),
    include_str!("migrations/0020_hook_signatures.sql"),
    include_str!("migrations/0021_owner_and_bot_indexes.sql"),
    include_str!("migrations/0022_drop_turns_bot.sql"),
    include_str!("migrations/0023_subagent_stop.sql"),
    include_str!("migrations/0024_bots_name_key.sql"),
    include_str!("migrations/0025_subagents_running.sql"),
    include_str!("migrations/0026_bots_owner_main.sql"),
    include_str!("migrations/0027_rooms_shared.sql"),
    include_str!("migrations/0028_session_floors.sql"),
    include_str!("migrations/0029_approvals_owner_pending.sql"),
    include_str!("migrations/0030_memory_expired.sql"),
    include_str!("migrations/0031_hook_signatures_digest.sql"),
    include_str!("migrations/0032_subagents_withheld.sql"),
    include_str!("migrations/0033_subagents_given.sql"),
];

/// The migration that adds `bots.name_key` (`0024_bots_name_key.sql`),
/// whose rows [`fill_name_keys`] completes in its transaction.
const BOTS_NAME_KEY: i64 = 24;

/// Number of the newest migration this binary knows.
pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Refuses a database older than this binary without changing it, for
/// a store opened with `StoreOptions::migrate` off. A database with no
/// migration applied (version 0: new or empty) passes: migrating it
/// changes no data.
pub(crate) fn require_current(conn: &Connection) -> Result<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    let latest = latest_version();
    if current > 0 && current < latest {
        return Err(StoreError::SchemaOlder {
            found: current,
            supported: latest,
        });
    }
    Ok(())
}

/// Refuses a database a newer botfleet migrated, without changing it (a
/// read of `check-config`: the start's [`migrate`] refuses it alike).
pub(crate) fn refuse_too_new(conn: &Connection) -> Result<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    let latest = latest_version();
    if current > latest {
        return Err(StoreError::SchemaTooNew {
            found: current,
            supported: latest,
        });
    }
    Ok(())
}

/// Refuses the database of another program: no botfleet schema version
/// (`user_version` 0) and tables in it. Call it before any pragma that
/// could write the file (`journal_mode`): a start took such a file over,
/// turned on its write-ahead log, added its own tables beside the other
/// program's and set the version (QA, 2026-12-04). A new store (no
/// tables yet) and one of any botfleet version pass.
pub(crate) fn refuse_foreign(conn: &Connection, path: &std::path::Path) -> Result<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if current != 0 {
        return Ok(());
    }
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name LIMIT 6",
        )?
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<_>>()?;
    if tables.is_empty() {
        return Ok(());
    }
    let mut named: Vec<String> = tables.iter().take(5).map(|t| format!("`{t}`")).collect();
    if tables.len() > 5 {
        named.push("…".into());
    }
    Err(StoreError::Foreign {
        path: path.display().to_string(),
        tables: named.join(", "),
    })
}

/// Brings the database up to date.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    refuse_too_new(conn)?;
    let current: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    let latest = latest_version();
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = index as i64 + 1;
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        if version == BOTS_NAME_KEY {
            fill_name_keys(&tx)?;
        }
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        // a new store is one event, not one line per migration (a first
        // start printed 19 of them before its banner); an upgrade names
        // each step it took
        if current > 0 {
            tracing::info!(version, "applied store migration");
        }
    }
    if current == 0 {
        tracing::info!(schema = latest, "created a new store");
    }
    Ok(())
}

/// Stores the [`name_key`](crate::ids::name_key) of every bot's name
/// that has none (SQLite cannot fold names as mentions do: NFKC, Unicode
/// case, no invisible characters).
fn fill_name_keys(conn: &Connection) -> Result<()> {
    let names: Vec<(String, String)> = conn
        .prepare("SELECT id, name FROM bots WHERE name_key IS NULL")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut update = conn.prepare("UPDATE bots SET name_key = ?2 WHERE id = ?1")?;
    for (id, name) in names {
        update.execute(rusqlite::params![id, crate::ids::name_key(&name)])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_once_and_refuses_newer() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        migrate(&mut conn)?;
        migrate(&mut conn)?;
        let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        assert_eq!(v, latest_version());
        conn.pragma_update(None, "user_version", latest_version() + 1)?;
        assert!(matches!(
            migrate(&mut conn),
            Err(StoreError::SchemaTooNew { .. })
        ));
        Ok(())
    }

    #[test]
    fn an_older_database_is_refused_unchanged_when_not_migrating() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        require_current(&conn)?;
        for sql in &MIGRATIONS[..10] {
            conn.execute_batch(sql)?;
        }
        conn.pragma_update(None, "user_version", 10)?;
        assert!(matches!(
            require_current(&conn),
            Err(StoreError::SchemaOlder {
                found: 10,
                supported
            }) if supported == latest_version()
        ));
        let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        assert_eq!(v, 10);
        migrate(&mut conn)?;
        require_current(&conn)?;
        Ok(())
    }

    /// Migration 9 adds `memory_forgotten.forgotten_by`: ids forgotten
    /// before it are kept, forgotten by no recorded call.
    #[test]
    fn forgotten_ids_survive_migration_9() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        for sql in &MIGRATIONS[..8] {
            conn.execute_batch(sql)?;
        }
        conn.pragma_update(None, "user_version", 8)?;
        conn.execute(
            "INSERT INTO memory_forgotten (id, scope_kind, scope_id, forgotten_at)
             VALUES ('m-aaaaaaaaaaaa', 'user', 'alice', 1)",
            [],
        )?;
        migrate(&mut conn)?;
        let row: (String, Option<String>) = conn.query_row(
            "SELECT scope_id, forgotten_by FROM memory_forgotten WHERE id = 'm-aaaaaaaaaaaa'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        assert_eq!(row, ("alice".to_owned(), None));
        Ok(())
    }

    /// Migration 11 counts the turns a store already holds, by bot and
    /// ended status (running turns are counted in `turns_open`).
    #[test]
    fn turn_counts_start_from_the_stored_turns() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        for sql in &MIGRATIONS[..10] {
            conn.execute_batch(sql)?;
        }
        conn.pragma_update(None, "user_version", 10)?;
        let turns = [
            ("a", "completed"),
            ("a", "completed"),
            ("a", "failed"),
            ("a", "running"),
            ("b", "cancelled"),
        ];
        for (i, (bot, status)) in turns.iter().enumerate() {
            conn.execute(
                "INSERT INTO turns (id, bot_id, session_id, status, inputs, checkpoint, attempts, started_at)
                 VALUES (?1, ?2, 's', ?3, '[]', '{}', 1, 0)",
                rusqlite::params![format!("t{i}"), bot, status],
            )?;
        }
        migrate(&mut conn)?;
        let mut stmt =
            conn.prepare("SELECT bot_id, status, n FROM turn_counts ORDER BY bot_id, status")?;
        let counts: Vec<(String, String, i64)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let want = [
            ("a", "completed", 2),
            ("a", "failed", 1),
            ("b", "cancelled", 1),
        ]
        .map(|(b, s, n)| (b.to_owned(), s.to_owned(), n));
        assert_eq!(counts, want);
        Ok(())
    }

    /// Migration 24 stores each bot's folded name (`bots.name_key`, what
    /// CreateAgent's name check looks bots up by): the bots a store
    /// already holds get theirs as it migrates, folded as mentions fold
    /// them.
    #[test]
    fn stored_bots_get_their_name_keys_at_migration_24() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        for sql in &MIGRATIONS[..23] {
            conn.execute_batch(sql)?;
        }
        conn.pragma_update(None, "user_version", 23)?;
        for (id, name) in [("r2", "Ｒｅｓｅａｒｃｈ Bot"), ("sis", "ΣΊΣΥΦΟΣ")] {
            conn.execute(
                "INSERT INTO bots (id, name, owner, role, provider, tools, settings, origin, created_at, updated_at)
                 VALUES (?1, ?2, 'alice', '', 'main', '[]', '{}', 'config', 0, 0)",
                rusqlite::params![id, name],
            )?;
        }
        migrate(&mut conn)?;
        let mut stmt = conn.prepare("SELECT id, name_key FROM bots ORDER BY id")?;
        let keys: Vec<(String, Option<String>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        assert_eq!(
            keys,
            [
                ("r2".to_owned(), Some("researchbot".to_owned())),
                ("sis".to_owned(), Some("σίσυφοσ".to_owned())),
            ]
        );
        Ok(())
    }

    /// Migration 33 records who gave each stored subagent its task and
    /// where, where that is certain: the session it came from is its
    /// parent's owner's and unfloored (the newest seq there as the
    /// subagent was made); elsewhere (an owner change already floored the
    /// session, or it is another person's) both stay NULL.
    #[test]
    fn stored_subagents_get_their_giver_at_migration_33() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        for sql in &MIGRATIONS[..32] {
            conn.execute_batch(sql)?;
        }
        conn.pragma_update(None, "user_version", 32)?;
        conn.execute_batch(
            "INSERT INTO bots (id, name, owner, role, provider, tools, settings, origin, created_at, updated_at)
               VALUES ('p', 'P', 'alice', '', 'main', '[]', '{}', 'config', 0, 0);
             INSERT INTO sessions (id, bot_id, kind, peer, owner, created_at) VALUES
               ('run', 'p', 'routine', 'taxes', 'alice', 0),
               ('moved', 'p', 'routine', 'old', 'alice', 0),
               ('carol', 'p', 'dm', 'carol', 'carol', 0);
             INSERT INTO entries (session_id, seq, id, kind, author, body, created_at) VALUES
               ('run', 1, 'e1', 'event', 'r', '{}', 100),
               ('run', 2, 'e2', 'assistant', 'p', '{}', 110),
               ('run', 3, 'e3', 'event', 'r', '{}', 500),
               ('moved', 1, 'e4', 'event', 'r', '{}', 100);
             INSERT INTO session_floors (session_id, user_id, from_seq, since)
               VALUES ('moved', 'alice', 2, 300);
             INSERT INTO subagents (id, parent, parent_session, description, status, created_at, updated_at) VALUES
               ('p.sub-run', 'p', 'run', 't', 'done', 120, 120),
               ('p.sub-moved', 'p', 'moved', 't', 'done', 120, 120),
               ('p.sub-carol', 'p', 'carol', 't', 'done', 120, 120);",
        )?;
        migrate(&mut conn)?;
        let mut stmt = conn.prepare("SELECT id, given_by, given_seq FROM subagents ORDER BY id")?;
        let rows: Vec<(String, Option<String>, Option<i64>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        assert_eq!(
            rows,
            [
                ("p.sub-carol".to_owned(), None, None),
                ("p.sub-moved".to_owned(), None, None),
                ("p.sub-run".to_owned(), Some("alice".to_owned()), Some(2)),
            ]
        );
        Ok(())
    }

    /// Migration 16 records the owner of an owed extraction: a row owed
    /// before it gets its bot's owner as stored (a migration runs before
    /// the start applies an owner change), a row of a bot not stored is
    /// dropped.
    #[test]
    fn owed_extractions_get_their_bots_owner_at_migration_16() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        for sql in &MIGRATIONS[..15] {
            conn.execute_batch(sql)?;
        }
        conn.pragma_update(None, "user_version", 15)?;
        conn.execute(
            "INSERT INTO bots (id, name, owner, role, provider, tools, settings, origin, created_at, updated_at)
             VALUES ('ann', 'Ann', 'alice', 'helps', 'main', '[]', '{}', 'config', 0, 0)",
            [],
        )?;
        for (turn, bot) in [("t1", "ann"), ("t2", "gone")] {
            conn.execute(
                "INSERT INTO extractions_owed (turn_id, bot_id, session_id, job, attempts, created_at)
                 VALUES (?1, ?2, 's', '{}', 0, 0)",
                rusqlite::params![turn, bot],
            )?;
        }
        migrate(&mut conn)?;
        let mut stmt = conn.prepare("SELECT turn_id, owner_id FROM extractions_owed")?;
        let rows: Vec<(String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        assert_eq!(rows, [("t1".to_owned(), "alice".to_owned())]);
        Ok(())
    }
}
