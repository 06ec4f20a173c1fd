//! A member whose owner stopped sharing it (`shareable = true` dropped
//! from its `[[bots]]` table): at the next start it leaves every open room
//! of another user, in the transaction that applies the config, with a
//! `members_changed` notice saying why. The room goes on with the others
//! (`shared` decided again from their owners); a discussion already
//! running, also one resumed after the restart, skips its turns (its
//! checkpoint still lists it). A bot given to another owner is not
//! withdrawn: that is an owner change (the room becomes shared).

use std::collections::HashMap;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::RoomRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreError;

use super::admin::members_changed_notice;
use super::room::shareable;
use crate::prompts::prompts;

/// The member changes that take each bot of `config` its owner no longer
/// shares (shareable in `stored`, its record before this config, with the
/// same owner) out of the open rooms of other users.
pub(crate) async fn withdraw_unshared(
    store: &Store,
    stored: &HashMap<BotId, BotRecord>,
    config: &[BotRecord],
) -> Result<Vec<Mutation>, StoreError> {
    // every bot as the config has it, for the new members' owners
    let mut bots: HashMap<BotId, BotRecord> = stored.clone();
    bots.extend(config.iter().map(|b| (b.id.clone(), b.clone())));
    let mut writes = Vec::new();
    // rooms already changed in this batch, with their members then
    let mut changed: HashMap<String, Vec<BotId>> = HashMap::new();
    for bot in config {
        let Some(before) = stored.get(&bot.id) else {
            continue;
        };
        if !shareable(before) || shareable(bot) || before.owner != bot.owner {
            continue;
        }
        for room in store.rooms_for(&bot.owner).await? {
            if room.owner == bot.owner || room.closed_at.is_some() {
                continue;
            }
            let from = changed
                .get(room.id.as_str())
                .cloned()
                .unwrap_or_else(|| room.members.clone());
            if !from.contains(&bot.id) {
                continue;
            }
            let to: Vec<BotId> = from.iter().filter(|m| **m != bot.id).cloned().collect();
            let shared = to
                .iter()
                .any(|m| bots.get(m).is_none_or(|b| b.owner != room.owner));
            tracing::warn!(bot = %bot.id, room = %room.id, "bot is no longer shareable: it leaves a room of another user");
            writes.push(Mutation::SetRoomMembers {
                room: room.id.clone(),
                from,
                to: to.clone(),
                shared,
                notice: Box::new(notice(&room, bot, &to, &bots)),
                // a member leaves: nobody gains the room
                fresh_start: None,
            });
            changed.insert(room.id.to_string(), to);
        }
    }
    Ok(writes)
}

/// The `members_changed` notice of `bot` leaving `room`, `to` the members
/// left.
fn notice(
    room: &RoomRecord,
    bot: &BotRecord,
    to: &[BotId],
    bots: &HashMap<BotId, BotRecord>,
) -> NewEntry {
    let label = |id: &BotId| match bots.get(id) {
        Some(b) => format!("{} (@{id})", b.name),
        None => format!("@{id}"),
    };
    let members: Vec<String> = to.iter().map(label).collect();
    let members = if members.is_empty() {
        "none".to_owned()
    } else {
        members.join(", ")
    };
    let text = prompts()
        .group_member_unshared
        .render(&[
            ("owner", bot.owner.as_str()),
            ("member", &label(&bot.id)),
            ("id", bot.id.as_str()),
            ("members", &members),
        ])
        .unwrap_or_default();
    members_changed_notice(room, text)
}

/// Whether `bot`, listed by a discussion of `room` that started before,
/// left the room because its owner no longer shares it: not the room
/// owner's, not shareable, and no longer among the room's members.
pub(crate) async fn withdrawn(
    store: &Store,
    room: &RoomRecord,
    bot: &BotRecord,
) -> Result<bool, StoreError> {
    if bot.owner == room.owner || shareable(bot) {
        return Ok(false);
    }
    Ok(store
        .get_room(&room.id)
        .await?
        .is_some_and(|now| !now.members.contains(&bot.id)))
}
