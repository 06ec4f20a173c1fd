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
//! A bot's own person's values are read into that set on its first turn
//! in the host's life, whether it lists a secret or not: another bot of
//! the person may have written one into the workspace they share in an
//! earlier life of the host.
//!
//! Scrubbing a value from a bot that cannot see it lets that bot test
//! guesses of it: it prints candidates, and the one that comes back
//! `[redacted]` is someone's secret. So where the host's Shell commands
//! run in the sandbox and see only their own processes
//! ([`Vault::with_isolated_commands`]: Landlock keeps them from the fleet
//! file, the data directory and the host's environment, and the private
//! `/proc` from other commands' arguments), a bot's results are scrubbed
//! only of the values its owner's bots can reach: its own secrets, the
//! fleet file's secrets any of its owner's bots lists, and its owner's
//! stored ones (all shared in the owner's workspace, where one bot may
//! write what another reads). The host's
//! credentials and other people's secrets, which no command can read
//! there, are not; a model server's error texts, which may quote anything
//! the host sent it, are still cleaned of the host's credentials
//! ([`Redactor::also_hiding_from_model_errors`]). Elsewhere every value above is scrubbed from every bot, and
//! the guessing stays possible (docs/security.md).

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;

use botfleet_memory::BotRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::UserId;
use parking_lot::Mutex;

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

/// A bot's own secrets shorter than this are not scrubbed from its
/// results either: a value of one to three characters (`e`) is in every
/// text, and scrubbed it blanked the host's own words in them, approval
/// ids and refusals included (QA, 2026-12-06: "not run: this action
/// n[redacted]ds alic[redacted]'s approval"). No guess is needed to find
/// such a value.
const OWN_SECRET_MIN_CHARS: usize = 4;

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
    /// The people whose secrets `people` holds as read once in this life
    /// of the host (module docs).
    people_read: Mutex<HashSet<UserId>>,
    /// Per person, the fleet file's secret names their bots list, as read
    /// at a generation of the bots table ([`Store::bots_generation`]).
    listed: Mutex<HashMap<UserId, (u64, Listed)>>,
}

/// Secret names listed by one person's bots.
type Listed = Arc<BTreeSet<String>>;

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
            people_read: Mutex::new(HashSet::new()),
            listed: Mutex::new(HashMap::new()),
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
            .filter(|v| v.trim().chars().count() >= HOST_SECRET_MIN_CHARS)
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
        let first = !self.people_read.lock().contains(&bot.owner);
        let supplied = if names.is_empty() && !first {
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
                    .filter(|v| v.trim().chars().count() >= HOST_SECRET_MIN_CHARS),
            );
            self.people_read.lock().insert(bot.owner.clone());
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
        let given = values
            .iter()
            .map(|(_, v)| v.expose())
            .filter(|v| v.chars().count() >= OWN_SECRET_MIN_CHARS);
        let redactor = if self.isolated {
            // no command of this bot can read the others (module docs);
            // its owner's other bots' fleet-file secrets it can, where
            // they wrote them
            let listed = self.listed_by_owner(store, &bot.owner).await?;
            let siblings = listed
                .iter()
                .filter_map(|name| self.config.get(name))
                .map(Secret::expose)
                .filter(|v| v.trim().chars().count() >= HOST_SECRET_MIN_CHARS);
            Redactor::new(given.chain(siblings))
                .also_scrubbing_of(&self.people, bot.owner.as_str())
                .also_hiding_from_model_errors(self.host_values())
        } else {
            Redactor::new(given.chain(self.host_values())).also_scrubbing(&self.people)
        };
        Ok(BotSecrets { values, redactor })
    }

    /// The fleet file's secret names that `owner`'s bots (not their
    /// subagents, which list none their parent does not) list, read again
    /// only after a bot was written. None read while the fleet file has
    /// no secrets.
    async fn listed_by_owner(&self, store: &Store, owner: &UserId) -> Result<Listed, StoreError> {
        if self.config.is_empty() {
            return Ok(Arc::default());
        }
        // taken before the read: a bot written during it makes the
        // result stale at once
        let generation = store.bots_generation();
        if let Some((at, names)) = self.listed.lock().get(owner)
            && *at == generation
        {
            return Ok(Arc::clone(names));
        }
        let names: Listed = Arc::new(
            store
                .main_bots_of(owner)
                .await?
                .iter()
                .flat_map(Self::names_of)
                .collect(),
        );
        self.listed
            .lock()
            .insert(owner.clone(), (generation, Arc::clone(&names)));
        Ok(names)
    }
}

#[cfg(test)]
#[path = "vault_tests.rs"]
mod tests;
