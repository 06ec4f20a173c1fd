//! When a room's audience last changed: the latest change that gave it to
//! a user other than its owner (a change of members, or an owner change
//! in fleet.toml; table `room_audience`, migration 0019). What was said
//! and done in the room before that change belongs to its earlier era:
//! a member turn that answered an input given before it publishes
//! nothing after it (actors `group/era.rs`), and what a member remembered
//! there before it is not shown in the shared room's memory block.

use rusqlite::Connection;
use rusqlite::params;

use super::super::Store;
use crate::error::Result;
use crate::ids::RoomId;

/// The timeline seq of the notice of `room`'s latest audience change and
/// its time (ms), `None` when no other user ever gained the room that way
/// (its owner's alone, or shared from its creation).
pub(crate) fn latest_change(conn: &Connection, room: &RoomId) -> Result<Option<(i64, i64)>> {
    Ok(conn
        .prepare_cached(
            "SELECT MAX(a.from_seq), MAX(a.since) FROM room_audience a
             JOIN rooms r ON r.id = a.room_id
             WHERE a.room_id = ?1 AND a.user_id != r.owner",
        )?
        .query_row(params![room.as_str()], |r| {
            Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?))
        })
        .map(|row| match row {
            (Some(seq), Some(since)) => Some((seq, since)),
            _ => None,
        })?)
}

impl Store {
    /// The timeline seq of the notice of `room`'s latest audience change
    /// (a user other than its owner gained it then), `None` if there was
    /// none. A later value than one read before means the room was given
    /// to someone since.
    pub async fn room_audience_seq(&self, room: &RoomId) -> Result<Option<i64>> {
        let room = room.clone();
        self.read(move |c| Ok(latest_change(c, &room)?.map(|(seq, _)| seq)))
            .await
    }

    /// When (ms, the store's clock) `room`'s audience last changed, `None`
    /// if it never did ([`Store::room_audience_seq`]).
    pub async fn room_audience_since(&self, room: &RoomId) -> Result<Option<i64>> {
        let room = room.clone();
        self.read(move |c| Ok(latest_change(c, &room)?.map(|(_, since)| since)))
            .await
    }
}
