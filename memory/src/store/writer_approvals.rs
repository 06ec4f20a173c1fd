//! The writer's side of approvals: request (with the per-bot limit and
//! lazy expiry), decide, consume, expire, the move of pending ones to
//! their session's new owner, and the review log. Every status
//! change appends an `approval` card entry to the approval's session, in
//! the same transaction, so clients render the card's newest state.

use rusqlite::OptionalExtension;
use rusqlite::params;

use super::Touched;
use super::Writer;
use crate::error::Result;
use crate::error::StoreError;
use crate::ids::ApprovalId;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::UserId;
use crate::record::ApprovalDecision;
use crate::record::ApprovalRecord;
use crate::record::ApprovalRequestOutcome;
use crate::record::ApprovalStatus;
use crate::record::EntryKind;
use crate::record::ExpiryCause;
use crate::record::NewApproval;
use crate::record::NewEntry;
use crate::record::ReviewRecord;
use crate::store::approvals;

/// Author of approval cards.
const CARD_AUTHOR: &str = "system";

impl Writer {
    /// Creates a pending approval unless the same action is already
    /// pending in the same session or the bot has `max_pending` pending
    /// ones. Stale approvals of the bot are expired first, so they do not
    /// count.
    pub(super) fn request_approval(
        &mut self,
        new: &NewApproval,
        now: i64,
        touched: &mut Touched,
    ) -> Result<ApprovalRequestOutcome> {
        self.expire_approvals(Some(&new.bot), now, touched)?;
        let open = approvals::open_of_bot(&self.conn, &new.bot, now)?;
        let pending: Vec<ApprovalRecord> = open.into_iter().filter(|a| a.is_pending()).collect();
        // Only within the session: an approval belongs to its session's
        // owner and expires with that session's user messages, so another
        // session of the bot (another person's DM, a routine) asking the
        // same action gets its own approval, card and expiry.
        if let Some(same) = pending
            .iter()
            .find(|a| a.fingerprint == new.fingerprint && a.session == new.session)
        {
            return Ok(ApprovalRequestOutcome::Existing(same.clone()));
        }
        if pending.len() >= new.max_pending as usize {
            return Ok(ApprovalRequestOutcome::TooMany { pending });
        }
        let (session_bot, owner) = self.session_meta(new.session)?;
        if session_bot != new.bot {
            return Err(StoreError::Rejected(format!(
                "session {} belongs to bot {session_bot}, not {}",
                new.session, new.bot
            )));
        }
        // the newest user message: a backward walk of the session's
        // (session_id, seq) index that stops at the first match. Only a
        // DM holds user messages: in another session (a routine's, a
        // hook's, where no person writes) the walk read every entry, on
        // the writer, for each approval asked
        let epoch: i64 = self
            .conn
            .prepare_cached(
                "SELECT e.seq FROM entries e
                 WHERE e.session_id = ?1 AND e.kind = 'user_message'
                   AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = ?1 AND s.kind = 'dm')
                 ORDER BY e.seq DESC LIMIT 1",
            )?
            .query_row(params![new.session.to_string()], |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        let record = ApprovalRecord {
            id: new.id,
            bot: new.bot.clone(),
            session: new.session,
            owner,
            turn: new.turn,
            call_id: new.call_id.clone(),
            tool: new.tool.clone(),
            fingerprint: new.fingerprint.clone(),
            summary: new.summary.clone(),
            reason: new.reason.clone(),
            action: new.action.clone(),
            epoch,
            status: ApprovalStatus::Pending,
            expired_by: None,
            created_at: now,
            expires_at: now + new.ttl_ms.max(1),
            decided_at: None,
            decided_by: None,
            consumed_at: None,
        };
        self.conn
            .prepare_cached(
                "INSERT INTO approvals (id, bot_id, session_id, owner, turn_id, call_id, tool,
                   fingerprint, summary, reason, action, epoch, status, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 'pending', ?13, ?14)",
            )?
            .execute(params![
                record.id.to_string(),
                record.bot.as_str(),
                record.session.to_string(),
                record.owner.as_str(),
                record.turn.map(|t| t.to_string()),
                record.call_id,
                record.tool,
                record.fingerprint,
                record.summary,
                record.reason,
                record.action.to_string(),
                record.epoch,
                record.created_at,
                record.expires_at,
            ])?;
        self.append_card(&record, now, touched)?;
        Ok(ApprovalRequestOutcome::Created(record))
    }

    /// Records a person's decision on a pending approval. An approved one
    /// may be used within a TTL of the decision.
    pub(super) fn decide_approval(
        &mut self,
        id: ApprovalId,
        decision: ApprovalDecision,
        by: &UserId,
        now: i64,
        touched: &mut Touched,
    ) -> Result<ApprovalRecord> {
        let mut record = self.approval_for(id, Some(by), now)?;
        if !record.is_pending() {
            return Err(StoreError::Rejected(format!(
                "approval {id} is {}, not pending",
                record.status.as_str()
            )));
        }
        let window = (record.expires_at - record.created_at).max(1);
        record.status = decision.status();
        record.decided_at = Some(now);
        record.decided_by = Some(by.clone());
        record.expires_at = now + window;
        self.conn
            .prepare_cached(
                "UPDATE approvals SET status = ?2, decided_at = ?3, decided_by = ?4, expires_at = ?5
                 WHERE id = ?1 AND status = 'pending'",
            )?
            .execute(params![
                id.to_string(),
                record.status.as_str(),
                now,
                by.as_str(),
                record.expires_at
            ])?;
        self.append_card(&record, now, touched)?;
        Ok(record)
    }

    /// Marks an approved action as run; an approval is used once.
    pub(super) fn consume_approval(&mut self, id: ApprovalId, now: i64) -> Result<ApprovalRecord> {
        let mut record = self.approval_for(id, None, now)?;
        if !record.is_usable() {
            let state = if record.consumed_at.is_some() {
                "already used"
            } else {
                record.status.as_str()
            };
            return Err(StoreError::Rejected(format!(
                "approval {id} is {state}; it cannot be used"
            )));
        }
        record.consumed_at = Some(now);
        self.conn
            .prepare_cached("UPDATE approvals SET consumed_at = ?2 WHERE id = ?1")?
            .execute(params![id.to_string(), now])?;
        Ok(record)
    }

    /// Persists the expiry of every open approval (of `bot`, or all) that
    /// is expired as of `now`, with a card each. Returns how many.
    pub(super) fn expire_approvals(
        &mut self,
        bot: Option<&BotId>,
        now: i64,
        touched: &mut Touched,
    ) -> Result<usize> {
        let expired: Vec<ApprovalRecord> = approvals::open_rows(&self.conn, bot)?
            .into_iter()
            .map(|r| r.effective(now))
            .filter(|a| a.status == ApprovalStatus::Expired)
            .collect();
        for record in &expired {
            self.conn
                .prepare_cached(
                    "UPDATE approvals SET status = 'expired', expired_by = ?2 WHERE id = ?1",
                )?
                .execute(params![
                    record.id.to_string(),
                    record.expired_by.map(|c| c.as_str())
                ])?;
            self.append_card(record, now, touched)?;
        }
        Ok(expired.len())
    }

    /// Gives the pending approvals of `bot` to the owner of the session
    /// each was asked in, where that changed (the bot's owner changed:
    /// `follow_owner` moved its own sessions). Whoever a session belongs to
    /// decides what the bot asks there, so a person's DM keeps its
    /// approvals with that person. Approvals already decided or expired
    /// stay with the owner they had: the record of what they decided (or
    /// let lapse). One that the owner change itself expires (a subagent's
    /// whose task came from its parent's former owner: `owner_changed`)
    /// before its TTL moves with its session too, so the session's owner reads it, and
    /// is answered why it can no longer be decided; and so does one
    /// stored so, which nobody decided (the bot given back takes it back).
    /// Returns how many moved.
    pub(super) fn approvals_follow_sessions(&mut self, bot: &BotId, now: i64) -> Result<usize> {
        let pending: Vec<ApprovalId> = approvals::pending_off_session(&self.conn, bot)?
            .into_iter()
            .filter_map(|r| {
                // stored as lapsed by an owner change (the query's other
                // rows are stored pending): undecided, it follows on
                let lapsed = r.record.status == ApprovalStatus::Expired;
                let a = r.effective(now);
                (lapsed
                    || a.is_pending()
                    || (a.expired_by == Some(ExpiryCause::OwnerChanged) && now < a.expires_at))
                    .then_some(a.id)
            })
            .collect();
        let mut moved = 0;
        for id in pending {
            moved += self
                .conn
                .prepare_cached(
                    "UPDATE approvals
                     SET owner = (SELECT s.owner FROM sessions s WHERE s.id = approvals.session_id)
                     WHERE id = ?1 AND (status = 'pending'
                       OR (status = 'expired' AND expired_by = 'owner_changed'))",
                )?
                .execute(params![id.to_string()])?;
        }
        Ok(moved)
    }

    /// Adds a row to the review log.
    pub(super) fn record_review(&mut self, review: &ReviewRecord, now: i64) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO reviews (bot_id, session_id, turn_id, call_id, tool, surface, mode,
                   decision, reason, fingerprint, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                review.bot.as_str(),
                review.session.to_string(),
                review.turn.map(|t| t.to_string()),
                review.call_id,
                review.tool,
                review.surface,
                review.mode,
                review.decision,
                review.reason,
                review.fingerprint,
                now
            ])?;
        Ok(())
    }

    /// An approval with its effective status; `owner` (when given) must
    /// match, otherwise it is reported missing.
    fn approval_for(
        &mut self,
        id: ApprovalId,
        owner: Option<&UserId>,
        now: i64,
    ) -> Result<ApprovalRecord> {
        match approvals::get_row(&self.conn, id)?.map(|r| r.effective(now)) {
            Some(r) if owner.is_none_or(|o| *o == r.owner) => Ok(r),
            _ => Err(StoreError::NotFound {
                what: "approval",
                id: id.to_string(),
            }),
        }
    }

    /// Appends the card of an approval's current state to its session.
    fn append_card(
        &mut self,
        record: &ApprovalRecord,
        now: i64,
        touched: &mut Touched,
    ) -> Result<()> {
        let entry = NewEntry {
            id: EntryId::new_v7(),
            session: record.session,
            author: CARD_AUTHOR.into(),
            turn: match record.status {
                ApprovalStatus::Pending => record.turn,
                ApprovalStatus::Approved | ApprovalStatus::Denied | ApprovalStatus::Expired => None,
            },
            kind: EntryKind::Approval {
                approval: record.id,
                status: record.status,
                tool: record.tool.clone(),
                summary: record.summary.clone(),
                reason: record.reason.clone(),
                expires_at: record.expires_at,
                expired_by: record.expired_by,
            },
        };
        self.append(&entry, now, touched).map(|_| ())
    }
}
