//! Managing a room: its owner replaces its members or closes it.
//!
//! Only the room's owner may: a user who cannot see the room is told it
//! does not exist (as for every room route), and a member's owner who reads
//! a shared room is told only its owner may change it.
//!
//! A change of members commits with a `members_changed` notice in the
//! timeline (who joined, who left), so everyone reading the room sees it.
//! It applies to discussions that start after it: a discussion already
//! running keeps the members it started with (its checkpoint lists them,
//! `actor.rs`), so its member indices never point at another bot. A
//! removed member's own session of the room is kept (its owner reads it).
//!
//! A change that gives the room to a user who could not read it (their
//! first bot joins) is a new audience: in the same write, that user reads
//! the timeline from the change's notice on, and each member's own session
//! of the room starts a new context epoch (a `summary` entry,
//! prompts/group_now_shared.md), so nothing said there before — perhaps
//! while the room was its owner's alone, with her private memory and
//! tools — is sent to the model again or summarised into the room's
//! later summaries (`memory::store::writer_newcomers`).
//!
//! A closed room keeps everything (timeline, runs, member sessions) and
//! takes no more messages or member changes; the writer checks it in the
//! transaction of each message. A discussion running at the close, and
//! those of messages posted before it, still run to their end: they were
//! asked for while the room was open, and cutting one off would leave its
//! member turns half-published.

use std::collections::BTreeSet;

use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::RoomRecord;
use botfleet_memory::StoreError;
use botfleet_memory::UserId;

use super::error::GroupError;
use super::room::check_members;
use super::room::room_for;
use crate::prompts::prompts;
use crate::runtime::Runtime;

/// Code of the timeline notice of a change of members.
pub const MEMBERS_CHANGED_CODE: &str = "members_changed";
/// Code of the timeline notice of a room's close.
pub const CLOSED_CODE: &str = "room_closed";

/// The `members_changed` notice of `room`'s timeline saying `text`.
pub(super) fn members_changed_notice(room: &RoomRecord, text: String) -> NewEntry {
    NewEntry {
        id: EntryId::new_v7(),
        session: room.timeline().id(),
        author: "system".into(),
        turn: None,
        kind: EntryKind::Notice {
            code: MEMBERS_CHANGED_CODE.into(),
            text,
            retry_turn: None,
        },
    }
}

/// The summary that starts a new context epoch in each member's session
/// of `room` when `newcomers` (listed, comma-separated) gain it
/// (prompts/group_now_shared.md).
pub(super) fn now_shared_text(room: &RoomRecord, newcomers: &str) -> String {
    // both placeholders given (a test renders every template with its own)
    prompts()
        .group_now_shared
        .render(&[("owner", room.owner.as_str()), ("newcomers", newcomers)])
        .unwrap_or_default()
}

/// The room `room` if `user` owns it: `NotFound` when they cannot see it,
/// `Forbidden` when they read it as a member's owner.
async fn owned_room(rt: &Runtime, user: &UserId, room: &str) -> Result<RoomRecord, GroupError> {
    let record = room_for(rt, user, room).await?;
    if record.owner != *user {
        if owner_gone(rt, &record) {
            return Err(GroupError::Forbidden(format!(
                "only the room's owner ({}) may change its members, and {} is no longer a user \
                 of this host; you may close the room (DELETE /v1/groups/{}) and create a new one",
                record.owner, record.owner, record.id
            )));
        }
        return Err(GroupError::Forbidden(format!(
            "only the room's owner ({}) may change its members or close it; ask them",
            record.owner
        )));
    }
    Ok(record)
}

/// Whether `room`'s owner is no longer one of the host's users (taken out
/// of `[[users]]`). Not known without the list (`Settings::user_ids`
/// empty): then the owner is taken to be there.
fn owner_gone(rt: &Runtime, room: &RoomRecord) -> bool {
    let users = &rt.settings.user_ids;
    !users.is_empty() && !users.contains(&room.owner)
}

/// The room `room` if `user` may close it: its owner's, or, when its
/// owner is no longer a user of the host, any user who sees it (a
/// member's owner). Such a room could not be closed at all: its members'
/// owners could never take their bots out of it.
async fn closable_room(rt: &Runtime, user: &UserId, room: &str) -> Result<RoomRecord, GroupError> {
    let record = room_for(rt, user, room).await?;
    if record.owner != *user && owner_gone(rt, &record) {
        return Ok(record);
    }
    owned_room(rt, user, room).await
}

/// `Name (@id)` of each bot, from its record (the id alone without one).
async fn labels(rt: &Runtime, ids: &[BotId]) -> Result<Vec<String>, GroupError> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(match rt.store.get_bot(id).await? {
            Some(b) => format!("{} (@{id})", b.name),
            None => format!("@{id}"),
        });
    }
    Ok(out)
}

