//! fleet.toml: the host, its users, model providers, runtime settings and
//! bots. Unknown keys are errors; every error names the file, the key and
//! what is expected.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;

#[path = "config_review.rs"]
mod review;

pub use review::ReviewFileConfig;

/// The example fleet, used by `botfleet run` when no fleet file is given.
pub const EMBEDDED_FLEET: &str = include_str!("../examples/fleet.toml");
/// The offline script the example fleet points at.
pub const EMBEDDED_OFFLINE_SCRIPT: &str = include_str!("../examples/scripts/offline.toml");
/// Path the embedded fleet uses for its offline script.
pub const EMBEDDED_OFFLINE_PATH: &str = "scripts/offline.toml";

/// A configuration error.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    // `cause`, not `source`: the message already says it, and a `source`
    // would be printed again by every formatter that walks the chain
    // (`{:#}` of anyhow)
    #[error("cannot read {path}: {cause}")]
    Read {
        /// File.
        path: String,
        /// Cause.
        cause: std::io::Error,
    },
    /// The TOML did not parse or did not match the schema.
    #[error("{path}: {detail}")]
    Parse {
        /// File.
        path: String,
        /// The parser's message (with line, column and key).
        detail: String,
    },
    /// A value is not valid.
    #[error("{path}: key `{key}`: {message}")]
    Invalid {
        /// File.
        path: String,
        /// Dotted key, e.g. `bots[1].provider`.
        key: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// More than one value is not valid (each an `Invalid`).
    #[error("{}", several(.0))]
    Several(Vec<ConfigError>),
}

fn several(problems: &[ConfigError]) -> String {
    let mut text = format!("{} problems:", problems.len());
    for p in problems {
        text.push_str("\n  ");
        text.push_str(&p.to_string());
    }
    text
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetFile {
    /// `[host]`.
    #[serde(default)]
    pub host: HostConfig,
    /// `[runtime]`.
    #[serde(default)]
    pub runtime: RuntimeConfig,
    /// `[[users]]`.
    #[serde(default)]
    pub users: Vec<UserConfig>,
    /// `[providers.NAME]`.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// `[[bots]]`.
    #[serde(default)]
    pub bots: Vec<BotConfig>,
    /// `[review]`: auto-review of side effects.
    #[serde(default)]
    pub review: ReviewFileConfig,
    /// `[[secrets]]`: values tools get by reference (never a model).
    #[serde(default)]
    pub secrets: Vec<SecretConfig>,
}

/// `[[secrets]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretConfig {
    /// Name (an environment-variable name, e.g. `GITHUB_TOKEN`).
    pub name: String,
    /// The value, inline.
    #[serde(default)]
    pub value: Option<String>,
    /// Or the environment variable holding it.
    #[serde(default)]
    pub value_env: Option<String>,
}

/// `[host]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Data directory (database, index, workspace). Relative to the
    /// current directory.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// Address of the HTTP API.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Workspace for files and Shell (default `<data_dir>/workspace`).
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// SQLite durability: `normal` (survives a process crash) or `full`
    /// (survives power loss).
    #[serde(default)]
    pub synchronous: botfleet_memory::Synchronous,
    /// Largest request body the API accepts, in bytes.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Longest message text the API accepts, in characters.
    #[serde(default = "default_max_text")]
    pub max_text_chars: usize,
    /// Seconds an API connection has to send a whole request head (from
    /// its start, or from the end of its previous response) before it is
    /// closed.
    #[serde(default = "default_header_timeout")]
    pub header_timeout_s: u64,
    /// Seconds a request may take to be answered, its body included
    /// (`/v1/events` streams excepted).
    #[serde(default = "default_request_timeout")]
    pub request_timeout_s: u64,
    /// Most API connections open at once; past it new ones wait.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// Most `/v1/events` streams one user may hold open (the web page
    /// holds one per tab); all users together hold at most
    /// `max_connections` less a quarter kept for other requests.
    #[serde(default = "default_max_streams_per_user")]
    pub max_streams_per_user: u32,
    /// Most messages one user may send (to bots and rooms, all together)
    /// per minute: a token bucket holding a minute's worth, so one user's
    /// flood cannot fill the store's one writer that every other user's
    /// messages and turns wait on. Past it the API answers `429
    /// rate_limited` with `Retry-After`.
    #[serde(default = "default_user_messages_per_minute")]
    pub user_messages_per_minute: u32,
}

