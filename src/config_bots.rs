//! Checks of `[[secrets]]` and `[[bots]]`, and that the fleet has someone
//! to sign in and something to talk to. `impl LoadedFleet`, split from
//! `config_load.rs`.

use std::collections::HashMap;
use std::collections::HashSet;

use botfleet_actors::group::mentions::EVERYONE;
use botfleet_actors::group::mentions::MemberName;
use botfleet_actors::group::mentions::NameIndex;

use super::BotConfig;
use super::ConfigError;
use super::LoadedFleet;

/// Longest secret value, as `PUT /v1/secrets/{name}` allows
/// (`src/api/secrets.rs`).
pub(super) const MAX_SECRET_BYTES: usize = 16 * 1024;

/// The tool every bot needs: the only way it speaks (a reply to a person,
/// a post in a room, a routine's report: DESIGN.md §3-4).
const SEND_MESSAGE: &str = "SendMessage";

/// A bot and its place in `[[bots]]`.
type Listed<'a> = (usize, &'a BotConfig);

/// The bots checked so far, indexed by the words they answer to, so that
/// each new bot is compared only with the bots that share one (checking
/// every pair took minutes for a few thousand bots of one owner).
#[derive(Default)]
struct Addressable<'a> {
    /// Every bot: a `shareable` one meets them all.
    all: NameIndex<Listed<'a>>,
    /// The `shareable` bots: they meet every other bot.
    shareable: NameIndex<Listed<'a>>,
    /// Each owner's bots.
    by_owner: HashMap<&'a str, NameIndex<Listed<'a>>>,
}

impl LoadedFleet {
    /// Checks `[[secrets]]`: names, each once, exactly one of `value` or
    /// `value_env`, and an inline value the API would take too.
    pub(super) fn validate_secrets(&self) -> Result<(), ConfigError> {
        let f = &self.file;
        for (i, sec) in f.secrets.iter().enumerate() {
            let key = format!("secrets[{i}]");
            if let Some(problem) = botfleet_actors::secret_name_problem(&sec.name) {
                return Err(self.invalid(format!("{key}.name"), problem));
            }
            // `[[secrets]]` are not scoped: one name, one value for every bot listing it
            if f.secrets[..i].iter().any(|o| o.name == sec.name) {
                return Err(self.invalid(
                    format!("{key}.name"),
                    format!("secret {:?} is defined twice", sec.name),
                ));
            }
            if sec.value.is_some() == sec.value_env.is_some() {
                return Err(self.invalid(
                    format!("{key}.value"),
                    "give exactly one of `value` or `value_env`",
                ));
            }
            if let Some(problem) = sec.value.as_deref().and_then(secret_value_problem) {
                return Err(self.invalid(format!("{key}.value"), problem));
            }
        }
        Ok(())
    }

