//! Creating rooms, who may use them, and posting a user's message.
//!
//! Who may add which bot: a user adds their own bots, and other users'
//! bots whose owner marked them `shareable = true` in fleet.toml (stored as
//! `{"shareable": true}` in the bot's settings). A room whose members
//! belong to more than one user is *shared*: decided here at creation
//! and when its owner changes its members (`admin.rs`, by the same
//! `check_members`), and again by the store's writer whenever a
//! member's owner may have changed (fleet.toml gave it to another user),
//! in the same transaction.
//!
//! Who may use a room: its owner (the creating user) reads and posts; in a
//! shared room, so does every user who owns one of its members — their
//! bots speak there, so they see the room. Change signals on `/v1/events`
//! go to the room owner (the owner of the timeline session); other users
//! of a shared room poll the timeline.

use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::RoomId;
use botfleet_memory::RoomRecord;
use botfleet_memory::SessionRecord;
use botfleet_memory::StoreError;
use botfleet_memory::SubagentStatus;
use botfleet_memory::UserId;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::absent::ABSENT_CODE;
use super::absent::Absent;
use super::absent::absent;
use super::absent::absent_text;
use super::actor::RunState;
use super::error::GroupError;
use super::mentions::EVERYONE;
use super::mentions::MemberName;
use super::mentions::mentions;
use super::mentions::select;
use super::run::Limits;
use crate::protocol::nonce_time_ms;
use crate::runtime::Runtime;

/// Longest room display name.
pub const MAX_ROOM_NAME_CHARS: usize = 100;
/// Fewest members of a room.
pub const MIN_MEMBERS: usize = 2;

/// A request to create a room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRoom {
    /// Room id; defaults to `name` (then the name must follow the id rules).
    pub id: Option<String>,
    /// Display name.
    pub name: String,
    /// Member bot ids, in the order they speak.
    pub members: Vec<String>,
}

/// The answer to a message posted to a room.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Posted {
    /// The ledger's answer (`accepted`, `duplicate`, `conflict`,
    /// `unknown`) with the message's record.
    #[serde(flatten)]
    pub outcome: AdmitOutcome,
    /// The room.
    pub room: RoomId,
    /// Members the message addresses, in the order they run.
    pub addressed: Vec<BotId>,
    /// Mentions that match no member.
    pub unknown_mentions: Vec<String>,
    /// Members it mentions that the fleet's config no longer lists (they
    /// take no turns).
    pub removed_mentions: Vec<BotId>,
}

/// Whether other users may add `bot` to their rooms (fleet.toml
/// `shareable = true`, stored in its settings).
pub(crate) fn shareable(bot: &BotRecord) -> bool {
    bot.settings.get("shareable").and_then(Value::as_bool) == Some(true)
}

/// Creates a room owned by `user`.
pub async fn create_room(
    rt: &Runtime,
    user: &UserId,
    new: NewRoom,
) -> Result<RoomRecord, GroupError> {
    let name = new.name.trim().to_owned();
    if name.is_empty() {
        return Err(GroupError::Invalid(
            "`name` is empty; give the room a name".into(),
        ));
    }
    if let Some(problem) = botfleet_memory::display_name_problem(&name) {
        return Err(GroupError::Invalid(format!("`name` {problem}")));
    }
    if name.chars().count() > MAX_ROOM_NAME_CHARS {
        return Err(GroupError::Invalid(format!(
            "`name` is longer than {MAX_ROOM_NAME_CHARS} characters; shorten it"
        )));
    }
    let raw_id = new.id.as_deref().map(str::trim).unwrap_or(&name);
    let id = RoomId::new(raw_id).map_err(|e| {
        GroupError::Invalid(if new.id.is_some() {
            format!("`id`: {e}")
        } else {
            format!("{e}; pass an `id` (or use such a name), e.g. \"standup\"")
        })
    })?;
    let (members, shared) = check_members(rt, user, &new.members).await?;
    // a taken id is refused by the store, in the write's transaction: its
    // message names the existing room only to that room's owner (room ids
    // are one namespace for the fleet; another user's must not leak); so
    // is a bot's id, whoever's (`rooms::create_room`)
    let now = rt.store.clock().now_ms();
    let room = RoomRecord {
        id: id.clone(),
        name,
        owner: user.clone(),
        members,
        shared,
        created_at: now,
        updated_at: now,
        closed_at: None,
    };
    let key = room.timeline();
    let session = SessionRecord {
        id: key.id(),
        key,
        owner: user.clone(),
        epoch: 0,
        last_seq: 0,
        created_at: now,
    };
    match rt
        .store
        .write(vec![
            Mutation::CreateRoom(Box::new(room.clone())),
            Mutation::EnsureSession(session),
        ])
        .await
    {
        Ok(_) => Ok(room),
        // the store refuses an id taken (ignoring case), naming the room
        // that holds it only to that room's owner
        Err(StoreError::Rejected(m)) => Err(GroupError::Conflict(m)),
        Err(e) => Err(e.into()),
    }
}

