//! Removing a bot made by CreateAgent at its owner's request
//! (`DELETE /v1/bots/{bot}`, `botfleet bots remove`): the bot is marked
//! removed as a start marks a bot the fleet's config no longer lists
//! ([`BotRecord::mark_removed`]), and the running host takes it in at
//! once. A bot of fleet.toml is removed there; a subagent with its parent.

use std::collections::HashMap;
use std::collections::HashSet;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::SubagentStatus;

use super::FleetHandle;
use super::derived;
use crate::engine::unanswered::Removal;
use crate::engine::unanswered::newest_questions;
use crate::engine::unanswered::removal_notice;
use crate::error::ActorError;
use crate::error::Result;

/// The prefix of the origin of a bot made by CreateAgent.
const MADE_BY: &str = "agent:";

/// The prefix of the origin of a subagent.
const SUBAGENT_OF: &str = "subagent:";

impl FleetHandle {
    /// Marks `bot`, made by CreateAgent, removed, and answers its record
    /// as it now is (with `removed_at`). Everything a removed bot is holds
    /// from then on (docs/operations.md, "Removing a bot"): it takes no
    /// more messages and runs no turns, what it was sent waits in the
    /// store (a bot among the senders is told no answer will come), its
    /// sessions stay readable; its subagents are removed with
    /// it, and the bots it made keep only `SendMessage`, as the next start
    /// would have them.
    ///
    /// In the running host: each bot whose record changed re-reads it,
    /// and the running turn of the bot and of each of its subagents is
    /// cancelled as `POST /v1/bots/{bot}/cancel` does (it ends `cancelled`
    /// at its next safe point, its running tools killed), so nothing goes
    /// on working after the answer. Removing a removed bot changes nothing
    /// and answers the same record. Refused with [`ActorError::Conflict`]
    /// for a bot of fleet.toml and a subagent, with what to do instead;
    /// [`ActorError::UnknownBot`] for no such bot.
    pub async fn remove_made_bot(&self, bot: &BotId) -> Result<BotRecord> {
        let store = &self.rt.store;
        let record = store
            .get_bot(bot)
            .await?
            .ok_or_else(|| ActorError::UnknownBot(bot.clone()))?;
        let stopped = record.origin.starts_with(SUBAGENT_OF)
            && store
                .get_subagent(&record.id)
                .await?
                .is_some_and(|s| s.status == SubagentStatus::Stopped);
        refuse_unmade(&record, stopped)?;
        if record.removed_at().is_some() {
            return Ok(record);
        }
        let now = store.clock().now_ms();
        let removed = record.mark_removed(now);
        let mut all: HashMap<BotId, BotRecord> = store
            .list_bots(None)
            .await?
            .into_iter()
            .map(|b| (b.id.clone(), b))
            .collect();
        let before = all.clone();
        all.insert(removed.id.clone(), removed.clone());
        // what the next start would write for the bots that follow this
        // one (its subagents removed with it, the bots it made cut to
        // SendMessage, and theirs), and nothing for any other bot
        let below = followers(&all, &removed.id);
        let mut records = vec![removed.clone()];
        for w in derived::follow_origins(&all, now) {
            // `follow_origins` writes only bot records
            if let Mutation::UpsertBot(b) = w
                && below.contains(&b.id)
            {
                records.push(b);
            }
        }
        store
            .write(records.iter().cloned().map(Mutation::UpsertBot).collect())
            .await?;
        tracing::warn!(bot = %removed.id, owner = %removed.owner, origin = %removed.origin, "bot made by CreateAgent removed by its owner: it takes no more messages; its sessions are kept");
        for b in &records {
            // an active bot re-reads its record (a sleeping one reads it
            // as it wakes): a removed one starts no more turns; a router
            // that is restarting starts its bots with the stored records
            if let Err(error) = self.reload(b.id.clone()) {
                tracing::debug!(bot = %b.id, %error, "a removed bot's actor was not told (its router is restarting)");
            }
        }
        let newly_removed = newly_removed(&records, &before);
        for b in &newly_removed {
            // after the reload above (the same mailbox): the turn ends and
            // no other starts
            match self.cancel(&b.id).await {
                Ok(true) => {
                    tracing::info!(bot = %b.id, "the running turn of a removed bot was cancelled");
                }
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(bot = %b.id, %error, "the running turn of a removed bot was not cancelled yet; it is cancelled when the bot reads the cancel");
                }
            }
        }
        for b in &newly_removed {
            // after the cancels (the same mailbox as the reload): what is
            // still queued stays so, and the cancelled turn tells those it
            // read itself
            self.tell_unanswered(b, Removal::ByOwner).await;
        }
        // as stored (the store stamps `updated_at` as it writes)
        Ok(store.get_bot(bot).await?.unwrap_or(removed))
    }
}

