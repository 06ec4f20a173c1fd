//! A change of members that gives a room to users who could not read it
//! (one of their bots joins while none was in it): they read the
//! timeline from the change's notice on (`rooms::audience`), and each
//! member's session of the room starts a new context epoch — a `summary`
//! entry covering everything before, the mechanism compaction uses — so
//! what a member saw and did there before (tool results of its owner's
//! private surface, its drafts, an earlier summary) is neither sent to
//! the model again nor summarised into the room's later summaries. One
//! transaction with the change: a crash leaves both or neither.

use rusqlite::params;

use super::super::Touched;
use super::super::Writer;
use crate::error::Result;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::RoomId;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::store::rooms::audience;

/// The change: `room`'s members go `from` → `to`.
pub(super) struct Change<'a> {
    pub(super) room: &'a RoomId,
    pub(super) from: &'a [BotId],
    pub(super) to: &'a [BotId],
}

impl Writer {
    /// Records who gains the room with `change` (reading it from
    /// `notice_seq`, the change's notice) and, with `fresh_start` (the
    /// summary's text), cuts every member's session of the room. Nothing
    /// when nobody gains it.
    pub(super) fn welcome_newcomers(
        &mut self,
        change: &Change<'_>,
        notice_seq: i64,
        fresh_start: Option<&str>,
        now: i64,
        touched: &mut Touched,
    ) -> Result<()> {
        let users = audience::newcomers(&self.conn, change.room, change.from, change.to)?;
        if users.is_empty() {
            return Ok(());
        }
        audience::admit(&self.conn, change.room, &users, notice_seq, now)?;
        let Some(text) = fresh_start else {
            return Ok(());
        };
        for (session, epoch) in audience::member_sessions(&self.conn, change.room, change.to)? {
            let last = self.next_seq(session)? - 1;
            if last <= 0 {
                continue;
            }
            let epoch = epoch + 1;
            let summary = NewEntry {
                id: EntryId::new_v7(),
                session,
                author: "system".into(),
                turn: None,
                kind: EntryKind::Summary {
                    text: text.to_owned(),
                    covers_to_seq: last,
                    epoch,
                },
            };
            self.append(&summary, now, touched)?;
            self.conn
                .prepare_cached("UPDATE sessions SET epoch = ?2 WHERE id = ?1")?
                .execute(params![session.to_string(), epoch])?;
        }
        Ok(())
    }
}
