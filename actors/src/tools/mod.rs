//! Tools: the model's only hands.
//!
//! A tool is a trait object in a [`ToolRegistry`]: a name, a JSON schema,
//! whether its effect is internal (a store write committed atomically with
//! the call's outcome, so it happens exactly once) or external (a side
//! effect outside the store, which is marked `started` before it runs so a
//! crash leaves an honest "outcome unknown"), whether it is idempotent, and
//! `call`. Errors are [`ToolError`]s that tell the model the next step.

mod agents;
mod arg_errors;
mod delivery;
mod files;
pub mod gate;
mod memory_tools;
mod recall;
mod shell;
mod shell_registry;
mod subagents;
pub mod surface;
#[cfg(test)]
pub(crate) mod test_support;
mod visible;
mod workspace;

pub use shell_registry::ShellRegistry;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::SessionId;
use botfleet_memory::SessionRecord;
use botfleet_memory::Store;
use botfleet_memory::TurnId;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use agents::CreateAgent;
pub use agents::SendToAgent;
pub use agents::UpdateAgent;
pub(crate) use agents::recipient_in;
pub use agents::subagent_shaped;
pub(crate) use agents::unanswered_at_budget;
pub use delivery::ReactToMessage;
pub use delivery::SendMessage;
pub use files::Edit;
pub use files::Read;
pub use files::Write;
pub use memory_tools::Forget;
pub use memory_tools::Remember;
pub use recall::READ_DEFAULT_AROUND;
pub use recall::READ_MAX_AROUND;
pub use recall::ReadTranscript;
pub use recall::SEARCH_DEFAULT_LIMIT;
pub use recall::SEARCH_MAX_LIMIT;
pub use recall::SearchTranscript;
pub use shell::Shell;
pub use subagents::CheckSubagent;
pub use subagents::MessageSubagent;
pub use subagents::StopSubagent;
pub use subagents::Task;
pub(crate) use subagents::running_subagents;
pub(crate) use subagents::started_in;
pub(crate) use subagents::subagent_role;
pub use visible::VisibleSessions;
pub use visible::describe_session;
pub use workspace::Workspace;
pub use workspace::WorkspaceError;
pub use workspace::Workspaces;

use crate::model::ToolSpec;
use crate::runtime::Runtime;

/// Where a tool's effect lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Only store writes, returned in [`ToolOutput::effects`] and committed
    /// with the outcome: exactly once, never "unknown".
    Internal,
    /// Outside the store (files, processes, the network).
    External,
}

/// Who runs a turn; decides its tool surface (docs/security.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    /// A bot working for its people (DMs, messages from other bots).
    Main,
    /// A subagent working on a delegated task.
    Subagent,
    /// A member of a group room; `shared` when the room has members of
    /// more than one user.
    GroupMember {
        /// Whether the room is shared with other users' bots.
        shared: bool,
    },
    /// A routine firing on its schedule.
    Routine,
    /// A webhook delivery.
    Hook,
}

/// Where a reply to another bot goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyTo {
    /// The bot that wrote.
    pub bot: BotId,
    /// Its session that replies go to.
    pub session: SessionId,
    /// When it wrote (ms, its message's entry; the earliest of its
    /// messages from that session): a room given to more people since
    /// takes no reply to it (`agent_messages.rs`).
    pub asked_at: i64,
    /// Whether a message of it among the inputs is owed a reply: one that
    /// does not answer this bot (`EntryKind::AgentMessage::answers`), from
    /// another bot than this one, in this bot's conversation with it
    /// (where a question lands).
    pub owed: bool,
}

/// The turn a tool call belongs to.
#[derive(Debug, Clone)]
pub struct TurnScope {
    /// The session the turn works in.
    pub session: SessionRecord,
    /// Who runs it.
    pub runner: Runner,
    /// Bot-to-bot hops since the originating user message.
    pub hop: u32,
    /// The bots that wrote in this turn's inputs, and where their replies
    /// go: one per bot and session, in the order of the inputs. A bot that
    /// asked from two of its conversations (its person's, and another
    /// bot's) has both, and a reply goes to each (QA: only the newest got
    /// it, and the other never woke).
    pub reply_to: Vec<ReplyTo>,
    /// The input that started the chain of bots this turn belongs to
    /// (this turn's own for a person's message, a routine's run, a
    /// webhook's delivery), carried by every message the turn sends to
    /// another bot; none when the inputs do not say (older entries).
    pub chain: Option<botfleet_memory::ChainOrigin>,
}

