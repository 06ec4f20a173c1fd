//! The timeline notice of a member turn that did not complete: who, why,
//! and what can be done about it.
//!
//! A room's timeline is read by every user who owns one of its members
//! (a shared room), while a turn's error is its owner's: it may quote the
//! owner's model endpoint (its URL, credentials in it) and the provider's
//! answer. So the error is quoted on the timeline only when the failing
//! member's owner is the only one who reads it; otherwise the notice says
//! where that owner finds it (the `turn_failed` notice in the member's own
//! session, and `GET /v1/turns/{turn}`), which other users cannot read.
//! The same holds for a member paused by its spent daily token budget:
//! others read until when, not its token use and budget.

use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::NewEntry;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;

use super::absent::Absent;
use super::absent::absent;
use super::actor::GroupState;
use super::error::GroupError;
use super::member::MemberDone;
use crate::engine;
use crate::engine::BudgetPause;
use crate::prompts::prompts;

/// Code of the timeline notice of a member turn that did not complete
/// (`room_run_` like the run's other notices, so clients that show those
/// show it too).
const MEMBER_FAILED_CODE: &str = "room_run_member_failed";
/// Longest error text quoted in that notice.
const MAX_REASON_CHARS: usize = 300;

/// Why a member's turn did not complete.
pub(super) enum Reason {
    /// Its inputs came before fleet.toml gave the member to its owner
    /// (`engine::came_before_owner_change`): not answered, and not to be
    /// retried.
    BeforeOwnerChange,
    /// The error recorded with its turn (its owner's to read).
    Error(String),
    /// No error was recorded: its status.
    Status(&'static str),
}

impl GroupState {
    /// Why a member's turn did not complete: its error, or its status.
    pub(super) async fn failure_reason(&self, done: &MemberDone) -> Result<Reason, GroupError> {
        let record = match done.turn {
            Some(turn) => self.rt.store.get_turn(turn).await?,
            None => None,
        };
        if let Some(record) = &record
            && record.status == TurnStatus::Cancelled
            && let Some(bot) = self.rt.store.get_bot(&record.bot).await?
            && engine::came_before_owner_change(&self.rt.store, record, &bot.owner).await?
        {
            return Ok(Reason::BeforeOwnerChange);
        }
        Ok(match record.and_then(|t| t.error) {
            Some(e) => Reason::Error(e),
            None => Reason::Status(done.status.as_str()),
        })
    }

    /// The owner of member `bot` (the room's owner for a bot the store
    /// does not know).
    fn owner_of(&self, bot: &BotId) -> &UserId {
        self.room
            .members
            .iter()
            .position(|m| m == bot)
            .and_then(|i| self.owners.get(i))
            .unwrap_or(&self.room.owner)
    }

