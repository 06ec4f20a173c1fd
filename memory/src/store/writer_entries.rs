//! The writer's sessions, transcript entries and admissions: bots and
//! sessions upserted, each entry given the next seq of its session, and an
//! input admitted through the ledger with its entry and inbox row in one
//! job. `impl Writer`, split from `writer.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::store::chains;
use crate::store::rooms;
use crate::store::session_floors;

/// Whether a bot's sessions of `kind` are the bot's own work, owned by
/// whoever owns the bot (and moved when its owner changes), rather than
/// someone's conversation with it.
fn follows_bot_owner(kind: SessionKind) -> bool {
    match kind {
        // runs of its routines and webhooks, its conversations with other
        // bots and its subagent's: no person in them but the bot's owner
        SessionKind::Routine | SessionKind::Hook | SessionKind::Agent | SessionKind::Subagent => {
            true
        }
        // a person's conversation with the bot: theirs, whoever owns it now
        SessionKind::Dm => false,
        // its own session of a room: its owner's, who reads it from the
        // change on (`session_floors.rs`). (It stayed with the former
        // owner, who went on reading what the room said to it after losing
        // the room, and could retry its turns there on the new owner's
        // model: QA.)
        SessionKind::Group => true,
        // a room's timeline: its key's bot is a room, never a bot record
        SessionKind::Room => false,
    }
}

impl Writer {
    pub(super) fn upsert_bot(&mut self, bot: &BotRecord, now: i64) -> Result<()> {
        // its owner before this upsert: a room already shared that its new
        // owner gains through it is a new audience for them
        let former: Option<String> = self
            .conn
            .prepare_cached("SELECT owner FROM bots WHERE id = ?1")?
            .query_row(params![bot.id.as_str()], |r| r.get(0))
            .optional()?;
        let tools = serde_json::to_string(&bot.tools).unwrap_or_else(|_| "[]".into());
        self.conn
            .prepare_cached(
                "INSERT INTO bots (id, name, owner, role, provider, tools, settings, origin, created_at, updated_at, name_key)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10)
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name, owner = excluded.owner,
                   role = excluded.role, provider = excluded.provider, tools = excluded.tools,
                   settings = excluded.settings, origin = excluded.origin, updated_at = excluded.updated_at,
                   name_key = excluded.name_key",
            )?
            .execute(params![
                bot.id.as_str(),
                bot.name,
                bot.owner.as_str(),
                bot.role,
                bot.provider,
                tools,
                bot.settings.to_string(),
                bot.origin,
                now,
                crate::ids::name_key(&bot.name)
            ])?;
        self.follow_owner(bot, now)?;
        self.subagent_names_follow(&bot.id, now)?;
        if let Some(former) = former.filter(|f| f != bot.owner.as_str()) {
            rooms::admit_new_owner(&self.conn, &bot.id, &UserId::new(former.as_str())?, now)?;
            self.drop_former_owners_routines(bot, &former)?;
        }
        Ok(())
    }

