//! The [`Store`]'s reads of group rooms and their runs.

use rusqlite::OptionalExtension;

use super::Store;
use super::rooms;
use crate::error::Result;
use crate::ids::UserId;

impl Store {
    /// A group room by id.
    pub async fn get_room(
        &self,
        id: &crate::ids::RoomId,
    ) -> Result<Option<crate::record::RoomRecord>> {
        let id = id.clone();
        self.read(move |c| rooms::get_room(c, &id)).await
    }

    /// Of `ids`, those a room holds, ignoring case: `(id asked, the
    /// room's id)` each. One indexless lookup per id over the rooms (a
    /// start asks it once for the fleet file's bots).
    pub async fn rooms_holding(&self, ids: &[String]) -> Result<Vec<(String, String)>> {
        let ids = ids.to_vec();
        self.read(move |c| rooms::rooms_holding(c, &ids)).await
    }

    /// Every room not closed, by id (a start checks their members' names).
    pub async fn open_rooms(&self) -> Result<Vec<crate::record::RoomRecord>> {
        self.read_many(rooms::open_rooms).await
    }

    /// Rooms `user` owns, plus every shared room (the caller filters those
    /// by membership).
    pub async fn rooms_for(&self, user: &UserId) -> Result<Vec<crate::record::RoomRecord>> {
        let user = user.clone();
        self.read_many(move |c| rooms::rooms_for(c, &user)).await
    }

    /// A room's unfinished runs, oldest first.
    pub async fn open_room_runs(
        &self,
        room: &crate::ids::RoomId,
    ) -> Result<Vec<crate::record::RoomRunRecord>> {
        let room = room.clone();
        self.read_many(move |c| rooms::open_runs(c, &room)).await
    }

    /// A room's oldest unfinished run (the one in progress, or the next
    /// to start), one row however many wait.
    pub async fn oldest_open_room_run(
        &self,
        room: &crate::ids::RoomId,
    ) -> Result<Option<crate::record::RoomRunRecord>> {
        let room = room.clone();
        self.read(move |c| rooms::oldest_open_run(c, &room)).await
    }

    /// [`Store::oldest_open_room_run`] on the calling thread: one row by
    /// index, read at every SendMessage in a room, where the hop to the
    /// blocking pool and back costs more than the read.
    pub fn oldest_open_room_run_now(
        &self,
        room: &crate::ids::RoomId,
    ) -> Result<Option<crate::record::RoomRunRecord>> {
        self.inner.readers.with(|c| rooms::oldest_open_run(c, room))
    }

    /// A room's newest finished run.
    pub async fn last_done_room_run(
        &self,
        room: &crate::ids::RoomId,
    ) -> Result<Option<crate::record::RoomRunRecord>> {
        let room = room.clone();
        self.read(move |c| rooms::last_done_run(c, &room)).await
    }

    /// The seq of the message whose discussion in `room` gave the member
    /// input at `gid` (the coordinator admits each input under
    /// `{trigger_seq}:{round}:{slot}`); `None` when the ledger no longer
    /// holds it (pruned after its retention) or it is no room input. It
    /// walks the room's ledger rows: for a retry, not for every turn.
    pub async fn room_input_trigger(
        &self,
        room: &crate::ids::RoomId,
        gid: i64,
    ) -> Result<Option<i64>> {
        let source = format!("room:{room}");
        self.read_many(move |c| {
            let nonce: Option<String> = c
                .prepare_cached("SELECT nonce FROM ledger WHERE source = ?1 AND gid = ?2")?
                .query_row(rusqlite::params![source, gid], |r| r.get(0))
                .optional()?;
            Ok(nonce.and_then(|n| n.split(':').next()?.parse().ok()))
        })
        .await
    }

    /// One run of a room, by the seq of the message that started it.
    pub async fn get_room_run(
        &self,
        room: &crate::ids::RoomId,
        trigger_seq: i64,
    ) -> Result<Option<crate::record::RoomRunRecord>> {
        let room = room.clone();
        self.read(move |c| rooms::get_run(c, &room, trigger_seq))
            .await
    }

    /// The first timeline seq of `room` that `user` may read when it is
    /// not the first: the notice of the change that gave them the room
    /// (migration 0019). `None` for its owner and for a user who reads it
    /// from the start.
    pub async fn room_visible_from(
        &self,
        room: &crate::ids::RoomId,
        user: &UserId,
    ) -> Result<Option<i64>> {
        let (room, user) = (room.clone(), user.clone());
        self.read(move |c| rooms::audience::visible_from(c, &room, &user))
            .await
    }

    /// Every room (not their own) `user` reads from a later seq than its
    /// start, with that seq ([`Store::room_visible_from`]).
    pub async fn room_history_floors(
        &self,
        user: &UserId,
    ) -> Result<Vec<(crate::ids::RoomId, i64)>> {
        let user = user.clone();
        self.read(move |c| rooms::audience::floors(c, &user)).await
    }

    /// Rooms with unfinished runs (resumed after a restart).
    pub async fn rooms_with_open_runs(&self) -> Result<Vec<crate::ids::RoomId>> {
        self.read_many(rooms::rooms_with_open_runs).await
    }
}