/// The text of the `members_changed` notice.
async fn members_text(
    rt: &Runtime,
    user: &UserId,
    from: &[BotId],
    to: &[BotId],
) -> Result<String, GroupError> {
    let joined: Vec<BotId> = to.iter().filter(|m| !from.contains(m)).cloned().collect();
    let left: Vec<BotId> = from.iter().filter(|m| !to.contains(m)).cloned().collect();
    let mut parts = Vec::new();
    if !joined.is_empty() {
        parts.push(format!("joined: {}", labels(rt, &joined).await?.join(", ")));
    }
    if !left.is_empty() {
        parts.push(format!("left: {}", labels(rt, &left).await?.join(", ")));
    }
    if parts.is_empty() {
        parts.push("same members, new speaking order".into());
    }
    Ok(format!(
        "{user} changed the members of this room ({}). Members now, in speaking order: {}. \
         Discussions that start from now on have them; one already running finishes with \
         the members it had.",
        parts.join("; "),
        labels(rt, to).await?.join(", ")
    ))
}

/// The owners of `bots` (a bot without a record: nobody's).
async fn owners(rt: &Runtime, bots: &[BotId]) -> Result<BTreeSet<UserId>, GroupError> {
    let mut out = BTreeSet::new();
    for id in bots {
        if let Some(b) = rt.store.get_bot(id).await? {
            out.insert(b.owner);
        }
    }
    Ok(out)
}

/// The text that starts a new context epoch in each member's session of
/// `room` (prompts/group_now_shared.md) when members `to` give the room
/// to users who could not read it (a user's first bot joins), `None`
/// when they give it to nobody. The writer decides again who gains the
/// room, in the change's transaction, and cuts only then: this names
/// them.
async fn fresh_start(
    rt: &Runtime,
    room: &RoomRecord,
    to: &[BotId],
) -> Result<Option<String>, GroupError> {
    let before = owners(rt, &room.members).await?;
    let newcomers: Vec<String> = owners(rt, to)
        .await?
        .into_iter()
        .filter(|u| *u != room.owner && !before.contains(u))
        .map(|u| u.to_string())
        .collect();
    if newcomers.is_empty() {
        return Ok(None);
    }
    Ok(Some(now_shared_text(room, &newcomers.join(", "))))
}

/// Replaces the members of `room` with `members` (same rules as at
/// creation, [`check_members`]) and answers the room. The same list again
/// writes nothing.
pub async fn set_members(
    rt: &Runtime,
    user: &UserId,
    room: &str,
    members: &[String],
) -> Result<RoomRecord, GroupError> {
    let record = owned_room(rt, user, room).await?;
    if record.closed_at.is_some() {
        return Err(closed(&record));
    }
    let (to, shared) = check_members(rt, user, members).await?;
    if to == record.members {
        return Ok(record);
    }
    let notice =
        members_changed_notice(&record, members_text(rt, user, &record.members, &to).await?);
    let fresh_start = fresh_start(rt, &record, &to).await?;
    let written = rt
        .store
        .write(vec![Mutation::SetRoomMembers {
            room: record.id.clone(),
            from: record.members.clone(),
            to,
            shared,
            notice: Box::new(notice),
            fresh_start,
        }])
        .await;
    match written {
        Ok(_) => {}
        // closed, or changed by another request since it was read: the
        // store's message says which and what to do
        Err(StoreError::Rejected(m)) => return Err(GroupError::Conflict(m)),
        Err(e) => return Err(e.into()),
    }
    // a discussion that is running (or waiting to start) may still run a
    // member of the old list: its turns keep the stricter surface until
    // the room's coordinator takes up a discussion with the new members
    let running = rt.store.oldest_open_room_run(&record.id).await?.is_some();
    rt.groups
        .note_shared(&record.id, shared || (running && record.shared));
    reread(rt, &record).await
}

/// Closes `room` and answers it: its owner does, or any user who sees it
/// once its owner is no longer a user of the host. Closing a closed room
/// changes nothing.
pub async fn close_room(rt: &Runtime, user: &UserId, room: &str) -> Result<RoomRecord, GroupError> {
    let record = closable_room(rt, user, room).await?;
    if record.closed_at.is_some() {
        return Ok(record);
    }
    let notice = NewEntry {
        id: EntryId::new_v7(),
        session: record.timeline().id(),
        author: "system".into(),
        turn: None,
        kind: EntryKind::Notice {
            code: CLOSED_CODE.into(),
            text: format!(
                "{user} closed this room: it takes no more messages. Its timeline stays \
                 readable and searchable; the discussions of messages posted before the \
                 close still run. Create a new room to go on."
            ),
            retry_turn: None,
        },
    };
    rt.store
        .write(vec![Mutation::CloseRoom {
            room: record.id.clone(),
            notice: Box::new(notice),
        }])
        .await?;
    reread(rt, &record).await
}

/// The refusal of a change to a closed room.
fn closed(room: &RoomRecord) -> GroupError {
    GroupError::Conflict(format!(
        "the room is closed: {} takes no more member changes. Its timeline stays readable; \
         create a new room (POST /v1/groups) to go on",
        room.id
    ))
}

/// The room as stored after a change.
async fn reread(rt: &Runtime, room: &RoomRecord) -> Result<RoomRecord, GroupError> {
    rt.store.get_room(&room.id).await?.ok_or_else(|| {
        GroupError::NotFound(format!(
            "room {} is gone; list your rooms with GET /v1/groups or `botfleet group list`",
            room.id
        ))
    })
}