    /// Checks that the fleet has users and bots, then `[[bots]]`: a file
    /// with no `[[users]]` is told so, not that its first bot's owner is
    /// undefined (QA).
    pub(super) fn validate_bots(&self) -> Result<(), ConfigError> {
        self.validate_not_empty()?;
        let f = &self.file;
        let mut seen_bots = HashSet::new();
        // each bot's id in ASCII lowercase → where it was first listed
        let mut folded_ids: HashMap<String, usize> = HashMap::new();
        let mut addressable = Addressable::default();
        let users: HashSet<&str> = f.users.iter().map(|u| u.id.as_str()).collect();
        for (i, b) in f.bots.iter().enumerate() {
            let key = format!("bots[{i}]");
            let valid = botfleet_memory::BotId::new(b.id.as_str()).map(|_| ());
            self.unique_id(&key, "bot", &b.id, valid, &mut seen_bots)?;
            if botfleet_actors::tools::subagent_shaped(&b.id) {
                return Err(self.invalid(
                    format!("{key}.id"),
                    format!(
                        "{:?} has the form of a subagent's id (`<bot>.sub-<hex digits>`), which \
                         the host gives the subagents a bot's Task starts: the bot would read as \
                         one of them, or take a subagent's id; choose another id, without `.sub-`",
                        b.id
                    ),
                ));
            }
            // mentions (`@b1`) ignore case: two such ids would both be woken
            if let Some(&j) = folded_ids.get(&b.id.to_ascii_lowercase()) {
                return Err(self.invalid(
                    format!("{key}.id"),
                    format!(
                        "bot {:?} differs from bot {:?} (bots[{j}].id) only in case; mentions ignore case, so @{} would wake both: rename one",
                        b.id, f.bots[j].id, b.id
                    ),
                ));
            }
            folded_ids.insert(b.id.to_ascii_lowercase(), i);
            if b.name.trim().is_empty() {
                return Err(self.invalid(format!("{key}.name"), "must not be empty"));
            }
            if let Some(problem) = botfleet_memory::display_name_problem(&b.name) {
                return Err(self.invalid(format!("{key}.name"), problem));
            }
            self.validate_not_a_user(&key, b)?;
            self.validate_name_apart(&key, (i, b), &mut addressable)?;
            self.validate_bot_secrets(&key, b)?;
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
            if !users.contains(b.owner.as_str()) {
                // every such owner with every bot of theirs, and the ways
                // out (QA: only the first bot of the first was named, and
                // no fix)
                let mut missing: Vec<(&str, Vec<&str>)> = Vec::new();
                for o in &self.file.bots {
                    if users.contains(o.owner.as_str()) {
                        continue;
                    }
                    match missing.iter_mut().find(|(u, _)| *u == o.owner) {
                        Some((_, bots)) => bots.push(o.id.as_str()),
                        None => missing.push((o.owner.as_str(), vec![o.id.as_str()])),
                    }
                }
                let bots_of = |bots: &[&str]| {
                    if bots.len() == 1 {
                        (format!("bot {}", bots[0]), "it")
                    } else {
                        (format!("bots {}", bots.join(", ")), "them")
                    }
                };
                let message = match missing.as_slice() {
                    [(user, bots)] => {
                        let (bots, them) = bots_of(bots);
                        format!(
                            "user {user:?} is not defined under [[users]]: add a [[users]] entry \
                             for them, or give their {bots} another `owner`, or remove {them}"
                        )
                    }
                    _ => {
                        let each: Vec<String> = missing
                            .iter()
                            .map(|(user, bots)| format!("{user:?} (their {})", bots_of(bots).0))
                            .collect();
                        format!(
                            "users {} are not defined under [[users]]: add a [[users]] entry for \
                             each, or give their bots another `owner`, or remove them",
                            each.join(", ")
                        )
                    }
                };
                return Err(self.invalid(format!("{key}.owner"), message));
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
            self.validate_tools(&key, b)?;
        }
        Ok(())
    }

    /// `{key}.name`: no earlier bot that a person can address along with
    /// bot `b` (the same owner's, or either one `shareable`) answers to the
    /// same word (its id or name, ignoring case): a room's `@Name` would
    /// wake both, and SendToAgent could not tell them apart. Then adds `b`
    /// to `seen`, the bots checked before it.
    fn validate_name_apart<'a>(
        &self,
        key: &str,
        listed: Listed<'a>,
        seen: &mut Addressable<'a>,
    ) -> Result<(), ConfigError> {
        let (_, b) = listed;
        let me = MemberName {
            id: b.id.clone(),
            name: b.name.trim().to_owned(),
        };
        if me.answers_to(EVERYONE) {
            let field = if botfleet_memory::name_key(&me.id) == EVERYONE {
                "id"
            } else {
                "name"
            };
            return Err(self.invalid(
                format!("{key}.{field}"),
                format!(
                    "bot {:?} (name {:?}) answers to @{EVERYONE}, which addresses every member \
                     of a room, so it could never be mentioned alone; give it another {field}",
                    b.id, b.name
                ),
            ));
        }
        // the earliest clash among the bots `b` meets, as a pass over
        // every earlier bot in order would find it
        let clash = if b.shareable {
            seen.all.first_clash(&me)
        } else {
            let own = seen
                .by_owner
                .get(b.owner.as_str())
                .and_then(|index| index.first_clash(&me));
            let shared = seen.shareable.first_clash(&me);
            match (own, shared) {
                (Some(o), Some(s)) => Some(if o.0.0 <= s.0.0 { o } else { s }),
                (o, s) => o.or(s),
            }
        };
        if let Some((&(j, o), _, token)) = clash {
            return Err(self.invalid(
                format!("{key}.name"),
                format!(
                    "bot {:?} (name {:?}) and bot {:?} (bots[{j}], name {:?}) both answer to \
                     {token:?} (a bot's id or name, ignoring case): @{token} would wake both \
                     and SendToAgent could not tell them apart; give one of them another name",
                    b.id, b.name, o.id, o.name
                ),
            ));
        }
        if b.shareable {
            seen.shareable.insert(listed, me.clone());
        }
        seen.by_owner
            .entry(b.owner.as_str())
            .or_default()
            .insert(listed, me.clone());
        seen.all.insert(listed, me);
        Ok(())
    }

