//! The hop budget: a person's request may set off at most
//! `runtime.max_hops` bot-to-bot messages (a message, a task, a report).
//! A call past it is refused with what the bot can still do in its
//! conversation: in one with its person, answer them; in one with another
//! bot, nothing (SendMessage there goes to that bot, and is refused too),
//! so it ends its turn. The person whose message started the chain is
//! told it was cut off: a `hop_budget` notice in their conversation, once
//! per message of theirs however many calls are refused.
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

/// Writes the `hop_budget` notice in the conversation of the person whose
/// message started the chain, unless one already follows their newest
/// message there. (A chain a routine, a webhook or a room started has no
/// such conversation: it is cut off with the log line only.)
async fn tell_origin(ctx: &ToolContext<'_>, to: &BotId) -> Result<(), StoreError> {
    let Some(origin) = chain_origin(ctx).await? else {
        tracing::info!(bot = %ctx.bot.id, "the start of the cut-off chain was not found");
        return Ok(());
    };
    if origin.key.kind != SessionKind::Dm {
        return Ok(());
    }
    let store = ctx.store();
    let recent = store.tail_entries(origin.id, WINDOW).await?;
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
    store
        .write(vec![Mutation::Append(Box::new(NewEntry {
            id: EntryId::derive(ctx.turn, ctx.call_id, HOP_BUDGET_CODE),
            session: origin.id,
            author: origin.key.bot.to_string(),
            turn: None,
            kind: EntryKind::Notice {
                code: HOP_BUDGET_CODE.into(),
                text,
                retry_turn: None,
            },
        }))])
        .await?;
    Ok(())
}

/// The session at hop 0 of the chain the calling turn belongs to, if its
/// steps can still be read back.
async fn chain_origin(ctx: &ToolContext<'_>) -> Result<Option<SessionRecord>, StoreError> {
    let store = ctx.store();
    let mut session = ctx.scope.session.clone();
    let mut hop = ctx.scope.hop;
    // one hop back per round: the walk ends at hop 0 at the latest
    while hop > 0 {
        let entries = store.tail_entries(session.id, WINDOW).await?;
        let back = entries.iter().rev().find_map(|e| match &e.kind {
            EntryKind::AgentMessage {
                from,
                hop: h,
                reply_session,
                ..
            } if *h == hop => Some(Back::Sender(reply_session.unwrap_or_else(|| {
                SessionKey {
                    bot: from.clone(),
                    kind: SessionKind::Agent,
                    peer: session.key.bot.to_string(),
                }
                .id()
            }))),
            EntryKind::Event { hop: Some(h), .. }
                if *h == hop && session.key.kind == SessionKind::Subagent =>
            {
                Some(Back::Parent)
            }
            _ => None,
        });
        let previous = match back {
            Some(Back::Sender(id)) => id,
            Some(Back::Parent) => match store.get_subagent(&session.key.bot).await? {
                Some(sub) => sub.parent_session,
                None => return Ok(None),
            },
            None => return Ok(None),
        };
        session = match store.get_session(previous).await? {
            Some(s) => s,
            None => return Ok(None),
        };
        hop -= 1;
    }
    Ok(Some(session))
}

/// Where the input at a hop came from.
enum Back {
    /// Another bot's message: the session its sender worked in.
    Sender(SessionId),
    /// A parent's task or message to its subagent: the parent's session.
    Parent,
}
