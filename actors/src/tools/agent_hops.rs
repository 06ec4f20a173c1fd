//! The hop budget: a person's request may set off at most
//! `runtime.max_hops` bot-to-bot messages (a message, a task, a report).
//! A call past it is refused with what the bot can still do in its
//! conversation: in one with its person, answer them; in one with another
//! bot, nothing (SendMessage there goes to that bot, and is refused too),
//! so it ends its turn. The person whose message started the chain is
//! told it was cut off: a `hop_budget` notice in their conversation, once
//! per message of theirs however many calls are refused (restarts
//! included); for a chain a routine started, the bot's owner, in their
//! conversation with the bot, once per run. Only a person (or owner) who
//! owns the cut-off bot is told: a chain its former owner started does not
//! tell them what the bot, given to someone else since, does now.
//!
//! A chain is also bounded in breadth: `runtime.max_chain_messages`
//! messages between bots descended from one person's message (or routine
//! run, webhook delivery), however many bots it fans out to. The store's
//! writer is the judge: a call's outcome goes to it as a
//! `Mutation::Limited` with the chain's bound, and past it the writer
//! writes the call's refusal (as for the hop budget) and the notice
//! instead of the message (once per chain, whichever bound cut it), so
//! the bound is exact however many bots send at the same moment.
//!
//! Every message of a chain carries its start (the input that set it
//! off: `ChainOrigin`, next to the hop count), so the notice finds the
//! person's conversation in one read, and the store counts the chain's
//! messages under it as they are written. A chain whose messages were
//! written before they carried it is walked back instead, one hop at a
//! time: the input at hop `h` of a session names the session its sender
//! worked in at hop `h - 1` (an `agent_message`'s `reply_session`; a
//! subagent's task, its parent's session), down to hop 0.

use botfleet_memory::BotId;
use botfleet_memory::ChainOrigin;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Limit;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::StoreError;
use botfleet_memory::WriteLimit;

use super::ToolContext;
use super::ToolError;
use super::limits::refused_outcome;
use crate::prompts::prompts;
use crate::tools::describe_session;

/// The notice's code.
const HOP_BUDGET_CODE: &str = "hop_budget";

/// Entries read per session when walking a chain back (the input of a
/// hop is among a session's newest entries while its chain runs).
const WINDOW: i64 = 100;

/// What a refused call would have sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut<'a> {
    /// A message to another bot (SendToAgent, SendMessage to a bot).
    Message,
    /// More work for a subagent (MessageSubagent): the input and its
    /// report, two hops.
    Work,
    /// A new subagent's task (Task), titled so: two hops like
    /// [`Cut::Work`], but the subagent is never made, so the person's
    /// notice names the task, not the id it would have had.
    Task(&'a str),
}

impl Cut<'_> {
    /// The bot-to-bot messages the call needs: a task's report comes back
    /// without asking, so it must fit too.
    fn messages(self) -> u64 {
        match self {
            Cut::Message => 1,
            Cut::Work | Cut::Task(_) => 2,
        }
    }

    /// What the person's notice says the bot could not do, `to` being
    /// the recipient.
    fn notice_part(self, to: &BotId) -> String {
        let p = prompts();
        match self {
            Cut::Message | Cut::Work => p.chain_cut_message.render(&[("to", to.as_str())]),
            Cut::Task(description) => p.chain_cut_task.render(&[("description", description)]),
        }
        .unwrap_or_default()
    }
}

/// Which bound cut a chain off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CutBy {
    /// `runtime.max_hops`: the chain grew too long.
    Hops,
    /// `runtime.max_chain_messages`: it spread to too many messages.
    Breadth,
}

/// The refusal of a call to `to` at `hop`, past `runtime.max_hops`:
/// nothing is sent, the bot is told what it can do instead in its
/// conversation (`instead` in a conversation with its person), and the
/// person who started the chain is told it was cut off.
pub(crate) async fn hop_budget_spent(
    ctx: &ToolContext<'_>,
    to: &BotId,
    hop: u32,
    cut: Cut<'_>,
    instead: &str,
) -> ToolError {
    let max = ctx.rt.settings.max_hops;
    tracing::warn!(bot = %ctx.bot.id, %to, hop, "hop budget spent");
    let p = prompts();
    let max_text = max.to_string();
    let what = match cut {
        Cut::Message => p.hop_budget.render(&[("max", &max_text)]),
        Cut::Work | Cut::Task(_) => p.hop_budget_task.render(&[
            ("max", &max_text),
            ("left", &max.saturating_sub(ctx.scope.hop).to_string()),
        ]),
    };
    cut_by_hops(ctx, to, cut, what.unwrap_or_default(), instead).await
}