/// What a tool call may use.
pub struct ToolContext<'a> {
    /// The fleet's shared runtime (store, settings, workspaces, admission).
    pub rt: &'a Runtime,
    /// The bot running the call.
    pub bot: &'a BotRecord,
    /// The turn's session and runner.
    pub scope: &'a TurnScope,
    /// The turn.
    pub turn: TurnId,
    /// The model's id for this call.
    pub call_id: &'a str,
    /// Fires when the turn is cancelled for good: stop, kill what you run.
    pub cancel: &'a CancellationToken,
    /// Fires when a person's new message interrupts the turn (and with
    /// `cancel`): the turn ends at its next safe point, so a call that has
    /// not started yet (one waiting for a lock) does not start.
    pub interrupt: &'a CancellationToken,
    /// The secrets the bot may use (values by reference; never show them).
    pub secrets: &'a crate::vault::BotSecrets,
    /// Effects of the step's earlier calls, run but not yet committed (the
    /// calls of a step that only touch the store commit together): a
    /// limit counted from the store counts these too.
    pub step_effects: &'a [Mutation],
    /// Messages the turn delivered in its committed steps (its state's
    /// count, kept across a resume): 0 spares SendMessage's look for a
    /// repeat in the store.
    pub delivered_before: u32,
    /// Tokens the turn used and has not stored yet (its usage commits with
    /// its end): what a budget check made within a call counts besides
    /// the stored usage (the reviewer model's call, `gate_review.rs`).
    pub turn_tokens: u64,
    /// The memory items this turn's prompt shows: Forget by text forgets
    /// only those (the bot cannot have meant a fact it was not shown).
    pub memory_shown: ShownMemory<'a>,
    /// Seqs of the turn's inputs in its session (kept across a resume;
    /// none for a background run): a room member speaks to its room only
    /// in the turn that took the input the discussion awaits.
    pub inputs: &'a [i64],
    /// The most tokens a tool result is sent to the model with (a quarter
    /// of the provider's `compact_at_tokens`, `engine/entry_clip.rs`): a
    /// larger one is clipped, its start and end kept. A tool that pages
    /// (ReadTranscript) sizes its pages within it.
    pub result_cap_tokens: u64,
}

/// The ids of the memory items a turn's prompt shows (`memory/render.rs`
/// lines `- <id> (…) "…"`): those of the context's frozen memory block,
/// and those of this turn's fresh block when its update goes in the
/// requests. Fact extraction may change only these, for the same reason.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShownMemory<'a> {
    /// Ids the frozen block of the context shows.
    pub frozen: &'a [String],
    /// Ids of the turn's fresh block, when its update is sent (else
    /// empty).
    pub update: &'a [String],
}

impl ShownMemory<'_> {
    /// Whether the prompt shows item `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.frozen.iter().chain(self.update).any(|s| s == id)
    }
}

impl ToolContext<'_> {
    /// The session of the turn.
    pub fn session(&self) -> SessionId {
        self.scope.session.id
    }

    /// The workspace of the bot's owner, `<workspace>/<owner id>/`: the
    /// files the bot's tools reach, shared with the owner's other bots and
    /// with no one else's ([`Workspaces`]).
    pub fn workspace(&self) -> &Workspace {
        self.rt.workspaces.for_owner(&self.bot.owner)
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.rt.store
    }

    /// Limits that apply to tools.
    pub fn limits(&self) -> &ToolLimits {
        &self.rt.settings.tool_limits
    }

    /// Whether the caller may call tool `name` in this turn: the bot has
    /// it, and its runner is shown it under the fleet's policy.
    pub fn may_use(&self, name: &str) -> bool {
        self.bot.tools.iter().any(|t| t == name)
            && surface::is_visible(self.scope.runner, name, &self.rt.safety.surfaces)
    }
}

