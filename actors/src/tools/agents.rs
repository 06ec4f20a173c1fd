//! Bots working with other bots: SendToAgent (an asynchronous message that
//! returns at once), CreateAgent and UpdateAgent.
//!
//! A message to another bot is admitted through the idempotency ledger
//! *inside the sender's outcome batch* (`Mutation::Admit` as the call's
//! effect, within the chain's bound: `Mutation::Limited`), so it is sent
//! exactly once and only if the call is recorded as sent; the engine
//! routes it after the commit. The sender's turn goes on (or
//! ends); the recipient works in its own session; its reply arrives later
//! as a new message that wakes the sender. There is no waiting anywhere,
//! so two bots writing to each other, or a bot writing to itself, cannot
//! deadlock. Chains are bounded by a hop budget per originating request
//! (their length) and by `runtime.max_chain_messages` (their breadth).
//! A bot that takes no more messages (removed from the fleet's config) is
//! refused at the call, never sent to; so is a subagent (its parent
//! steers it with the subagent tools, nobody else: `agent_targets.rs`),
//! and a bot of another owner than the sender's, compared at each message
//! (fleet.toml may have given one of two bots in a conversation to
//! someone else since it began). UpdateAgent does not change a subagent
//! either, nor a removed bot (also one removed while the call ran: its
//! write is bounded by `WriteLimit::BotNotRemoved`), nor give a bot made
//! by CreateAgent a tool its maker lacks (`agent_made.rs`).
//!
//! CreateAgent inserts its bot during the call (an external, idempotent
//! effect, like Remember): the store refuses a taken id in the transaction
//! that inserts it, so of two callers racing for one new id exactly one
//! creates it and the other is told it is taken. An id differing from
//! another bot's only in case is refused the same way, before. It makes
//! at most `runtime.max_created_agents` bots per owner, and no id of a
//! subagent's form (`agent_made.rs`).

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::Mutation;
use botfleet_memory::Priority;
use botfleet_memory::StoreError;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::Effect;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::parse_args;
use crate::model::ToolSpec;

/// The hop budget: its refusal, and the notice to the person whose
/// message started a chain it cuts off.
#[path = "agent_hops.rs"]
mod hops;
pub(crate) use hops::Cut;
pub(crate) use hops::answer_budget_spent;
pub(crate) use hops::chain_limit;
pub(crate) use hops::hop_budget_spent;
pub(crate) use hops::unanswered_at_budget;

/// A message to another bot (SendToAgent, SendMessage to a bot).
#[path = "agent_messages.rs"]
mod messages;
pub(crate) use messages::message_to_bot;

/// Calls whose writes the store's writer bounds (a chain's breadth, a
/// parent's running subagents).
#[path = "call_limits.rs"]
mod limits;
pub(crate) use limits::bounded;
pub(crate) use limits::refused_outcome;

/// Names a person can tell apart: refused clashes, refused ambiguous
/// lookups.
#[path = "agent_names.rs"]
mod names;

/// Which bot SendToAgent and UpdateAgent address (never a subagent).
#[path = "agent_targets.rs"]
mod targets;
pub(crate) use targets::resolve_bot;

/// What CreateAgent may make (how many, which ids), and which tools
/// UpdateAgent may give a bot it made.
#[path = "agent_made.rs"]
mod made;
pub use made::subagent_shaped;

/// Tools an agent created by another agent never gets by default: those
/// that make or change agents, and with Task the tools that only serve
/// the subagents it starts (QA: a made bot got CheckSubagent without
/// Task, and was told to "start one with Task").
const MANAGEMENT_TOOLS: &[&str] = &[
    "CreateAgent",
    "UpdateAgent",
    "Task",
    "CheckSubagent",
    "MessageSubagent",
    "StopSubagent",
];

/// Longest role text.
const MAX_ROLE_CHARS: usize = 8000;

/// Key of [`BotRecord::settings`] on a bot made by CreateAgent: the call
/// that made it (`<turn>:<call id>`), so that call, run again after a
/// crash, knows the bot as its own instead of taken.
const CREATED_BY_CALL: &str = "created_by_call";

fn store_error(e: impl std::fmt::Display) -> ToolError {
    ToolError::new(
        format!("could not read the fleet's records: {e}"),
        "try again",
    )
}

