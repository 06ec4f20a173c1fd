//! fleet.toml: the host, its users, model providers, runtime settings and
//! bots. Unknown keys are errors; every error names the file, the key and
//! what is expected.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;

#[path = "config_host.rs"]
mod host;
#[path = "config_numbers.rs"]
mod numbers;
#[path = "config_review.rs"]
mod review;
#[path = "config_runtime.rs"]
mod runtime;

pub use host::HostConfig;
pub use review::ReviewFileConfig;
pub use runtime::RuntimeConfig;
pub use runtime::ShellSandboxMode;

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
    /// Allowed tools. Required (docs/operations.md): a missing key is
    /// refused as the other required fields are, naming it, rather than
    /// read as an empty list and refused for lacking SendMessage (QA).
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
    #[serde(default, deserialize_with = "numbers::token_budget")]
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

#[path = "config_shape.rs"]
mod shape;
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