/// The bot `given` likely means when it is not a bot id `user` may add:
/// the id in another case, or the display name, of one they may add
/// (their own, or another user's marked `shareable`). `send` says the
/// same for a bot (QA: `--members chatty,CHATTY` was told to "add your
/// own bots"). With `listed` (the members before it) holding that bot,
/// it is said to be listed twice, and the second value is true.
async fn meant_member(
    rt: &Runtime,
    user: &UserId,
    given: &str,
    listed: &[BotId],
) -> Result<(String, bool), GroupError> {
    let key = botfleet_memory::name_key(given);
    let meant = rt
        .store
        .bots_answering_to(&[key])
        .await?
        .into_iter()
        .find(|b| {
            b.id.as_str() != given && b.removed_at().is_none() && (b.owner == *user || shareable(b))
        });
    Ok(match meant {
        Some(b) if listed.contains(&b.id) => (
            format!(
                "; it is {} ({:?}), listed already: list each bot once, by its id",
                b.id, b.name
            ),
            true,
        ),
        Some(b) => (
            format!(
                "; did you mean {} ({:?})? Members are given by bot id, matched exactly; list \
                 yours with GET /v1/bots or `botfleet bots`",
                b.id, b.name
            ),
            false,
        ),
        None => (String::new(), false),
    })
}

