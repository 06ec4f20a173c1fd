//! The [`Store`]'s reads of bots and what belongs to them: token usage,
//! their owners' secrets, subagents and routines.

use super::Store;
use super::reader;
use super::routines;
use crate::error::Result;
use crate::ids::BotId;
use crate::ids::UserId;
use crate::record::BotRecord;
use crate::record::SubagentStatus;
use crate::record::TokenUsage;
use crate::record::TurnStatus;

/// What the bot list (`GET /v1/bots`) shows of a bot besides its record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BotActivity {
    /// Turn counts per status; statuses without turns are left out.
    pub turns: Vec<(TurnStatus, i64)>,
    /// Token usage over all days.
    pub usage_total: TokenUsage,
    /// Token usage of the day asked for.
    pub usage_today: TokenUsage,
    /// Turns whose usage was counted.
    pub usage_turns: i64,
    /// A subagent's status (running, done, failed, stopped); `None` for
    /// any other bot.
    pub subagent_status: Option<SubagentStatus>,
}

/// The bot list with the finished subagents it leaves out
/// ([`Store::list_bots_keeping`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BotListing {
    /// The bots listed, by id, with their activity.
    pub bots: Vec<(BotRecord, BotActivity)>,
    /// Finished subagents not listed.
    pub left_out: usize,
}

impl Store {
    /// A bot by id.
    /// Served from the records read before when no bot was written since
    /// (`bot_cache.rs`).
    pub async fn get_bot(&self, id: &BotId) -> Result<Option<BotRecord>> {
        if let Some(record) = self.inner.bots.get(id) {
            return Ok(Some(record));
        }
        let generation = self.inner.bots.generation();
        let id = id.clone();
        let record = self.read(move |c| reader::get_bot(c, &id)).await?;
        if let Some(r) = &record {
            self.inner.bots.put(generation, r);
        }
        Ok(record)
    }

    /// The generation of the bots table: it grows after every committed
    /// bot write, before that write's caller is answered. Taken before a
    /// read of bots, it tells a cache of that read whether it is still
    /// current (`bot_cache.rs`).
    pub fn bots_generation(&self) -> u64 {
        self.inner.bots.generation()
    }

    /// Bots, of one owner or all.
    pub async fn list_bots(&self, owner: Option<&UserId>) -> Result<Vec<BotRecord>> {
        let owner = owner.cloned();
        self.read_many(move |c| reader::list_bots(c, owner.as_ref()))
            .await
    }

    /// The bots, of any owner, that may answer to one of the mentions
    /// `keys` (each as [`name_key`](crate::ids::name_key) folds it), each
    /// once, by id: those whose id or display name folds to one of them,
    /// and any whose folded name the store lacks (written outside it). A few
    /// index searches per key, whatever the size of the fleet, where
    /// [`Store::list_bots`] of everyone read every record; the caller
    /// still decides which of them clash (`MemberName::clash`).
    pub async fn bots_answering_to(&self, keys: &[String]) -> Result<Vec<BotRecord>> {
        let mut keys: Vec<String> = keys.iter().filter(|k| !k.is_empty()).cloned().collect();
        keys.sort_unstable();
        keys.dedup();
        self.read(move |c| {
            let mut found: Vec<BotRecord> = Vec::new();
            for key in &keys {
                for bot in reader::bots_answering_to(c, key)? {
                    if !found.iter().any(|b| b.id == bot.id) {
                        found.push(bot);
                    }
                }
            }
            found.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(found)
        })
        .await
    }

    /// Bots, of one owner or all, each with its turn counts and token
    /// usage (all days and `today`, UTC `YYYY-MM-DD`), read on one
    /// connection in one go: three index lookups per bot (see
    /// [`Store::turn_status_counts`]) rather than a scan of the turns,
    /// and one hop to a reader thread for the whole list rather than two
    /// per bot (at 250 bots: 1-2 ms against 20-40 ms).
    pub async fn list_bots_with_activity(
        &self,
        owner: Option<&UserId>,
        today: &str,
    ) -> Result<Vec<(BotRecord, BotActivity)>> {
        let owner = owner.cloned();
        let today = today.to_owned();
        self.read_many(move |c| with_activity(c, reader::list_bots(c, owner.as_ref())?, &today))
            .await
    }

