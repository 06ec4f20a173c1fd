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
//!
//! And of every person's secrets that the vault has read for one of their
//! bots: a person's value reaches only their own bots' commands, but a
//! command that puts it in an argument shows it to every other command on
//! the machine (`/proc/<pid>/cmdline`, `ps`). [`Vault::for_bot`] puts the
//! values of the bot's person in that fleet-wide set before it hands any
//! of them out, and takes out those the person deleted (values under 8
//! characters excepted); every redactor it makes scrubs the
//! set as it stands at each scrub, so a turn that began before a value
//! was added scrubs it too ([`Redactor::shared_set`]).
//!
//! Scrubbing a value from a bot that cannot see it lets that bot test
//! guesses of it: it prints candidates, and the one that comes back
//! `[redacted]` is someone's secret. So where the host's Shell commands
//! run in the sandbox and see only their own processes
//! ([`Vault::with_isolated_commands`]: Landlock keeps them from the fleet
//! file, the data directory and the host's environment, and the private
//! `/proc` from other commands' arguments), a bot's results are scrubbed
//! only of the values its owner's bots can reach: its own secrets and its
//! owner's stored ones (shared in the owner's workspace). The host's
//! credentials and other people's secrets, which no command can read
//! there, are not; a model server's error texts, which may quote anything
//! the host sent it, are still cleaned of the host's credentials
//! ([`Redactor::also_hiding_from_model_errors`]). Elsewhere every value above is scrubbed from every bot, and
//! the guessing stays possible (docs/security.md).

use std::collections::HashMap;

use botfleet_memory::BotRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreError;

use crate::safety::Redactor;
use crate::safety::Secret;

#[path = "vault_names.rs"]
mod names;

pub use names::secret_name_problem;
pub use names::secret_name_shape_problem;
pub use names::valid_secret_name;

/// Host credentials and people's secrets shorter than this are not
/// scrubbed from other bots' results (a value of a few characters would
/// redact innocent text everywhere, and is no secret anyway).
const HOST_SECRET_MIN_CHARS: usize = 8;

/// Secrets declared in the fleet file, and the host's credentials and
/// people's secrets that every tool result is scrubbed of.
pub struct Vault {
    config: HashMap<String, Secret>,
    /// Values scrubbed from every bot's tool results, given to none.
    host: Vec<Secret>,
    /// The values of every person's secrets read for one of their bots,
    /// scrubbed from every bot's tool results (module docs): a
    /// [`Redactor::shared_set`].
    people: Redactor,
    /// Held from a read of a person's secrets until `people` has it: a
    /// read made before a value was stored never replaces, in the set,
    /// one made after (whose turn holds the value).
    people_order: tokio::sync::Mutex<()>,
    /// [`Vault::host_redactor`], built on first use.
    host_redactor: std::sync::OnceLock<Redactor>,
    /// Whether commands can read neither the host's credentials nor other
    /// commands' arguments ([`Vault::with_isolated_commands`]).
    isolated: bool,
}

impl Default for Vault {
    fn default() -> Self {
        Self::new([])
    }
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
            people: Redactor::shared_set(),
            people_order: tokio::sync::Mutex::new(()),
            host_redactor: std::sync::OnceLock::new(),
            isolated: false,
        }
    }

    /// Says whether the host's Shell commands are isolated: they run in
    /// the OS sandbox that hides the host's files and environment from
    /// them, and see only their own processes (the launcher's probe at
    /// start). Then each bot's results are scrubbed only of what its
    /// owner's bots can reach (module docs); by default, of everything.
    #[must_use]
    pub fn with_isolated_commands(mut self, isolated: bool) -> Self {
        self.isolated = isolated;
        self
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
    /// file's secrets, the host's credentials and the people's secrets
    /// read so far), but none that only one bot's are: for
    /// the text of model calls that run for no one turn (compaction, fact
    /// extraction), whose errors reach the log and the transcript.
    pub fn host_redactor(&self) -> &Redactor {
        self.host_redactor
            .get_or_init(|| Redactor::new(self.host_values()).also_scrubbing(&self.people))
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
    /// The redactor also scrubs the host's credentials and every person's
    /// secrets; the person's, as just read, are in that set before this
    /// returns (module docs).
    pub async fn for_bot(&self, store: &Store, bot: &BotRecord) -> Result<BotSecrets, StoreError> {
        let names = Self::names_of(bot);
        let supplied = if names.is_empty() {
            Vec::new()
        } else {
            let _order = self.people_order.lock().await;
            let supplied = store.user_secrets(&bot.owner).await?;
            // before any is handed out: from now on every bot's output is
            // scrubbed of them, whoever's command shows them
            self.people.set_shared(
                bot.owner.as_str(),
                supplied
                    .iter()
                    .map(|(_, v, _)| v.expose())
                    .filter(|v| v.chars().count() >= HOST_SECRET_MIN_CHARS),
            );
            supplied
        };
        let mut values = Vec::new();
        for name in names {
            // a name reserved since the secret was stored (or the bot's
            // list written): never injected, however it got here — it
            // would change what the bot's reviewed commands run or trust
            if let Some(problem) = secret_name_problem(&name) {
                tracing::warn!(
                    bot = %bot.id,
                    secret = %name,
                    %problem,
                    "secret not given to the bot's commands: its name is reserved; \
                     store it under another name and list that in fleet.toml"
                );
                continue;
            }
            let own = supplied
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, v, _)| Secret::new(v.expose()));
            let value = own.or_else(|| self.config.get(&name).map(|s| Secret::new(s.expose())));
            if let Some(v) = value {
                values.push((name, v));
            }
        }
        let given = values.iter().map(|(_, v)| v.expose());
        let redactor = if self.isolated {
            // no command of this bot can read the others (module docs)
            Redactor::new(given)
                .also_scrubbing_of(&self.people, bot.owner.as_str())
                .also_hiding_from_model_errors(self.host_values())
        } else {
            Redactor::new(given.chain(self.host_values())).also_scrubbing(&self.people)
        };
        Ok(BotSecrets { values, redactor })
    }
}

#[cfg(test)]
#[path = "vault_tests.rs"]
mod tests;
