//! Approval rows: how they are read (by readers and by the writer), with
//! their *effective* status as of a given time. A stored `pending` past its
//! TTL or behind a newer user message of its session, and a stored
//! `approved` left unused past its window, read as `expired`: every read
//! computes the state from the stored times, so no read depends on whether
//! the expiry was written yet. The writer persists it (`ExpireApprovals`)
//! only so the session's card says so too. An open approval (pending, or
//! approved and unused) of a subagent its parent stopped reads `expired`
//! too (`subagent_stopped`): a stopped subagent takes no more work, so it
//! never reads a decision or repeats the call; StopSubagent writes that
//! expiry in the transaction of the stop. So does an open approval of a
//! subagent whose task was delegated from work that is no longer its
//! parent's owner's (`owner_changed`: fleet.toml gave the parent to
//! another user, and every turn of that task ends without running).

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::Row;
use rusqlite::params;

use crate::error::Result;
use crate::error::StoreError;
use crate::ids::ApprovalId;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::UserId;
use crate::record::ApprovalRecord;
use crate::record::ApprovalStatus;
use crate::record::ExpiryCause;
use crate::record::ReviewRecord;

/// Whether a user message newer than the approval's epoch exists in its
/// session. Only a DM holds user messages (a person's message to the
/// bot; a room's are in its timeline, where no bot acts), so the session
/// is checked first (one primary-key lookup): in a session where no
/// person writes (a routine's, a hook's, a room member's, another
/// bot's) the scan of its entries after the epoch read every one of them,
/// for each approval read (200 ms for a page of 100 approvals in a
/// routine's session of 20,000 entries). In a DM it is a range scan of
/// the entries after the epoch on `(session_id, seq)`, which stops at
/// the first user message. A partial index of user messages made it one
/// seek everywhere but cost every admitted message an index write (~9%
/// of `fleet-load`'s turns/s, measured). A macro, to be spliced into the
/// `const`s below with `concat!`.
macro_rules! newer_user_message {
    () => {
        "(EXISTS (SELECT 1 FROM sessions us WHERE us.id = a.session_id AND us.kind = 'dm')
          AND EXISTS (SELECT 1 FROM entries e WHERE e.session_id = a.session_id
                AND e.seq > a.epoch AND e.kind = 'user_message'))"
    };
}

/// Whether, in a conversation between two bots, the other bot asked
/// something new (a message that is no answer) since the approval was
/// decided: a new request, as a person's new message is in a DM. Only a
/// session of kind `agent` is read, and only its newest 200 entries,
/// backwards on `(session_id, seq)`: such a
/// session has no user message, so its epoch is 0, and a scan from it
/// read the whole conversation for each check (the trap
/// [`newer_user_message`] names). A question further back than that,
/// within the approval's window, is missed: the call is refused as
/// already run, as before, never run twice.
macro_rules! newer_bot_question {
    () => {
        "(EXISTS (SELECT 1 FROM sessions bs WHERE bs.id = a.session_id AND bs.kind = 'agent')
          AND EXISTS (SELECT 1 FROM (SELECT e.kind, e.body, e.created_at FROM entries e
                WHERE e.session_id = a.session_id ORDER BY e.seq DESC LIMIT 200) n
                WHERE n.kind = 'agent_message'
                AND n.created_at > COALESCE(a.consumed_at, a.decided_at)
                AND COALESCE(json_extract(n.body, '$.answers'), 0) = 0))"
    };
}

/// Whether the approval's bot is a subagent its parent stopped (a lookup
/// of the subagents' primary key). A macro, as [`newer_user_message`].
macro_rules! subagent_stopped {
    () => {
        "EXISTS (SELECT 1 FROM subagents sa WHERE sa.id = a.bot_id AND sa.status = 'stopped')"
    };
}

/// Whether the approval's bot is a subagent whose task (its record's
/// `parent_session`) is work that is no longer its parent's owner's: the
/// DM of a person who no longer owns the parent, or the parent's
/// conversation with a bot that belongs to another user (fleet.toml gave
/// one of them to someone else), or a task its owner reads from the
/// change on (the approval's session, its task session, has a floor for
/// them: given by a routine the former owner made through the API;
/// `Writer::floor_task_of_unread_origin`). Every turn of such a task ends
/// `owner_changed` without running (`engine/owner_changed.rs`,
/// `FormerOwnersTask`), so it never reads a decision nor repeats the call.
/// Lookups of primary keys. A macro, as [`newer_user_message`].
macro_rules! former_owners_task {
    () => {
        "EXISTS (SELECT 1 FROM subagents sa
           JOIN bots pb ON pb.id = sa.parent
           JOIN sessions ps ON ps.id = sa.parent_session
           WHERE sa.id = a.bot_id
             AND ((ps.kind = 'dm' AND ps.peer != pb.owner)
               OR (ps.kind = 'agent' AND EXISTS (SELECT 1 FROM bots ob
                     WHERE ob.id = ps.peer AND ob.owner != pb.owner))
               OR EXISTS (SELECT 1 FROM session_floors tf
                     WHERE tf.session_id = a.session_id AND tf.user_id = pb.owner)))"
    };
}