    /// `owner`'s bots as [`Store::list_bots_with_activity`] lists them,
    /// without the finished subagents (done, failed, stopped) of a parent
    /// past its `keep` latest ones: a bot that delegates for months has
    /// thousands, each a bot record of its own (`GET /v1/bots`,
    /// docs/api.md). Index reads of the bots listed only
    /// (reader_bots.rs, `bots_keeping`).
    pub async fn list_bots_keeping(
        &self,
        owner: &UserId,
        today: &str,
        keep: usize,
    ) -> Result<BotListing> {
        let owner = owner.clone();
        let today = today.to_owned();
        self.read_many(move |c| {
            let (bots, left_out) = if keep == usize::MAX {
                (reader::list_bots(c, Some(&owner))?, 0)
            } else {
                reader::bots_keeping(c, &owner, keep)?
            };
            Ok(BotListing {
                bots: with_activity(c, bots, &today)?,
                left_out,
            })
        })
        .await
    }

    /// `owner`'s bots other than subagents (origin not `subagent:`), by
    /// id: a search of an index that holds no subagent, however many
    /// tasks the owner's bots delegated (what CreateAgent counts, what
    /// SendToAgent names as likely meant, who may forget a project's
    /// note).
    pub async fn main_bots_of(&self, owner: &UserId) -> Result<Vec<BotRecord>> {
        let owner = owner.clone();
        self.read_many(move |c| reader::main_bots_of(c, &owner))
            .await
    }

    /// A bot's token usage: all days, `today` (UTC `YYYY-MM-DD`), and the
    /// number of turns counted.
    pub async fn bot_usage(
        &self,
        bot: &BotId,
        today: &str,
    ) -> Result<(crate::record::TokenUsage, crate::record::TokenUsage, i64)> {
        let bot = bot.clone();
        let today = today.to_owned();
        self.read(move |c| reader::bot_usage(c, &bot, &today)).await
    }

    /// The token usage on `day` (UTC `YYYY-MM-DD`) of `root` and of every
    /// subagent it delegated to (whichever their status): the usage its
    /// daily token budget counts. One row per bot that used tokens that
    /// day, by bot id; sum them for the family's.
    pub async fn family_usage(&self, root: &BotId, day: &str) -> Result<Vec<(BotId, TokenUsage)>> {
        let root = root.clone();
        let day = day.to_owned();
        self.read_many(move |c| reader::family_usage(c, &root, &day))
            .await
    }

    /// The secrets a person supplied: (name, value, updated_at).
    pub async fn user_secrets(
        &self,
        owner: &UserId,
    ) -> Result<Vec<(String, crate::record::SecretValue, i64)>> {
        let owner = owner.clone();
        self.read_many(move |c| reader::user_secrets(c, &owner))
            .await
    }

    /// Subagent `id` of `parent` (`None`: `parent` has no such subagent),
    /// read by its key: what CheckSubagent, MessageSubagent and
    /// StopSubagent read of the subagent they name.
    pub async fn subagent_of(
        &self,
        parent: &BotId,
        id: &str,
    ) -> Result<Option<crate::record::SubagentRecord>> {
        let parent = parent.clone();
        let id = id.to_owned();
        self.read(move |c| reader::subagent_of(c, &parent, &id))
            .await
    }

    /// The running subagents of `parent`, oldest first, without their
    /// results (`None`): index `subagents_running` only.
    pub async fn running_subagents_of(
        &self,
        parent: &BotId,
    ) -> Result<Vec<crate::record::SubagentRecord>> {
        let parent = parent.clone();
        self.read(move |c| reader::running_subagents_of(c, &parent))
            .await
    }

    /// What a list of `parent`'s subagents shows: every running one and
    /// the `finished` latest finished ones, oldest first, without their
    /// results (`None`), and how many earlier finished ones it leaves out
    /// (reader_bots.rs `subagents_listed`: index reads only).
    pub async fn subagents_listed(
        &self,
        parent: &BotId,
        finished: usize,
    ) -> Result<(Vec<crate::record::SubagentRecord>, usize)> {
        let parent = parent.clone();
        self.read_many(move |c| reader::subagents_listed(c, &parent, finished))
            .await
    }