/// Trims the text argument `arg` of a call of `tool` and refuses it empty
/// or over `max` characters. The errors name the argument as the tool
/// contract does (`text`, Task's `prompt`), and `what` says what belongs
/// in it: "the text" of a Task call left the model looking for an
/// argument it never passed.
pub(crate) fn check_text(
    tool: &str,
    arg: &str,
    what: &str,
    text: &str,
    max: usize,
) -> Result<String, TextRefused> {
    let Some((kind, problem)) = text_problem(arg, text, max) else {
        return Ok(crate::message_text(text).to_owned());
    };
    let next = match kind {
        TextProblem::Empty => format!("call {tool} again with `{arg}` set to {what}"),
        TextProblem::TooLong => format!("shorten `{arg}` or split it over several calls"),
    };
    Err(TextRefused {
        kind,
        error: ToolError::new(problem, next),
    })
}

/// What is wrong with `text` as argument `arg` (spaces around it do not
/// count): empty, or more than `max` characters, said with the count.
/// `None` when it fits. [`check_text`]'s words, also for the arguments
/// whose advice is their own (Task's title, an agent's role).
pub(crate) fn text_problem(arg: &str, text: &str, max: usize) -> Option<(TextProblem, String)> {
    let text = crate::message_text(text);
    let chars = text.chars().count();
    if chars == 0 {
        Some((TextProblem::Empty, format!("`{arg}` is empty")))
    } else if botfleet_memory::shows_nothing(text) {
        // the API refuses such a message as empty; a bot's message or
        // task of it was delivered as a blank one (QA)
        Some((
            TextProblem::Empty,
            format!("`{arg}` is empty (nothing but spaces or invisible characters such as U+200B)"),
        ))
    } else if chars > max {
        Some((
            TextProblem::TooLong,
            format!("`{arg}` has {chars} characters; the limit is {max}"),
        ))
    } else {
        None
    }
}

/// Why [`check_text`] refused a text, with the refusal it would give: a
/// tool whose advice differs (a Task cannot be split) gives its own.
#[derive(Debug)]
pub(crate) struct TextRefused {
    /// What is wrong.
    pub(crate) kind: TextProblem,
    /// The refusal.
    pub(crate) error: ToolError,
}

/// What [`check_text`] found wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextProblem {
    /// Nothing but whitespace.
    Empty,
    /// Over the limit.
    TooLong,
}

impl From<TextRefused> for ToolError {
    fn from(refused: TextRefused) -> Self {
        refused.error
    }
}

/// Sends a message to another bot and returns at once.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendToAgent;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendToAgentArgs {
    agent: String,
    text: String,
}

#[async_trait]
impl Tool for SendToAgent {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "SendToAgent".into(),
            description: "Send a message to another bot (not to a subagent: only its parent steers it, with MessageSubagent). Returns at once with \"delivered\"; the bot's reply arrives later as a new message that wakes you. Do not wait for it in this turn.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": "The bot's id or name."},
                    "text": {"type": "string"}
                },
                "required": ["agent", "text"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Internal
    }

    fn idempotent(&self) -> bool {
        false
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: SendToAgentArgs = parse_args("SendToAgent", args)?;
        let text = check_text(
            "SendToAgent",
            "text",
            "the message to send",
            &args.text,
            ctx.limits().max_message_chars,
        )?;
        let target = resolve_bot(ctx, &args.agent, "message one of").await?;
        let admits = message_to_bot(
            ctx,
            "SendToAgent",
            &target,
            &text,
            Priority::Bot,
            "agent",
            None,
        )
        .await?;
        // the message's id, as the recipient's session has it: what a
        // client matches a reply to, and the model may quote. An answer
        // to the recipient's message is owed no reply: one promised kept a
        // model waiting for it (QA)
        let then = if is_answer(&admits) {
            ": it answers that bot's message, so no reply is owed and none will come"
        } else {
            "; its reply will arrive later as a new message"
        };
        let mut content = match admitted_id(&admits) {
            Some(id) => format!("{DELIVERED_TO}{} as message {id}{then}", target.id),
            None => format!("{DELIVERED_TO}{}{then}", target.id),
        };
        // a recipient paused by its daily budget answers after the pause
        // at the earliest: the sender can tell its person, or ask another
        // (QA: "its reply will arrive later", and nothing said when)
        match crate::engine::budget_pause(ctx.store(), &target, 0).await {
            Ok(Some(pause)) => content.push_str(&format!(
                ", but not before {} UTC: {} is paused until then by {} daily token budget \
                 (tell your person if they wait for it, or message another agent)",
                pause.until,
                target.id,
                match &pause.payer {
                    Some(parent) => format!("its parent {parent}'s"),
                    None => "its".to_owned(),
                }
            )),
            Ok(None) => {}
            // the message is admitted whatever the read says
            Err(e) => {
                tracing::warn!(bot = %target.id, error = %e, "could not read the recipient's budget");
            }
        }
        Ok(ToolOutput {
            content,
            effects: admits,
            delivered: false,
        })
    }
}

