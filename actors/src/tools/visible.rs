//! Which transcripts a searcher may see — the one rule behind the recall
//! tools (SearchTranscript, ReadTranscript) and `GET /v1/search`.
//!
//! A **bot** sees:
//!
//! - its own sessions (`store.sessions_of_bot`): its DMs, its side of
//!   conversations with other bots, its private session in each room, its
//!   routines, webhooks and subagent sessions;
//! - the public timeline of every room it is a member of;
//! - if it is a **subagent**: also the one session of its parent that
//!   delegated the task (`parent_session`), where the task's context was
//!   said — not the parent's other sessions (its DMs with other people,
//!   its rooms): a subagent gets the least it needs. Only while that
//!   session is the subagent's owner's: when the parent is given to
//!   someone else, the subagent goes with it, but a DM it was started
//!   from stays with the person who wrote it (before, the new owner read
//!   the former owner's DM through the subagent: `GET /v1/search?bot=`,
//!   `botfleet search --bot`, the subagent's own SearchTranscript);
//! - if it delegated to **subagents**: their sessions (the work done on its
//!   behalf; their transcripts never enter its context otherwise).
//!
//! It never sees another bot's sessions, even a bot of the same owner: a
//! private DM stays between that bot and its person. Nor does it see its
//! own sessions of another owner's: a bot given to someone else in
//! fleet.toml keeps its DMs with its former owner, which stay theirs.
//!
//! A **user** (the API) sees the sessions they own (`sessions.owner`: the
//! sessions of every bot they own, their subagents included, and their DMs
//! with a bot since given to someone else) and the timelines of the rooms
//! they may use (rooms they own, and shared rooms one of their bots is a
//! member of: [`crate::group::rooms_for`]). Narrowed to one of their bots,
//! they see what that bot sees. (A user once saw every session of the
//! bots they own: after an owner change, the new owner found the former
//! owner's DMs, and the former owner lost them.)

use std::collections::HashMap;
use std::collections::HashSet;

use botfleet_memory::BotCopies;
use botfleet_memory::BotRecord;
use botfleet_memory::RoomCopies;
use botfleet_memory::RoomId;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::UserId;
use botfleet_memory::room_timeline;

use crate::group::GroupError;
use crate::runtime::Runtime;

/// The sessions a searcher may read, with their records.
#[derive(Debug, Clone, Default)]
pub struct VisibleSessions {
    by_id: HashMap<SessionId, SessionRecord>,
}

impl VisibleSessions {
    /// What `bot` may search and read (see the module docs).
    pub async fn of_bot(store: &Store, bot: &BotRecord) -> Result<Self, StoreError> {
        let mut v = Self::default();
        v.extend_owned(store.sessions_of_bot(&bot.id).await?, &bot.owner);
        for room in store.rooms_for(&bot.owner).await? {
            if room.members.contains(&bot.id) {
                v.add_session(store, room.timeline().id()).await?;
            }
        }
        if let Some(me) = store.get_subagent(&bot.id).await?
            && let Some(parent) = store.get_session(me.parent_session).await?
        {
            // only while it is still its owner's: after an owner change
            // the delegating session may be the former owner's DM, which
            // stays theirs (the same rule as the subagent's own sessions)
            v.extend_owned(vec![parent], &bot.owner);
        }
        // one read for all its subagents: one per subagent made a search by
        // a bot that had delegated 1,500 tasks take 86-180 ms
        v.extend_owned(store.sessions_of_subagents(&bot.id).await?, &bot.owner);
        Ok(v)
    }

    /// What `user` may search through the API (see the module docs).
    pub async fn of_user(rt: &Runtime, user: &UserId) -> Result<Self, GroupError> {
        let mut v = Self::default();
        v.extend(rt.store.sessions_of_owner(user).await?);
        for room in crate::group::rooms_for(rt, user).await? {
            v.add_session(&rt.store, room_timeline(&room.id).id())
                .await?;
        }
        Ok(v)
    }

    /// Adds a session if it exists (a room nobody wrote in has none yet).
    async fn add_session(&mut self, store: &Store, id: SessionId) -> Result<(), StoreError> {
        if !self.by_id.contains_key(&id)
            && let Some(record) = store.get_session(id).await?
        {
            self.by_id.insert(id, record);
        }
        Ok(())
    }

    fn extend(&mut self, records: Vec<SessionRecord>) {
        self.by_id.extend(records.into_iter().map(|r| (r.id, r)));
    }

    /// [`VisibleSessions::extend`] with the sessions `owner` owns.
    fn extend_owned(&mut self, records: Vec<SessionRecord>, owner: &UserId) {
        self.extend(records.into_iter().filter(|r| &r.owner == owner).collect());
    }

    /// Whether `session` may be read.
    pub fn contains(&self, session: SessionId) -> bool {
        self.by_id.contains_key(&session)
    }