    /// The timeline notice of a member turn that did not complete: who,
    /// why (or, in a shared room, where its owner reads why), and the turn
    /// to retry; for a member paused by its daily token budget, until
    /// when; for a subagent stopped meanwhile, that it takes no more
    /// turns (a retry would be refused); for a bot its owner removed,
    /// that, and no retry either.
    pub(super) async fn failure_notice(
        &self,
        bot: &BotId,
        turn: Option<TurnId>,
        reason: Reason,
    ) -> Result<NewEntry, GroupError> {
        let record = self.rt.store.get_bot(bot).await?;
        // a spent budget fails every turn until midnight: say so, rather
        // than advising a mention that cannot help before then
        let paused: Option<BudgetPause> = match &record {
            Some(b) => engine::budget_pause(&self.rt.store, b, 0).await?,
            None => None,
        };
        let gone = match &record {
            Some(b) => absent(&self.rt.store, b).await?,
            None => None,
        };
        let (stopped, removed) = match gone {
            Some(Absent::Stopped { parent }) => (Some(parent), false),
            // its owner removed it: a retry is refused (409), a mention
            // reaches no one, so neither is offered (QA, 2026-12-04)
            Some(Absent::RemovedByOwner | Absent::OwnerAway) => (None, true),
            Some(Absent::Removed | Absent::ParentGone { .. }) | None => (None, false),
        };
        let name = self
            .names
            .iter()
            .find(|n| n.id == bot.as_str())
            .map_or(bot.as_str(), |n| n.name.as_str());
        let turn_text = turn.map(|t| t.to_string()).unwrap_or_default();
        let member = format!("{name} (@{bot})");
        // in a shared room the bot may be someone else's: only its owner
        // can retry its turn, and only its owner may read its error
        let owner = self.owner_of(bot);
        let private = !self.room.shared && *owner == self.room.owner;
        // a member paused by its budget fails a retried turn at once too:
        // the notice says until when, and offers no retry (QA: the page's
        // Retry read "Queued again" while the retry failed unseen)
        // nor one whose input came before its owner had it (a retry is
        // refused: `FleetHandle::retry`)
        let before_change = matches!(reason, Reason::BeforeOwnerChange);
        let retry = stopped.is_none() && !removed && paused.is_none() && !before_change;
        let p = prompts();
        let text = match (paused, stopped, reason) {
            _ if removed => p
                .group_member_removed
                .render(&[("member", &member), ("owner", owner.as_str())]),
            // its token use and budget are its owner's, like its error
            (Some(pause), _, _) if !private => p.group_member_paused_shared.render(&[
                ("member", &member),
                ("id", bot.as_str()),
                ("until", &pause.until),
                ("owner", owner.as_str()),
            ]),
            (Some(pause), _, _) => p.group_member_paused.render(&[
                ("member", &member),
                ("id", bot.as_str()),
                ("until", &pause.until),
                ("used", &pause.used.to_string()),
                ("budget", &pause.budget.to_string()),
            ]),
            (None, Some(parent), _) => p
                .group_member_stopped
                .render(&[("member", &member), ("parent", parent.as_str())]),
            (None, None, Reason::BeforeOwnerChange) => p
                .group_member_owner_changed
                .render(&[("member", &member), ("id", bot.as_str())]),
            (None, None, Reason::Error(_)) if !private && turn.is_some() => {
                p.group_member_failed_shared.render(&[
                    ("member", &member),
                    ("id", bot.as_str()),
                    ("owner", owner.as_str()),
                    ("turn", &turn_text),
                ])
            }
            (None, None, reason) => {
                let reason = match reason {
                    Reason::Error(e) => cut(e),
                    Reason::Status(s) => s.to_owned(),
                    Reason::BeforeOwnerChange => String::new(),
                };
                p.group_member_failed.render(&[
                    ("member", &member),
                    ("id", bot.as_str()),
                    ("reason", &reason),
                    ("owner", owner.as_str()),
                    ("turn", &turn_text),
                ])
            }
        }
        .unwrap_or_default();
        Ok(NewEntry {
            id: turn.map_or_else(EntryId::new_v7, |t| {
                EntryId::derive(t, "room", "member_failed")
            }),
            session: self.timeline,
            author: "system".into(),
            turn: None,
            kind: EntryKind::Notice {
                code: MEMBER_FAILED_CODE.into(),
                text,
                // a stopped subagent's, removed bot's or paused member's
                // turn is not retried
                retry_turn: turn.filter(|_| retry),
            },
        })
    }
}

/// `reason` cut to about [`MAX_REASON_CHARS`], at spaces, keeping its
/// start (what failed, and where) and its end: an error's chain ends in
/// its cause (`…: client error (Connect): dns error: failed to lookup
/// address information: …`), which the notice cut off mid-word
/// ("client error (Connect): dn…"). The middle goes, marked ` … `; its
/// owner reads the whole error in the member's own session and in
/// `GET /v1/turns/{turn}`.
fn cut(reason: String) -> String {
    let chars = reason.chars().count();
    if chars <= MAX_REASON_CHARS {
        return reason;
    }
    // room for the mark; the cause usually is the longer part
    let keep = MAX_REASON_CHARS - 3;
    let head_chars = keep * 2 / 5;
    let tail_chars = keep - head_chars;
    let at = |n: usize| {
        reason
            .char_indices()
            .nth(n)
            .map_or(reason.len(), |(i, _)| i)
    };
    let head = &reason[..at(head_chars)];
    // back to the last space (a word cut in half is dropped); a head with
    // none (one long token) is kept as it is
    let head = head
        .rfind(char::is_whitespace)
        .map_or(head, |i| &head[..i])
        .trim_end();
    let tail = &reason[at(chars - tail_chars)..];
    let tail = tail
        .find(char::is_whitespace)
        .map_or(tail, |i| &tail[i..])
        .trim_start();
    format!("{head} … {tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (round 22, H4): the cut kept the first 300 characters and
    /// ended mid-word before the cause: "client error (Connect): dn…".
    #[test]
    fn a_long_reason_keeps_its_cause_and_whole_words() {
        let reason = "providers.xai (POST https://api.x.ai/v1/chat/completions): check that the \
                      server is running and reachable at this address (providers.xai.base_url). \
                      Error: model endpoint unreachable after 5 attempt(s): error sending request \
                      for url (https://api.x.ai/v1/chat/completions): client error (Connect): dns \
                      error: failed to lookup address information: Temporary failure in name \
                      resolution";
        assert!(reason.chars().count() > MAX_REASON_CHARS);
        let cut = cut(reason.to_owned());
        assert!(cut.chars().count() <= MAX_REASON_CHARS, "{cut}");
        assert!(
            cut.ends_with("dns error: failed to lookup address information: Temporary failure in name resolution"),
            "{cut}"
        );
        assert!(cut.starts_with("providers.xai (POST "), "{cut}");
        let (head, tail) = cut.split_once(" … ").unwrap();
        // whole words on both sides of the mark
        assert!(reason.contains(&format!("{head} ")), "{head}");
        assert!(reason.contains(&format!(" {tail}")), "{tail}");
    }

    #[test]
    fn a_short_reason_is_kept_whole_and_a_wordless_one_is_cut() {
        assert_eq!(cut("timed out".to_owned()), "timed out");
        let token = "x".repeat(1000);
        let cut = cut(token);
        assert_eq!(cut.chars().count(), MAX_REASON_CHARS);
        assert!(cut.contains(" … "), "{cut}");
    }
}