/// A call cut off by the hop budget, saying `what`: the person who
/// started the chain is told, and the bot what it can still do. A task
/// refused for its report leaves one message that fits: the bot's reply
/// (QA: it was told SendMessage would be refused too, and it went
/// through).
async fn cut_by_hops(
    ctx: &ToolContext<'_>,
    to: &BotId,
    cut: Cut<'_>,
    what: String,
    instead: &str,
) -> ToolError {
    cut_off(ctx, &cut.notice_part(to), CutBy::Hops).await;
    let reply_left = ctx.scope.hop < ctx.rt.settings.max_hops;
    refusal(ctx, what, instead, reply_left)
}

/// The refusal of Task or MessageSubagent (`cut`) to `to` at `hop` in a
/// conversation another bot started, where the task and its report fit
/// the hop budget but the answer owed to that bot, one hop after the
/// report, would not: the subagent's work was done and its result could
/// never reach the bot that asked (audit, 2026-12-07). As
/// [`hop_budget_spent`], the person who started the chain is told.
pub(crate) async fn answer_budget_spent(
    ctx: &ToolContext<'_>,
    to: &BotId,
    hop: u32,
    cut: Cut<'_>,
    instead: &str,
) -> ToolError {
    let max = ctx.rt.settings.max_hops;
    tracing::warn!(bot = %ctx.bot.id, %to, hop, "hop budget leaves no answer to the asking bot after a task");
    let what = prompts()
        .hop_budget_task_answer
        .render(&[
            ("asker", &ctx.scope.session.key.peer),
            ("max", &max.to_string()),
            ("left", &max.saturating_sub(ctx.scope.hop).to_string()),
        ])
        .unwrap_or_default();
    cut_by_hops(ctx, to, cut, what, instead).await
}

/// The writes that tell the person whose message started the chain that
/// it was cut off where this bot, at the hop budget's last hop, ended its
/// turn without answering `asker`, which could not act on word of it
/// (its every message to a bot is refused past the budget): nothing sent
/// was refused, so no refusal told them (agent-load: the asker, woken in
/// its conversation with a bot, only had its own send refused). Once per
/// chain, as a refusal's notice.
pub(crate) async fn unanswered_at_budget(
    ctx: &ToolContext<'_>,
    asker: &BotId,
) -> Result<Vec<Mutation>, StoreError> {
    if ctx.scope.hop == 0 {
        return Ok(Vec::new());
    }
    let what = prompts()
        .chain_cut_answer
        .render(&[("to", asker.as_str())])
        .unwrap_or_default();
    notice_writes(ctx, &what, CutBy::Hops, true).await
}

/// The bound of `runtime.max_chain_messages` on a call of `tool` that
/// would send `cut` to `to`, for the writer to check as the call's
/// outcome commits (the chain's messages between bots, counted by the
/// store as they are written, with those of steps committed before in the
/// same transaction): past it, nothing is sent and the call's result is
/// the refusal, as for the hop budget, written with the notice to the
/// chain's person. `None` for a chain whose start is unknown (its
/// messages were written before they carried it): not bounded.
pub(crate) async fn chain_limit(
    ctx: &ToolContext<'_>,
    tool: &str,
    to: &BotId,
    cut: Cut<'_>,
    instead: &str,
) -> Option<Limit> {
    let chain = ctx.scope.chain?;
    let max = ctx.rt.settings.max_chain_messages;
    let needed = cut.messages();
    let what = prompts()
        .chain_budget
        .render(&[("max", &max.to_string())])
        .unwrap_or_default();
    let mut refused = vec![refused_outcome(
        ctx,
        tool,
        &refusal(ctx, what, instead, false),
    )];
    if ctx.scope.hop > 0 {
        // read now, written only if the writer refuses (at hop 0 the
        // bot answers its person itself)
        match notice_writes(ctx, &cut.notice_part(to), CutBy::Breadth, false).await {
            Ok(notice) => refused.extend(notice),
            Err(e) => {
                tracing::warn!(bot = %ctx.bot.id, error = %e, "could not prepare the notice that the chain was cut off");
            }
        }
    }
    Some(Limit {
        bound: WriteLimit::ChainMessages {
            origin: chain,
            max,
            needed,
        },
        refused,
    })
}