    /// The record of a visible session.
    pub fn get(&self, session: SessionId) -> Option<&SessionRecord> {
        self.by_id.get(&session)
    }

    /// Every visible session id (in no particular order).
    pub fn ids(&self) -> Vec<SessionId> {
        self.by_id.keys().copied().collect()
    }

    /// The room copies to leave out of a search of `searched` (visible
    /// sessions): each member session in it whose room's timeline it
    /// holds too, where the timeline has the room's messages once
    /// ([`RoomCopies`]). A member session searched without its timeline
    /// (alone, or by a bot no longer in the room) keeps them. Where the
    /// searcher reads the timeline from a later seq (`floors`, as
    /// [`Store::history_floors`] gives them: a bot taken out and added
    /// back), only the copies written from that seq's time on are left
    /// out; the earlier ones are the only place its earlier messages are
    /// found.
    pub async fn room_copies(
        &self,
        store: &Store,
        searched: &[SessionId],
        floors: &[(SessionId, i64)],
    ) -> Result<Vec<RoomCopies>, StoreError> {
        let searched_ids: HashSet<SessionId> = searched.iter().copied().collect();
        let mut copies = Vec::new();
        for id in searched {
            let Some(record) = self.by_id.get(id) else {
                continue;
            };
            if record.key.kind != SessionKind::Group {
                continue;
            }
            let Ok(room) = RoomId::new(&record.key.peer) else {
                continue;
            };
            let timeline = room_timeline(&room).id();
            if !searched_ids.contains(&timeline) {
                continue;
            }
            let from_time = match floors.iter().find(|(s, _)| *s == timeline) {
                None => None,
                Some((_, from)) => {
                    match store.entries_after(timeline, from - 1, 1).await?.first() {
                        Some(first) => Some(first.created_at),
                        // nothing on the timeline the searcher may read yet:
                        // every copy is the only place of its message
                        None => continue,
                    }
                }
            };
            copies.push(RoomCopies {
                session: *id,
                inputs_by: crate::group::input_author(room.as_str()),
                from_time,
            });
        }
        Ok(copies)
    }

    /// The copies of messages between bots to leave out of a search of
    /// `searched` (visible sessions), where the same search covers the
    /// other copy ([`BotCopies`]): a bot's conversation with another bot
    /// searched with sessions of that other bot (its replies there are
    /// found where they arrived), and each subagent whose task session
    /// is searched (its reports are found there, where it said them). A
    /// session searched alone keeps everything.
    pub fn bot_copies(&self, searched: &[SessionId]) -> Vec<BotCopies> {
        let records: Vec<&SessionRecord> = searched
            .iter()
            .filter_map(|id| self.by_id.get(id))
            .collect();
        // searched sessions per bot
        let mut of_bot: HashMap<&str, usize> = HashMap::new();
        for record in &records {
            *of_bot.entry(record.key.bot.as_str()).or_default() += 1;
        }
        records
            .iter()
            .filter_map(|record| match record.key.kind {
                // the other bot's copy is in one of its sessions (its
                // conversation with this bot, or the session it asked
                // replies to go to); a bot in conversation with itself
                // needs another of its sessions besides this one
                SessionKind::Agent => {
                    let own = usize::from(record.key.bot.as_str() == record.key.peer);
                    let others = of_bot.get(record.key.peer.as_str()).copied().unwrap_or(0);
                    (others > own).then_some(BotCopies::Sent { session: record.id })
                }
                // a subagent's task session (its conversation with its
                // parent): every message it sends another bot is its report
                SessionKind::Subagent => Some(BotCopies::Reported {
                    subagent: record.key.bot.to_string(),
                }),
                SessionKind::Dm
                | SessionKind::Group
                | SessionKind::Routine
                | SessionKind::Hook
                | SessionKind::Room => None,
            })
            .collect()
    }

    /// How many sessions are visible.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether nothing is visible.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// A short description of a session for the model and the CLI: `DM with
/// alice`, `room standup (public timeline)`, ...
pub fn describe_session(session: &SessionRecord) -> String {
    let peer = &session.key.peer;
    match session.key.kind {
        SessionKind::Dm => format!("DM of {} with {peer}", session.key.bot),
        SessionKind::Agent => format!("messages between {} and bot {peer}", session.key.bot),
        SessionKind::Group => format!("{}'s own session in room {peer}", session.key.bot),
        SessionKind::Routine => format!("routine {peer} of {}", session.key.bot),
        SessionKind::Hook => format!("webhook {peer} of {}", session.key.bot),
        SessionKind::Subagent => format!("subagent {} working for {peer}", session.key.bot),
        SessionKind::Room => format!("room {} (public timeline)", session.key.bot),
    }
}

#[cfg(test)]
#[path = "visible_tests.rs"]
mod tests;