    /// The task of each of `ids` that is a subagent of `parent`, by id
    /// (reader_bots.rs `subagent_tasks`: one key read each).
    pub async fn subagent_tasks(
        &self,
        parent: &BotId,
        ids: Vec<BotId>,
    ) -> Result<Vec<(BotId, String)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let parent = parent.clone();
        self.read(move |c| reader::subagent_tasks(c, &parent, &ids))
            .await
    }

    /// How subagent `id` was stopped, as its stop recorded it
    /// ([`Mutation::StopSubagent`](crate::store::Mutation::StopSubagent)).
    pub async fn subagent_stop(&self, id: &BotId) -> Result<Option<crate::record::SubagentStop>> {
        let id = id.clone();
        self.read(move |c| reader::subagent_stop(c, &id)).await
    }

    /// The subagents whose task title and report a start withholds from
    /// their owner, or shows again (reader_bots.rs `subagent_task_holds`:
    /// the floored task sessions and the withheld subagents only).
    pub async fn subagent_task_holds(&self) -> Result<Vec<crate::record::SubagentTaskHold>> {
        self.read_many(reader::subagent_task_holds).await
    }

    /// A subagent by its bot id.
    pub async fn get_subagent(&self, id: &BotId) -> Result<Option<crate::record::SubagentRecord>> {
        let id = id.clone();
        self.read(move |c| reader::get_subagent(c, &id)).await
    }

    /// Routines of one bot (by name), or of every bot (by bot, then name).
    pub async fn routines(&self, bot: Option<&BotId>) -> Result<Vec<crate::record::RoutineRecord>> {
        let bot = bot.cloned();
        self.read_many(move |c| routines::list(c, bot.as_ref()))
            .await
    }

    /// One routine of a bot.
    pub async fn get_routine(
        &self,
        bot: &BotId,
        name: &str,
    ) -> Result<Option<crate::record::RoutineRecord>> {
        let bot = bot.clone();
        let name = name.to_owned();
        self.read(move |c| routines::get(c, &bot, &name)).await
    }
}

#[cfg(test)]
#[path = "store_usage_tests.rs"]
mod usage_tests;

#[cfg(test)]
#[path = "store_bot_names_tests.rs"]
mod bot_names_tests;

impl Store {
    /// The ids of `owner`'s bots, in no set order, without their records:
    /// what [`Store::list_bots`] of the owner gives, for a caller that needs
    /// only the ids (an owner with thousands of subagents paid the
    /// decoding of every record, its tools and settings, at each read).
    pub async fn bot_ids_of(&self, owner: &UserId) -> Result<Vec<BotId>> {
        let owner = owner.clone();
        self.read_many(move |c| reader::bot_ids_of(c, &owner)).await
    }
}

#[cfg(test)]
#[path = "store_bot_ids_tests.rs"]
mod bot_ids_tests;

/// `bots` each with its turn counts and token usage (all days and
/// `today`), read on `conn`: three index lookups per bot (see
/// [`Store::turn_status_counts`]) rather than a scan of the turns, and
/// one hop to a reader thread for the whole list rather than two per bot
/// (at 250 bots: 1-2 ms against 20-40 ms).
fn with_activity(
    c: &rusqlite::Connection,
    bots: Vec<BotRecord>,
    today: &str,
) -> Result<Vec<(BotRecord, BotActivity)>> {
    let mut out = Vec::with_capacity(bots.len());
    for bot in bots {
        let turns = reader::turn_status_counts(c, &bot.id)?;
        let (usage_total, usage_today, usage_turns) = reader::bot_usage(c, &bot.id, today)?;
        // one lookup by primary key, on this connection
        let subagent_status = if bot.origin.starts_with("subagent:") {
            reader::get_subagent(c, &bot.id)?.map(|s| s.status)
        } else {
            None
        };
        let activity = BotActivity {
            turns,
            usage_total,
            usage_today,
            usage_turns,
            subagent_status,
        };
        out.push((bot, activity));
    }
    Ok(out)
}