/// Limits for tools, from the fleet settings.
#[derive(Debug, Clone)]
pub struct ToolLimits {
    /// Shell timeout when the model gives none.
    pub shell_default_timeout: Duration,
    /// Longest shell timeout the model may ask for.
    pub shell_max_timeout: Duration,
    /// Most bytes of a tool's text returned to the model.
    pub max_output_bytes: usize,
    /// Largest file Read returns in one call / Write accepts.
    pub max_file_bytes: usize,
    /// Longest SendMessage text.
    pub max_message_chars: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            shell_default_timeout: Duration::from_secs(60),
            shell_max_timeout: Duration::from_secs(600),
            max_output_bytes: 32 * 1024,
            max_file_bytes: 1024 * 1024,
            max_message_chars: 16_000,
        }
    }
}

/// A successful call.
#[derive(Debug, Default)]
pub struct ToolOutput {
    /// What the model is told.
    pub content: String,
    /// Store writes committed atomically with the outcome.
    pub effects: Vec<Mutation>,
    /// Whether the call delivered a message to people.
    pub delivered: bool,
}

impl ToolOutput {
    /// An output with text only.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Default::default()
        }
    }
}

/// A failed call: what went wrong and what the model should do next (a
/// message that ends its own sentence gets no second full stop).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error: {}. Next step: {hint}", .message.trim_end_matches('.'))]
pub struct ToolError {
    /// What went wrong.
    pub message: String,
    /// How to recover.
    pub hint: String,
    /// A tool [`ToolError::hint`] uses, and how to recover without it: a
    /// caller that may not call that tool is given this hint instead
    /// ([`ToolError::for_caller`]), so no advice names a tool it lacks.
    pub hint_without: Option<(&'static str, String)>,
}

impl ToolError {
    /// A new error.
    pub fn new(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            hint: hint.into(),
            hint_without: None,
        }
    }

    /// The same error, with `hint` as what to do for a caller that may
    /// not call `tool` (the one the error's own hint uses).
    #[must_use]
    pub fn or_without(mut self, tool: &'static str, hint: impl Into<String>) -> Self {
        self.hint_without = Some((tool, hint.into()));
        self
    }

    /// The error as the caller of `ctx` is told it: with the hint that
    /// does without the tool the caller may not call.
    #[must_use]
    pub fn for_caller(mut self, ctx: &ToolContext<'_>) -> Self {
        if let Some((tool, hint)) = self.hint_without.take()
            && !ctx.may_use(tool)
        {
            self.hint = hint;
        }
        self
    }

    /// Arguments that did not match the schema.
    pub fn bad_args(tool: &str, detail: impl std::fmt::Display) -> Self {
        Self::new(
            format!("invalid arguments for {tool}: {detail}"),
            format!("call {tool} again with arguments that match its schema"),
        )
    }
}

/// A tool.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// Name, description and argument schema.
    fn spec(&self) -> ToolSpec;
    /// Where the effect lands.
    fn effect(&self) -> Effect;
    /// Whether running the same call twice has the same effect as once
    /// (then a call cut off by a crash is simply run again).
    fn idempotent(&self) -> bool;
    /// Whether the call changes anything (say `true` when in doubt).
    fn mutates(&self) -> bool;
    /// Refuses a call that [`Tool::call`] would refuse before doing
    /// anything, for what its arguments and the workspace tell already
    /// (a path out of the workspace): checked before the gate, so that no
    /// reviewer and no person is asked about a call that cannot run, and
    /// no approval is used up by it. Nothing may change here.
    fn precheck(&self, _ctx: &ToolContext<'_>, _args: &Value) -> Result<(), ToolError> {
        Ok(())
    }
    /// Runs the call.
    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError>;
}

