//! Secrets for tools, by reference. A bot lists the secret *names* it may
//! use (`secrets = [...]` in fleet.toml); the values come from the fleet
//! file (`[[secrets]]`) or from the bot's person through the API — never
//! through a model. Tools get the values (Shell as environment variables),
//! and everything a tool returns is scrubbed of them before it enters a
//! model request, the transcript or a log.
//!
//! Every tool result of every bot is also scrubbed of the host's own
//! credentials, which no bot is given but a command could read where the
//! host keeps them (its environment, `/proc/<host pid>/environ`): the
//! fleet file's secrets (a bot not listing one is not given it either),
//! the providers' API keys, the users' tokens and the webhooks' signing
//! secrets ([`Vault::with_host_secrets`]).

use std::collections::HashMap;

use botfleet_memory::BotRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreError;

use crate::safety::Redactor;
use crate::safety::Secret;

/// Whether `name` is a usable secret name ([`secret_name_problem`] finds
/// nothing wrong with it).
pub fn valid_secret_name(name: &str) -> bool {
    secret_name_problem(name).is_none()
}

/// Environment variables that steer how the shell, the dynamic loader or
/// an interpreter runs every command: a secret reaches Shell as an
/// environment variable of that name, so one named `PATH` would break
/// every command and one named `LD_PRELOAD` would load code into commands
/// that passed review.
const RESERVED_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "SHELL",
    "USER",
    "LOGNAME",
    "PWD",
    "OLDPWD",
    "TMPDIR",
    "IFS",
    "ENV",
    "BASH_ENV",
    "CDPATH",
    "SHELLOPTS",
    "BASHOPTS",
    "GLOBIGNORE",
    "PS4",
    "PROMPT_COMMAND",
    "POSIXLY_CORRECT",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "HOSTALIASES",
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYLIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
];

/// Prefixes of reserved names ([`RESERVED_NAMES`]): the dynamic loader's
/// (`LD_PRELOAD`, `LD_LIBRARY_PATH`, macOS's `DYLD_*`), the C library's,
/// the locale's and bash's exported functions.
const RESERVED_PREFIXES: &[&str] = &["LD_", "DYLD_", "GLIBC_", "MALLOC_", "LC_", "BASH_FUNC_"];

/// What is wrong with `name` as a secret name, if anything: it must be an
/// environment-variable name (`A-Z`, `0-9`, `_`, not starting with a
/// digit, at most 64 characters) and not one that steers how commands run
/// (`PATH`, `HOME`, `LD_*`, …). The message names the rule.
pub fn secret_name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let shaped = matches!(chars.next(), Some(c) if c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64;
    if !shaped {
        return Some(format!(
            "{name:?} is not a secret name; use an environment-variable name such as \
             GITHUB_TOKEN (A-Z, 0-9 and _, not starting with a digit, at most 64 characters)"
        ));
    }
    let reserved =
        RESERVED_NAMES.contains(&name) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p));
    reserved.then(|| {
        format!(
            "{name:?} is reserved: commands get each secret as an environment variable of its \
             name, and {name} steers how the shell or the system runs every command; use a \
             name of your own such as MY_{name}"
        )
    })
}

/// Host credentials shorter than this are not scrubbed from other bots'
/// results (a value of a few characters would redact innocent text
/// everywhere, and is no secret anyway).
const HOST_SECRET_MIN_CHARS: usize = 8;

/// Secrets declared in the fleet file, and the host's credentials that
/// every tool result is scrubbed of.
#[derive(Default)]
pub struct Vault {
    config: HashMap<String, Secret>,
    /// Values scrubbed from every bot's tool results, given to none.
    host: Vec<Secret>,
    /// [`Vault::host_redactor`], built on first use.
    host_redactor: std::sync::OnceLock<Redactor>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault")
            .field("names", &self.config.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The secrets one bot may use in one turn.
#[derive(Default)]
pub struct BotSecrets {
    /// `(name, value)` pairs.
    pub values: Vec<(String, Secret)>,
    /// Scrubs the values out of text.
    pub redactor: Redactor,
}

impl std::fmt::Debug for BotSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.values.iter().map(|(n, _)| n))
            .finish()
    }
}