fn default_data_dir() -> PathBuf {
    PathBuf::from("./botfleet-data")
}
fn default_listen() -> String {
    "127.0.0.1:7878".into()
}
fn default_max_body() -> usize {
    1024 * 1024
}
fn default_max_text() -> usize {
    32_000
}
fn default_header_timeout() -> u64 {
    30
}
fn default_request_timeout() -> u64 {
    60
}
fn default_max_connections() -> u32 {
    512
}
fn default_max_streams_per_user() -> u32 {
    16
}
fn default_user_messages_per_minute() -> u32 {
    600
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            data_dir: default_data_dir(),
            listen: default_listen(),
            workspace: None,
            synchronous: botfleet_memory::Synchronous::default(),
            max_body_bytes: default_max_body(),
            max_text_chars: default_max_text(),
            header_timeout_s: default_header_timeout(),
            request_timeout_s: default_request_timeout(),
            max_connections: default_max_connections(),
            max_streams_per_user: default_max_streams_per_user(),
            user_messages_per_minute: default_user_messages_per_minute(),
        }
    }
}

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
    #[serde(default = "default_idle")]
    pub idle_timeout_s: u64,
    /// Most model steps per turn.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Most bot-to-bot hops per originating user message.
    #[serde(default = "default_max_hops")]
    pub max_hops: u32,
    /// Most bot-to-bot messages (messages, subagent tasks and reports)
    /// descended from one person's message, routine run or webhook
    /// delivery, however wide the chain fans out.
    #[serde(default = "default_max_chain_messages")]
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
    #[serde(default = "default_context_entries")]
    pub context_entries: usize,
    /// Shell timeout when the model gives none.
    #[serde(default = "default_shell_timeout")]
    pub shell_timeout_s: u64,
    /// Longest shell timeout the model may ask for.
    #[serde(default = "default_shell_max")]
    pub shell_max_timeout_s: u64,
    /// Days the idempotency ledger keeps its records.
    #[serde(default = "default_ledger_days")]
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

/// `[[users]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// User id.
    pub id: String,
    /// Bearer token, inline.
    #[serde(default)]
    pub token: Option<String>,
    /// Or the name of an environment variable holding it.
    #[serde(default)]
    pub token_env: Option<String>,
    /// The user's IANA time zone (`Asia/Shanghai`; default UTC): the times
    /// the user's bots read their inputs in.
    #[serde(default)]
    pub timezone: Option<String>,
}

/// `[providers.NAME]`, chosen by its `kind` key (read through a flat
/// table so that errors name the key: `config_provider.rs`).
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "provider::RawProvider")]
// read once per start, a few per fleet: boxing the `openai` variant's keys
// would only make every match on it longer
#[allow(clippy::large_enum_variant)]
pub enum ProviderConfig {
    /// An OpenAI-compatible chat-completions endpoint.
    Openai {
        /// e.g. `http://127.0.0.1:8000/v1`.
        base_url: String,
        /// Model name.
        model: String,
        /// Environment variable with the API key (optional for local servers).
        #[serde(default)]
        api_key_env: Option<String>,
        /// Seconds a request may take (silence between streamed chunks).
        #[serde(default)]
        timeout_s: Option<u64>,
        /// Seconds one model call may take in all, its retries included
        /// (default 300, or twice `timeout_s` when that is more; at least
        /// `timeout_s`).
        #[serde(default)]
        call_timeout_s: Option<u64>,
        /// Most bytes of one answer: text plus tool-call arguments, or a
        /// whole non-streamed body (default 4 MiB, at least 1024).
        #[serde(default)]
        max_response_bytes: Option<u64>,
        /// Stream responses (default true).
        #[serde(default)]
        stream: Option<bool>,
        /// With `stream`, ask for the token counts in a last chunk
        /// (`stream_options.include_usage`; default true). `false` sends
        /// no `stream_options`, for servers and proxies that refuse it;
        /// the tokens are then counted by botfleet.
        #[serde(default)]
        stream_usage: Option<bool>,
        /// Retries on 429, 5xx and connection errors (default 4).
        #[serde(default)]
        max_retries: Option<u32>,
        /// The request field of the token limit compaction and memory
        /// extraction set: `max_tokens` (default) or
        /// `max_completion_tokens` (OpenAI's o-series and gpt-5 models
        /// refuse `max_tokens`). Checked when the file is read.
        #[serde(default)]
        max_tokens_field: Option<String>,
        /// Another provider to use when `api_key_env` is not set (announced
        /// at start), e.g. the offline scripted model.
        #[serde(default)]
        fallback: Option<String>,
        /// Extra headers sent with every request (`X-Title`,
        /// `HTTP-Referer`, `OpenAI-Organization`), e.g.
        /// `headers = { "X-Title" = "botfleet" }`; never logged.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// Extra headers whose values are read from environment variables
        /// at start, header name to variable, e.g.
        /// `headers_env = { "X-Api-Key" = "GATEWAY_KEY" }`: a credential
        /// in a custom header stays out of the file. A variable that is
        /// not set is refused at start (naming the header and the
        /// variable); values are never logged and are scrubbed from tool
        /// results like the API key.
        #[serde(default)]
        headers_env: BTreeMap<String, String>,
        /// Tokenizer encoding (`o200k_base` default, or `cl100k_base`).
        #[serde(default)]
        encoding: Option<String>,
        /// Compact a session's context above this many tokens (default 100000).
        #[serde(default)]
        compact_at_tokens: Option<u64>,
        /// Compact in the background after a turn above this (default 80% of compact_at_tokens).
        #[serde(default)]
        background_compact_at_tokens: Option<u64>,
    },
    /// The deterministic scripted model.
    Scripted {
        /// Script file, relative to the fleet file.
        script: PathBuf,
        /// Tokenizer encoding (`o200k_base` default, or `cl100k_base`).
        #[serde(default)]
        encoding: Option<String>,
        /// Compact a session's context above this many tokens (default 100000).
        #[serde(default)]
        compact_at_tokens: Option<u64>,
        /// Compact in the background after a turn above this (default 80% of compact_at_tokens).
        #[serde(default)]
        background_compact_at_tokens: Option<u64>,
    },
}