/// Tools by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    /// Each tool's spec, built once (a turn shows them; building one
    /// allocates its JSON schema).
    specs: BTreeMap<String, Arc<ToolSpec>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// The built-in tools of the host.
    pub fn builtin() -> Self {
        let mut r = Self::default();
        r.register(Arc::new(SendMessage));
        r.register(Arc::new(ReactToMessage));
        r.register(Arc::new(Read));
        r.register(Arc::new(Write));
        r.register(Arc::new(Edit));
        r.register(Arc::new(Shell::default()));
        r.register(Arc::new(Remember));
        r.register(Arc::new(Forget));
        r.register(Arc::new(SendToAgent));
        r.register(Arc::new(CreateAgent));
        r.register(Arc::new(UpdateAgent));
        r.register(Arc::new(Task));
        r.register(Arc::new(CheckSubagent));
        r.register(Arc::new(MessageSubagent));
        r.register(Arc::new(StopSubagent));
        r.register(Arc::new(SearchTranscript));
        r.register(Arc::new(ReadTranscript));
        r
    }

    /// Adds or replaces a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let spec = tool.spec();
        self.tools.insert(spec.name.clone(), tool);
        self.specs.insert(spec.name.clone(), Arc::new(spec));
    }

    /// Rebuilds the built-in tools whose schemas state limits (Shell's
    /// timeouts) with `limits`, the ones their calls apply: the specs are
    /// built once, so they must be built from the settings in use.
    pub fn apply_limits(&mut self, limits: &ToolLimits) {
        if self.contains("Shell") {
            self.register(Arc::new(Shell::new(limits)));
        }
    }

    /// A tool's spec by name (built once, at registration).
    pub fn spec(&self, name: &str) -> Option<&Arc<ToolSpec>> {
        self.specs.get(name)
    }

    /// A tool by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Every tool name.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// Whether `name` is a known tool.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }
}

/// Parses arguments into a typed struct, with an error the model can act on.
///
/// The arguments must be a JSON object (docs/operations.md, Limits): serde
/// would read an array into the struct by position and the call would run,
/// yet every later request shows arguments that are not an object as `{}`
/// (model/openai/encode.rs), so the model's history would not match what ran.
pub(crate) fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &str,
    args: Value,
) -> Result<T, ToolError> {
    let kind = match &args {
        // read from a reference: no copy of the arguments (a Write's
        // content) on the way in; a wrong type names the field
        Value::Object(map) => {
            return T::deserialize(&args)
                .map_err(|e| ToolError::bad_args(tool, arg_errors::explain::<T>(map, &e)));
        }
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
    };
    Err(ToolError::new(
        format!(
            "invalid arguments for {tool}: they are {kind}, and arguments must be a JSON object \
             with the fields its schema names"
        ),
        format!(
            "call {tool} again with its arguments as one JSON object, each under its name \
             (like {{\"field\": value}}), not as an array or a bare value"
        ),
    ))
}

/// Cuts `text` to at most `max` bytes at a char boundary, saying so.
pub(crate) fn truncate_output(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... {} more bytes not shown]",
        &text[..end],
        text.len() - end
    )
}

/// A path for messages: relative to the workspace when inside it.
pub(crate) fn show_path(workspace: &Workspace, path: &Path) -> String {
    path.strip_prefix(workspace.root())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::ToolError;
    use super::parse_args;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Args {
        text: String,
    }

    /// Regression: `["hi"]` was read into the struct by position, so the
    /// call ran while later requests showed its arguments as `{}`.
    #[test]
    fn arguments_must_be_a_json_object() {
        assert_eq!(
            parse_args::<Args>("SendMessage", json!({"text": "hi"})),
            Ok(Args {
                text: "hi".to_owned()
            })
        );
        for (args, kind) in [
            (json!(["hi"]), "an array"),
            (json!("hi"), "a string"),
            (json!(7), "a number"),
            (json!(true), "a boolean"),
            (json!(null), "null"),
        ] {
            let error = parse_args::<Args>("SendMessage", args).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "error: invalid arguments for SendMessage: they are {kind}, and arguments \
                     must be a JSON object with the fields its schema names. Next step: call \
                     SendMessage again with its arguments as one JSON object, each under its \
                     name (like {{\"field\": value}}), not as an array or a bare value"
                )
            );
        }
    }

    /// Regression: a message that ends its sentence read "…you have.. Next
    /// step" (the hop-budget refusal, prompts/hop_budget.md).
    #[test]
    fn a_tool_error_reads_as_sentences() {
        let e = ToolError::new("the budget is spent.", "answer the person");
        assert_eq!(
            e.to_string(),
            "error: the budget is spent. Next step: answer the person"
        );
        let e = ToolError::new("no such file", "list the folder first");
        assert_eq!(
            e.to_string(),
            "error: no such file. Next step: list the folder first"
        );
    }
}
