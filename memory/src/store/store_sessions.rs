//! The [`Store`]'s reads of sessions and their transcript entries.

use super::Store;
use super::reader;
use crate::error::Result;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::UserId;
use crate::record::Entry;
use crate::record::SessionRecord;
use crate::record::SessionView;

impl Store {
    /// A session by id.
    pub async fn get_session(&self, id: SessionId) -> Result<Option<SessionRecord>> {
        self.read(move |c| reader::get_session(c, id)).await
    }

    /// What a turn's context is built from, in one read: the session's
    /// record, its latest summary and its newest `window` entries after the
    /// summary, and every entry from `keep_from` on (see
    /// `reader::session_view`).
    pub async fn session_view(
        &self,
        id: SessionId,
        window: i64,
        keep_from: Option<i64>,
    ) -> Result<SessionView> {
        self.read(move |c| reader::session_view(c, id, window, keep_from))
            .await
    }

    /// A page of a session: its record and its entries with seq > `after`,
    /// oldest first, at most `limit`, in one read, so the record's
    /// `last_seq` is never older than the entries (see
    /// `reader::session_page`). `None` when there is no such session.
    pub async fn session_page(
        &self,
        id: SessionId,
        after: i64,
        limit: i64,
    ) -> Result<Option<(SessionRecord, Vec<Entry>)>> {
        self.read_many(move |c| reader::session_page(c, id, None, after, limit))
            .await
    }

    /// [`Store::session_page`] as `user` reads it: from their floor of a
    /// session given to them with its bot ([`Store::session_floor`]), in
    /// the same read.
    pub async fn session_page_for(
        &self,
        id: SessionId,
        user: &UserId,
        after: i64,
        limit: i64,
    ) -> Result<Option<(SessionRecord, Vec<Entry>)>> {
        let user = user.clone();
        self.read_many(move |c| reader::session_page(c, id, Some(&user), after, limit))
            .await
    }

    /// Where `user` starts reading `session` when it was given to them
    /// with its bot: (first seq, first time in ms); `None` when they read
    /// it from the start (`session_floors.rs`).
    pub async fn session_floor(
        &self,
        session: SessionId,
        user: &UserId,
    ) -> Result<Option<(i64, i64)>> {
        let user = user.clone();
        self.read(move |c| super::session_floors::floor(c, session, &user))
            .await
    }

    /// Every session `user` reads from a later seq than its start, with
    /// that seq: the timelines of rooms shared with them after they began
    /// (`Store::room_history_floors`) and the sessions given to them with
    /// their bots (`session_floors.rs`). What search and recall pass as
    /// `SearchQuery::visible_from`.
    pub async fn history_floors(&self, user: &UserId) -> Result<Vec<(SessionId, i64)>> {
        let user = user.clone();
        self.read(move |c| {
            let mut out: Vec<(SessionId, i64)> = super::rooms::audience::floors(c, &user)?
                .into_iter()
                .map(|(room, from)| (crate::record::room_timeline(&room).id(), from))
                .collect();
            out.extend(super::session_floors::floors(c, &user)?);
            Ok(out)
        })
        .await
    }

    /// The sessions of `bot` that `user`, its owner, reads from a later
    /// seq than their start (given to them by an owner change), with
    /// that seq: inputs queued below it were the former owner's work.
    pub async fn bot_session_floors(
        &self,
        bot: &BotId,
        user: &UserId,
    ) -> Result<Vec<(SessionId, i64)>> {
        let (bot, user) = (bot.clone(), user.clone());
        self.read(move |c| super::session_floors::floors_of_bot(c, &bot, &user))
            .await
    }

    /// The sessions `owner` owns, room timelines left out (see
    /// `reader::sessions_of_owner`).
    pub async fn sessions_of_owner(&self, owner: &UserId) -> Result<Vec<SessionRecord>> {
        let owner = owner.clone();
        self.read_many(move |c| reader::sessions_of_owner(c, &owner))
            .await
    }

    /// Sessions of a bot (its own: a room's public timeline is not one,
    /// even when the room is named like the bot).
    pub async fn sessions_of_bot(&self, bot: &BotId) -> Result<Vec<SessionRecord>> {
        let bot = bot.clone();
        self.read_many(move |c| reader::sessions_of_bot(c, &bot))
            .await
    }

    /// The sessions of every subagent `parent` delegated to, in one read.
    pub async fn sessions_of_subagents(&self, parent: &BotId) -> Result<Vec<SessionRecord>> {
        let parent = parent.clone();
        self.read_many(move |c| reader::sessions_of_subagents(c, &parent))
            .await
    }

    /// Entries of a session with seq > `after`, oldest first, at most `limit`.
    pub async fn entries_after(
        &self,
        session: SessionId,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Entry>> {
        self.read_many(move |c| reader::entries_after(c, session, after, limit))
            .await
    }

    /// [`Store::entries_after`] on the calling thread, for short indexed
    /// reads on a hot path where the hop to the blocking pool costs more
    /// than the read itself (a room coordinator checking a member's turn).
    pub fn entries_after_now(
        &self,
        session: SessionId,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Entry>> {
        self.inner
            .readers
            .with(|c| reader::entries_after(c, session, after, limit))
    }

    /// Entries of a session with `from <= seq <= to`.
    pub async fn entries_between(
        &self,
        session: SessionId,
        from: i64,
        to: i64,
    ) -> Result<Vec<Entry>> {
        self.read_many(move |c| reader::entries_between(c, session, from, to))
            .await
    }

    /// How many public messages of a room timeline below seq `before` a
    /// member has not been shown: user messages after `seen.0`, and
    /// deliveries after `seen.1` other than its own (`except`).
    pub async fn count_unseen_messages(
        &self,
        session: SessionId,
        seen: (i64, i64),
        before: i64,
        except: &str,
    ) -> Result<i64> {
        let except = except.to_owned();
        self.read_many(move |c| reader::count_unseen_messages(c, session, seen, before, &except))
            .await
    }

    /// The newest compaction summary of a session.
    pub async fn latest_summary(&self, session: SessionId) -> Result<Option<Entry>> {
        self.read(move |c| reader::latest_summary(c, session)).await
    }

    /// Where bot `from` asked replies to go, by its newest message in
    /// `session`, and when it wrote it (see `reader::reply_session_of`).
    pub async fn reply_session_of(
        &self,
        session: SessionId,
        from: &BotId,
    ) -> Result<Option<(SessionId, i64)>> {
        let from = from.to_string();
        self.read(move |c| reader::reply_session_of(c, session, &from))
            .await
    }

    /// The newest `limit` entries of a session, oldest first.
    pub async fn tail_entries(&self, session: SessionId, limit: i64) -> Result<Vec<Entry>> {
        self.read(move |c| reader::tail_entries(c, session, limit))
            .await
    }

    /// Entries of every session in global order after `gid` (for indexers).
    pub async fn entries_after_gid(&self, gid: i64, limit: i64) -> Result<Vec<Entry>> {
        self.read_many(move |c| reader::entries_after_gid(c, gid, limit))
            .await
    }

    /// The newest global entry order.
    pub async fn max_gid(&self) -> Result<i64> {
        self.read(reader::max_gid).await
    }
}
