//! The hop budget: a person's request may set off at most
//! `runtime.max_hops` bot-to-bot messages (a message, a task, a report).
//! A call past it is refused with what the bot can still do in its
//! conversation: in one with its person, answer them; in one with another
//! bot, nothing (SendMessage there goes to that bot, and is refused too),
//! so it ends its turn. The person whose message started the chain is
//! told it was cut off: a `hop_budget` notice in their conversation, once
//! per message of theirs however many calls are refused; for a chain a
//! routine started, the bot's owner, in their conversation with the bot,
//! once per run.
//!
//! Where the chain started is read back from the store, one hop at a
//! time: the input at hop `h` of a session names the session its sender
//! worked in at hop `h - 1` (an `agent_message`'s `reply_session`; a
//! subagent's task, its parent's session), down to hop 0.

use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::StoreError;

use super::ToolContext;
use super::ToolError;
use crate::prompts::prompts;
use crate::tools::describe_session;

/// The notice's code.
const HOP_BUDGET_CODE: &str = "hop_budget";

/// Entries read per session when walking a chain back (the input of a
/// hop is among a session's newest entries while its chain runs).
const WINDOW: i64 = 100;

/// What a refused call would have sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// A message to another bot (SendToAgent, SendMessage to a bot).
    Message,
    /// Work for a subagent (Task, MessageSubagent): the input and its
    /// report, two hops.
    Work,
}

/// The refusal of a call to `to` at `hop`, past `runtime.max_hops`:
/// nothing is sent, the bot is told what it can do instead in its
/// conversation (`instead` in a conversation with its person), and the
/// person who started the chain is told it was cut off.
pub(crate) async fn hop_budget_spent(
    ctx: &ToolContext<'_>,
    to: &BotId,
    hop: u32,
    cut: Cut,
    instead: &str,
) -> ToolError {
    let max = ctx.rt.settings.max_hops;
    tracing::warn!(bot = %ctx.bot.id, %to, hop, "hop budget spent");
    if ctx.scope.hop > 0 {
        // a chain of bots is cut off (at hop 0 the call was refused in the
        // person's own conversation: the bot answers them there)
        if let Err(e) = tell_origin(ctx, to).await {
            tracing::warn!(bot = %ctx.bot.id, error = %e, "could not tell the person the chain was cut off");
        }
    }
    let p = prompts();
    let max_text = max.to_string();
    let what = match cut {
        Cut::Message => p.hop_budget.render(&[("max", &max_text)]),
        Cut::Work => p.hop_budget_task.render(&[
            ("max", &max_text),
            ("left", &max.saturating_sub(ctx.scope.hop).to_string()),
        ]),
    };
    let (then, hint) = match ctx.scope.session.key.kind {
        // SendMessage would go to the other bot: nothing is left to do
        SessionKind::Agent | SessionKind::Room => (
            p.hop_budget_end.render(&[]),
            "end your turn now, without calling more tools",
        ),
        SessionKind::Dm
        | SessionKind::Group
        | SessionKind::Routine
        | SessionKind::Hook
        | SessionKind::Subagent => (p.hop_budget_answer.render(&[]), instead),
    };
    ToolError::new(
        format!("{} {}", what.unwrap_or_default(), then.unwrap_or_default()),
        hint,
    )
}

/// Tells the person whose message started the chain that it was cut off
/// (a `hop_budget` notice in that conversation, unless one already follows
/// their newest message there); for a chain a routine or a webhook started,
/// the bot's owner in their conversation with it, once per run or
/// delivery. (A chain a room started is cut off with the log line only:
/// the room's run has limits of its own.)
async fn tell_origin(ctx: &ToolContext<'_>, to: &BotId) -> Result<(), StoreError> {
    let Some(origin) = chain_origin(ctx).await? else {
        tracing::info!(bot = %ctx.bot.id, "the start of the cut-off chain was not found");
        return Ok(());
    };
    match origin.session.key.kind {
        SessionKind::Dm => tell_person(ctx, &origin.session, to).await,
        SessionKind::Routine | SessionKind::Hook => tell_owner(ctx, &origin, to).await,
        SessionKind::Agent | SessionKind::Group | SessionKind::Room | SessionKind::Subagent => {
            Ok(())
        }
    }
}

/// The notice in the person's own conversation `dm`.
async fn tell_person(
    ctx: &ToolContext<'_>,
    dm: &SessionRecord,
    to: &BotId,
) -> Result<(), StoreError> {
    let store = ctx.store();
    let recent = store.tail_entries(dm.id, WINDOW).await?;
    let told = recent
        .iter()
        .rev()
        .take_while(|e| !matches!(e.kind, EntryKind::UserMessage { .. }))
        .any(|e| matches!(&e.kind, EntryKind::Notice { code, .. } if code == HOP_BUDGET_CODE));
    if told {
        return Ok(());
    }
    let text = prompts()
        .hop_budget_notice
        .render(&[
            ("max", &ctx.rt.settings.max_hops.to_string()),
            ("bot", ctx.bot.id.as_str()),
            ("to", to.as_str()),
        ])
        .unwrap_or_default();
    let id = EntryId::derive(ctx.turn, ctx.call_id, HOP_BUDGET_CODE);
    store
        .write(vec![notice(id, dm.id, &dm.key.bot, text)])
        .await?;
    Ok(())
}