/// The columns of an approval, then whether a user message newer than its
/// epoch exists in its session, whether its bot is a stopped subagent,
/// and whether its bot is a subagent working on a former owner's task.
const SELECT: &str = concat!(
    "SELECT a.id, a.bot_id, a.session_id, a.owner, a.turn_id, a.call_id, a.tool,
        a.fingerprint, a.summary, a.reason, a.action, a.epoch, a.status, a.expired_by,
        a.created_at, a.expires_at, a.decided_at, a.decided_by, a.consumed_at,
        ",
    newer_user_message!(),
    ",
        ",
    subagent_stopped!(),
    ",
        ",
    former_owners_task!(),
    "
    FROM approvals a"
);

/// An approval as stored, plus whether a newer user message exists,
/// whether its bot is a stopped subagent, and whether its bot is a
/// subagent whose task is a former owner's ([`former_owners_task`]).
pub(crate) struct Stored {
    pub(crate) record: ApprovalRecord,
    pub(crate) newer_user_message: bool,
    pub(crate) subagent_stopped: bool,
    pub(crate) former_owners_task: bool,
}

impl Stored {
    /// The record with its effective status as of `now`: an open one
    /// (pending, or approved and unused) of a stopped subagent is expired
    /// by the stop, whatever its times say (the stop is final; its cause
    /// says more than a TTL that also ran out), and one of a subagent
    /// whose task is a former owner's by the owner change (its action can
    /// never run, whoever decides) while its TTL lasts: one whose TTL ran
    /// out first lapsed with its owner, and stays theirs (review: written
    /// `owner_changed`, it followed its session to every later owner);
    /// else [`ApprovalRecord::effective`].
    pub(crate) fn effective(mut self, now: i64) -> ApprovalRecord {
        let open = self.record.is_pending() || self.record.is_usable();
        let (status, cause) = if self.subagent_stopped && open {
            (ApprovalStatus::Expired, Some(ExpiryCause::SubagentStopped))
        } else if self.former_owners_task && open && now < self.record.expires_at {
            (ApprovalStatus::Expired, Some(ExpiryCause::OwnerChanged))
        } else {
            self.record.effective(now, self.newer_user_message)
        };
        self.record.status = status;
        self.record.expired_by = cause;
        self.record
    }
}

fn corrupt(detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table: "approvals",
        detail: detail.to_string(),
    }
}

type Raw = (
    [String; 4],
    Option<String>,
    [String; 6],
    i64,
    String,
    Option<String>,
    (i64, i64, Option<i64>, Option<String>, Option<i64>),
    (bool, bool, bool),
);

fn raw(r: &Row<'_>) -> rusqlite::Result<Raw> {
    Ok((
        [r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?],
        r.get(4)?,
        [
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
            r.get(9)?,
            r.get(10)?,
        ],
        r.get(11)?,
        r.get(12)?,
        r.get(13)?,
        (r.get(14)?, r.get(15)?, r.get(16)?, r.get(17)?, r.get(18)?),
        (r.get(19)?, r.get(20)?, r.get(21)?),
    ))
}

fn parse(raw: Raw) -> Result<Stored> {
    let (
        [id, bot, session, owner],
        turn,
        [call_id, tool, fingerprint, summary, reason, action],
        epoch,
        status,
        expired_by,
        times,
        (newer, stopped, former_owners),
    ) = raw;
    let (created_at, expires_at, decided_at, decided_by, consumed_at) = times;
    Ok(Stored {
        record: ApprovalRecord {
            id: id.parse()?,
            bot: BotId::new(bot)?,
            session: session.parse()?,
            owner: UserId::new(owner)?,
            turn: turn.map(|t| t.parse()).transpose()?,
            call_id,
            tool,
            fingerprint,
            summary,
            reason,
            action: serde_json::from_str(&action).map_err(corrupt)?,
            epoch,
            status: ApprovalStatus::parse(&status)
                .ok_or_else(|| corrupt(format!("status {status:?}")))?,
            expired_by: expired_by
                .map(|c| ExpiryCause::parse(&c).ok_or_else(|| corrupt(format!("expired_by {c:?}"))))
                .transpose()?,
            created_at,
            expires_at,
            decided_at,
            decided_by: decided_by.map(UserId::new).transpose()?,
            consumed_at,
        },
        newer_user_message: newer,
        subagent_stopped: stopped,
        former_owners_task: former_owners,
    })
}