impl FleetHandle {
    /// Tells each bot whose message waits, unread, in the queue of
    /// `removed` that no answer will come (`engine/unanswered.rs`). A
    /// failure is logged: the removal stands, and the messages stay in the
    /// removed bot's sessions.
    pub(crate) async fn tell_unanswered(&self, removed: &BotRecord, how: Removal) {
        let store = &self.rt.store;
        let pending = match store.pending_inbox(&removed.id).await {
            Ok(pending) => pending,
            Err(error) => {
                tracing::warn!(bot = %removed.id, %error, "could not read a removed bot's queue: the bots waiting on it are not told");
                return;
            }
        };
        let mut questions = Vec::with_capacity(pending.len());
        for item in pending {
            match store
                .entries_between(item.session, item.seq, item.seq)
                .await
            {
                Ok(found) => questions.extend(found),
                Err(error) => {
                    tracing::warn!(bot = %removed.id, session = %item.session, seq = item.seq, %error, "could not read a removed bot's queued input");
                }
            }
        }
        // one notice for each bot and the conversation it wrote from, as
        // the cancelled turn sends: quoting its newest message there
        for question in newest_questions(&questions, |_, _| true) {
            let sent = match removal_notice(store, removed, question, how).await {
                Ok(Some(req)) => self.rt.admit(req).await.map(|_| ()),
                Ok(None) => Ok(()),
                Err(e) => Err(e.into()),
            };
            if let Err(error) = sent {
                tracing::warn!(bot = %removed.id, entry = %question.id, %error, "could not tell a bot its message to a removed bot goes unanswered");
            }
        }
    }
}

/// Of `now`, the bots removed since `before` (removed now, listed then and
/// not removed): the removal's, or a start's that dropped them from the
/// config.
pub(super) fn newly_removed<'a>(
    now: impl IntoIterator<Item = &'a BotRecord>,
    before: &HashMap<BotId, BotRecord>,
) -> Vec<&'a BotRecord> {
    now.into_iter()
        .filter(|b| {
            b.removed_at().is_some()
                && before
                    .get(&b.id)
                    .is_some_and(|was| was.removed_at().is_none())
        })
        .collect()
}