    /// Deletes the routines of `bot` made through the API (`origin =
    /// 'api'`), at a change of its owner: they were made by its former
    /// owner (only a bot's owner makes its routines), and their prompts
    /// are that owner's instructions, which never run with the new
    /// owner's tools, workspace or secrets. (They went with the bot and
    /// kept firing for the new owner.) The file's routines are the
    /// operator's, and stay. Each is named in the log; the new owner may
    /// make it again.
    fn drop_former_owners_routines(&mut self, bot: &BotRecord, former: &str) -> Result<()> {
        let names: Vec<String> = self
            .conn
            .prepare_cached(
                "DELETE FROM routines WHERE bot_id = ?1 AND origin = 'api' RETURNING name",
            )?
            .query_map(params![bot.id.as_str()], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for routine in names {
            tracing::warn!(bot = %bot.id, %routine, former_owner = %former, owner = %bot.owner,
                "routine made through the API by the bot's former owner removed with the owner change \
                 (its prompt is theirs); the new owner may make it again");
        }
        Ok(())
    }

    /// Moves the bot's own work to its owner (the bot's `owner` changed in
    /// fleet.toml; session keys of routines, hooks, bots and subagents
    /// hold no user, so the next run would land in the session of the old
    /// owner): its own sessions, the approvals pending in them, and its
    /// subagents (child bots it delegated to, running or finished: their
    /// records, sessions and pending approvals). One level: a subagent
    /// delegates no further. The rooms the bot and its subagents are in
    /// are shared or not again by their members' owners. In the upsert's
    /// transaction, and run at every upsert, so work left behind by an
    /// owner change made before this rule is moved at the next start too.
    fn follow_owner(&mut self, bot: &BotRecord, now: i64) -> Result<()> {
        self.move_own_work(&bot.id, &bot.owner, now)?;
        let children: Vec<String> = self
            .conn
            .prepare_cached(
                "SELECT b.id FROM subagents s JOIN bots b ON b.id = s.id
                 WHERE s.parent = ?1 AND b.owner != ?2",
            )?
            .query_map(params![bot.id.as_str(), bot.owner.as_str()], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for child in &children {
            let child = BotId::new(child.as_str())?;
            self.conn
                .prepare_cached("UPDATE bots SET owner = ?2, updated_at = ?3 WHERE id = ?1")?
                .execute(params![child.as_str(), bot.owner.as_str(), now])?;
            self.move_own_work(&child, &bot.owner, now)?;
            self.floor_task_of_unread_origin(&child, bot, now)?;
        }
        if !children.is_empty() {
            tracing::info!(bot = %bot.id, owner = %bot.owner, subagents = children.len(), "bot's subagents moved to its owner");
        }
        self.rooms_follow_members(&bot.id, now)
    }

    /// A subagent's task given in a session that stays another person's
    /// (the former owner's DM with the bot), or in the part of a session
    /// that its new owner reads no more of (the runs of a routine the
    /// former owner made through the API; a room's turns have no Task):
    /// the task session goes to the new owner read from the change on, as
    /// a room session is. The task and the steering in it
    /// are that person's words (QA: a task given in the former owner's
    /// DM, "read my tax return", moved whole with the subagent, and the
    /// new owner found it by search); such a task never runs again
    /// (`owner_changed`), so nothing it needs is cut from its context.
    /// Run after the parent's sessions moved (and got their floors): a
    /// task given where the new owner reads keeps its history, and one
    /// the owner gave themselves (the bot given back) is read whole again.
    fn floor_task_of_unread_origin(
        &mut self,
        child: &BotId,
        parent: &BotRecord,
        now: i64,
    ) -> Result<()> {
        let origin: Option<(String, Option<String>, Option<i64>)> = self
            .conn
            .prepare_cached(
                "SELECT parent_session, given_by, given_seq FROM subagents WHERE id = ?1",
            )?
            .query_row(params![child.as_str()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        let Some((origin, given_by, given_seq)) = origin else {
            return Ok(());
        };
        let origin: SessionId = origin.parse()?;
        let origin_owner: Option<String> = self
            .conn
            .prepare_cached("SELECT owner FROM sessions WHERE id = ?1")?
            .query_row(params![origin.to_string()], |r| r.get(0))
            .optional()?;
        let task = SessionKey {
            bot: child.clone(),
            kind: SessionKind::Subagent,
            peer: parent.id.to_string(),
        }
        .id();
        // the session went to the owner read from a seq on (the routine
        // a former owner made through the API: its runs, and the task one
        // gave, are theirs; review: such a task was read whole): a task
        // given before that seq is read no more than the runs around it.
        // The file's routine is read from its first run on, so a task its
        // runs gave is read (by position, not time: the floor's time is
        // the change's).
        let given_unread = match (
            session_floors::floor(&self.conn, origin, &parent.owner)?,
            given_seq,
        ) {
            (Some((from_seq, _)), Some(seq)) => seq < from_seq,
            _ => false,
        };
        // the owner gave it themselves (given back after a change: the
        // give-back floors the routine's session for them too, from then)
        let theirs = given_by.is_some_and(|g| g == parent.owner.as_str());
        if theirs || (!given_unread && origin_owner.is_none_or(|o| o == parent.owner.as_str())) {
            // given back to the person whose task it is: read whole again
            // (review: the floor of the change before stayed, and a task
            // given more work ran without its start in its context)
            return session_floors::clear(&self.conn, task);
        }
        let from = self.next_seq(task)?;
        session_floors::set(&self.conn, task, &parent.owner, from, now)
    }

    /// Decides again whether the rooms `bot` or one of its subagents is in
    /// are shared, now that their owner may have changed: a room whose
    /// members belong to more than one user is shared, so its members run
    /// there without their owners' private connectors, and every member's
    /// owner may use it. (Fixed when the room was created, a member given
    /// to another user kept searching its new owner's DMs into a room its
    /// former owner reads.)
    fn rooms_follow_members(&mut self, bot: &BotId, now: i64) -> Result<()> {
        for (room, shared) in rooms::follow_member_owners(&self.conn, bot, now)? {
            tracing::info!(%bot, %room, shared, "room's sharing follows its members' owners");
        }
        Ok(())
    }

    /// Moves the sessions of `bot` whose kind [`follows_bot_owner`] and
    /// whose stored owner is another user to `owner`, forgets the bot's
    /// sessions kept for change signals (so they are read again with their
    /// new owner), then gives the approvals pending in moved sessions to
    /// their new owner.
    fn move_own_work(&mut self, bot: &BotId, owner: &UserId, now: i64) -> Result<()> {
        // with, for a routine's session, since when the file's routine of
        // its name is (`None`: none of the file's). The session is the
        // name's: runs of a routine made through the API, which the change
        // deletes (`drop_former_owners_routines`), of one its owner
        // deleted before, and of one the file's replaced under its name,
        // are in it before the file's (QA found each moved whole)
        let others: Vec<(String, String, Option<i64>)> = self
            .conn
            .prepare_cached(
                "SELECT s.id, s.kind, (SELECT r.created_at FROM routines r \
                   WHERE r.bot_id = s.bot_id AND r.name = s.peer AND r.origin = 'config') \
                 FROM sessions s WHERE s.bot_id = ?1 AND s.owner != ?2",
            )?
            .query_map(params![bot.as_str(), owner.as_str()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut moved = 0;
        for (id, kind, file_since) in others {
            let kind = SessionKind::parse(&kind).ok_or_else(|| StoreError::Corrupt {
                table: "sessions",
                detail: format!("kind {kind}"),
            })?;
            if !follows_bot_owner(kind) {
                continue;
            }
            moved += self
                .conn
                .prepare_cached("UPDATE sessions SET owner = ?2 WHERE id = ?1")?
                .execute(params![id, owner.as_str()])?;
            let session: SessionId = id.parse()?;
            // what the room said to the bot before is not the new owner's
            // to read, as the room's timeline is not; nor the runs of a
            // routine that is not the file's: its prompts were the former
            // owner's, and what the bot sent went to them (QA: the new
            // owner read and searched them, and a routine made again under
            // its name ran with them in its context)
            let from = match (kind, file_since) {
                (SessionKind::Group, _) | (SessionKind::Routine, None) => {
                    Some(self.next_seq(session)?)
                }
                (SessionKind::Routine, Some(since)) => self.first_seq_since(session, since)?,
                _ => None,
            };
            if let Some(from) = from {
                session_floors::set(&self.conn, session, owner, from, now)?;
            }
        }
        if moved > 0 {
            tracing::info!(%bot, %owner, sessions = moved, "bot's sessions moved to its owner");
            self.sessions.retain(|_, (b, _)| b != bot);
        }
        let approvals = self.approvals_follow_sessions(bot, now)?;
        if approvals > 0 {
            tracing::info!(%bot, %owner, approvals, "bot's pending approvals moved to its owner");
        }
        Ok(())
    }

    /// Where the file's routine's runs begin in its `session`, when
    /// earlier runs (of another routine of its name) are there: the first
    /// entry written `since` (ms) on, or the next seq when none is yet;
    /// `None` when every entry is the file's routine's.
    fn first_seq_since(&mut self, session: SessionId, since: i64) -> Result<Option<i64>> {
        let (earlier, first): (bool, Option<i64>) = self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM entries WHERE session_id = ?1 AND created_at < ?2), \
                        (SELECT MIN(seq) FROM entries WHERE session_id = ?1 AND created_at >= ?2)",
            )?
            .query_row(params![session.to_string(), since], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        if !earlier {
            return Ok(None);
        }
        Ok(Some(match first {
            Some(seq) => seq,
            None => self.next_seq(session)?,
        }))
    }

    /// Inserts a new bot; [`StoreError::Taken`] if its id is held, or
    /// differs from a bot's only in case (`B1` while `b1` exists: mentions
    /// ignore case; ids are ASCII, which `lower` folds), or is a room's in
    /// any case (rooms take no bot's id either: search hits and the
    /// `transcripts/<id>/` mirror would name both). Decided here, in the
    /// one statement that inserts it, so two creations of one id (or of
    /// `B1` and `b1`) cannot both succeed (a read before the write could
    /// not tell).
    pub(super) fn create_bot(&mut self, bot: &BotRecord, now: i64) -> Result<()> {
        let tools = serde_json::to_string(&bot.tools).unwrap_or_else(|_| "[]".into());
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO bots (id, name, owner, role, provider, tools, settings, origin, created_at, updated_at, name_key)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10
                 WHERE NOT EXISTS (SELECT 1 FROM bots WHERE lower(id) = lower(?1))
                   AND NOT EXISTS (SELECT 1 FROM rooms WHERE id = ?1 COLLATE NOCASE)
                 ON CONFLICT (id) DO NOTHING",
            )?
            .execute(params![
                bot.id.as_str(),
                bot.name,
                bot.owner.as_str(),
                bot.role,
                bot.provider,
                tools,
                bot.settings.to_string(),
                bot.origin,
                now,
                crate::ids::name_key(&bot.name)
            ])?;
        if inserted == 0 {
            return Err(StoreError::Taken {
                what: "bot",
                id: bot.id.to_string(),
            });
        }
        Ok(())
    }

    pub(super) fn ensure_session(&mut self, session: &SessionRecord, now: i64) -> Result<()> {
        if self.sessions.contains_key(&session.id) {
            return Ok(());
        }
        if session.id != session.key.id() {
            return Err(StoreError::Rejected(format!(
                "session id {} does not match its key",
                session.id
            )));
        }
        self.conn
            .prepare_cached(
                "INSERT INTO sessions (id, bot_id, kind, peer, owner, epoch, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6) ON CONFLICT (id) DO NOTHING",
            )?
            .execute(params![
                session.id.to_string(),
                session.key.bot.as_str(),
                session.key.kind.as_str(),
                session.key.peer,
                session.owner.as_str(),
                now
            ])?;
        // The stored record wins if it existed with another owner.
        self.session_meta(session.id)?;
        Ok(())
    }

    pub(super) fn session_meta(&mut self, session: SessionId) -> Result<(BotId, UserId)> {
        if let Some(meta) = self.sessions.get(&session) {
            return Ok(meta.clone());
        }
        let row: Option<(String, String)> = self
            .conn
            .prepare_cached("SELECT bot_id, owner FROM sessions WHERE id = ?1")?
            .query_row(params![session.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((bot, owner)) = row else {
            return Err(StoreError::NotFound {
                what: "session",
                id: session.to_string(),
            });
        };
        let meta = (BotId::new(bot)?, UserId::new(owner)?);
        self.sessions.insert(session, meta.clone());
        Ok(meta)
    }

    pub(super) fn next_seq(&mut self, session: SessionId) -> Result<i64> {
        let last = match self.seqs.get(&session) {
            Some(seq) => *seq,
            None => self
                .conn
                .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM entries WHERE session_id = ?1")?
                .query_row(params![session.to_string()], |r| r.get(0))?,
        };
        Ok(last + 1)
    }

    pub(super) fn append(
        &mut self,
        entry: &NewEntry,
        now: i64,
        touched: &mut Touched,
    ) -> Result<(EntryId, i64, i64, i64)> {
        self.session_meta(entry.session)?;
        let seq = self.next_seq(entry.session)?;
        let body = serde_json::to_string(&entry.kind).map_err(|e| StoreError::Corrupt {
            table: "entries",
            detail: e.to_string(),
        })?;
        self.conn
            .prepare_cached(
                "INSERT INTO entries (session_id, seq, id, kind, author, turn_id, body, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                entry.session.to_string(),
                seq,
                entry.id.to_string(),
                entry.kind.name(),
                entry.author,
                entry.turn.map(|t| t.to_string()),
                body,
                now
            ])?;
        let gid = self.conn.last_insert_rowid();
        if let Some(chain) = entry.kind.chain() {
            // a message between bots: counted against its chain's breadth
            // in the transaction that writes it
            chains::count(&self.conn, &chain, now)?;
        }
        self.seqs.insert(entry.session, seq);
        let slot = touched.entry(entry.session).or_insert(seq);
        *slot = (*slot).max(seq);
        Ok((entry.id, seq, gid, now))
    }

    /// Admits through the ledger; `inbox` writes the inbox row that
    /// routes the input to a bot (room timelines have none).
    pub(super) fn admit(
        &mut self,
        req: &AdmitRequest,
        now: i64,
        touched: &mut Touched,
        inbox: bool,
    ) -> Result<AdmitOutcome> {
        if let Some(answer) = crate::store::store_ledger::answer(&self.conn, req)? {
            return Ok(answer);
        }
        if let Some(t) = req.nonce_time_ms
            && t < self.horizon_ms
        {
            {
                return Ok(AdmitOutcome::Unknown {
                    reason: format!(
                        "it was made before {} and the ledger no longer holds records from then \
                         (pruned past retention or restored from an older snapshot)",
                        chrono::DateTime::<chrono::Utc>::from_timestamp_millis(self.horizon_ms)
                            .map(|d| d.to_rfc3339())
                            .unwrap_or_default()
                    ),
                });
            }
        }
        let session_id = req.session.id();
        if req.entry.session != session_id {
            return Err(StoreError::Rejected(
                "admitted entry must belong to the admitted session".into(),
            ));
        }
        self.ensure_session(
            &SessionRecord {
                id: session_id,
                key: req.session.clone(),
                owner: req.owner.clone(),
                epoch: 0,
                last_seq: 0,
                created_at: now,
            },
            now,
        )?;
        let (entry_id, seq, gid, _) = self.append(&req.entry, now, touched)?;
        self.conn
            .prepare_cached(
                "INSERT INTO ledger (source, nonce, digest, bot_id, session_id, seq, gid, entry_id, created_at, nonce_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![
                req.source,
                req.nonce,
                req.digest.to_hex(),
                req.session.bot.as_str(),
                session_id.to_string(),
                seq,
                gid,
                entry_id.to_string(),
                now,
                // kept until the horizon passes it too (`PruneLedger`)
                req.nonce_time_ms
            ])?;
        if inbox {
            self.conn
                .prepare_cached(
                    "INSERT INTO inbox (bot_id, gid, session_id, seq, priority, turn_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, NULL)",
                )?
                .execute(params![
                    req.session.bot.as_str(),
                    gid,
                    session_id.to_string(),
                    seq,
                    req.priority.as_i64()
                ])?;
        }
        Ok(AdmitOutcome::Accepted(AdmittedRecord {
            bot: req.session.bot.clone(),
            session: session_id,
            seq,
            gid,
            entry_id,
            admitted_at: now,
        }))
    }
}

#[cfg(test)]
#[path = "owner_change_tests.rs"]
mod owner_change_tests;
#[cfg(test)]
#[path = "task_origin_tests.rs"]
mod task_origin_tests;