impl ProviderConfig {
    /// The context keys every kind has: `encoding`, `compact_at_tokens`,
    /// `background_compact_at_tokens`.
    pub fn context_keys(&self) -> (Option<&str>, Option<u64>, Option<u64>) {
        match self {
            ProviderConfig::Openai {
                encoding,
                compact_at_tokens,
                background_compact_at_tokens,
                ..
            }
            | ProviderConfig::Scripted {
                encoding,
                compact_at_tokens,
                background_compact_at_tokens,
                ..
            } => (
                encoding.as_deref(),
                *compact_at_tokens,
                *background_compact_at_tokens,
            ),
        }
    }
}

/// `[[bots]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BotConfig {
    /// Stable id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Role text.
    #[serde(default)]
    pub role: String,
    /// Owner (a user id).
    pub owner: String,
    /// Provider name.
    pub provider: String,
    /// Allowed tools.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Projects the bot joined: it reads and writes their shared memory
    /// (`project:<name>` scopes). Names follow the id rules.
    #[serde(default)]
    pub projects: Vec<String>,
    /// Whether other users may add this bot to their group rooms (which
    /// makes those rooms shared). Default false: only the owner may.
    #[serde(default)]
    pub shareable: bool,
    /// `[[bots.routines]]`: prompts run on a schedule.
    #[serde(default)]
    pub routines: Vec<RoutineConfig>,
    /// `[[bots.hooks]]`: webhooks that wake the bot.
    #[serde(default)]
    pub hooks: Vec<HookConfig>,
    /// Names of the secrets the bot's tools may use (`[[secrets]]` or
    /// supplied by its person through the API).
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Tokens (prompt + completion) the bot may use per UTC day; when spent
    /// the bot pauses with a visible notice until midnight UTC.
    #[serde(default)]
    pub daily_token_budget: Option<u64>,
}

/// What a fleet file refers to outside itself, resolved for a start:
/// tokens and secrets from the environment, scripts from their files,
/// API keys. Made by `LoadedFleet::resolve_external`, which reports every
/// reference that does not resolve.
pub struct ResolvedFleet {
    /// `(user id, token)` of each user, in file order; no two share a token.
    pub tokens: Vec<(String, String)>,
    /// The signing secret of each webhook.
    pub hooks: Vec<ResolvedHook>,
    /// `(name, value)` of each `[[secrets]]`.
    pub secrets: Vec<(String, String)>,
    /// The parsed script of each scripted provider, by provider name.
    pub scripts: BTreeMap<String, botfleet_actors::model::Script>,
    /// The API key of each `openai` provider, by name: `None` without
    /// `api_key_env`, or when it is not set and the provider has a
    /// `fallback` (its bots then run on that scripted provider).
    pub api_keys: BTreeMap<String, Option<String>>,
    /// The headers of each `openai` provider's `headers_env`, by provider
    /// name: `(header, value)` with the value read from its variable
    /// (none for a provider whose bots run on its `fallback`).
    pub provider_headers: BTreeMap<String, Vec<(String, String)>>,
}

/// A webhook with its signing secret resolved.
pub struct ResolvedHook {
    /// Bot id.
    pub bot: String,
    /// Hook name.
    pub name: String,
    /// The signing secret.
    pub secret: String,
    /// Largest payload accepted, in bytes.
    pub max_payload_bytes: usize,
}

/// A loaded fleet file and where it came from.
#[derive(Debug, Clone)]
pub struct LoadedFleet {
    /// The content.
    pub file: FleetFile,
    /// Path shown in messages (`<embedded example fleet>` for the default).
    pub source: String,
    /// Directory relative paths resolve against; `None` for the embedded fleet.
    pub base_dir: Option<PathBuf>,
}

/// Values from the command line that replace keys of the file before it
/// is checked (`botfleet run --listen`, `--data`): a key that is replaced
/// is not held against the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Replaces `host.listen`.
    pub listen: Option<String>,
    /// Replaces `host.data_dir`.
    pub data_dir: Option<PathBuf>,
}

#[path = "config_load.rs"]
mod load;

#[path = "config_bots.rs"]
mod bots;

#[path = "config_keys.rs"]
mod keys;

#[path = "config_limits.rs"]
mod limits;
pub use limits::dir_problem;

#[path = "config_provider.rs"]
mod provider;

#[path = "config_triggers.rs"]
mod triggers;
pub use triggers::HookConfig;
pub use triggers::MIN_HOOK_SECRET;
pub use triggers::RoutineConfig;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "config_bots_tests.rs"]
mod bots_tests;
