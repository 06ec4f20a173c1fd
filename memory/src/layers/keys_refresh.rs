//! Memory's stored keys kept in step with the code that makes them.
//!
//! Every memory row keeps two keys computed from its text when it was
//! written: `norm`, its comparison key ([`comparison_key`]: duplicates and
//! Forget by text match on it), and `terms`, its recall terms
//! ([`stored_terms`]: ranking the log reads them instead of tokenizing at
//! prompt time). When the way either is computed changes, rows written
//! before would keep the old keys: a fact written as `Café` (decomposed)
//! would not be found by Forget `café`, and a log entry with `ΣΊΣΥΦΟΣ`
//! would never rank for `σίσυφος`. So the store records which
//! [`KEYS_FORMAT`] its rows hold (table `meta`), and at open, when it is
//! another, recomputes both keys of every row once, in one transaction,
//! before anything reads them.

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

use super::apply::secure;
use super::recall::stored_terms;
use super::types::comparison_key;
use crate::error::Result;

/// The way `norm` and `terms` are computed now. 1: lowercased, words
/// lowercased character by character (until 2026-12); 2: NFKC comparison
/// keys, recall terms fully case-folded, NFC and unbroken by invisible
/// characters and combining marks (search index format 3); 3: spaces next
/// to CJK text dropped from comparison keys (项目代号 Alpha = 项目代号Alpha);
/// 4: recall terms accent-folded (`Zürich` → `zurich`, search index
/// format 5), comparison keys unchanged; 5: comparison keys case- and
/// accent-folded as recall terms are (Forget `Zurich` finds `Zürich`), and
/// the texts Forget by text left as marks (`memory_forget_marks.needle`,
/// kept in comparison form) folded with them. A mark of an item forgotten
/// by id keeps only its text's hash: one made before the refresh matches
/// only its text with its own accents until it is pruned (an hour, or
/// once no extraction owed predates it). 6: comparison keys without
/// invisible characters (`lives in\u{200b} Berlin` = `lives in Berlin`).
/// 7: recall terms with the digits and letters of letter-prefixed numbers
/// (`x86` also gives `86`), comparison keys unchanged.
pub(crate) const KEYS_FORMAT: &str = "7";

/// The `meta` key holding the format of the stored keys.
const META_KEY: &str = "memory_keys_format";

/// Brings every memory row's keys to [`KEYS_FORMAT`] if the store's are
/// of another; answers how many rows changed (0 when already current).
pub(crate) fn refresh(conn: &mut Connection) -> Result<usize> {
    let stored: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [META_KEY], |r| {
            r.get(0)
        })
        .optional()?;
    if stored.as_deref() == Some(KEYS_FORMAT) {
        return Ok(0);
    }
    let tx = conn.transaction()?;
    let mut changed = 0;
    {
        let mut read = tx.prepare("SELECT id, text, norm, terms FROM memory")?;
        let rows = read
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut update = tx.prepare("UPDATE memory SET norm = ?2, terms = ?3 WHERE id = ?1")?;
        for (id, text, norm, terms) in rows {
            let (new_norm, new_terms) = (comparison_key(&text), stored_terms(&text));
            if new_norm != norm || new_terms != terms {
                update.execute(params![id, new_norm, new_terms])?;
                changed += 1;
            }
        }
    }
    changed += refresh_marks(&tx)?;
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![META_KEY, KEYS_FORMAT],
    )?;
    tx.commit()?;
    if changed > 0 {
        tracing::info!(
            rows = changed,
            format = KEYS_FORMAT,
            "memory: comparison keys and recall terms recomputed for the current format"
        );
    }
    Ok(changed)
}