/// Whether the message `admits` writes answers its recipient (goes where
/// the recipient asked replies to go).
fn is_answer(admits: &[Mutation]) -> bool {
    admits.iter().any(|admit| match admit {
        Mutation::Admit(req) => matches!(
            req.entry.kind,
            botfleet_memory::EntryKind::AgentMessage { answers: true, .. }
        ),
        Mutation::Limited(l) => is_answer(&l.within),
        _ => false,
    })
}

/// The id of the entry an admission writes, bounded by a limit or not.
/// (The first one's, when a reply goes to several conversations.)
fn admitted_id(admits: &[Mutation]) -> Option<EntryId> {
    admits.iter().find_map(|admit| match admit {
        Mutation::Admit(req) => Some(req.entry.id),
        Mutation::Limited(l) => admitted_id(&l.within),
        _ => None,
    })
}

/// The refusal of a new bot's id another bot holds (or one differing from
/// it only in case). Ids are global: the id may be another person's bot,
/// so the refusal says only that it is taken, never whose it is; but a
/// removed bot of the caller's own owner is named as such, since nothing
/// else would tell the model why an id no agent answers to is taken (it
/// read "already taken; choose another name", and the model tried the
/// same id again, or asked its person which agent held it).
async fn id_taken(ctx: &ToolContext<'_>, id: &BotId) -> ToolError {
    let taken = format!("the agent id \"{id}\" is already taken");
    // who holds it only words the refusal better: a failed read keeps
    // the plain one
    let holders = ctx
        .store()
        .bots_answering_to(&[id.as_str().to_ascii_lowercase()])
        .await
        .unwrap_or_default();
    let holder = holders.iter().find(|b| b.id == *id).or_else(|| {
        holders
            .iter()
            .find(|b| b.id.as_str().eq_ignore_ascii_case(id.as_str()))
    });
    match holder {
        Some(h) if h.owner == ctx.bot.owner && h.removed_at().is_some() => {
            let back = if h.made_by_agent() {
                "it does not come back"
            } else {
                "it comes back only if fleet.toml lists it again"
            };
            ToolError::new(
                format!(
                    "{taken}: by your owner's agent {} ({:?}), which was removed; a removed \
                     agent keeps its id (its conversations stay readable under it), and {back}; \
                     no agent was created",
                    h.id, h.name
                ),
                "call CreateAgent again with another `id` (e.g. one with a suffix, or from \
                 another name)",
            )
        }
        Some(_) => ToolError::new(
            taken,
            "choose another name for the new agent (or pass another `id`)",
        ),
        // no agent holds it: a room does (rooms and agents share ids),
        // whose, the refusal does not say
        None => ToolError::new(
            format!("{taken} (agents and rooms share ids)"),
            "choose another name for the new agent (or pass another `id`)",
        ),
    }
}

/// Refuses a display name no prompt or page could show on one line.
fn check_name(name: &str) -> Result<(), ToolError> {
    match botfleet_memory::display_name_problem(name) {
        // the problem says what to change (QA: a name mixing alphabets
        // was told to be "plain text on one line", which it was)
        Some(problem) => Err(ToolError::new(
            format!("the name {problem}"),
            "call again with the name changed as this error says",
        )),
        None => Ok(()),
    }
}

fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').chars().take(48).collect()
}

