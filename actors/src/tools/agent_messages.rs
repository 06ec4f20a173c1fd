//! A message from the calling bot to another bot: its admission through
//! the idempotency ledger, inside the sender's outcome batch, within the
//! hop budget and the chain's bound on its breadth (SendToAgent, and
//! SendMessage in a conversation with a bot), between bots of one owner
//! at the time it is sent, never to a subagent.

use botfleet_memory::AdmitRequest;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::Limited;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;

use super::Cut;
use super::ToolContext;
use super::ToolError;
use super::chain_limit;
use super::hop_budget_spent;
use super::store_error;

/// The admission of a message from the calling bot to `target`, bounded
/// by the chain's breadth (checked by the writer: past it, the call of
/// `tool` is refused instead, `Mutation::Limited`). The message lands in
/// `session` if given, else in each session the target asked replies to
/// go to (when it wrote in this turn's inputs, from one or more of its
/// conversations, or when the turn works in the caller's conversation with
/// it: [`asked_replies_here`]), else in the target's session with the
/// caller: one admission per session.
pub(crate) async fn message_to_bot(
    ctx: &ToolContext<'_>,
    tool: &str,
    target: &BotRecord,
    text: &str,
    priority: Priority,
    part: &str,
    session: Option<SessionId>,
) -> Result<Vec<Mutation>, ToolError> {
    // checked at every message, not when the conversation began: fleet.toml
    // may have given one of the two bots to another user since (the
    // sender's record is the host's, read at its start, where owners change)
    if target.owner != ctx.bot.owner {
        return Err(other_owners_bot(target));
    }
    if target.removed_at().is_some() {
        // its inputs would wait unanswered until a config lists it again;
        // one its owner removed never comes back (said as the API and
        // UpdateAgent say it, QA)
        let how = if target.made_by_agent() {
            "was removed by its owner"
        } else {
            "is no longer in the fleet"
        };
        return Err(ToolError::new(
            format!("agent {} {how} and takes no more messages", target.id),
            "tell your person instead, or message another agent",
        ));
    }
    // a subagent works on its parent's task, steered with the subagent
    // tools: a message would run it outside the task
    super::targets::refuse_message_to_subagent(ctx, target).await?;
    let hop = ctx.scope.hop.saturating_add(1);
    if hop > ctx.rt.settings.max_hops {
        return Err(hop_budget_spent(
            ctx,
            &target.id,
            hop,
            Cut::Message,
            "answer the person with SendMessage instead of messaging more bots",
        )
        .await);
    }
    let limit = chain_limit(
        ctx,
        tool,
        &target.id,
        Cut::Message,
        "answer the person with SendMessage instead of messaging more bots",
    )
    .await;
    // each with when it was asked from there (`None`: a session the
    // caller named)
    let wanted: Vec<(SessionId, Option<i64>)> = match session {
        Some(id) => vec![(id, None)],
        None => {
            let asked: Vec<(SessionId, Option<i64>)> = ctx
                .scope
                .reply_to
                .iter()
                .filter(|r| r.bot == target.id)
                .map(|r| (r.session, Some(r.asked_at)))
                .collect();
            if asked.is_empty() {
                asked_replies_here(ctx, target)
                    .await?
                    .into_iter()
                    .map(|(id, at)| (id, Some(at)))
                    .collect()
            } else {
                asked
            }
        }
    };
    // going where target asked replies to go (a reply to its message
    // among the turn's inputs, or to its question handed on): an answer,
    // owed none back. A reply to target's answer is one too: taken as a
    // question (a clarification's answer is one), a "thanks!" was owed a
    // reply, reminded, and its silence told the person "no answer is
    // coming" after they had it (review); two polite bots ran to the hop
    // budget
    let answers = wanted.iter().any(|(_, asked_at)| asked_at.is_some());
    let mut keys: Vec<SessionKey> = Vec::with_capacity(wanted.len().max(1));
    for (id, asked_at) in wanted {
        // a session of the target that is no longer its owner's (a former
        // owner's DM with it) is not: the reply goes to the bots' own one;
        // nor is its session of a room given to more people since it
        // asked from there
        let key = match ctx.store().get_session(id).await.map_err(store_error)? {
            Some(rec) if rec.key.bot == target.id && rec.owner == target.owner => {
                if given_since(ctx, &rec.key, asked_at).await? {
                    default_key(ctx, target)
                } else {
                    rec.key
                }
            }
            _ => default_key(ctx, target),
        };
        if !keys.iter().any(|k| k.id() == key.id()) {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        keys.push(default_key(ctx, target));
    }
    let admits: Vec<Mutation> = keys
        .into_iter()
        .enumerate()
        .map(|(i, key)| {
            // the first keeps the id and nonce a single message has
            let part = if i == 0 {
                part.to_owned()
            } else {
                format!("{part}-{i}")
            };
            let req = AdmitRequest {
                source: format!("bot:{}", ctx.bot.id),
                nonce: format!("{}:{}:{part}", ctx.turn, ctx.call_id),
                nonce_time_ms: None,
                digest: InputDigest::of_parts([
                    b"agent_message".as_slice(),
                    target.id.as_str().as_bytes(),
                    text.as_bytes(),
                ]),
                entry: NewEntry {
                    id: EntryId::derive(ctx.turn, ctx.call_id, &part),
                    session: key.id(),
                    author: ctx.bot.id.to_string(),
                    turn: None,
                    kind: EntryKind::AgentMessage {
                        from: ctx.bot.id.clone(),
                        text: text.to_owned(),
                        hop,
                        reply_session: Some(ctx.session()),
                        chain: ctx.scope.chain,
                        answers,
                    },
                },
                session: key,
                owner: target.owner.clone(),
                priority,
            };
            Mutation::Admit(Box::new(req))
        })
        .collect();
    Ok(match limit {
        // the call's other effects join it (`engine/calls.rs`)
        Some(limit) => vec![Mutation::Limited(Box::new(Limited {
            limits: vec![limit],
            within: admits,
        }))],
        None => admits,
    })
}

/// Whether `key` is a member's session of a room that was given to more
/// people (a member change or an owner change gave it to a user who could
/// not read it) after `asked_at`: a reply to what the member asked from
/// there while the room was not theirs may hold what they may not read
/// (QA: a bot asked from alice's private room, the room was shared with
/// bob, and the answer, from her DM, arrived in the room's context and was
/// posted to bob). Such a reply goes to the bots' own conversation.
async fn given_since(
    ctx: &ToolContext<'_>,
    key: &SessionKey,
    asked_at: Option<i64>,
) -> Result<bool, ToolError> {
    let (SessionKind::Group, Some(asked_at)) = (key.kind, asked_at) else {
        return Ok(false);
    };
    let Ok(room) = botfleet_memory::RoomId::new(key.peer.as_str()) else {
        return Ok(false);
    };
    let since = ctx
        .store()
        .room_audience_since(&room)
        .await
        .map_err(store_error)?;
    Ok(since.is_some_and(|since| since > asked_at))
}

/// Where `target` asked replies to go when this turn works in the
/// caller's conversation with it and none of the turn's inputs is
/// target's: by its newest message in this conversation. The caller was
/// woken here by a third bot's answer or its subagent's report after
/// target asked it something: its answer belongs in the conversation
/// target asked from (its person's), not in target's session with the
/// caller, where it woke target with no person to tell.
async fn asked_replies_here(
    ctx: &ToolContext<'_>,
    target: &BotRecord,
) -> Result<Option<(SessionId, i64)>, ToolError> {
    let key = &ctx.scope.session.key;
    if key.kind != SessionKind::Agent || key.peer != target.id.as_str() {
        return Ok(None);
    }
    ctx.store()
        .reply_session_of(ctx.session(), &target.id)
        .await
        .map_err(store_error)
}

/// The refusal of a message to `target`, a bot of another user than the
/// sender's owner: bots message only bots of their own owner (a room
/// shared between users has rules of its own). The bot is named only to a
/// sender that knows it already (SendToAgent finds only its owner's bots):
/// the other bot of its conversation, given to someone else since.
fn other_owners_bot(target: &BotRecord) -> ToolError {
    ToolError::new(
        format!(
            "{} no longer belongs to your owner, and a bot messages only bots of its own \
             owner: nothing was sent to it",
            target.id
        ),
        format!(
            "do not write to {} again; if a person is waiting for you, tell them instead, \
             otherwise end your turn now",
            target.id
        ),
    )
}

fn default_key(ctx: &ToolContext<'_>, target: &BotRecord) -> SessionKey {
    SessionKey {
        bot: target.id.clone(),
        kind: SessionKind::Agent,
        peer: ctx.bot.id.to_string(),
    }
}