impl Vault {
    /// A vault with the fleet file's secrets.
    pub fn new(config: impl IntoIterator<Item = (String, Secret)>) -> Self {
        Self {
            config: config.into_iter().collect(),
            host: Vec::new(),
            host_redactor: std::sync::OnceLock::new(),
        }
    }

    /// Adds the host's credentials (API keys, user tokens, webhook secrets)
    /// to what every tool result is scrubbed of. The fleet file's secrets
    /// are scrubbed from every bot's results without being listed here.
    #[must_use]
    pub fn with_host_secrets(mut self, values: impl IntoIterator<Item = Secret>) -> Self {
        self.host.extend(values);
        self.host_redactor = std::sync::OnceLock::new();
        self
    }

    /// Scrubs the values every bot's results are scrubbed of (the fleet
    /// file's secrets and the host's credentials), but no person's own: for
    /// the text of model calls that run for no one turn (compaction, fact
    /// extraction), whose errors reach the log and the transcript.
    pub fn host_redactor(&self) -> &Redactor {
        self.host_redactor
            .get_or_init(|| Redactor::new(self.host_values()))
    }

    /// The fleet file's secrets and the host's credentials long enough to
    /// scrub ([`HOST_SECRET_MIN_CHARS`]).
    fn host_values(&self) -> impl Iterator<Item = &str> {
        self.config
            .values()
            .chain(&self.host)
            .map(Secret::expose)
            .filter(|v| v.chars().count() >= HOST_SECRET_MIN_CHARS)
    }

    /// The secret names a bot may use (from its settings).
    pub fn names_of(bot: &BotRecord) -> Vec<String> {
        bot.settings
            .get("secrets")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The values of the bot's secrets: the person's own value wins over the
    /// fleet file's; a name with no value is left out.
    /// The redactor also scrubs the host's credentials (module docs).
    pub async fn for_bot(&self, store: &Store, bot: &BotRecord) -> Result<BotSecrets, StoreError> {
        let names = Self::names_of(bot);
        let supplied = if names.is_empty() {
            Vec::new()
        } else {
            store.user_secrets(&bot.owner).await?
        };
        let mut values = Vec::new();
        for name in names {
            let own = supplied
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, v, _)| Secret::new(v.expose()));
            let value = own.or_else(|| self.config.get(&name).map(|s| Secret::new(s.expose())));
            if let Some(v) = value {
                values.push((name, v));
            }
        }
        let redactor = Redactor::new(
            values
                .iter()
                .map(|(_, v)| v.expose())
                .chain(self.host_values()),
        );
        Ok(BotSecrets { values, redactor })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_look_like_env_vars() {
        assert!(valid_secret_name("GITHUB_TOKEN"));
        assert!(valid_secret_name("_X1"));
        for bad in ["", "github", "1X", "A-B", "A B"] {
            assert!(!valid_secret_name(bad), "{bad}");
        }
    }

    /// A secret becomes an environment variable of the commands that use
    /// it: one named after a variable that steers how they run is refused.
    #[test]
    fn names_that_steer_commands_are_reserved() {
        for name in [
            "PATH",
            "HOME",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "SHELL",
            "IFS",
            "PWD",
            "USER",
            "TMPDIR",
            "BASH_ENV",
            "ENV",
            "LC_ALL",
        ] {
            let problem = secret_name_problem(name).unwrap_or_default();
            assert!(problem.contains("reserved"), "{name}: {problem:?}");
            assert!(!valid_secret_name(name), "{name}");
        }
        // only whole names and the listed prefixes
        for fine in [
            "PATHS",
            "MY_PATH",
            "HOME_URL",
            "LDAP_TOKEN",
            "ENVIRONMENT",
            "USER_TOKEN",
        ] {
            assert_eq!(secret_name_problem(fine), None, "{fine}");
        }
        assert!(
            secret_name_problem("a-b")
                .unwrap_or_default()
                .contains("not a secret name")
        );
    }
}