/// Checks a tool list against what the caller itself may use: a bot gives
/// only tools it has.
fn check_tools(ctx: &ToolContext<'_>, tools: &[String]) -> Result<Vec<String>, ToolError> {
    let mut out = Vec::new();
    for t in tools {
        if !ctx.rt.tools.contains(t) {
            return Err(ToolError::new(
                format!("unknown tool {t:?}"),
                choose_from(ctx),
            ));
        }
        if !ctx.bot.tools.contains(t) {
            return Err(ToolError::new(
                format!("you cannot give the tool {t:?}: you do not have it yourself"),
                choose_from(ctx),
            ));
        }
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    Ok(out)
}

/// The next step of a refused tool list: the tools the caller may give,
/// its own that the fleet knows. It used to offer every tool of the fleet
/// for an unknown name, so the model picked one it lacked and was refused
/// again.
fn choose_from(ctx: &ToolContext<'_>) -> String {
    let own: Vec<&str> = ctx
        .bot
        .tools
        .iter()
        .map(String::as_str)
        .filter(|t| ctx.rt.tools.contains(t))
        .collect();
    format!(
        "choose from your tools (you can give only tools you have): {}",
        own.join(", ")
    )
}

/// The tool every bot needs: the only way it speaks (a reply to a person,
/// a post in a room, a routine's report). fleet.toml refuses a bot without
/// it (`src/config_bots.rs`); so do CreateAgent and UpdateAgent.
const SEND_MESSAGE: &str = "SendMessage";

/// Refuses a tool list without [`SEND_MESSAGE`]: every message to such a
/// bot would end `undelivered`, after a reminder to use a tool it lacks.
fn check_can_speak(tool: &str, tools: &[String]) -> Result<(), ToolError> {
    if tools.iter().any(|t| t == SEND_MESSAGE) {
        return Ok(());
    }
    Err(ToolError::new(
        format!(
            "the agent's tools would not include {SEND_MESSAGE}: it could not speak to anyone \
             (reply to a person, post in a room, report a routine)"
        ),
        format!("call {tool} again with \"{SEND_MESSAGE}\" in `tools`"),
    ))
}

/// The [`CREATED_BY_CALL`] value of the calling tool call.
fn creating_call(ctx: &ToolContext<'_>) -> String {
    format!("{}:{}", ctx.turn, ctx.call_id)
}

/// Whether bot `id` was made by this very call (a run before a crash).
async fn created_by_this_call(ctx: &ToolContext<'_>, id: &BotId) -> Result<bool, ToolError> {
    let existing = ctx.store().get_bot(id).await.map_err(store_error)?;
    Ok(existing.is_some_and(|b| {
        b.owner == ctx.bot.owner
            && b.settings.get(CREATED_BY_CALL).and_then(Value::as_str)
                == Some(creating_call(ctx).as_str())
    }))
}

/// Creates a new bot owned by the same person.
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateAgent;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    name: String,
    role: String,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    id: Option<String>,
}

