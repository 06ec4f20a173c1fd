//! The [`Store`]'s count of the messages a turn delivered, wherever they
//! went: a webhook's or a routine's turn delivers to its owner's DM, not
//! to its own session.

use rusqlite::Connection;
use rusqlite::params;

use super::Store;
use crate::error::Result;
use crate::ids::TurnId;

impl Store {
    /// How many `delivery` entries turn `turn` wrote in any session. Its
    /// entries all come after its inputs, so the scan starts after
    /// `after_gid` (the gid of its first input, or less): a range of the
    /// primary key, not the whole table (entries have no index by turn).
    pub async fn deliveries_of_turn(&self, turn: TurnId, after_gid: i64) -> Result<u32> {
        self.read(move |c| count_deliveries(c, turn, after_gid))
            .await
    }
}

fn count_deliveries(conn: &Connection, turn: TurnId, after_gid: i64) -> Result<u32> {
    let mut stmt = conn.prepare_cached(
        // not a room's published copy of a member's reply (it carries
        // the turn's id too): a resumed member turn counted each reply
        // published before the crash twice (QA)
        "SELECT count(*) FROM entries WHERE gid > ?1 AND turn_id = ?2 AND kind = 'delivery'
           AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = entries.session_id
                           AND s.kind = 'room')",
    )?;
    let n: i64 = stmt.query_row(params![after_gid, turn.to_string()], |r| r.get(0))?;
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}
