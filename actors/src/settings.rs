//! Runtime settings of a fleet (the `[runtime]` part of fleet.toml).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::str::FromStr;

use chrono_tz::Tz;

use botfleet_memory::BotId;
use botfleet_memory::Encoding;
use botfleet_memory::UserId;
use std::time::Duration;

use crate::tools::ToolLimits;

/// How the fleet behaves.
#[derive(Debug, Clone)]
pub struct FleetSettings {
    /// The debounce window. A person's message to a bot that runs no turn
    /// and had no person's message within this time starts its turn at
    /// once; one that comes sooner (or while a turn runs) waits until this
    /// much time passes with no more, so rapid messages fold into one
    /// turn. Zero turns batching off.
    pub debounce: Duration,
    /// Longest the first waiting message waits while more keep arriving.
    pub debounce_max: Duration,
    /// Idle time after which a bot's actor is stopped (its state stays in
    /// the store).
    pub idle_timeout: Duration,
    /// Most model steps in one turn.
    pub max_steps: u32,
    /// Most bot-to-bot hops per originating user message.
    pub max_hops: u32,
    /// Most bot-to-bot messages (messages, subagent tasks and reports) in
    /// one chain, however wide: descended from one person's message,
    /// routine run or webhook delivery (`runtime.max_chain_messages`).
    pub max_chain_messages: u64,
    /// Most subagents of one bot running at once.
    pub max_subagents: usize,
    /// Most bots made by CreateAgent per owner that are still in the
    /// fleet (not removed): past it CreateAgent is refused
    /// (`runtime.max_created_agents`).
    pub max_created_agents: usize,
    /// Most starts of one turn at the same step (its first run or last
    /// finished step, plus restarts after crashes; clean stops do not
    /// count) before it fails for good.
    pub max_turn_attempts: i64,
    /// Entries of a session kept in memory and sent as context.
    pub context_entries: usize,
    /// The fleet workspace (files and Shell).
    pub workspace: PathBuf,
    /// Limits of tools.
    pub tool_limits: ToolLimits,
    /// Where running Shell commands are listed, so that a host started
    /// after a SIGKILL kills what the dead one left running (none: not
    /// listed; `tools::ShellRegistry`).
    pub shell_registry: Option<crate::tools::ShellRegistry>,
    /// How Shell confines its commands (the host's `runtime.shell_sandbox`).
    pub shell_sandbox: ShellSandbox,
    /// The soft open-file limit (`ulimit -n`) the host process started
    /// with, before `botfleet run` raised its own for its connections:
    /// every Shell command is given it back (a [`ShellSandbox::Launcher`]
    /// by its `--open-files` argument, a direct `sh` by a `ulimit` before
    /// the command), so that a bot's command cannot open as many files as
    /// the hard limit allows. `None`: nothing was raised (a host embedded
    /// without `botfleet run`); commands inherit the host's limit.
    pub shell_open_files: Option<u64>,
    /// Auto-review and approvals (`[review]`).
    pub review: crate::safety::ReviewConfig,
    /// Context economy per model provider (name → settings); providers not
    /// listed use `default_context`.
    pub context: HashMap<String, ContextSettings>,
    /// Context economy of providers without their own settings.
    pub default_context: ContextSettings,
    /// Run the fact-extraction pass (a model call with purpose `extract`)
    /// after each completed turn that had messages from the bot's owner.
    pub extract_memory: bool,
    /// The fleet's users (`[[users]]`, fixed until the next start): a bot
    /// that CreateAgent makes or UpdateAgent renames may not be named like
    /// one of them, as fleet.toml refuses for its own bots (in a room its
    /// messages could pass for that person's).
    pub user_ids: Vec<UserId>,
    /// Each user's time zone (`[[users]] timezone`); a user not listed
    /// has UTC ([`FleetSettings::timezone_of`]).
    pub user_timezones: HashMap<UserId, Tz>,
    /// The display name fleet.toml gives each of its bots (by id), fixed
    /// until the next start. UpdateAgent may rename such a bot until then,
    /// and the start gives it this name back: CreateAgent and UpdateAgent
    /// refuse it for another bot the owner could address along with it,
    /// as they refuse its name of the moment (else the next start stopped
    /// on the clash a model made).
    pub fleet_names: HashMap<BotId, String>,
}