    /// `{key}.name`: not a user's id (compared as names are, ignoring
    /// case and spaces): in a room a bot named `alice` would post under
    /// the name people know alice by.
    fn validate_not_a_user(&self, key: &str, b: &BotConfig) -> Result<(), ConfigError> {
        let name = botfleet_memory::name_key(&b.name);
        let Some(user) = self
            .file
            .users
            .iter()
            .find(|u| botfleet_memory::name_key(u.id.as_str()) == name)
        else {
            return Ok(());
        };
        Err(self.invalid(
            format!("{key}.name"),
            format!(
                "bot {:?} is named {:?}, which reads as the user {:?}: in a room its messages \
                 could pass for that person's; give the bot another name",
                b.id, b.name, user.id
            ),
        ))
    }

    /// `{key}.secrets`: names, each once.
    fn validate_bot_secrets(&self, key: &str, b: &BotConfig) -> Result<(), ConfigError> {
        for (j, name) in b.secrets.iter().enumerate() {
            if let Some(problem) = botfleet_actors::secret_name_problem(name) {
                return Err(self.invalid(format!("{key}.secrets[{j}]"), problem));
            }
            if let Some(first) = b.secrets[..j].iter().position(|o| o == name) {
                return Err(self.invalid(
                    format!("{key}.secrets[{j}]"),
                    format!("secret {name:?} is listed twice (also {key}.secrets[{first}])"),
                ));
            }
        }
        Ok(())
    }

    /// `{key}.tools`: known tools, each once, SendMessage among them.
    fn validate_tools(&self, key: &str, b: &BotConfig) -> Result<(), ConfigError> {
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
            if let Some(first) = b.tools[..j].iter().position(|o| o == t) {
                return Err(self.invalid(
                    format!("{key}.tools[{j}]"),
                    format!("tool {t:?} is listed twice (also {key}.tools[{first}])"),
                ));
            }
        }
        // without it every message to the bot would end `undelivered`
        // after a reminder to use a tool it does not have
        if !b.tools.iter().any(|t| t == SEND_MESSAGE) {
            return Err(self.invalid(
                format!("{key}.tools"),
                format!(
                    "bot {:?} has no {SEND_MESSAGE}: it could not speak to anyone (reply to a \
                     person, post in a room, report a routine); add \"{SEND_MESSAGE}\" to its tools",
                    b.id
                ),
            ));
        }
        Ok(())
    }

    /// A fleet with no users or no bots: a host nobody could use.
    fn validate_not_empty(&self) -> Result<(), ConfigError> {
        let f = &self.file;
        if f.users.is_empty() {
            return Err(self.invalid(
                "users",
                "no [[users]] are defined: nobody could sign in; add one with an `id` and a \
                 `token` (or `token_env`)",
            ));
        }
        if f.bots.is_empty() {
            return Err(self.invalid(
                "bots",
                "no [[bots]] are defined: there would be nothing to talk to; add one with \
                 `id`, `name`, `owner`, `provider` and `tools = [\"SendMessage\"]`",
            ));
        }
        Ok(())
    }
}

/// What is wrong with a secret's value, if anything: the rules of
/// `PUT /v1/secrets/{name}`.
pub(super) fn secret_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        Some(format!(
            "must not be empty (a secret is 1 to {MAX_SECRET_BYTES} bytes)"
        ))
    } else if value.len() > MAX_SECRET_BYTES {
        Some(format!(
            "is {} bytes but a secret is at most {MAX_SECRET_BYTES} bytes",
            value.len()
        ))
    } else if value.trim().is_empty() {
        Some("is only whitespace: give the secret's value itself, as the API asks".into())
    } else if value.contains('\0') {
        Some(
            "must not contain a NUL byte: a secret becomes an environment variable of the \
             commands that use it"
                .into(),
        )
    } else {
        None
    }
}