#[async_trait]
impl Tool for CreateAgent {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "CreateAgent".into(),
            description: "Create a new long-lived bot for the same person, with a name, a role and tools (a subset of yours). It exists at once and can be messaged with SendToAgent.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "role": {"type": "string", "description": "Who the bot is and what it does."},
                    "tools": {"type": "array", "items": {"type": "string"}, "description": "Default: your tools except agent management."},
                    "id": {"type": "string", "description": "Optional id (letters, digits, - _ .); default: from the name."}
                },
                "required": ["name", "role"],
                "additionalProperties": false
            }),
        }
    }

    /// External, not internal: whether the id is free is known only when
    /// the bot is inserted, and the result must say it. Committed with the
    /// outcome, the insert of a lost race would fail the whole step (or,
    /// as an upsert, take the other caller's bot over). So the call writes
    /// it itself, recorded as started first.
    fn effect(&self) -> Effect {
        Effect::External
    }

    /// A call cut off by a crash runs again and finds the bot it made
    /// (marked with the call, [`CREATED_BY_CALL`]).
    fn idempotent(&self) -> bool {
        true
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: CreateArgs = parse_args("CreateAgent", args)?;
        let name = args.name.trim();
        if name.is_empty() {
            return Err(ToolError::new(
                "the name is empty",
                "give the new agent a name",
            ));
        }
        check_name(name)?;
        names::check_not_a_user(ctx, name)?;
        let role = args.role.trim();
        if let Some((_, problem)) = text_problem("role", &args.role, MAX_ROLE_CHARS) {
            return Err(ToolError::new(
                problem,
                "describe who the agent is and what it does, briefly",
            ));
        }
        let raw_id = args.id.clone().unwrap_or_else(|| slug(name));
        if args.id.is_none() && raw_id.is_empty() {
            // a name of Chinese, Cyrillic… letters makes no id: say so,
            // not `invalid bot id ""`
            return Err(ToolError::new(
                format!(
                    "the name {name:?} has no ASCII letters or digits, so no id can be made of it"
                ),
                "pass an `id` made of letters, digits, '-', '_' or '.', e.g. \"researcher\"",
            ));
        }
        let id = BotId::new(raw_id.clone()).map_err(|e| {
            ToolError::new(
                e.to_string(),
                "pass an `id` made of letters, digits, '-', '_' or '.'",
            )
        })?;
        made::check_not_subagent_shaped(id.as_str())?;
        let tools = match &args.tools {
            Some(t) => check_tools(ctx, t)?,
            None => ctx
                .bot
                .tools
                .iter()
                .filter(|t| !MANAGEMENT_TOOLS.contains(&t.as_str()))
                .cloned()
                .collect(),
        };
        check_can_speak("CreateAgent", &tools)?;
        let now = ctx.rt.store.clock().now_ms();
        let record = BotRecord {
            id: id.clone(),
            name: name.to_owned(),
            owner: ctx.bot.owner.clone(),
            role: role.to_owned(),
            provider: ctx.bot.provider.clone(),
            tools: tools.clone(),
            // a made bot spends at most what its maker may a day: it takes
            // its maker's daily token budget (each start keeps it so,
            // `fleet_derived.rs`)
            settings: match ctx.bot.settings.get("daily_token_budget") {
                Some(budget) => {
                    json!({ CREATED_BY_CALL: creating_call(ctx), "daily_token_budget": budget })
                }
                None => json!({ CREATED_BY_CALL: creating_call(ctx) }),
            },
            origin: format!("agent:{}", ctx.bot.id),
            created_at: now,
            updated_at: now,
        };
        names::check_name_free(ctx, &record, name).await?;
        // a call run again after a crash finds its bot among those counted
        if !created_by_this_call(ctx, &id).await? {
            made::check_room_to_make(ctx).await?;
        }
        // The store decides, in the transaction that inserts it, whether
        // the id is free, also of another bot's id in another case (`B1`
        // and `b1`; migration 17 indexes the folded ids): a read before
        // the write would let two callers both see it free and the later
        // one take the record over.
        match ctx.rt.store.write(vec![Mutation::CreateBot(record)]).await {
            Ok(_) => {}
            Err(StoreError::Taken { .. }) if created_by_this_call(ctx, &id).await? => {
                // this call made it before a crash cut it off
            }
            Err(StoreError::Taken { .. }) => return Err(id_taken(ctx, &id).await),
            Err(e) => {
                return Err(ToolError::new(
                    format!("could not create the agent {id}: {e}"),
                    "try again",
                ));
            }
        }
        Ok(ToolOutput::text(format!(
            "created agent {id} ({name}) with tools {}; message it with SendToAgent",
            tools.join(", ")
        )))
    }
}

/// Changes another bot's (or one's own) name, role or tools.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpdateAgent;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    agent: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    tools: Option<Vec<String>>,
}