/// The refusal: `what` was not sent, and what the bot can still do in its
/// conversation (`reply_left`: one message to the bot it talks with still
/// fits the hop budget).
fn refusal(ctx: &ToolContext<'_>, what: String, instead: &str, reply_left: bool) -> ToolError {
    let p = prompts();
    let (then, hint) = match ctx.scope.session.key.kind {
        // SendMessage goes to the other bot, and one message still fits
        SessionKind::Agent if reply_left => (
            p.hop_budget_reply_left.render(&[]),
            "SendMessage that bot what could not be done, then end your turn",
        ),
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
    ToolError::new(format!("{what} {}", then.unwrap_or_default()), hint)
}

/// Tells whoever started the chain that `by` cut it off, where the bot
/// could not do `what` ([`Cut::notice_part`]), logging a failure (the
/// refusal goes on). At hop 0 nothing is told: the call was refused in
/// the person's own conversation, and the bot answers them there.
async fn cut_off(ctx: &ToolContext<'_>, what: &str, by: CutBy) {
    if ctx.scope.hop == 0 {
        return;
    }
    let written = match notice_writes(ctx, what, by, true).await {
        Ok(writes) if writes.is_empty() => Ok(()),
        Ok(writes) => ctx.store().write(writes).await.map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(e) = written {
        tracing::warn!(bot = %ctx.bot.id, error = %e, "could not tell the person the chain was cut off");
    }
}

/// The writes that tell the person whose message started the chain that
/// it was cut off (a `hop_budget` notice in that conversation); for a
/// chain a routine or a webhook started, the bot's owner in their
/// conversation with it. Once per chain, whichever bound cut it and
/// however many calls are refused: the store marks the chain told in the
/// transaction that writes the notice (`if_untold` spares that write when
/// a read finds it told already). (A chain a room started is cut off with
/// the log line only: the room's run has limits of its own.)
///
/// The chain's start is what the turn's inputs carry: one keyed read of
/// its session. Inputs written before messages carried it are walked back
/// instead ([`chain_origin`]).
async fn notice_writes(
    ctx: &ToolContext<'_>,
    what: &str,
    by: CutBy,
    if_untold: bool,
) -> Result<Vec<Mutation>, StoreError> {
    let origin = match ctx.scope.chain {
        Some(chain) => ctx
            .store()
            .get_session(chain.session)
            .await?
            .map(|session| Origin {
                session,
                start: Start::Entry(chain.entry),
            }),
        None => chain_origin(ctx).await?,
    };
    let Some(origin) = origin else {
        tracing::info!(bot = %ctx.bot.id, "the start of the cut-off chain was not found");
        return Ok(Vec::new());
    };
    if origin.session.owner != ctx.bot.owner {
        // a chain a former owner started, still carried by the bot fleet.toml
        // gave to someone else: what it does now (and which bots it
        // messages) is not theirs to be told
        tracing::info!(bot = %ctx.bot.id, "the cut-off chain was started by another user than the bot's owner: not told");
        return Ok(Vec::new());
    }
    match origin.session.key.kind {
        SessionKind::Dm => tell_person(ctx, &origin, what, by, if_untold).await,
        SessionKind::Routine | SessionKind::Hook => {
            tell_owner(ctx, &origin, what, by, if_untold).await
        }
        SessionKind::Agent | SessionKind::Group | SessionKind::Room | SessionKind::Subagent => {
            Ok(Vec::new())
        }
    }
}

/// The input that started the chain `origin` describes: its entry, or
/// for an older chain the newest entry of the origin's session before the
/// chain's first message that `starts` (a person's message, an event).
async fn start_entry(
    ctx: &ToolContext<'_>,
    origin: &Origin,
    starts: impl Fn(&EntryKind) -> bool,
) -> Result<Option<EntryId>, StoreError> {
    match origin.start {
        Start::Entry(id) => Ok(Some(id)),
        Start::SentAt(at) => Ok(ctx
            .store()
            .tail_entries(origin.session.id, WINDOW)
            .await?
            .iter()
            .rev()
            .find(|e| e.created_at <= at && starts(&e.kind))
            .map(|e| e.id)),
    }
}

/// The notice in the person's own conversation, the chain's origin.
async fn tell_person(
    ctx: &ToolContext<'_>,
    origin: &Origin,
    what: &str,
    by: CutBy,
    if_untold: bool,
) -> Result<Vec<Mutation>, StoreError> {
    let dm = &origin.session;
    let starts = |k: &EntryKind| matches!(k, EntryKind::UserMessage { .. });
    let Some(message) = start_entry(ctx, origin, starts).await? else {
        tracing::info!(bot = %ctx.bot.id, "the message that started the cut-off chain was not found");
        return Ok(Vec::new());
    };
    let chain = ChainOrigin {
        session: dm.id,
        entry: message,
    };
    if if_untold && ctx.store().chain_told(&chain).await? {
        return Ok(Vec::new());
    }
    let p = prompts();
    let (template, max) = match by {
        CutBy::Hops => (&p.hop_budget_notice, ctx.rt.settings.max_hops.to_string()),
        CutBy::Breadth => (
            &p.chain_budget_notice,
            ctx.rt.settings.max_chain_messages.to_string(),
        ),
    };
    let text = template
        .render(&[("max", &max), ("bot", ctx.bot.id.as_str()), ("cut", what)])
        .unwrap_or_default();
    Ok(vec![tell_once(chain, dm.id, &dm.key.bot, text)])
}

/// The notice about a routine run or webhook delivery (the event that
/// set the chain off) in the owner's conversation with the bot, where
/// that bot's messages from routines and webhooks go too.
async fn tell_owner(
    ctx: &ToolContext<'_>,
    chain: &Origin,
    what: &str,
    by: CutBy,
    if_untold: bool,
) -> Result<Vec<Mutation>, StoreError> {
    let origin = &chain.session;
    let starts = |k: &EntryKind| matches!(k, EntryKind::Event { hop: None, .. });
    let Some(event) = start_entry(ctx, chain, starts).await? else {
        tracing::info!(bot = %ctx.bot.id, "the event that started the cut-off chain was not found");
        return Ok(Vec::new());
    };
    let chain = ChainOrigin {
        session: origin.id,
        entry: event,
    };
    if if_untold && ctx.store().chain_told(&chain).await? {
        return Ok(Vec::new());
    }
    let dm = SessionKey {
        bot: origin.key.bot.clone(),
        kind: SessionKind::Dm,
        peer: origin.owner.to_string(),
    };
    let p = prompts();
    let (template, max) = match by {
        CutBy::Hops => (
            &p.hop_budget_notice_event,
            ctx.rt.settings.max_hops.to_string(),
        ),
        CutBy::Breadth => (
            &p.chain_budget_notice_event,
            ctx.rt.settings.max_chain_messages.to_string(),
        ),
    };
    let text = template
        .render(&[
            ("event", &describe_session(origin)),
            ("max", &max),
            ("bot", ctx.bot.id.as_str()),
            ("cut", what),
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
    Ok(vec![
        Mutation::EnsureSession(record),
        tell_once(chain, dm.id(), &dm.bot, text),
    ])
}

/// The `hop_budget` notice about `chain` in `session`, written unless the
/// chain was told before. Its id is derived from the chain's start.
fn tell_once(chain: ChainOrigin, session: SessionId, bot: &BotId, text: String) -> Mutation {
    Mutation::TellChain {
        origin: chain,
        notice: Box::new(NewEntry {
            id: EntryId::derive_from(chain.entry, HOP_BUDGET_CODE),
            session,
            author: bot.to_string(),
            turn: None,
            kind: EntryKind::Notice {
                code: HOP_BUDGET_CODE.into(),
                text,
                retry_turn: None,
            },
        }),
    }
}

/// The start of a chain of bots.
struct Origin {
    /// The session at hop 0.
    session: SessionRecord,
    /// The input there that set the chain off.
    start: Start,
}

/// How the input that set a chain off is known.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// Its entry, carried by the chain's messages.
    Entry(EntryId),
    /// For a chain whose messages do not carry it (written before they
    /// did): when the input at hop 1 was written (by the turn at hop 0),
    /// ms; the input is the newest one before it.
    SentAt(i64),
}

/// The start of a chain whose messages do not carry it (written before
/// they did), called at hop 1 or more: walked back one hop at a time, if
/// its steps can still be read back (each among its session's newest
/// [`WINDOW`] entries, so at most `max_hops` reads).
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
    Ok(Some(Origin {
        session,
        start: Start::SentAt(sent_at),
    }))
}

/// Where the input at a hop came from.
enum Back {
    /// Another bot's message: the session its sender worked in.
    Sender(SessionId),
    /// A parent's task or message to its subagent: the parent's session.
    Parent,
}