/// Rows matching `filter` (SQL after `FROM approvals a`).
pub(crate) fn query(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<Stored>> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT} {filter}"))?;
    let raws = stmt
        .query_map(params, raw)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    raws.into_iter().map(parse).collect()
}

/// One approval as stored.
pub(crate) fn get_row(conn: &Connection, id: ApprovalId) -> Result<Option<Stored>> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT} WHERE a.id = ?1"))?;
    let raw = stmt.query_row(params![id.to_string()], raw).optional()?;
    raw.map(parse).transpose()
}

/// One approval with its effective status.
pub(crate) fn get(conn: &Connection, id: ApprovalId, now: i64) -> Result<Option<ApprovalRecord>> {
    Ok(get_row(conn, id)?.map(|r| r.effective(now)))
}

/// A user's approvals, effectively pending ones first (oldest first), then
/// the rest newest first; at most `limit`. Ordered by the status as of
/// `now` before the limit (ordering by the stored status let a stored
/// `pending` that had expired take the place of a newer decided one, so
/// this page and the listing by status disagreed). Two reads, each
/// stopping at `limit`: the pending ones through the partial index
/// `approvals_owner_pending` (a stored `pending` that reads expired is
/// skipped there and found by the second read), then the others newest
/// first through `approvals_owner`. One read ordered by the computed
/// status read every approval of the user (58 ms at 9,300).
pub(crate) fn of_owner(
    conn: &Connection,
    owner: &UserId,
    now: i64,
    limit: i64,
) -> Result<Vec<ApprovalRecord>> {
    let mut out = of_owner_with_status(conn, owner, ApprovalStatus::Pending, now, limit)?;
    let left = limit.saturating_sub(i64::try_from(out.len()).unwrap_or(i64::MAX));
    if left > 0 {
        let rows = query(
            conn,
            &owner_not_pending_filter(),
            params![owner.as_str(), now, left],
        )?;
        out.extend(rows.into_iter().map(|r| r.effective(now)));
    }
    Ok(out)
}