/// How Shell runs a command: directly, or through a launcher that puts it
/// in an OS sandbox first.
#[derive(Debug, Clone, Default)]
pub enum ShellSandbox {
    /// `sh` runs directly, confined only by the path check on the command
    /// text (the default of a runtime built without a host, and
    /// `runtime.shell_sandbox = "off"`).
    #[default]
    Direct,
    /// `sh` runs through [`ShellLauncher`].
    Launcher(ShellLauncher),
    /// Every Shell call fails with this message: a sandbox is required and
    /// this host cannot have one (it says why and which key to change).
    Unavailable(String),
}

/// A program that confines itself and then becomes the command, keeping
/// its process id (so the process group Shell kills is the command's).
/// Shell runs `PROGRAM ARGS… --rw WORKSPACE [--hide PATH]… -- sh -c
/// COMMAND`, with WORKSPACE the calling bot's workspace root at the time
/// of the call.
#[derive(Debug, Clone)]
pub struct ShellLauncher {
    /// The program (the `botfleet` binary).
    pub program: PathBuf,
    /// Its arguments before the `--rw` (the hidden `sandbox-exec`
    /// subcommand).
    pub args: Vec<OsString>,
    /// Paths the command may not read (the data directory, the fleet file,
    /// the fleet workspace root: the bot's own workspace is granted inside
    /// it); absolute.
    pub hidden: Vec<PathBuf>,
}

/// Token accounting and compaction for one model provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextSettings {
    /// Tokenizer encoding of the provider's models.
    pub encoding: Encoding,
    /// Compact a session before a model call once its context passes this.
    pub compact_at_tokens: u64,
    /// Compact in the background after a turn, while the session is idle,
    /// once its context passes this (lower) mark.
    pub background_compact_at_tokens: u64,
    /// User-side messages kept verbatim after a compaction (with what
    /// follows them), as long as they span at most a quarter of
    /// `FleetSettings::context_entries`: the protection yields to the
    /// window, so entries never leave it unsummarised.
    pub keep_recent_inputs: usize,
}

impl Default for ContextSettings {
    fn default() -> Self {
        Self {
            encoding: Encoding::O200kBase,
            compact_at_tokens: 100_000,
            background_compact_at_tokens: 80_000,
            keep_recent_inputs: 4,
        }
    }
}

impl FleetSettings {
    /// Defaults with the given workspace.
    pub fn new(workspace: PathBuf) -> Self {
        Self {
            debounce: Duration::from_millis(500),
            debounce_max: Duration::from_millis(2000),
            idle_timeout: Duration::from_secs(300),
            max_steps: 40,
            max_hops: 8,
            max_chain_messages: 200,
            max_subagents: 8,
            max_created_agents: 100,
            max_turn_attempts: 3,
            context_entries: 200,
            workspace,
            tool_limits: ToolLimits::default(),
            shell_registry: None,
            shell_sandbox: ShellSandbox::Direct,
            shell_open_files: None,
            review: crate::safety::ReviewConfig::default(),
            context: HashMap::new(),
            default_context: ContextSettings::default(),
            extract_memory: true,
            user_ids: Vec::new(),
            user_timezones: HashMap::new(),
            fleet_names: HashMap::new(),
        }
    }

    /// The context settings of a provider.
    pub fn context_for(&self, provider: &str) -> &ContextSettings {
        self.context.get(provider).unwrap_or(&self.default_context)
    }

    /// The time zone of `user` (UTC when none is set): what a bot of
    /// theirs reads its inputs' times in.
    pub fn timezone_of(&self, user: &UserId) -> Tz {
        self.user_timezones.get(user).copied().unwrap_or(Tz::UTC)
    }

    /// An IANA time zone name (`Asia/Shanghai`), or what is wrong with it and
    /// what is expected.
    pub fn parse_timezone(name: &str) -> Result<Tz, String> {
        Tz::from_str(name).map_err(|_| {
            let hint = chrono_tz::TZ_VARIANTS
                .iter()
                .find(|tz| tz.name().eq_ignore_ascii_case(name.trim()))
                .map(|tz| format!(" (did you mean {:?}?)", tz.name()))
                .unwrap_or_default();
            format!(
                "time zone {name:?} is not an IANA time zone name{hint}; expected e.g. \
                 \"Asia/Shanghai\", \"America/New_York\", \"Europe/Berlin\" or \"UTC\""
            )
        })
    }
}
