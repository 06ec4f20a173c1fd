//! What the fleet file's bots may not do to the bots the store holds that
//! bots made (CreateAgent, subagents): take the id of another person's,
//! or answer to a mention the same owner's made bot answers to. A start
//! ([`super::FleetHandle::start`]) and `botfleet check-config` (from the
//! store read as it is) both ask [`check_fleet_file_bots`], so a file the
//! check accepts starts (QA, 2026-12-04: check-config said ok to a file
//! the start then refused).

use std::collections::HashMap;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;

use crate::error::ActorError;
use crate::error::Result;
use crate::group::mentions::MemberName;

/// Checks the fleet file's `bots` against the `stored` bots. `Err` names
/// both bots and the fix: a file bot with the id of another owner's made
/// bot (an id is taken whoever owns the bot, and its conversations and
/// memory are that owner's), or one that answers to the same mention
/// (id or name, ignoring case) as a live bot its owner's bots made, which
/// `@Name` would wake with it. `Ok` holds what a start logs: made bots of
/// the file bot's owner that the file now lists by their id (adopted:
/// they keep their conversations and memory).
pub fn check_fleet_file_bots(stored: &[BotRecord], bots: &[BotRecord]) -> Result<Vec<String>> {
    // a store may hold thousands of subagents: each looked up, not scanned for
    let by_id: HashMap<&BotId, &BotRecord> = bots.iter().map(|b| (&b.id, b)).collect();
    // ids are ASCII: lowercase folds them as mentions do
    let by_folded: HashMap<String, &BotRecord> = bots
        .iter()
        .map(|b| (b.id.as_str().to_ascii_lowercase(), b))
        .collect();
    let mut notes = Vec::new();
    for made in stored.iter().filter(|b| !b.from_config()) {
        if !by_id.contains_key(&made.id)
            && let Some(listed) = by_folded.get(&made.id.as_str().to_ascii_lowercase())
        {
            // (QA: `HELPER` in the file beside alice's made `helper` was
            // stored, and the two could not share a room)
            return Err(ActorError::Conflict(format!(
                "the fleet file's bot `{id}` (owner {new}) differs only in case from {old}'s \
                 bot `{other}` {how}: ids must differ in more than case, since mentions and \
                 SendToAgent ignore it. Give that [[bots]] table another id",
                id = listed.id,
                new = listed.owner,
                old = made.owner,
                other = made.id,
                how = made_how(made),
            )));
        }
        if let Some(listed) = by_id.get(&made.id) {
            let how = made_how(made);
            if listed.owner != made.owner {
                return Err(ActorError::Conflict(format!(
                    "the fleet file's bot `{id}` (owner {new}) has the id of {old}'s bot {how}: \
                     an id is taken whoever owns the bot, and its conversations and memory are \
                     {old}'s. Give that [[bots]] table another id",
                    id = made.id,
                    new = listed.owner,
                    old = made.owner,
                )));
            }
            notes.push(format!(
                "bot {id} ({how}) is now the fleet file's bot of that id (the same owner's): it \
                 keeps its conversations and memory, and takes the tools and role fleet.toml \
                 gives it",
                id = made.id
            ));
            continue;
        }
        // a subagent is no room member and no SendToAgent target by name
        if made.removed_at().is_some() || !made.made_by_agent() {
            continue;
        }
        let how = made_how(made);
        let theirs = MemberName {
            id: made.id.to_string(),
            name: made.name.trim().to_owned(),
        };
        for b in bots.iter().filter(|b| b.owner == made.owner) {
            let mine = MemberName {
                id: b.id.to_string(),
                name: b.name.trim().to_owned(),
            };
            if let Some(token) = mine.clash(&theirs) {
                return Err(ActorError::Conflict(format!(
                    "the fleet file's bot `{id}` (name {name:?}) and {owner}'s bot `{other}` \
                     {how} (name {other_name:?}) both answer to {token:?} (a bot's id or name, \
                     ignoring case): @{token} would wake both and SendToAgent could not tell \
                     them apart. Give that [[bots]] table another `name`, or rename `{other}` \
                     (UpdateAgent)",
                    id = b.id,
                    name = b.name,
                    owner = made.owner,
                    other = made.id,
                    other_name = made.name,
                )));
            }
        }
    }
    Ok(notes)
}

/// How a bot was made, for a message: "made by helper with CreateAgent".
fn made_how(made: &BotRecord) -> String {
    match made.origin.split_once(':') {
        Some(("agent", maker)) => format!("made by {maker} with CreateAgent"),
        Some(("subagent", parent)) => format!("a subagent of {parent}"),
        _ => format!("of origin `{}`", made.origin),
    }
}

/// What a start logs of the fleet file's `bots` whose id a room holds
/// (`rooms`: `(bot id, room id)`, ignoring case, from
/// `Store::rooms_holding`): a room may not take a bot's id, nor
/// CreateAgent a room's, but a bot added to the file after the room can;
/// search hits and the `transcripts/<id>/` mirror then name both. Not
/// refused: the room may be another person's, and the bot its owner's to
/// name; the warning says what to change.
pub fn room_id_clashes(rooms: &[(String, String)]) -> Vec<String> {
    rooms
        .iter()
        .map(|(bot, room)| {
            format!(
                "the fleet file's bot `{bot}` has the id of the room `{room}` (ids ignore case): \
                 search hits and the transcripts/{bot}/ files name both, so a reader cannot tell \
                 them apart. Give that [[bots]] table another id"
            )
        })
        .collect()
}

#[cfg(test)]
#[path = "fleet_claims_tests.rs"]
mod tests;