/// The SQL condition for "its effective status is `status`" with `?2` the
/// time as of which: [`ApprovalRecord::effective`] spelled in SQL, so that
/// a listing by status filters before its `LIMIT` (a stored `pending` or
/// `approved` row may read `expired`).
fn effective_is(status: ApprovalStatus) -> &'static str {
    match status {
        ApprovalStatus::Pending => concat!(
            "(a.status = 'pending' AND a.expires_at > ?2 AND NOT ",
            newer_user_message!(),
            " AND NOT ",
            subagent_stopped!(),
            " AND NOT ",
            former_owners_task!(),
            ")"
        ),
        ApprovalStatus::Approved => concat!(
            "(a.status = 'approved' AND (a.consumed_at IS NOT NULL
               OR (a.expires_at > ?2 AND NOT ",
            subagent_stopped!(),
            " AND NOT ",
            former_owners_task!(),
            ")))"
        ),
        ApprovalStatus::Denied => "a.status = 'denied'",
        ApprovalStatus::Expired => concat!(
            "(a.status = 'expired'
             OR (a.status = 'pending' AND (a.expires_at <= ?2 OR ",
            newer_user_message!(),
            " OR ",
            subagent_stopped!(),
            " OR ",
            former_owners_task!(),
            "))
             OR (a.status = 'approved' AND a.consumed_at IS NULL AND (a.expires_at <= ?2 OR ",
            subagent_stopped!(),
            " OR ",
            former_owners_task!(),
            ")))"
        ),
    }
}

/// A user's approvals whose effective status is `status`: pending ones
/// oldest first, the others newest first; at most `limit`, counted after
/// the filter; ties in `created_at` in insertion order. The
/// `approvals_owner` index `(owner, created_at)` (its entries end with the
/// rowid), or for pending ones `approvals_owner_pending`, gives the order,
/// so the scan stops at the `limit`-th match.
pub(crate) fn of_owner_with_status(
    conn: &Connection,
    owner: &UserId,
    status: ApprovalStatus,
    now: i64,
    limit: i64,
) -> Result<Vec<ApprovalRecord>> {
    let rows = query(
        conn,
        &owner_status_filter(status),
        params![owner.as_str(), now, limit],
    )?;
    Ok(rows.into_iter().map(|r| r.effective(now)).collect())
}

/// The filter of [`of_owner_with_status`] (`?1` the owner, `?2` now, `?3`
/// the limit). Pending ones are read through the partial index
/// `approvals_owner_pending`, which holds only rows stored as pending.
pub(crate) fn owner_status_filter(status: ApprovalStatus) -> String {
    let order = match status {
        ApprovalStatus::Pending => "ASC",
        ApprovalStatus::Approved | ApprovalStatus::Denied | ApprovalStatus::Expired => "DESC",
    };
    format!(
        "WHERE a.owner = ?1 AND ({})
         ORDER BY a.created_at {order}, a.rowid {order} LIMIT ?3",
        effective_is(status)
    )
}

/// The second read of [`of_owner`]: the user's approvals that are not
/// effectively pending, newest first, through `approvals_owner`.
pub(crate) fn owner_not_pending_filter() -> String {
    format!(
        "WHERE a.owner = ?1 AND NOT {}
         ORDER BY a.created_at DESC, a.rowid DESC LIMIT ?3",
        effective_is(ApprovalStatus::Pending)
    )
}

/// Whether approval `a` was asked in a DM whose person no longer owns its
/// bot (`SessionKey::is_former_owners_dm`: fleet.toml gave the bot to
/// someone else, and the DM stayed that person's). Such an approval can
/// no longer be decided (its person gets `409`, nobody else sees it) and
/// its action never runs: no turn runs in that DM any more.
const IN_FORMER_OWNERS_DM: &str = "EXISTS (SELECT 1 FROM sessions s JOIN bots b ON b.id = s.bot_id
        WHERE s.id = a.session_id AND s.kind = 'dm' AND s.peer != b.owner)";

/// A bot's open approvals (stored pending, or approved and unused) with
/// their effective status, oldest first: the ones its turns wait for and
/// may use, and that count toward its pending limit. Uses the partial
/// index. Those asked in a former owner's DM ([`IN_FORMER_OWNERS_DM`])
/// are left out: they can never be decided or used, so they do not hold
/// the bot's side effects for its new owner, do not take a place of the
/// limit, and their action's text reaches none of the new owner's turns
/// (they stay listed for their person until their TTL expires them).
pub(crate) fn open_of_bot(conn: &Connection, bot: &BotId, now: i64) -> Result<Vec<ApprovalRecord>> {
    Ok(query(
        conn,
        &format!(
            "WHERE a.bot_id = ?1 AND {OPEN} AND NOT {IN_FORMER_OWNERS_DM} ORDER BY a.created_at"
        ),
        params![bot.as_str()],
    )?
    .into_iter()
    .map(|r| r.effective(now))
    .collect())
}

/// The newest approval of `owner` in `session` that decided the action
/// for this request of the person's, while its window lasts (the
/// approval's TTL from the decision) and no user message came in its
/// session since it was asked, nor, in a conversation with another bot,
/// a new question of that bot since the decision (QA: a used approval
/// answered that bot's next requests "already ran", with another
/// request's result): one approved and used for the exact action
/// `fingerprint` (the action already ran), or one denied for it or for an
/// action its card shows the same (`tool` and `summary`: `cat  .env` is
/// summarised as `cat .env`). Found on the `approvals_owner` index, as
/// the person's listing is. See `Store::decided_approval`.
pub(crate) fn decided_in_window(
    conn: &Connection,
    owner: &UserId,
    session: SessionId,
    (fingerprint, tool, summary): (&str, &str, &str),
    now: i64,
) -> Result<Option<ApprovalRecord>> {
    Ok(query(
        conn,
        concat!(
            "WHERE a.owner = ?1 AND a.session_id = ?2 AND a.expires_at > ?4
               AND ((a.status = 'approved' AND a.consumed_at IS NOT NULL
                     AND a.fingerprint = ?3)
                 OR (a.status = 'denied'
                     AND (a.fingerprint = ?3 OR (a.tool = ?5 AND a.summary = ?6))))
               AND NOT ",
            newer_user_message!(),
            " AND NOT ",
            newer_bot_question!(),
            " ORDER BY a.decided_at DESC LIMIT 1"
        ),
        params![
            owner.as_str(),
            session.to_string(),
            fingerprint,
            now,
            tool,
            summary
        ],
    )?
    .into_iter()
    .next()
    .map(|r| r.effective(now)))
}

/// The bots of `owner` with an open row (stored pending, or approved and
/// unused) that is expired as of `now`: those whose expiry
/// `ExpireApprovals` has yet to write.
pub(crate) fn bots_with_unwritten_expiry(
    conn: &Connection,
    owner: &UserId,
    now: i64,
) -> Result<Vec<BotId>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT DISTINCT a.bot_id FROM approvals a
         WHERE a.owner = ?1 AND {OPEN} AND ({})
         ORDER BY a.bot_id",
        effective_is(ApprovalStatus::Expired)
    ))?;
    let ids = stmt
        .query_map(params![owner.as_str(), now], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    ids.into_iter()
        .map(|id| BotId::new(id).map_err(Into::into))
        .collect()
}

/// Open rows: the terms of the `approvals_open` partial index, spelled as
/// there so SQLite uses it.
const OPEN: &str = "a.status IN ('pending', 'approved') AND a.consumed_at IS NULL";

/// Open rows (stored pending, or approved and unused), of one bot or all.
pub(crate) fn open_rows(conn: &Connection, bot: Option<&BotId>) -> Result<Vec<Stored>> {
    match bot {
        Some(bot) => query(
            conn,
            &format!("WHERE a.bot_id = ?1 AND {OPEN} ORDER BY a.created_at"),
            params![bot.as_str()],
        ),
        None => query(conn, &format!("WHERE {OPEN} ORDER BY a.created_at"), []),
    }
}

/// A bot's stored-pending approvals whose owner is no longer the owner of
/// the session they were asked in (the bot's owner changed and took the
/// session along: `Writer::follow_owner`), oldest first.
pub(crate) fn pending_off_session(conn: &Connection, bot: &BotId) -> Result<Vec<Stored>> {
    query(
        conn,
        &format!(
            "JOIN sessions s ON s.id = a.session_id
             WHERE a.bot_id = ?1 AND a.owner != s.owner
               AND (({OPEN} AND a.status = 'pending') OR {LAPSED_BY_OWNER_CHANGE})
             ORDER BY a.created_at"
        ),
        params![bot.as_str()],
    )
}

/// An approval stored expired by an owner change (`owner_changed`):
/// nobody decided it, so it goes on following its session's owner (a
/// bot given back takes it back: review, it stayed with the interim
/// owner, who read the former owner's command, and the session's owner
/// got `404`).
const LAPSED_BY_OWNER_CHANGE: &str =
    "(a.status = 'expired' AND a.expired_by = 'owner_changed' AND a.decided_at IS NULL)";

/// The review log's columns.
const REVIEW_COLUMNS: &str =
    "bot_id, session_id, turn_id, call_id, tool, surface, mode, decision, reason, fingerprint, at";

type ReviewRaw = (String, String, Option<String>, [String; 7], i64);

fn review_raw(r: &Row<'_>) -> rusqlite::Result<ReviewRaw> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        [
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
            r.get(9)?,
        ],
        r.get(10)?,
    ))
}

