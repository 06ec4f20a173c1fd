//! The [`Store`]'s reads of a bot's work: its pending inputs, its turns
//! and their tool calls.

use super::Store;
use super::reader;
use crate::error::Result;
use crate::ids::BotId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::record::InboxItem;
use crate::record::ToolCallRecord;
use crate::record::TurnRecord;
use crate::record::TurnStatus;

impl Store {
    /// A bot's admitted inputs that no turn has consumed, oldest first
    /// (every one: a bot with a backlog has thousands, so the read goes to
    /// the blocking pool).
    pub async fn pending_inbox(&self, bot: &BotId) -> Result<Vec<InboxItem>> {
        let bot = bot.clone();
        self.read_many(move |c| reader::pending_inbox(c, &bot))
            .await
    }

    /// Bots with pending inputs or unfinished turns.
    pub async fn bots_with_work(&self) -> Result<Vec<BotId>> {
        self.read_many(reader::bots_with_work).await
    }

    /// A bot's turns still marked running (after a crash).
    pub async fn open_turns(&self, bot: &BotId) -> Result<Vec<TurnRecord>> {
        let bot = bot.clone();
        self.read_many(move |c| reader::open_turns(c, &bot)).await
    }

    /// A turn by id.
    pub async fn get_turn(&self, id: TurnId) -> Result<Option<TurnRecord>> {
        self.read(move |c| reader::get_turn(c, id)).await
    }

    /// A bot's newest turns.
    pub async fn turns_of_bot(&self, bot: &BotId, limit: i64) -> Result<Vec<TurnRecord>> {
        let bot = bot.clone();
        self.read_many(move |c| reader::turns_of_bot(c, &bot, None, None, limit))
            .await
    }

    /// [`Store::turns_of_bot`], only those in sessions `owner` owns
    /// (counted after that filter): what the API lists for a user, who
    /// reads a turn only when they read its session; with `before`, only
    /// those older than that turn (the next page).
    pub async fn turns_of_bot_for_owner(
        &self,
        bot: &BotId,
        owner: &UserId,
        before: Option<crate::ids::TurnId>,
        limit: i64,
    ) -> Result<Vec<TurnRecord>> {
        let bot = bot.clone();
        let owner = owner.clone();
        self.read_many(move |c| reader::turns_of_bot(c, &bot, Some(&owner), before, limit))
            .await
    }

    /// Turn counts per status for a bot, by status name; statuses without
    /// turns are left out. Two index lookups whatever the number of turns:
    /// the ended turns are counted in `turn_counts`, kept by the writer as
    /// turns end (migration 11), the running ones in the partial index
    /// `turns_open`.
    pub async fn turn_status_counts(&self, bot: &BotId) -> Result<Vec<(TurnStatus, i64)>> {
        let bot = bot.clone();
        self.read_many(move |c| reader::turn_status_counts(c, &bot))
            .await
    }

    /// The tool calls of a turn, in order.
    pub async fn tool_calls(&self, turn: TurnId) -> Result<Vec<ToolCallRecord>> {
        self.read(move |c| reader::tool_calls(c, turn)).await
    }
}