/// Checks a room's member list as given by `user` (creation, or a change
/// of members): 2–6 existing bots, each listed once, each `user`'s own or
/// another user's marked `shareable`, none that takes no turns, no two
/// that answer to one mention. Returns the members in order and whether
/// they make the room shared (some belong to another user).
pub(super) async fn check_members(
    rt: &Runtime,
    user: &UserId,
    given: &[String],
) -> Result<(Vec<BotId>, bool), GroupError> {
    let limits = Limits::default();
    if given.len() > limits.max_members {
        return Err(GroupError::Invalid(format!(
            "a room has at most {} members; you gave {}. Split them into several rooms",
            limits.max_members,
            given.len()
        )));
    }
    if given.len() < MIN_MEMBERS {
        return Err(GroupError::Invalid(format!(
            "a room needs at least {MIN_MEMBERS} members; you gave {}. Talk to a single bot directly instead (POST /v1/bots/{{bot}}/messages)",
            given.len()
        )));
    }
    let mut members: Vec<BotId> = Vec::with_capacity(given.len());
    let mut names: Vec<MemberName> = Vec::with_capacity(given.len());
    let mut shared = false;
    for raw in given {
        let raw = raw.trim();
        let id = match BotId::new(raw) {
            Ok(id) => id,
            Err(e) => {
                // a display name given for an id ("Chatty Cathy")
                let (hint, _) = meant_member(rt, user, raw, &members).await?;
                return Err(GroupError::Invalid(format!(
                    "member {}: {e}{hint}",
                    botfleet_memory::quote_short(raw)
                )));
            }
        };
        if members.contains(&id) {
            return Err(GroupError::Invalid(format!(
                "member {id} is listed twice; list each bot once"
            )));
        }
        let bot = rt.store.get_bot(&id).await?;
        if let Some(b) = &bot
            && b.owner == *user
            && b.origin.starts_with("subagent:")
            && let Some(sub) = rt.store.get_subagent(&b.id).await?
            && sub.status == SubagentStatus::Stopped
        {
            // its turns would be cancelled as they start, silently
            return Err(GroupError::Conflict(format!(
                "member {id} is a subagent that was stopped and takes no more work; ask {} \
                 to start a new task, or add another bot",
                sub.parent
            )));
        }
        if let Some(b) = &bot
            && b.removed_at().is_some()
            && (b.owner == *user || shareable(b))
        {
            // it runs no turns: the discussion would skip it every time
            return Err(GroupError::Conflict(
                match super::absent::absent(&rt.store, b).await? {
                    Some(super::absent::Absent::OwnerAway) => format!(
                        "member {id} belongs to a user who is no longer one of this host's and \
                         takes no turns until [[users]] lists them again; add another bot"
                    ),
                    Some(super::absent::Absent::ParentGone { parent }) => format!(
                        "member {id} is a subagent whose parent {parent} is no longer in the \
                         fleet and takes no turns; add another bot"
                    ),
                    // made by CreateAgent: no config lists it, it does not come back
                    Some(super::absent::Absent::RemovedByOwner) => format!(
                        "member {id} was removed by its owner and takes no turns; add another bot"
                    ),
                    // removed (it is: `removed_at` is set), so neither
                    // stopped nor taking turns: what the config dropped
                    Some(
                        super::absent::Absent::Removed | super::absent::Absent::Stopped { .. },
                    )
                    | None => format!(
                        "member {id} is no longer in the fleet's config and takes no turns; list \
                         it in fleet.toml again, or add another bot"
                    ),
                },
            ));
        }
        let name = MemberName {
            id: id.to_string(),
            name: bot.as_ref().map(|b| b.name.clone()).unwrap_or_default(),
        };
        match bot {
            Some(b) if b.owner == *user => {}
            Some(b) if shareable(&b) => shared = true,
            _ => {
                let (hint, twice) = meant_member(rt, user, raw, &members).await?;
                if twice {
                    // a member listed twice, in another case or by its
                    // name: a bad list (400), as the same id twice is,
                    // not a bot that is not there (QA, 2026-12-05: 404)
                    return Err(GroupError::Invalid(format!("member \"{raw}\"{hint}")));
                }
                if !hint.is_empty() {
                    return Err(GroupError::NotFound(format!(
                        "no bot \"{id}\" you may add{hint}"
                    )));
                }
                return Err(GroupError::NotFound(format!(
                    "no bot \"{id}\" you may add: add your own bots, or other users' bots marked \
                     `shareable = true`; list yours with GET /v1/bots or `botfleet bots`"
                )));
            }
        }
        if name.answers_to(EVERYONE) {
            // `@everyone` addresses every member: this one could never be
            // addressed alone
            return Err(GroupError::Invalid(format!(
                "member {id} answers to @{EVERYONE}, which addresses every member of a room, so \
                 it could never be mentioned alone; rename it (`name` in fleet.toml, or its id) \
                 or leave it out"
            )));
        }
        if let Some((other, token)) = names
            .iter()
            .find_map(|n| n.clash(&name).map(|token| (n, token)))
        {
            // mentions go by id or display name, ignoring case
            return Err(GroupError::Invalid(format!(
                "members {} and {} both answer to @{token}, so a mention of one would wake \
                 both; rename one of them (`name` in fleet.toml) or leave one out",
                other.id, name.id
            )));
        }
        names.push(name);
        members.push(id);
    }
    Ok((members, shared))
}

fn not_found(room: &str) -> GroupError {
    GroupError::NotFound(format!(
        "no room {} for you; list your rooms with GET /v1/groups or `botfleet group list`",
        botfleet_memory::quote_short(room)
    ))
}