/// Brings the needles of the Forget marks (`forget_marks.rs`) to the
/// current comparison form: a needle is a comparison key, and the key of
/// a key is the key of the text it came from. Answers how many changed.
fn refresh_marks(tx: &rusqlite::Transaction<'_>) -> Result<usize> {
    let needles = tx
        .prepare("SELECT rowid, needle FROM memory_forget_marks WHERE needle IS NOT NULL")?
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    // a needle is (part of) a forgotten text: its old form is zeroed
    secure(tx, |conn| {
        let mut update =
            conn.prepare("UPDATE memory_forget_marks SET needle = ?2 WHERE rowid = ?1")?;
        let mut changed = 0;
        for (row, needle) in needles {
            let key = comparison_key(&needle);
            if key != needle {
                update.execute(params![row, key])?;
                changed += 1;
            }
        }
        Ok(changed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_at_format_1() -> Result<Connection> {
        let mut conn = Connection::open_in_memory()?;
        crate::store::schema::migrate(&mut conn)?;
        // the keys format 1 wrote for `σίσυφος pushes`: terms lowercased
        // character by character, so the final sigma kept apart from `σ`
        conn.execute(
            "INSERT INTO memory (id, scope_kind, scope_id, layer, text, norm, chars, terms,
                                 importance, source, created_at, updated_at)
             VALUES ('m-aaaaaaaaaaaa', 'user', 'alice', 'log', 'σίσυφος pushes', 'σίσυφος pushes',
                     14, 'σίσυφος push', 1, 'test', 0, 0)",
            [],
        )?;
        Ok(conn)
    }

    /// A store whose rows hold keys of an older format gets them
    /// recomputed once, and says so in `meta`; a second open changes
    /// nothing.
    #[test]
    fn keys_of_an_older_format_are_recomputed_once() -> Result<()> {
        let mut conn = store_at_format_1()?;
        assert_eq!(refresh(&mut conn)?, 1);
        let (norm, terms): (String, String) = conn.query_row(
            "SELECT norm, terms FROM memory WHERE id = 'm-aaaaaaaaaaaa'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        assert_eq!(norm, comparison_key("σίσυφος pushes"));
        assert_eq!(terms, stored_terms("σίσυφος pushes"));
        assert_eq!(
            terms,
            stored_terms("ΣΊΣΥΦΟΣ pushes"),
            "the final-sigma spelling and the capital one share their terms now"
        );
        let format: String =
            conn.query_row("SELECT value FROM meta WHERE key = ?1", [META_KEY], |r| {
                r.get(0)
            })?;
        assert_eq!(format, KEYS_FORMAT);
        assert_eq!(refresh(&mut conn)?, 0);
        Ok(())
    }

    /// Marks the store's keys as written at `format`, as an older host left them.
    fn set_keys_format(conn: &Connection, format: u32) -> Result<()> {
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            params![META_KEY, format.to_string()],
        )?;
        Ok(())
    }

    /// Regression: a log entry written at keys format 3 kept its accented
    /// terms (`zürich`), so it never ranked for `Zurich`; its terms are
    /// recomputed, accent-folded, at the next open.
    #[test]
    fn accented_terms_of_format_3_are_folded() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        crate::store::schema::migrate(&mut conn)?;
        let text = "Booked the hotel in Zürich";
        conn.execute(
            "INSERT INTO memory (id, scope_kind, scope_id, layer, text, norm, chars, terms,
                                 importance, source, created_at, updated_at)
             VALUES ('m-bbbbbbbbbbbb', 'user', 'alice', 'log', ?1, ?2, 26,
                     'book hotel zürich', 1, 'test', 0, 0)",
            params![text, comparison_key(text)],
        )?;
        set_keys_format(&conn, 3)?;
        assert_eq!(refresh(&mut conn)?, 1);
        let terms: String = conn.query_row(
            "SELECT terms FROM memory WHERE id = 'm-bbbbbbbbbbbb'",
            [],
            |r| r.get(0),
        )?;
        assert_eq!(terms, "book hotel zurich");
        assert_eq!(terms, stored_terms("booked the hotel in Zurich"));
        Ok(())
    }

    /// Regression (round 22): comparison keys were not accent-folded
    /// while recall terms were, so Forget `Zurich` did not find "Lives in
    /// Zürich" that recall ranked for `Zurich`. A store at keys format 4
    /// gets its rows' keys and its Forget marks' needles folded at open.
    #[test]
    fn comparison_keys_and_marks_of_format_4_are_accent_folded() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        crate::store::schema::migrate(&mut conn)?;
        conn.execute(
            "INSERT INTO memory (id, scope_kind, scope_id, layer, text, norm, chars, terms,
                                 importance, source, created_at, updated_at)
             VALUES ('m-cccccccccccc', 'user', 'alice', 'profile', 'Lives in Zürich',
                     'lives in zürich', 15, 'live zurich', 1, 'test', 0, 0)",
            [],
        )?;
        conn.execute(
            "INSERT INTO memory_forget_marks (scope_kind, scope_id, needle, forgotten_at)
             VALUES ('user', 'alice', 'tromsø', 0)",
            [],
        )?;
        set_keys_format(&conn, 4)?;
        assert_eq!(refresh(&mut conn)?, 2);
        let norm: String = conn.query_row(
            "SELECT norm FROM memory WHERE id = 'm-cccccccccccc'",
            [],
            |r| r.get(0),
        )?;
        assert_eq!(norm, "lives in zurich");
        assert_eq!(norm, comparison_key("LIVES IN ZURICH"));
        let needle: String =
            conn.query_row("SELECT needle FROM memory_forget_marks", [], |r| r.get(0))?;
        assert_eq!(needle, "tromso");
        Ok(())
    }
}