#[async_trait]
impl Tool for UpdateAgent {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "UpdateAgent".into(),
            description: "Change a bot's name, role or tools (tools: a subset of yours). Takes effect from its next turn.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": "The bot's id or name."},
                    "name": {"type": "string"},
                    "role": {"type": "string"},
                    "tools": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["agent"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Internal
    }

    fn idempotent(&self) -> bool {
        false
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: UpdateArgs = parse_args("UpdateAgent", args)?;
        // the agent first: an unknown one is what to fix before anything
        // (QA: no fields and an unknown agent answered "nothing to
        // change", sending the model on a second useless call)
        let record = resolve_bot(ctx, &args.agent, "pass one of").await?;
        if args.name.is_none() && args.role.is_none() && args.tools.is_none() {
            return Err(ToolError::new(
                "nothing to change",
                "pass at least one of name, role, tools",
            ));
        }
        // with what the step's earlier calls changed in it
        let mut record = targets::as_in_step(ctx, record);
        targets::refuse_update_of_subagent(ctx, &record).await?;
        targets::refuse_update_of_removed(&record)?;
        targets::refuse_update_of_stronger(ctx, &record)?;
        if record.origin == "config" && args.tools.is_some() && record.id != ctx.bot.id {
            return Err(ToolError::new(
                format!(
                    "{} is defined in fleet.toml; its tools can only change there",
                    record.id
                ),
                "change its role or name, or ask the person to edit the fleet file",
            ));
        }
        let mut changed = Vec::new();
        if let Some(name) = args.name.as_deref().map(str::trim) {
            if name.is_empty() {
                return Err(ToolError::new(
                    "the name is empty",
                    "give a name or leave it out",
                ));
            }
            check_name(name)?;
            names::check_not_a_user(ctx, name)?;
            names::check_name_free(ctx, &record, name).await?;
            record.name = name.to_owned();
            changed.push("name");
        }
        if let Some(given) = args.role.as_deref() {
            let role = given.trim();
            if let Some((_, problem)) = text_problem("role", given, MAX_ROLE_CHARS) {
                return Err(ToolError::new(problem, "describe the role briefly"));
            }
            record.role = role.to_owned();
            changed.push("role");
        }
        if let Some(tools) = &args.tools {
            let tools = check_tools(ctx, tools)?;
            made::check_maker_has(ctx, &record, &tools).await?;
            check_can_speak("UpdateAgent", &tools)?;
            record.tools = tools;
            changed.push("tools");
        }
        let now = ctx.rt.store.clock().now_ms();
        record.updated_at = now;
        // the bots it made and its subagents keep only its tools
        let followers = if args.tools.is_some() {
            made::cut_followers(ctx, &record, now).await?
        } else {
            Vec::new()
        };
        let mut content = format!(
            "updated {} ({}); it applies from its next turn",
            record.id,
            changed.join(", ")
        );
        if record.origin == "config" {
            // the start sets a fleet.toml bot as the file has it: said
            // here, or the change looks lasting and is gone after a restart
            content.push_str(&format!(
                ", until the host restarts: {} is defined in fleet.toml, which sets its name, \
                 role and tools again at each start (for a lasting change, ask the person to \
                 edit the fleet file)",
                record.id
            ));
        }
        if !followers.is_empty() {
            // at most LISTED_FOLLOWERS (QA: a bot's 27 subagents,
            // finished ones too, were all named)
            let mut cut: Vec<String> = followers
                .iter()
                .take(LISTED_FOLLOWERS)
                .map(|b| format!("{} (now {})", b.id, b.tools.join(", ")))
                .collect();
            if followers.len() > LISTED_FOLLOWERS {
                cut.push(format!("and {} more", followers.len() - LISTED_FOLLOWERS));
            }
            // (QA: after "until the host restarts" above, a model took
            // their cut for one a restart undoes too)
            let lasting = if record.origin == "config" {
                ", and keep that cut after a restart (nothing gives them their tools back by itself)"
            } else {
                ""
            };
            content.push_str(&format!(
                "; the bots it made and its subagents keep only its tools{lasting}: {}",
                cut.join("; ")
            ));
        }
        // its owner may remove it (or one of them) before this write commits
        let mut limits = vec![targets::not_removed(ctx, &record)];
        limits.extend(followers.iter().map(|b| made::follower_not_removed(ctx, b)));
        let effects = std::iter::once(record)
            .chain(followers)
            .map(Mutation::UpsertBot)
            .collect();
        Ok(ToolOutput {
            content,
            effects: bounded(effects, limits),
            delivered: false,
        })
    }
}

/// How many of the bots an UpdateAgent cut the tools of its result names.
const LISTED_FOLLOWERS: usize = 20;

/// How SendToAgent's result begins, before the id of the bot it went to.
const DELIVERED_TO: &str = "delivered to ";

/// The id of the bot a SendToAgent result `content` says the message went
/// to: the bot the model's `agent` (an id, a name in any case, `@Name`)
/// resolved to, so that what a turn asked names each bot once (it listed
/// "Beta, b and @BETA" for one bot: QA).
pub(crate) fn recipient_in(content: &str) -> Option<&str> {
    content
        .strip_prefix(DELIVERED_TO)?
        .split([' ', ';'])
        .next()
        .filter(|id| !id.is_empty())
}

#[cfg(test)]
#[path = "agents_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "agents_owner_tests.rs"]
mod owner_tests;

#[cfg(test)]
#[path = "agents_removed_tests.rs"]
mod removed_tests;
