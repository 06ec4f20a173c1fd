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
use botfleet_memory::RoomRecord;

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
                "{key}.id`: the fleet file's bot `{id}` (owner {new}) differs only in case from \
                 {old}'s bot `{other}` {how}: ids must differ in more than case, since mentions \
                 and SendToAgent ignore it. Give that [[bots]] table another id",
                key = key_of(bots, &listed.id),
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
                    "{key}.id`: the fleet file's bot `{id}` (owner {new}) has the id of {old}'s \
                     bot {how}: an id is taken whoever owns the bot, and its conversations and \
                     memory are {old}'s. Give that [[bots]] table another id",
                    key = key_of(bots, &made.id),
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
                    "{key}.name`: the fleet file's bot `{id}` (name {name:?}) and {owner}'s bot `{other}` \
                     {how} (name {other_name:?}) both answer to {token:?} (a bot's id or name, \
                     ignoring case): @{token} would wake both and SendToAgent could not tell \
                     them apart. Give that [[bots]] table another `name`, or rename `{other}` \
                     (UpdateAgent)",
                    key = key_of(bots, &b.id),
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

/// Checks each room's members (a closed one's wake for nothing) as the fleet file's `bots` name them
/// (the `stored` bots for members the file does not list): two members
/// that answer to one mention would both wake for it, which creating a
/// room and changing its members refuse. A file that gives a bot another
/// owner and a name one of the room's other members has (alice's `a`,
/// "A", and `x`, given to bob and renamed "A", in alice's room) made one
/// at a start, and nothing said so (QA). `Err` when one of the two is a
/// file bot (the file can fix it); `Ok` holds what a start logs of clashes
/// between bots the file does not list (made bots: renamed with
/// UpdateAgent), which only a running host can fix.
pub fn room_member_clashes(
    rooms: &[RoomRecord],
    stored: &[BotRecord],
    bots: &[BotRecord],
) -> Result<Vec<String>> {
    let listed: HashMap<&BotId, &BotRecord> = bots.iter().map(|b| (&b.id, b)).collect();
    let before: HashMap<&BotId, &BotRecord> = stored.iter().map(|b| (&b.id, b)).collect();
    let kept: HashMap<&BotId, &BotRecord> = stored
        .iter()
        .filter(|b| !b.from_config() && b.removed_at().is_none())
        .map(|b| (&b.id, b))
        .collect();
    let mut notes = Vec::new();
    for room in rooms.iter().filter(|r| r.closed_at.is_none()) {
        // the members as they answer once this start applies (a member the
        // file drops, or one removed, takes no turns there)
        let members: Vec<(&BotRecord, bool, MemberName)> = room
            .members
            .iter()
            .filter_map(|id| {
                let (b, in_file) = match listed.get(id) {
                    Some(b) => (*b, true),
                    None => (*kept.get(id)?, false),
                };
                let name = MemberName {
                    id: b.id.to_string(),
                    name: b.name.trim().to_owned(),
                };
                Some((b, in_file, name))
            })
            .collect();
        for (i, (a, a_file, a_name)) in members.iter().enumerate() {
            for (b, b_file, b_name) in &members[i + 1..] {
                let Some(token) = a_name.clash(b_name) else {
                    continue;
                };
                let clash = format!(
                    "room `{room}` ({owner}'s) would have two members that answer to \
                     {token:?} (a bot's id or name, ignoring case): bot `{a}` ({a_owner}'s, name \
                     {a_n:?}) and bot `{b}` ({b_owner}'s, name {b_n:?}); @{token} would wake both",
                    room = room.id,
                    owner = room.owner,
                    a = a.id,
                    a_owner = a.owner,
                    a_n = a.name,
                    b = b.id,
                    b_owner = b.owner,
                    b_n = b.name,
                );
                // a file bot this start changes (another owner or name than
                // stored, or new) made the clash: the file is refused. One
                // the store had already (an earlier version's start made
                // it) is warned of: a refusal would keep the host, the only
                // way to change the room, from starting (review)
                let changed = |x: &BotRecord, in_file: bool| {
                    in_file
                        && before
                            .get(&x.id)
                            .is_none_or(|s| s.owner != x.owner || s.name.trim() != x.name.trim())
                };
                let which = match (changed(a, *a_file), changed(b, *b_file)) {
                    (true, false) => Some(&a.id),
                    (_, true) => Some(&b.id),
                    (false, false) => None,
                };
                if let Some(which) = which {
                    return Err(ActorError::Conflict(format!(
                        "{key}.name`: {clash}. Give the [[bots]] table `{which}` another `name`, \
                         or keep it as it was and take one of them out of the room first \
                         (PUT /v1/groups/{room}/members)",
                        key = key_of(bots, which),
                        room = room.id,
                    )));
                }
                notes.push(format!(
                    "{clash}. Rename one of them (its `name` in the fleet file, or UpdateAgent) or \
                     take one out of the room (PUT /v1/groups/{room}/members)",
                    room = room.id,
                ));
            }
        }
    }
    Ok(notes)
}

/// The key of the fleet file's bot `id` as errors name it, without its
/// closing backquote (`` key `bots[1] ``, to go on with `.id` or `.name`):
/// its place in `bots`, the file's order (QA: the errors named none).
fn key_of(bots: &[BotRecord], id: &BotId) -> String {
    bots.iter()
        .position(|b| &b.id == id)
        .map_or_else(|| "key `bots".to_owned(), |i| format!("key `bots[{i}]"))
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
