//! fleet.toml: the host, its users, model providers, runtime settings and
//! bots. Unknown keys are errors; every error names the file, the key and
//! what is expected.

use std::collections::BTreeMap;
use std::net::SocketAddr;
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
    #[error("cannot read {path}: {source}")]
    Read {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
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

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            data_dir: default_data_dir(),
            listen: default_listen(),
            workspace: None,
            synchronous: botfleet_memory::Synchronous::default(),
            max_body_bytes: default_max_body(),
            max_text_chars: default_max_text(),
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
    /// Most running subagents per bot.
    #[serde(default = "default_max_subagents")]
    pub max_subagents: usize,
    /// Most starts of one turn before it fails for good.
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
fn default_max_subagents() -> usize {
    8
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
            max_subagents: default_max_subagents(),
            max_turn_attempts: default_attempts(),
            context_entries: default_context_entries(),
            shell_timeout_s: default_shell_timeout(),
            shell_max_timeout_s: default_shell_max(),
            ledger_retention_days: default_ledger_days(),
            extract_memory: default_extract_memory(),
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
}

/// `[providers.NAME]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
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
        /// Stream responses (default true).
        #[serde(default)]
        stream: Option<bool>,
        /// Retries on 429, 5xx and connection errors (default 4).
        #[serde(default)]
        max_retries: Option<u32>,
        /// Another provider to use when `api_key_env` is not set (announced
        /// at start), e.g. the offline scripted model.
        #[serde(default)]
        fallback: Option<String>,
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

impl LoadedFleet {
    /// Reads and validates a fleet file.
    pub fn from_path(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, &path.display().to_string(), Some(base))
    }

    /// The embedded example fleet.
    pub fn embedded() -> Result<Self, ConfigError> {
        Self::parse(EMBEDDED_FLEET, "<embedded example fleet>", None)
    }

    /// Parses and validates fleet text.
    pub fn parse(text: &str, source: &str, base_dir: Option<PathBuf>) -> Result<Self, ConfigError> {
        let file: FleetFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: source.to_owned(),
            detail: e.to_string().trim_end().to_owned(),
        })?;
        let loaded = Self {
            file,
            source: source.to_owned(),
            base_dir,
        };
        loaded.validate()?;
        Ok(loaded)
    }

    fn invalid(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.source.clone(),
            key: key.into(),
            message: message.into(),
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let f = &self.file;
        if let Err((key, message)) = f.review.validate(&f.providers) {
            return Err(self.invalid(key, message));
        }
        if f.host.listen.parse::<SocketAddr>().is_err() {
            return Err(self.invalid(
                "host.listen",
                format!(
                    "{:?} is not an address; expected IP:PORT such as \"127.0.0.1:7878\"",
                    f.host.listen
                ),
            ));
        }
        if f.host.max_body_bytes < 1024 {
            return Err(self.invalid("host.max_body_bytes", "must be at least 1024"));
        }
        if f.runtime.max_steps == 0 {
            return Err(self.invalid("runtime.max_steps", "must be at least 1"));
        }
        if f.runtime.max_turn_attempts < 1 {
            return Err(self.invalid("runtime.max_turn_attempts", "must be at least 1"));
        }
        if f.runtime.context_entries < 4 {
            return Err(self.invalid("runtime.context_entries", "must be at least 4"));
        }
        if f.runtime.debounce_max_ms < f.runtime.debounce_ms {
            return Err(self.invalid(
                "runtime.debounce_max_ms",
                "must be at least runtime.debounce_ms",
            ));
        }
        if f.runtime.shell_max_timeout_s == 0
            || f.runtime.shell_timeout_s > f.runtime.shell_max_timeout_s
        {
            return Err(self.invalid(
                "runtime.shell_timeout_s",
                "must be positive and at most runtime.shell_max_timeout_s",
            ));
        }
        let mut seen_users = Vec::new();
        for (i, u) in f.users.iter().enumerate() {
            let key = format!("users[{i}]");
            if let Err(e) = botfleet_memory::UserId::new(u.id.as_str()) {
                return Err(self.invalid(format!("{key}.id"), e.to_string()));
            }
            if seen_users.contains(&u.id) {
                return Err(self.invalid(
                    format!("{key}.id"),
                    format!("user {:?} is defined twice", u.id),
                ));
            }
            seen_users.push(u.id.clone());
            match (&u.token, &u.token_env) {
                (Some(_), Some(_)) => {
                    return Err(self.invalid(
                        format!("{key}.token"),
                        "give either `token` or `token_env`, not both",
                    ));
                }
                (None, None) => {
                    return Err(self.invalid(
                        format!("{key}.token"),
                        "missing: give `token = \"...\"` or `token_env = \"ENV_VAR\"`",
                    ));
                }
                (Some(t), None) if t.len() < 8 => {
                    return Err(self.invalid(
                        format!("{key}.token"),
                        "is too short; use at least 8 characters",
                    ));
                }
                _ => {}
            }
        }
        for (name, p) in &f.providers {
            let key = format!("providers.{name}");
            match p {
                ProviderConfig::Openai {
                    base_url,
                    model,
                    fallback,
                    timeout_s,
                    ..
                } => {
                    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                        return Err(self.invalid(
                            format!("{key}.base_url"),
                            format!("{base_url:?} is not an http(s) URL; expected e.g. \"http://127.0.0.1:8000/v1\""),
                        ));
                    }
                    if model.trim().is_empty() {
                        return Err(self.invalid(format!("{key}.model"), "must not be empty"));
                    }
                    if timeout_s == &Some(0) {
                        return Err(self.invalid(format!("{key}.timeout_s"), "must be at least 1"));
                    }
                    if let Some(fb) = fallback {
                        match f.providers.get(fb) {
                            Some(ProviderConfig::Scripted { .. }) => {}
                            Some(ProviderConfig::Openai { .. }) => {
                                return Err(self.invalid(
                                    format!("{key}.fallback"),
                                    format!("{fb:?} must be a `scripted` provider"),
                                ));
                            }
                            None => {
                                return Err(self.invalid(
                                    format!("{key}.fallback"),
                                    format!(
                                        "provider {fb:?} is not defined; defined: {}",
                                        self.provider_names()
                                    ),
                                ));
                            }
                        }
                    }
                }
                ProviderConfig::Scripted { script, .. } => {
                    if script.as_os_str().is_empty() {
                        return Err(
                            self.invalid(format!("{key}.script"), "must name a script file")
                        );
                    }
                }
            }
        }
        for (name, p) in &f.providers {
            let (encoding, compact, background) = match p {
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
                } => (encoding, compact_at_tokens, background_compact_at_tokens),
            };
            if let Some(e) = encoding
                && botfleet_memory::Encoding::parse(e).is_none()
            {
                return Err(self.invalid(
                    format!("providers.{name}.encoding"),
                    format!("{e:?} is not an encoding; use \"o200k_base\" or \"cl100k_base\""),
                ));
            }
            if compact.is_some_and(|n| n < 1000) {
                return Err(self.invalid(
                    format!("providers.{name}.compact_at_tokens"),
                    "must be at least 1000",
                ));
            }
            if let (Some(b), c) = (background, compact.unwrap_or(100_000))
                && *b > c
            {
                return Err(self.invalid(
                    format!("providers.{name}.background_compact_at_tokens"),
                    "must not be above compact_at_tokens",
                ));
            }
        }
        for (i, sec) in f.secrets.iter().enumerate() {
            let key = format!("secrets[{i}]");
            if !botfleet_actors::valid_secret_name(&sec.name) {
                return Err(self.invalid(
                    format!("{key}.name"),
                    format!("{:?} is not a secret name; use an environment-variable name such as GITHUB_TOKEN", sec.name),
                ));
            }
            if sec.value.is_some() == sec.value_env.is_some() {
                return Err(self.invalid(
                    format!("{key}.value"),
                    "give exactly one of `value` or `value_env`",
                ));
            }
        }
        let mut seen_bots = Vec::new();
        for (i, b) in f.bots.iter().enumerate() {
            let key = format!("bots[{i}]");
            if let Err(e) = botfleet_memory::BotId::new(b.id.as_str()) {
                return Err(self.invalid(format!("{key}.id"), e.to_string()));
            }
            if seen_bots.contains(&b.id) {
                return Err(self.invalid(
                    format!("{key}.id"),
                    format!("bot {:?} is defined twice", b.id),
                ));
            }
            seen_bots.push(b.id.clone());
            if b.name.trim().is_empty() {
                return Err(self.invalid(format!("{key}.name"), "must not be empty"));
            }
            for (j, name) in b.secrets.iter().enumerate() {
                if !botfleet_actors::valid_secret_name(name) {
                    return Err(self.invalid(
                        format!("{key}.secrets[{j}]"),
                        format!("{name:?} is not a secret name; use an environment-variable name such as GITHUB_TOKEN"),
                    ));
                }
            }
            if b.daily_token_budget == Some(0) {
                return Err(self.invalid(
                    format!("{key}.daily_token_budget"),
                    "must be at least 1 (leave it out for no budget)",
                ));
            }
            if !f.providers.contains_key(&b.provider) {
                return Err(self.invalid(
                    format!("{key}.provider"),
                    format!(
                        "provider {:?} is not defined; defined: {}",
                        b.provider,
                        self.provider_names()
                    ),
                ));
            }
            if !f.users.iter().any(|u| u.id == b.owner) {
                return Err(self.invalid(
                    format!("{key}.owner"),
                    format!("user {:?} is not defined under [[users]]", b.owner),
                ));
            }
            self.validate_routines_and_hooks(&key, b)?;
            for (j, p) in b.projects.iter().enumerate() {
                if let Err(e) = botfleet_memory::ProjectId::new(p.as_str()) {
                    return Err(self.invalid(format!("{key}.projects[{j}]"), e.to_string()));
                }
                if b.projects[..j].contains(p) {
                    return Err(self.invalid(
                        format!("{key}.projects[{j}]"),
                        format!("project {p:?} is listed twice"),
                    ));
                }
            }
            let known = botfleet_actors::tools::ToolRegistry::builtin();
            for (j, t) in b.tools.iter().enumerate() {
                if !known.contains(t) {
                    return Err(self.invalid(
                        format!("{key}.tools[{j}]"),
                        format!(
                            "unknown tool {t:?}; available: {}",
                            known.names().join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The context settings of each provider.
    pub fn context_settings(
        &self,
    ) -> std::collections::HashMap<String, botfleet_actors::ContextSettings> {
        self.file
            .providers
            .iter()
            .map(|(name, p)| {
                let (encoding, compact, background) = match p {
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
                    } => (encoding, compact_at_tokens, background_compact_at_tokens),
                };
                let mut c = botfleet_actors::ContextSettings::default();
                if let Some(e) = encoding
                    .as_deref()
                    .and_then(botfleet_memory::Encoding::parse)
                {
                    c.encoding = e;
                }
                if let Some(n) = compact {
                    c.compact_at_tokens = *n;
                    c.background_compact_at_tokens = n * 4 / 5;
                }
                if let Some(n) = background {
                    c.background_compact_at_tokens = *n;
                }
                (name.clone(), c)
            })
            .collect()
    }

    fn provider_names(&self) -> String {
        if self.file.providers.is_empty() {
            return "(none)".into();
        }
        self.file
            .providers
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Resolves a path from the file against its directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        match &self.base_dir {
            Some(base) if p.is_relative() => base.join(p),
            _ => p.to_path_buf(),
        }
    }
}

#[path = "config_triggers.rs"]
mod triggers;
pub use triggers::HookConfig;
pub use triggers::MIN_HOOK_SECRET;
pub use triggers::RoutineConfig;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
