//! A member given to another user in fleet.toml (its `owner` changed, or
//! its parent's) makes a room that was its former owner's alone shared at
//! the next start (`rooms::follow_member_owners`, in the transaction that
//! applies the config). That is a new audience, as when a change of
//! members gives the room to someone (`admin.rs`), and it is handled the
//! same way in the same transaction: the writer lets the new users read
//! the timeline from the next entry on — the `members_changed` notice
//! written here, saying whose the member is now
//! (prompts/group_member_given.md) — and each member's own session of
//! the room starts a new context epoch (a `summary` entry,
//! prompts/group_now_shared.md), so nothing said or done there while the
//! room was private (its owner's memory, DM search results, drafts) is
//! sent to the model for the new audience or summarised into the room's
//! later summaries.
//!
//! A room that is shared already is a new audience for a user who gains
//! it this way too (carol's bot in alice's room given to bob): the writer
//! reads the bot's former owner before its upsert
//! (`rooms::admit_new_owner`) and admits bob from the next entry on; the
//! notice and the cut here are the same.

use std::collections::BTreeSet;
use std::collections::HashMap;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::RoomId;
use botfleet_memory::RoomRecord;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::UserId;

use super::admin::members_changed_notice;
use super::admin::now_shared_text;
use crate::prompts::prompts;

/// Origin of a subagent's record: `subagent:<parent>`.
const SUBAGENT_OF: &str = "subagent:";

/// The writes that start the new audience of each room that `config`
/// gives to another user by giving them one of its members (or a
/// member's parent): a room of one owner it makes shared, or a shared
/// room a user gains this way; `stored` holds every bot's record before
/// this config. Written after the config's bots, in their transaction.
pub(crate) async fn share_given_rooms(
    store: &Store,
    stored: &HashMap<BotId, BotRecord>,
    config: &[BotRecord],
) -> Result<Vec<Mutation>, StoreError> {
    let owners = owners_after(stored, config);
    let mut former: BTreeSet<&UserId> = BTreeSet::new();
    for (id, before) in stored {
        if owners.get(id).is_some_and(|now| *now != before.owner) {
            former.insert(&before.owner);
        }
    }
    let mut writes = Vec::new();
    let mut seen: BTreeSet<RoomId> = BTreeSet::new();
    for owner in former {
        for room in store.rooms_for(owner).await? {
            if !seen.insert(room.id.clone()) {
                continue;
            }
            // the users who gain the room with this config: a member of
            // theirs now, none before, and not the room's owner — in a
            // room of one owner, or one shared already (carol's bot in
            // alice's room given to bob), as the writer admits them
            // (`rooms::follow_member_owners`, `rooms::admit_new_owner`)
            let before: BTreeSet<&UserId> = room
                .members
                .iter()
                .filter_map(|m| stored.get(m).map(|b| &b.owner))
                .collect();
            let newcomers: BTreeSet<&UserId> = room
                .members
                .iter()
                .filter_map(|m| owners.get(m))
                .filter(|u| **u != room.owner && !before.contains(u))
                .collect();
            if newcomers.is_empty() {
                continue;
            }
            let newcomers: Vec<&str> = newcomers.into_iter().map(UserId::as_str).collect();
            tracing::info!(room = %room.id, newcomers = %newcomers.join(", "), "a member given to another owner gives the room to them: its members start a new context");
            let given: Vec<&BotId> = room
                .members
                .iter()
                .filter(|m| {
                    owners
                        .get(*m)
                        .is_some_and(|u| stored.get(*m).is_some_and(|b| b.owner != *u))
                })
                .collect();
            writes.push(notice(&room, &given, &newcomers, stored, config));
            writes.extend(cuts(store, &room, &newcomers).await?);
        }
    }
    Ok(writes)
}

/// Each bot's owner once `config` applies: the config's, a subagent its
/// parent's (the writer moves it with its parent), else as stored.
fn owners_after(
    stored: &HashMap<BotId, BotRecord>,
    config: &[BotRecord],
) -> HashMap<BotId, UserId> {
    let mut owners: HashMap<BotId, UserId> = stored
        .iter()
        .map(|(id, b)| (id.clone(), b.owner.clone()))
        .collect();
    owners.extend(config.iter().map(|b| (b.id.clone(), b.owner.clone())));
    for bot in stored.values() {
        let parent = bot
            .origin
            .strip_prefix(SUBAGENT_OF)
            .and_then(|p| BotId::new(p).ok());
        if let Some(owner) = parent.and_then(|p| owners.get(&p).cloned()) {
            owners.insert(bot.id.clone(), owner);
        }
    }
    owners
}

/// The timeline's `members_changed` notice: `given` belong to other users
/// now, who read the room from here on.
fn notice(
    room: &RoomRecord,
    given: &[&BotId],
    newcomers: &[&str],
    stored: &HashMap<BotId, BotRecord>,
    config: &[BotRecord],
) -> Mutation {
    let record = |id: &BotId| {
        config
            .iter()
            .find(|b| b.id == *id)
            .or_else(|| stored.get(id))
    };
    let label = |id: &BotId| match record(id) {
        Some(b) => format!("{} (@{id}, now {}'s)", b.name, b.owner),
        None => format!("@{id}"),
    };
    let given: Vec<String> = given.iter().map(|id| label(id)).collect();
    let members: Vec<String> = room.members.iter().map(label).collect();
    // every placeholder given (a test renders every template with its own)
    let text = prompts()
        .group_member_given
        .render(&[
            ("owner", room.owner.as_str()),
            ("given", &given.join(", ")),
            ("newcomers", &newcomers.join(", ")),
            ("members", &members.join(", ")),
        ])
        .unwrap_or_default();
    Mutation::Append(Box::new(members_changed_notice(room, text)))
}

/// A new context epoch in each member's own session of `room` that has
/// entries: a `summary` covering all of them
/// (prompts/group_now_shared.md), as the writer cuts them for a change of
/// members (`memory::store::writer_newcomers`). Read at the start, before
/// any turn runs, so nothing lands in those sessions in between.
async fn cuts(
    store: &Store,
    room: &RoomRecord,
    newcomers: &[&str],
) -> Result<Vec<Mutation>, StoreError> {
    let text = now_shared_text(room, &newcomers.join(", "));
    let mut writes = Vec::new();
    for member in &room.members {
        let session = SessionKey {
            bot: member.clone(),
            kind: SessionKind::Group,
            peer: room.id.to_string(),
        }
        .id();
        writes.extend(cut(store, session, &text).await?);
    }
    Ok(writes)
}

/// The writes that start a new context epoch in `session`, a member's own
/// session of a room: a `summary` of `text` covering every entry so far,
/// and the session's epoch moved past it. None for a session that does
/// not exist or is empty.
pub(super) async fn cut(
    store: &Store,
    session: botfleet_memory::SessionId,
    text: &str,
) -> Result<Vec<Mutation>, StoreError> {
    let Some(record) = store.get_session(session).await? else {
        return Ok(Vec::new());
    };
    if record.last_seq <= 0 {
        return Ok(Vec::new());
    }
    let epoch = record.epoch + 1;
    Ok(vec![
        Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session,
            author: "system".into(),
            turn: None,
            kind: EntryKind::Summary {
                text: text.to_owned(),
                covers_to_seq: record.last_seq,
                epoch,
            },
        })),
        Mutation::SetEpoch { session, epoch },
    ])
}