/// Refuses to remove a bot that CreateAgent did not make, saying how such
/// a bot goes (`stopped`: a subagent its parent stopped).
fn refuse_unmade(bot: &BotRecord, stopped: bool) -> Result<()> {
    if bot.made_by_agent() {
        return Ok(());
    }
    if let Some(parent) = bot.origin.strip_prefix(SUBAGENT_OF)
        && stopped
    {
        // nothing left to stop or cancel (QA: it was told to do both)
        return Err(ActorError::Conflict(format!(
            "bot {} is a subagent of {parent} that {parent} stopped: it takes no more work and \
             runs nothing, and it is not removed on its own; it goes with its parent, and its \
             transcript stays readable until then",
            bot.id
        )));
    }
    if let Some(parent) = bot.origin.strip_prefix(SUBAGENT_OF) {
        return Err(ActorError::Conflict(format!(
            "bot {} is a subagent of {parent} and is not removed on its own: it goes with its \
             parent. To end its task, ask {parent} to stop it (StopSubagent), or cancel its \
             running turn (POST /v1/bots/{}/cancel, `botfleet cancel {}`)",
            bot.id, bot.id, bot.id
        )));
    }
    if bot.from_config() {
        return Err(ActorError::Conflict(format!(
            "bot {} comes from the fleet's config: delete its [[bots]] table from fleet.toml \
             and restart the host (docs/operations.md, \"Removing a bot\"); only a bot made by \
             CreateAgent is removed with DELETE /v1/bots/{{bot}}",
            bot.id
        )));
    }
    Err(ActorError::Conflict(format!(
        "bot {} has origin {:?}: only a bot made by CreateAgent (origin agent:<maker>) is \
         removed with DELETE /v1/bots/{{bot}}",
        bot.id, bot.origin
    )))
}

/// The bots among `bots` that follow `root` down its chains of origins:
/// its subagents and the bots it made, theirs, and so on (not `root`).
fn followers(bots: &HashMap<BotId, BotRecord>, root: &BotId) -> HashSet<BotId> {
    let mut found: HashSet<BotId> = HashSet::from([root.clone()]);
    // each pass that goes on adds at least one bot, so this ends
    loop {
        let more: Vec<BotId> = bots
            .values()
            .filter(|b| !found.contains(&b.id))
            .filter(|b| {
                b.origin
                    .strip_prefix(MADE_BY)
                    .or_else(|| b.origin.strip_prefix(SUBAGENT_OF))
                    .is_some_and(|up| found.iter().any(|f| f.as_str() == up))
            })
            .map(|b| b.id.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        found.extend(more);
    }
    found.remove(root);
    found
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn bot(id: &str, origin: &str) -> BotRecord {
        BotRecord {
            id: BotId::new(id).unwrap(),
            name: id.into(),
            owner: botfleet_memory::UserId::new("alice").unwrap(),
            role: "r".into(),
            provider: "p".into(),
            tools: vec!["SendMessage".into()],
            settings: json!({}),
            origin: origin.into(),
            created_at: 0,
            updated_at: 0,
        }
    }

    /// A made bot's subagents and the bots it made follow it, down the
    /// chain; its maker and other bots do not.
    #[test]
    fn followers_are_the_chain_below_the_bot() {
        let bots: HashMap<BotId, BotRecord> = [
            bot("boss", "config"),
            bot("made", "agent:boss"),
            bot("made.sub-1", "subagent:made"),
            bot("grand", "agent:made"),
            bot("grand.sub-1", "subagent:grand"),
            bot("other", "agent:boss"),
        ]
        .into_iter()
        .map(|b| (b.id.clone(), b))
        .collect();
        let mut got: Vec<String> = followers(&bots, &BotId::new("made").unwrap())
            .into_iter()
            .map(|b| b.to_string())
            .collect();
        got.sort();
        assert_eq!(got, vec!["grand", "grand.sub-1", "made.sub-1"]);
    }

    /// Only a made bot is removed this way; the others are told how.
    #[test]
    fn a_config_bot_and_a_subagent_are_refused_with_what_to_do() {
        assert!(refuse_unmade(&bot("made", "agent:boss"), false).is_ok());
        let config = refuse_unmade(&bot("boss", "config"), false)
            .unwrap_err()
            .to_string();
        assert!(config.contains("[[bots]] table"), "{config}");
        let sub = refuse_unmade(&bot("boss.sub-1", "subagent:boss"), false)
            .unwrap_err()
            .to_string();
        assert!(sub.contains("StopSubagent"), "{sub}");
        let stopped = refuse_unmade(&bot("boss.sub-1", "subagent:boss"), true)
            .unwrap_err()
            .to_string();
        assert!(stopped.contains("that boss stopped"), "{stopped}");
    }
}