/// Whether `user` may read and post in `room` (see the module docs).
async fn may_use(rt: &Runtime, user: &UserId, room: &RoomRecord) -> Result<bool, GroupError> {
    if room.owner == *user {
        return Ok(true);
    }
    if !room.shared {
        return Ok(false);
    }
    for id in &room.members {
        if rt
            .store
            .get_bot(id)
            .await?
            .is_some_and(|b| b.owner == *user)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A room `user` may use. Rooms of others are reported as missing, so ids
/// do not leak across users; a name no room can have is `Invalid`, as a
/// bad bot id is (it says nothing of any room).
pub async fn room_for(rt: &Runtime, user: &UserId, room: &str) -> Result<RoomRecord, GroupError> {
    let id = RoomId::new(room).map_err(|e| GroupError::Invalid(e.to_string()))?;
    match rt.store.get_room(&id).await? {
        Some(r) if may_use(rt, user, &r).await? => Ok(r),
        _ => Err(not_found(room)),
    }
}

/// Every room `user` may use, by id: `may_use` of each of the user's
/// rooms and each shared one, whose members it looks up by key (records
/// the store keeps in memory). It read every bot record of the user and
/// searched them one by one for each member, at each listing of rooms,
/// API search and SearchTranscript call: thousands of records, for a user
/// whose bots delegate (each subagent is a bot of its own).
pub async fn rooms_for(rt: &Runtime, user: &UserId) -> Result<Vec<RoomRecord>, GroupError> {
    let mut out = Vec::new();
    for room in rt.store.rooms_for(user).await? {
        if may_use(rt, user, &room).await? {
            out.push(room);
        }
    }
    Ok(out)
}

/// Posts a user's message to a room: the ledger decides (`Idempotency-Key`
/// semantics as for direct messages), and an accepted message is written
/// with the run it starts and, if some mentions match nobody, a notice
/// naming them. Answers after the commit; the run happens afterwards.
///
/// Who may post and whom the message addresses are decided from one read
/// of the room; the write refuses the message if the room changed since
/// (its members, or its being shared): then the poster is told the room
/// is gone (404) if they may no longer use it, or to post again (409).
pub async fn post_message(
    rt: &Runtime,
    user: &UserId,
    room: &str,
    text: &str,
    key: Option<&str>,
) -> Result<Posted, GroupError> {
    let planned = plan_post(rt, user, room, text, key).await?;
    commit_post(rt, user, planned).await
}

/// The digest the ledger keeps of a person's message `text` to the room
/// `room` (its id): a retry under the same key with the same digest is a
/// `duplicate`.
pub fn room_message_digest(room: &str, text: &str) -> InputDigest {
    InputDigest::of_parts([b"room_message".as_slice(), room.as_bytes(), text.as_bytes()])
}

/// A room message as decided from one read of the room, not yet written.
#[derive(Debug)]
pub(super) struct PlannedPost {
    /// The room as read.
    room: RoomRecord,
    /// The admission, with the members and `shared` it was decided from.
    write: Mutation,
    /// Members it addresses, in the order they run.
    addressed: Vec<BotId>,
    /// Mentions that match no member.
    unknown: Vec<String>,
    /// Members it mentions that take no turns.
    removed: Vec<BotId>,
}

/// Reads the room and decides the message: may `user` post, whom it
/// addresses, which notices go with it.
pub(super) async fn plan_post(
    rt: &Runtime,
    user: &UserId,
    room: &str,
    text: &str,
    key: Option<&str>,
) -> Result<PlannedPost, GroupError> {
    let room = room_for(rt, user, room).await?;
    let text = crate::message_text(text);
    if text.is_empty() {
        return Err(GroupError::Invalid(
            "`text` is empty; send the message text".into(),
        ));
    }
    let mut names = Vec::with_capacity(room.members.len());
    let mut absent_members = Vec::new();
    for id in &room.members {
        let bot = rt.store.get_bot(id).await?;
        if let Some(b) = &bot
            && let Some(why) = absent(&rt.store, b).await?
        {
            absent_members.push((id.clone(), why));
        }
        names.push(MemberName {
            id: id.to_string(),
            name: bot.map(|b| b.name).unwrap_or_else(|| id.to_string()),
        });
    }
    let selection = select(text, &names);
    // a member the fleet's config no longer lists, or a stopped subagent,
    // takes no turns: not addressed, and the person is told if they asked
    // for it by name
    let (gone, addressed): (Vec<BotId>, Vec<BotId>) = selection
        .members
        .iter()
        .filter_map(|i| room.members.get(*i).cloned())
        .partition(|id| absent_members.iter().any(|(a, _)| a == id));
    // of those, the ones asked for by name: `@everyone` or no mention
    // names nobody (QA: `@everyone` reported every absent member, each
    // time, where a message with no mention reported none)
    let written = mentions(text);
    let answers_now = |m: &str| {
        names
            .iter()
            .any(|n| n.answers_to(m) && !absent_members.iter().any(|(a, _)| a.as_str() == n.id))
    };
    // a mention a present member answers to is theirs: a made bot its
    // owner removed gave up its name, which another may have now (QA:
    // `@Fourth` for the member named so also reported the removed bot
    // once named so)
    let by_name: Vec<BotId> = gone
        .iter()
        .filter(|id| {
            names.iter().any(|n| {
                n.id == id.as_str()
                    && written.iter().any(|m| {
                        botfleet_memory::name_key(m) != EVERYONE
                            && n.answers_to(m)
                            && !answers_now(m)
                    })
            })
        })
        .cloned()
        .collect();
    // the members to address: those that take turns (QA: the unknown
    // mention's notice offered a removed member)
    let present: Vec<MemberName> = names
        .iter()
        .filter(|n| !absent_members.iter().any(|(a, _)| a.as_str() == n.id))
        .cloned()
        .collect();
    let nonce = key
        .map(str::to_owned)
        .unwrap_or_else(|| Uuid::now_v7().to_string());
    let timeline = room.timeline();
    let session = timeline.id();
    let mut notices = Vec::new();
    if !by_name.is_empty() {
        let named: Vec<(BotId, Absent)> = absent_members
            .into_iter()
            .filter(|(id, _)| by_name.contains(id))
            .collect();
        notices.push(NewEntry {
            id: EntryId::new_v7(),
            session,
            author: "system".into(),
            turn: None,
            kind: EntryKind::Notice {
                code: ABSENT_CODE.into(),
                text: absent_text(&named),
                retry_turn: None,
            },
        });
    }
    if !selection.unknown.is_empty() {
        let unknown: Vec<String> = selection.unknown.iter().map(|u| format!("@{u}")).collect();
        let addressed_text = if addressed.is_empty() {
            "nobody else was addressed, so nobody will answer".to_owned()
        } else {
            let ids: Vec<String> = addressed.iter().map(|a| format!("@{a}")).collect();
            format!("the message goes to {}", ids.join(", "))
        };
        notices.push(NewEntry {
            id: EntryId::new_v7(),
            session,
            author: "system".into(),
            turn: None,
            kind: EntryKind::Notice {
                code: "unknown_mention".into(),
                text: format!(
                    "No member of this room is called {}; {addressed_text}. {}",
                    unknown.join(", "),
                    if present.is_empty() {
                        "No member takes turns here now.".to_owned()
                    } else {
                        format!("Members: {}.", super::mentions::members_list(&present))
                    }
                ),
                retry_turn: None,
            },
        });
    }
    let removed_mentions = by_name;
    let state = RunState {
        selected: addressed.clone(),
        unknown: selection.unknown.clone(),
        removed: removed_mentions.clone(),
        // another user's message, or one to a shared room, is discussed
        // with the shared surface even if the room stops being shared
        // before its discussion starts (its text may come from anyone)
        shared: room.shared || room.owner != *user,
        progress: None,
    };
    let request = AdmitRequest {
        source: format!("user:{user}"),
        nonce_time_ms: nonce_time_ms(&nonce),
        digest: room_message_digest(room.id.as_str(), text),
        nonce,
        session: timeline,
        owner: room.owner.clone(),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session,
            author: user.to_string(),
            turn: None,
            kind: EntryKind::UserMessage {
                text: text.to_owned(),
            },
        },
        priority: Priority::Background,
    };
    let state =
        serde_json::to_value(&state).map_err(|e| GroupError::Invalid(format!("run state: {e}")))?;
    Ok(PlannedPost {
        write: Mutation::AdmitToRoom {
            request: Box::new(request),
            room: room.id.clone(),
            poster: user.clone(),
            members: room.members.clone(),
            shared: room.shared,
            state,
            notices,
        },
        room,
        addressed,
        unknown: selection.unknown,
        removed: removed_mentions,
    })
}

/// Writes a planned message; the store refuses it if the room changed
/// since it was read.
pub(super) async fn commit_post(
    rt: &Runtime,
    user: &UserId,
    planned: PlannedPost,
) -> Result<Posted, GroupError> {
    let PlannedPost {
        room,
        write,
        addressed,
        unknown,
        removed,
    } = planned;
    let written = match rt.store.write(vec![write]).await {
        Ok(results) => results,
        // the writer refuses a new message to a room closed, or whose
        // members changed, since it was read (its message says so and
        // what to do); one the poster may no longer use is missing to
        // them, as it is to any later request
        Err(StoreError::Rejected(m)) => {
            return match room_for(rt, user, room.id.as_str()).await {
                Ok(_) => Err(GroupError::Conflict(m)),
                Err(e) => Err(e),
            };
        }
        Err(e) => return Err(e.into()),
    };
    let outcome = match written.into_iter().next_back() {
        Some(MutationResult::Admitted(o)) => o,
        other => {
            return Err(
                StoreError::Rejected(format!("unexpected admission result {other:?}")).into(),
            );
        }
    };
    if matches!(
        outcome,
        AdmitOutcome::Accepted(_) | AdmitOutcome::Duplicate(_)
    ) && let Err(e) = rt.groups.wake(room.id.clone())
    {
        // the run is stored; recovery starts it
        tracing::warn!(room = %room.id, error = %e, "could not wake the room");
    }
    let mut posted = Posted {
        outcome,
        room: room.id,
        addressed,
        unknown_mentions: unknown,
        removed_mentions: removed,
    };
    if let AdmitOutcome::Duplicate(first) = &posted.outcome {
        // the message as first accepted: whom it addressed then (the
        // members may have changed since), as stored with its run
        match first_answer(rt, &posted.room, first.seq).await? {
            Some(state) => {
                posted.addressed = state.selected;
                posted.unknown_mentions = state.unknown;
                posted.removed_mentions = state.removed;
            }
            None => {
                tracing::warn!(room = %posted.room, seq = first.seq, "no readable run of a duplicate room message; answering from the current members");
            }
        }
    }
    Ok(posted)
}

/// The answer to a retry of a room message its poster may no longer
/// post to (taken out of the room): `outcome` (the ledger's `duplicate`,
/// whose record's `bot` is the room) with whom the message addressed and
/// its mentions, as stored with its run, so the answer is the record a
/// retry inside the room gets (QA: only the ledger's record, without
/// `addressed` and the mentions the API promises).
pub async fn retried_post(rt: &Runtime, outcome: AdmitOutcome) -> Result<Posted, GroupError> {
    let AdmitOutcome::Duplicate(first) = &outcome else {
        return Err(GroupError::Invalid(format!(
            "not a duplicate room message: {outcome:?}"
        )));
    };
    let room = RoomId::new(first.bot.as_str()).map_err(|e| GroupError::Invalid(e.to_string()))?;
    let (addressed, unknown, removed) = match first_answer(rt, &room, first.seq).await? {
        Some(state) => (state.selected, state.unknown, state.removed),
        None => {
            tracing::warn!(%room, seq = first.seq, "no readable run of a retried room message; answering without its mentions");
            (Vec::new(), Vec::new(), Vec::new())
        }
    };
    Ok(Posted {
        outcome,
        room,
        addressed,
        unknown_mentions: unknown,
        removed_mentions: removed,
    })
}

/// The stored state of the run the room message at `seq` started: its
/// addressed members and mentions as computed when it was accepted (the
/// coordinator keeps them as they were).
async fn first_answer(
    rt: &Runtime,
    room: &RoomId,
    seq: i64,
) -> Result<Option<RunState>, GroupError> {
    let Some(run) = rt.store.get_room_run(room, seq).await? else {
        return Ok(None);
    };
    Ok(serde_json::from_value(run.state).ok())
}

#[cfg(test)]
#[path = "room_tests.rs"]
mod tests;
