//! `[runtime]` of fleet.toml: how bots run (turns, hops, subagents,
//! Shell and its sandbox, the ledger).

use serde::Deserialize;

/// `[runtime]`: how bots run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Quiet time that folds rapid user messages into one turn (0: off).
    #[serde(default = "default_debounce")]
    pub debounce_ms: u64,
    /// Longest the first of those messages waits.
    #[serde(default = "default_debounce_max")]
    pub debounce_max_ms: u64,
    /// Idle seconds before a bot's actor is passivated.
    #[serde(
        default = "default_idle",
        deserialize_with = "super::numbers::positive_u64"
    )]
    pub idle_timeout_s: u64,
    /// Most model steps per turn.
    #[serde(
        default = "default_max_steps",
        deserialize_with = "super::numbers::positive_u32"
    )]
    pub max_steps: u32,
    /// Most bot-to-bot hops per originating user message.
    #[serde(
        default = "default_max_hops",
        deserialize_with = "super::numbers::positive_u32"
    )]
    pub max_hops: u32,
    /// Most bot-to-bot messages (messages, subagent tasks and reports)
    /// descended from one person's message, routine run or webhook
    /// delivery, however wide the chain fans out.
    #[serde(
        default = "default_max_chain_messages",
        deserialize_with = "super::numbers::positive_u64"
    )]
    pub max_chain_messages: u64,
    /// Most running subagents per bot.
    #[serde(default = "default_max_subagents")]
    pub max_subagents: usize,
    /// Most bots made by CreateAgent per owner, not counting removed ones
    /// (0: CreateAgent makes none).
    #[serde(default = "default_max_created_agents")]
    pub max_created_agents: usize,
    /// Most starts of one turn at the same step (crashes in a row with no
    /// step finished between; clean stops do not count) before it fails
    /// for good.
    #[serde(default = "default_attempts")]
    pub max_turn_attempts: i64,
    /// Transcript entries kept in a bot's context.
    #[serde(
        default = "default_context_entries",
        deserialize_with = "super::numbers::at_least_usize::<{ super::limits::MIN_CONTEXT_ENTRIES as u64 }, _>"
    )]
    pub context_entries: usize,
    /// Shell timeout when the model gives none.
    #[serde(
        default = "default_shell_timeout",
        deserialize_with = "super::numbers::positive_u64"
    )]
    pub shell_timeout_s: u64,
    /// Longest shell timeout the model may ask for.
    #[serde(
        default = "default_shell_max",
        deserialize_with = "super::numbers::positive_u64"
    )]
    pub shell_max_timeout_s: u64,
    /// Days the idempotency ledger keeps its records.
    #[serde(
        default = "default_ledger_days",
        deserialize_with = "super::numbers::positive_u64"
    )]
    pub ledger_retention_days: u64,
    /// Fact extraction after each completed turn (a model call).
    #[serde(default = "default_extract_memory")]
    pub extract_memory: bool,
    /// Whether Shell commands run in the OS sandbox (src/sandbox.rs).
    #[serde(default)]
    pub shell_sandbox: ShellSandboxMode,
    /// MiB the file tools and Shell leave free on the workspace's file
    /// system (0: none; unset: 512 MiB or 5 % of it, whichever is less):
    /// by default it is the store's (actors/src/tools/workspace_disk.rs).
    #[serde(default)]
    pub tools_min_free_disk_mb: Option<u64>,
}

/// `runtime.shell_sandbox`: whether Shell commands run in an OS sandbox
/// (Landlock) that keeps them out of the host's files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ShellSandboxMode {
    /// The sandbox when the kernel has Landlock; otherwise Shell runs
    /// without it and the host warns once at start.
    #[default]
    Auto,
    /// The sandbox, or no Shell: without Landlock every Shell call fails.
    Required,
    /// No sandbox: only the path check on the command text.
    Off,
}

/// By hand, so that any wrong value (a string or not) is answered with the
/// three that are right.
impl<'de> Deserialize<'de> for ShellSandboxMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Mode;
        impl serde::de::Visitor<'_> for Mode {
            type Value = ShellSandboxMode;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"auto\", \"required\" or \"off\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                match v {
                    "auto" => Ok(ShellSandboxMode::Auto),
                    "required" => Ok(ShellSandboxMode::Required),
                    "off" => Ok(ShellSandboxMode::Off),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(Mode)
    }
}

fn default_debounce() -> u64 {
    500
}
fn default_debounce_max() -> u64 {
    2000
}
fn default_idle() -> u64 {
    300
}
fn default_max_steps() -> u32 {
    40
}
fn default_max_hops() -> u32 {
    8
}
fn default_max_chain_messages() -> u64 {
    200
}
fn default_max_subagents() -> usize {
    8
}
fn default_max_created_agents() -> usize {
    100
}
fn default_attempts() -> i64 {
    3
}
fn default_context_entries() -> usize {
    200
}
fn default_shell_timeout() -> u64 {
    60
}
fn default_shell_max() -> u64 {
    600
}
fn default_ledger_days() -> u64 {
    7
}
fn default_extract_memory() -> bool {
    true
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            debounce_ms: default_debounce(),
            debounce_max_ms: default_debounce_max(),
            idle_timeout_s: default_idle(),
            max_steps: default_max_steps(),
            max_hops: default_max_hops(),
            max_chain_messages: default_max_chain_messages(),
            max_subagents: default_max_subagents(),
            max_created_agents: default_max_created_agents(),
            max_turn_attempts: default_attempts(),
            context_entries: default_context_entries(),
            shell_timeout_s: default_shell_timeout(),
            shell_max_timeout_s: default_shell_max(),
            ledger_retention_days: default_ledger_days(),
            extract_memory: default_extract_memory(),
            shell_sandbox: ShellSandboxMode::default(),
            tools_min_free_disk_mb: None,
        }
    }
}