/// A bot's newest review log rows, newest first; with `owner`, only the
/// rows of sessions that user owns (filtered before the limit): a review
/// names a conversation's turn and says what the bot tried there, which
/// only the conversation's owner reads (after an owner change, the bot's
/// former owner keeps their DM, and the new owner does not see it).
pub(crate) fn reviews_of_bot(
    conn: &Connection,
    bot: &BotId,
    owner: Option<&UserId>,
    limit: i64,
) -> Result<Vec<ReviewRecord>> {
    let raws = match owner {
        None => conn
            .prepare_cached(&format!(
                "SELECT {REVIEW_COLUMNS} FROM reviews WHERE bot_id = ?1 ORDER BY id DESC LIMIT ?2"
            ))?
            .query_map(params![bot.as_str(), limit], review_raw)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
        Some(owner) => conn
            .prepare_cached(&format!(
                "SELECT {REVIEW_COLUMNS} FROM reviews WHERE bot_id = ?1
                   AND session_id IN (SELECT id FROM sessions WHERE bot_id = ?1 AND owner = ?3)
                   AND NOT EXISTS (SELECT 1 FROM session_floors f
                     WHERE f.session_id = reviews.session_id AND f.user_id = ?3
                       AND reviews.at < f.since)
                 ORDER BY id DESC LIMIT ?2"
            ))?
            .query_map(params![bot.as_str(), limit, owner.as_str()], review_raw)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
    };
    raws.into_iter()
        .map(
            |(
                bot,
                session,
                turn,
                [call_id, tool, surface, mode, decision, reason, fingerprint],
                at,
            )| {
                Ok(ReviewRecord {
                    bot: BotId::new(bot)?,
                    session: session.parse()?,
                    turn: turn.map(|t| t.parse()).transpose()?,
                    call_id,
                    tool,
                    surface,
                    mode,
                    decision,
                    reason,
                    fingerprint,
                    at,
                })
            },
        )
        .collect()
}

#[cfg(test)]
#[path = "approvals_tests.rs"]
mod tests;
