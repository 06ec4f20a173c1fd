//! The [`Store`]'s reads of approvals (with their status as of now) and
//! of the auto-review log.

use super::Store;
use super::approvals;
use crate::error::Result;
use crate::ids::BotId;
use crate::ids::UserId;

impl Store {
    /// An approval, with its status as of now (a stored `pending` past its
    /// TTL or behind a newer user message reads `expired`).
    pub async fn approval(
        &self,
        id: crate::ids::ApprovalId,
    ) -> Result<Option<crate::record::ApprovalRecord>> {
        let now = self.inner.clock.now_ms();
        self.read(move |c| approvals::get(c, id, now)).await
    }

    /// A user's approvals as of now: pending first (oldest first), then the
    /// others newest first; at most `limit`.
    pub async fn approvals_of_owner(
        &self,
        owner: &UserId,
        limit: i64,
    ) -> Result<Vec<crate::record::ApprovalRecord>> {
        let owner = owner.clone();
        let now = self.inner.clock.now_ms();
        self.read_many(move |c| approvals::of_owner(c, &owner, now, limit))
            .await
    }

    /// A user's approvals whose status as of now is `status`: pending ones
    /// oldest first, the others newest first; at most `limit`, counted
    /// after the filter (older ones are found however many newer ones of
    /// other statuses there are).
    pub async fn approvals_of_owner_with_status(
        &self,
        owner: &UserId,
        status: crate::record::ApprovalStatus,
        limit: i64,
    ) -> Result<Vec<crate::record::ApprovalRecord>> {
        let owner = owner.clone();
        let now = self.inner.clock.now_ms();
        self.read_many(move |c| approvals::of_owner_with_status(c, &owner, status, now, limit))
            .await
    }

    /// A bot's open approvals as of now (stored pending, or approved and
    /// unused; each with its effective status, so some may read
    /// `expired`), oldest first: what its side effects wait for. Those
    /// asked in a DM whose person no longer owns the bot are left out:
    /// they can never be decided or used.
    pub async fn open_approvals(&self, bot: &BotId) -> Result<Vec<crate::record::ApprovalRecord>> {
        // most bots never had an approval: no read before their side effects
        let Some(at) = self.inner.approval_hint.check(bot) else {
            return Ok(Vec::new());
        };
        let id = bot.clone();
        let now = self.inner.clock.now_ms();
        let open = self
            .read(move |c| approvals::open_of_bot(c, &id, now))
            .await?;
        if open.is_empty() {
            self.inner.approval_hint.settle(bot, at);
        }
        Ok(open)
    }

    /// The newest approval of `owner` in `session` that decided the
    /// action `(fingerprint, tool, summary)` for the request it was asked
    /// in, while its window lasts and no user message came in `session`
    /// since it was asked; one read for the gate's two refusals:
    ///
    /// - approved and used for the exact action (`fingerprint`): the
    ///   action ran for the request the approval answered, so a repeat of
    ///   the call asks for nothing new (the decision's note, read after
    ///   the run, still says to repeat it);
    /// - denied, for the exact action or one whose card reads the same
    ///   (`tool` and `summary`: `cat  .env`, two spaces, is another
    ///   fingerprint, but its card said `run \`cat .env\``): the person
    ///   refused it for this request, so the same call is refused without
    ///   asking again. A new card for it looked like a second chance, and
    ///   approving it by mistake ran what they had just refused (QA,
    ///   2026-12-05).
    pub async fn decided_approval(
        &self,
        owner: &UserId,
        session: crate::ids::SessionId,
        (fingerprint, tool, summary): (&str, &str, &str),
    ) -> Result<Option<crate::record::ApprovalRecord>> {
        let owner = owner.clone();
        let action = (fingerprint.to_owned(), tool.to_owned(), summary.to_owned());
        let now = self.inner.clock.now_ms();
        self.read(move |c| {
            let (fingerprint, tool, summary) = &action;
            approvals::decided_in_window(c, &owner, session, (fingerprint, tool, summary), now)
        })
        .await
    }

    /// The bots of `owner` with an approval that is expired as of now but
    /// not yet written so (its card still shows it open). The state every
    /// read reports is computed; this says whose cards lag behind it.
    pub async fn bots_with_unwritten_expiry(&self, owner: &UserId) -> Result<Vec<BotId>> {
        let owner = owner.clone();
        let now = self.inner.clock.now_ms();
        self.read_many(move |c| approvals::bots_with_unwritten_expiry(c, &owner, now))
            .await
    }

    /// A bot's newest review log rows (what auto-review asked about or
    /// blocked), newest first.
    pub async fn reviews_of_bot(
        &self,
        bot: &BotId,
        limit: i64,
    ) -> Result<Vec<crate::record::ReviewRecord>> {
        let bot = bot.clone();
        self.read_many(move |c| approvals::reviews_of_bot(c, &bot, None, limit))
            .await
    }

    /// [`Store::reviews_of_bot`], only the rows of sessions `owner` owns
    /// (counted after that filter): what the API shows a user. A bot given
    /// to another owner keeps its former owner's DM, and the reviews there,
    /// from the new owner.
    pub async fn reviews_of_bot_for_owner(
        &self,
        bot: &BotId,
        owner: &UserId,
        limit: i64,
    ) -> Result<Vec<crate::record::ReviewRecord>> {
        let bot = bot.clone();
        let owner = owner.clone();
        self.read_many(move |c| approvals::reviews_of_bot(c, &bot, Some(&owner), limit))
            .await
    }
}
