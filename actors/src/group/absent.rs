//! Members that take no turns: a bot the fleet's config no longer lists,
//! a bot made by CreateAgent that its owner removed (for good) or whose
//! owner is no longer a user of the host (held until they are again), a
//! subagent removed with its parent, and a subagent its parent stopped
//! (its turns would be cancelled as they start, and a retry of them is
//! refused). A post does not address them
//! and says so when it mentions them (`removed_member`, and the answer's
//! `removed_mentions`); a discussion goes on without them.

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Store;
use botfleet_memory::SubagentStatus;

use super::error::GroupError;

/// Code of the timeline notice naming mentioned members that take no
/// turns.
pub(crate) const ABSENT_CODE: &str = "removed_member";

/// Why a member takes no turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Absent {
    /// The fleet's config no longer lists it.
    Removed,
    /// Made by CreateAgent, removed by its owner: no config lists it, it
    /// does not come back.
    RemovedByOwner,
    /// Made by CreateAgent for a user the fleet's config no longer lists:
    /// held until `[[users]]` lists them again (`fleet_derived.rs`).
    OwnerAway,
    /// A subagent removed with its parent `parent` (taken out of the
    /// fleet's config, or removed by its owner): it is in no config of its
    /// own. (It was named as "no longer in the fleet's config", with the
    /// advice to list it in fleet.toml, where a subagent cannot be: QA.)
    ParentGone {
        /// Its parent.
        parent: BotId,
    },
    /// A subagent `parent` stopped: it takes no more work.
    Stopped {
        /// The bot that started and stopped it.
        parent: BotId,
    },
}

/// Why room member `bot` takes no turns, as the API names it: `removed`
/// (the fleet's config no longer lists it, or its owner removed it) or
/// `stopped` (a subagent its parent stopped); `None` while it takes them.
pub async fn absence(store: &Store, bot: &BotRecord) -> Result<Option<&'static str>, GroupError> {
    Ok(absent(store, bot).await?.map(|a| match a {
        Absent::Removed
        | Absent::RemovedByOwner
        | Absent::OwnerAway
        | Absent::ParentGone { .. } => "removed",
        Absent::Stopped { .. } => "stopped",
    }))
}

/// Whether `bot` takes no turns, and why.
pub(crate) async fn absent(store: &Store, bot: &BotRecord) -> Result<Option<Absent>, GroupError> {
    if bot.removed_at().is_some() && bot.made_by_agent() {
        // held while its owner is away, not removed by them (QA: a room
        // said "removed by its owner" of a bot that comes back)
        if crate::fleet::derived::owner_absent(bot) {
            return Ok(Some(Absent::OwnerAway));
        }
        return Ok(Some(Absent::RemovedByOwner));
    }
    if bot.removed_at().is_some()
        && let Some(parent) = bot.origin.strip_prefix("subagent:")
        && let Ok(parent) = BotId::new(parent)
    {
        return Ok(Some(Absent::ParentGone { parent }));
    }
    if bot.removed_at().is_some() {
        return Ok(Some(Absent::Removed));
    }
    if !bot.origin.starts_with("subagent:") {
        return Ok(None);
    }
    Ok(store
        .get_subagent(&bot.id)
        .await?
        .filter(|s| s.status == SubagentStatus::Stopped)
        .map(|s| Absent::Stopped { parent: s.parent }))
}

/// The text of the [`ABSENT_CODE`] notice for the mentioned members in
/// `gone`: one sentence per reason.
pub(crate) fn absent_text(gone: &[(BotId, Absent)]) -> String {
    let mut removed = Vec::new();
    let mut by_owner = Vec::new();
    let mut sentences = Vec::new();
    for (id, why) in gone {
        match why {
            Absent::Removed => removed.push(format!("@{id}")),
            Absent::RemovedByOwner => by_owner.push(format!("@{id}")),
            Absent::OwnerAway => sentences.push(format!(
                "@{id} belongs to a user who is no longer one of this host's and takes no turns \
                 in this room until they are again; mention another member."
            )),
            Absent::ParentGone { parent } => sentences.push(format!(
                "@{id} is a subagent whose parent {parent} is no longer in the fleet, and takes \
                 no turns in this room; mention another member."
            )),
            Absent::Stopped { parent } => sentences.push(format!(
                "@{id} is a subagent that {parent} stopped and takes no more turns in this room; \
                 ask {parent} to start a new task, or mention another member."
            )),
        }
    }
    if !by_owner.is_empty() {
        sentences.insert(
            0,
            format!(
                "{} {} removed by {} owner and {} no turns in this room.",
                by_owner.join(", "),
                if by_owner.len() == 1 { "was" } else { "were" },
                if by_owner.len() == 1 { "its" } else { "their" },
                if by_owner.len() == 1 { "takes" } else { "take" }
            ),
        );
    }
    if !removed.is_empty() {
        sentences.insert(
            0,
            format!(
                "{} {} no longer in the fleet's config and takes no turns in this room.",
                removed.join(", "),
                if removed.len() == 1 { "is" } else { "are" }
            ),
        );
    }
    sentences.join(" ")
}