/// The notice about a routine run or webhook delivery (the newest event of
/// the origin's session written before the chain's first message: the one
/// that set it off) in the owner's conversation with the bot, where that
/// bot's messages from routines and webhooks go too. Its id is derived
/// from the event's, so a second cut of the same chain finds it.
async fn tell_owner(ctx: &ToolContext<'_>, chain: &Origin, to: &BotId) -> Result<(), StoreError> {
    let store = ctx.store();
    let origin = &chain.session;
    let recent = store.tail_entries(origin.id, WINDOW).await?;
    let Some(event) = recent.iter().rev().find(|e| {
        e.created_at <= chain.sent_at && matches!(e.kind, EntryKind::Event { hop: None, .. })
    }) else {
        tracing::info!(bot = %ctx.bot.id, "the event that started the cut-off chain was not found");
        return Ok(());
    };
    let dm = SessionKey {
        bot: origin.key.bot.clone(),
        kind: SessionKind::Dm,
        peer: origin.owner.to_string(),
    };
    let id = EntryId::derive_from(event.id, HOP_BUDGET_CODE);
    if store
        .tail_entries(dm.id(), WINDOW)
        .await?
        .iter()
        .any(|e| e.id == id)
    {
        return Ok(());
    }
    let text = prompts()
        .hop_budget_notice_event
        .render(&[
            ("event", &describe_session(origin)),
            ("max", &ctx.rt.settings.max_hops.to_string()),
            ("bot", ctx.bot.id.as_str()),
            ("to", to.as_str()),
        ])
        .unwrap_or_default();
    let record = SessionRecord {
        id: dm.id(),
        key: dm.clone(),
        owner: origin.owner.clone(),
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    };
    store
        .write(vec![
            Mutation::EnsureSession(record),
            notice(id, dm.id(), &dm.bot, text),
        ])
        .await?;
    Ok(())
}

/// A `hop_budget` notice written by `bot` in `session`.
fn notice(id: EntryId, session: SessionId, bot: &BotId, text: String) -> Mutation {
    Mutation::Append(Box::new(NewEntry {
        id,
        session,
        author: bot.to_string(),
        turn: None,
        kind: EntryKind::Notice {
            code: HOP_BUDGET_CODE.into(),
            text,
            retry_turn: None,
        },
    }))
}

/// The start of a chain of bots.
struct Origin {
    /// The session at hop 0.
    session: SessionRecord,
    /// When the input at hop 1 was written (by the turn at hop 0), ms.
    sent_at: i64,
}

/// The start of the chain the calling turn belongs to (called at hop 1
/// or more), if its steps can still be read back.
async fn chain_origin(ctx: &ToolContext<'_>) -> Result<Option<Origin>, StoreError> {
    let store = ctx.store();
    let mut session = ctx.scope.session.clone();
    let mut hop = ctx.scope.hop;
    let mut sent_at = i64::MAX;
    // one hop back per round: the walk ends at hop 0 at the latest
    while hop > 0 {
        let entries = store.tail_entries(session.id, WINDOW).await?;
        let back = entries.iter().rev().find_map(|e| match &e.kind {
            EntryKind::AgentMessage {
                from,
                hop: h,
                reply_session,
                ..
            } if *h == hop => Some((
                e.created_at,
                Back::Sender(reply_session.unwrap_or_else(|| {
                    SessionKey {
                        bot: from.clone(),
                        kind: SessionKind::Agent,
                        peer: session.key.bot.to_string(),
                    }
                    .id()
                })),
            )),
            EntryKind::Event { hop: Some(h), .. }
                if *h == hop && session.key.kind == SessionKind::Subagent =>
            {
                Some((e.created_at, Back::Parent))
            }
            _ => None,
        });
        let Some((at, back)) = back else {
            return Ok(None);
        };
        sent_at = at;
        let previous = match back {
            Back::Sender(id) => id,
            Back::Parent => match store.get_subagent(&session.key.bot).await? {
                Some(sub) => sub.parent_session,
                None => return Ok(None),
            },
        };
        session = match store.get_session(previous).await? {
            Some(s) => s,
            None => return Ok(None),
        };
        hop -= 1;
    }
    Ok(Some(Origin { session, sent_at }))
}

/// Where the input at a hop came from.
enum Back {
    /// Another bot's message: the session its sender worked in.
    Sender(SessionId),
    /// A parent's task or message to its subagent: the parent's session.
    Parent,
}
