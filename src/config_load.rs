//! Reading and checking a fleet file: parse (unknown keys are errors),
//! resolve tokens and paths, and validate every cross-reference, each
//! error naming the file, the key and what is expected. `impl LoadedFleet`,
//! split from `config.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;
use keys::parse_detail;

#[path = "config_hidden.rs"]
mod hidden;

/// Longest `timeout_s` and `call_timeout_s` of a provider (a day). A
/// larger one overflowed the call's deadline and crashed every turn.
const MAX_MODEL_TIMEOUT_S: u64 = 86_400;

/// The most `compact_at_tokens` (and its background twin) may be: ten
/// million tokens, past any model's context window. (A larger one passed
/// the checks and overflowed the start's arithmetic: QA.)
const MAX_COMPACT_AT_TOKENS: u64 = 10_000_000;
/// Fewest `compact_at_tokens` and `background_compact_at_tokens` of a
/// provider: lower would compact the context after every turn.
pub(super) const MIN_COMPACT_AT_TOKENS: u64 = 1000;
/// Fewest `max_response_bytes` of a provider.
pub(super) const MIN_RESPONSE_BYTES: u64 = 1024;

impl LoadedFleet {
    /// Reads and validates a fleet file.
    pub fn from_path(path: &Path) -> Result<Self, ConfigError> {
        Self::from_path_with(path, &Overrides::default())
    }

    /// Reads a fleet file, replaces what `overrides` gives, and validates it.
    pub fn from_path_with(path: &Path, overrides: &Overrides) -> Result<Self, ConfigError> {
        let bytes = std::fs::read(path).map_err(|cause| ConfigError::Read {
            path: path.display().to_string(),
            cause,
        })?;
        let text = utf8_text(bytes).map_err(|detail| ConfigError::Parse {
            path: path.display().to_string(),
            detail,
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse_with(&text, &path.display().to_string(), Some(base), overrides)
    }

    /// The embedded example fleet.
    pub fn embedded() -> Result<Self, ConfigError> {
        Self::embedded_with(&Overrides::default())
    }

    /// The embedded example fleet, with what `overrides` gives replaced.
    pub fn embedded_with(overrides: &Overrides) -> Result<Self, ConfigError> {
        Self::parse_with(EMBEDDED_FLEET, "<embedded example fleet>", None, overrides)
    }

    /// Parses and validates fleet text.
    pub fn parse(text: &str, source: &str, base_dir: Option<PathBuf>) -> Result<Self, ConfigError> {
        Self::parse_with(text, source, base_dir, &Overrides::default())
    }

    /// Parses fleet text, replaces what `overrides` gives, and validates
    /// the result: a replaced key is not checked as the file wrote it.
    pub fn parse_with(
        text: &str,
        source: &str,
        base_dir: Option<PathBuf>,
        overrides: &Overrides,
    ) -> Result<Self, ConfigError> {
        if let Some((key, message)) = super::shape::shape_problem(text) {
            return Err(ConfigError::Invalid {
                path: source.to_owned(),
                key,
                message,
            });
        }
        let mut file: FleetFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: source.to_owned(),
            // never a token or secret of the line it quotes (config_hidden.rs)
            detail: hidden::hide_credentials(text, &e, parse_detail(text, &e)),
        })?;
        if let Some(listen) = &overrides.listen {
            file.host.listen.clone_from(listen);
        }
        if let Some(dir) = &overrides.data_dir {
            file.host.data_dir.clone_from(dir);
        }
        let loaded = Self {
            file,
            source: source.to_owned(),
            base_dir,
        };
        loaded.validate()?;
        Ok(loaded)
    }

    /// Checks `{key}.id`: `valid` (the id type's own check) and not defined
    /// before in `seen`, which it joins.
    pub(super) fn unique_id(
        &self,
        key: &str,
        what: &str,
        id: &str,
        valid: Result<(), botfleet_memory::IdError>,
        seen: &mut std::collections::HashSet<String>,
    ) -> Result<(), ConfigError> {
        if let Err(e) = valid {
            return Err(self.invalid(format!("{key}.id"), e.to_string()));
        }
        if !seen.insert(id.to_owned()) {
            return Err(self.invalid(
                format!("{key}.id"),
                format!("{what} {id:?} is defined twice"),
            ));
        }
        Ok(())
    }

    pub(super) fn invalid(
        &self,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            path: self.source.clone(),
            key: key.into(),
            message: message.into(),
        }
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let f = &self.file;
        if let Err((key, message)) = f.review.validate(&f.providers) {
            return Err(self.invalid(key, message));
        }
        self.validate_host_and_runtime()?;
        let mut seen_users = std::collections::HashSet::new();
        for (i, u) in f.users.iter().enumerate() {
            let key = format!("users[{i}]");
            let valid = botfleet_memory::UserId::new(u.id.as_str()).map(|_| ());
            self.unique_id(&key, "user", &u.id, valid, &mut seen_users)?;
            if let Some(tz) = &u.timezone
                && let Err(problem) = botfleet_actors::FleetSettings::parse_timezone(tz)
            {
                return Err(self.invalid(format!("{key}.timezone"), problem));
            }
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
                (Some(t), None) => {
                    if let Some(problem) = token_problem(t) {
                        // the rule, never the value: said of "the token"
                        // (a bare "is too short" named nothing, QA)
                        return Err(
                            self.invalid(format!("{key}.token"), format!("the token {problem}"))
                        );
                    }
                    // `token_env` values are compared once resolved (`resolve_external`)
                    if let Some(other) = f.users[..i].iter().find(|o| o.token.as_ref() == Some(t)) {
                        return Err(
                            self.invalid(format!("{key}.token"), same_token(&u.id, &other.id))
                        );
                    }
                }
                // checked by the same rules once resolved (`resolve_external`)
                (None, Some(_)) => {}
            }
        }
        for (name, p) in &f.providers {
            let key = format!("providers.{name}");
            if !valid_provider_name(name) {
                return Err(self.invalid(
                    format!("providers.{name:?}"),
                    format!(
                        "{name:?} is not a provider name; use 1 to 64 of A-Z, a-z, 0-9, _ and -, \
                         starting with a letter or digit (e.g. \"main\")"
                    ),
                ));
            }
            match p {
                ProviderConfig::Openai {
                    base_url,
                    model,
                    api_key_env,
                    fallback,
                    timeout_s,
                    call_timeout_s,
                    max_response_bytes,
                    max_tokens_field,
                    headers,
                    headers_env,
                    ..
                } => {
                    for (header, value) in headers {
                        if let Some(problem) = provider::header_problem(header, value) {
                            return Err(self.invalid(format!("{key}.headers"), problem));
                        }
                    }
                    if let Some((a, b)) = provider::repeated_header(headers) {
                        return Err(self.invalid(
                            format!("{key}.headers"),
                            format!(
                                "headers {a:?} and {b:?} are one header (names ignore case); keep one"
                            ),
                        ));
                    }
                    if let Some(problem) = provider::headers_env_problem(headers, headers_env) {
                        return Err(self.invalid(format!("{key}.headers_env"), problem));
                    }
                    // each a variable's name, also while the provider runs
                    // on its fallback and the start reads none of them (a
                    // pasted credential passed until the key was set: QA)
                    for (header, var) in headers_env {
                        let field = format!("headers_env.{header:?}");
                        let names = provider::EnvKey {
                            field: &field,
                            holds: "a header's value",
                            example: "GATEWAY_KEY",
                        };
                        if let Err(problem) = provider::env_var_problem(&names, var) {
                            return Err(
                                self.invalid(format!("{key}.headers_env.\"{header}\""), problem)
                            );
                        }
                    }
                    // a space pasted around the URL: a leading one read as
                    // "not an http(s) URL", a trailing one was taken and
                    // shown in the banner (QA)
                    if base_url.trim() != base_url {
                        return Err(self.invalid(
                            format!("{key}.base_url"),
                            format!(
                                "{:?} starts or ends with whitespace; remove it",
                                without_userinfo(base_url)
                            ),
                        ));
                    }
                    // the scheme in any case, as URLs take it
                    let scheme = |s: &str| {
                        base_url
                            .get(..s.len())
                            .is_some_and(|p| p.eq_ignore_ascii_case(s))
                    };
                    if !(scheme("http://") || scheme("https://")) {
                        return Err(self.invalid(
                            format!("{key}.base_url"),
                            format!(
                                "{:?} is not an http(s) URL; expected e.g. \"http://127.0.0.1:8000/v1\"",
                                without_userinfo(base_url)
                            ),
                        ));
                    }
                    if let Some(problem) = provider::base_url_problem(&without_userinfo(base_url)) {
                        return Err(self.invalid(format!("{key}.base_url"), problem));
                    }
                    // what the provider itself would refuse (a fragment, a
                    // bad port or host), named with the file and key here
                    // rather than by the start after the file was accepted
                    if let Some(problem) = botfleet_actors::model::base_url_problem(base_url) {
                        return Err(self.invalid(format!("{key}.base_url"), problem));
                    }
                    if let Err(problem) = provider::model_problem(model) {
                        return Err(self.invalid(format!("{key}.model"), problem));
                    }
                    if let Some(field) = max_tokens_field
                        && let Err(problem) = botfleet_actors::model::MaxTokensField::parse(field)
                    {
                        return Err(
                            self.invalid(format!("{key}.max_tokens_field"), problem.to_string())
                        );
                    }
                    if let Some(name) = api_key_env
                        && let Err(problem) = provider::env_name_problem(name)
                    {
                        return Err(self.invalid(format!("{key}.api_key_env"), problem));
                    }
                    if timeout_s == &Some(0) {
                        return Err(self.invalid(format!("{key}.timeout_s"), "must be at least 1"));
                    }
                    for (name, value) in
                        [("timeout_s", timeout_s), ("call_timeout_s", call_timeout_s)]
                    {
                        if let Some(v) = value
                            && *v > MAX_MODEL_TIMEOUT_S
                        {
                            return Err(self.invalid(
                                format!("{key}.{name}"),
                                format!(
                                    "is {v} s but must be at most {MAX_MODEL_TIMEOUT_S} s (a day): no model call needs longer, and a stalled one would hold its turn that long"
                                ),
                            ));
                        }
                    }
                    if let Some(call) = call_timeout_s {
                        let silence = timeout_s.unwrap_or(
                            botfleet_actors::model::OpenAiOptions::DEFAULT_TIMEOUT.as_secs(),
                        );
                        if *call < silence.max(1) {
                            return Err(self.invalid(
                                format!("{key}.call_timeout_s"),
                                format!(
                                    "is {call} s but must be at least timeout_s ({silence} s): the whole call cannot be shorter than one silence it allows"
                                ),
                            ));
                        }
                    }
                    if let Some(bytes) = max_response_bytes
                        && *bytes < MIN_RESPONSE_BYTES
                    {
                        return Err(self.invalid(
                            format!("{key}.max_response_bytes"),
                            format!("is {bytes} but must be at least {MIN_RESPONSE_BYTES}"),
                        ));
                    }
                    if fallback.is_some() && api_key_env.is_none() {
                        // a fallback runs the bots when api_key_env's
                        // variable is unset: without one it never could
                        // (it passed without a word: QA)
                        return Err(self.invalid(
                            format!("{key}.fallback"),
                            "takes effect only when the variable `api_key_env` names is unset, \
                             and this provider has no api_key_env: add one, or remove fallback",
                        ));
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
            let (encoding, compact, background) = p.context_keys();
            if let Some(e) = encoding
                && botfleet_memory::Encoding::parse(e).is_none()
            {
                return Err(self.invalid(
                    format!("providers.{name}.encoding"),
                    format!("{e:?} is not an encoding; use \"o200k_base\" or \"cl100k_base\""),
                ));
            }
            if compact.is_some_and(|n| n < MIN_COMPACT_AT_TOKENS) {
                return Err(self.invalid(
                    format!("providers.{name}.compact_at_tokens"),
                    format!("must be at least {MIN_COMPACT_AT_TOKENS}"),
                ));
            }
            for (key, n) in [
                ("compact_at_tokens", compact),
                ("background_compact_at_tokens", background),
            ] {
                if n.is_some_and(|n| n > MAX_COMPACT_AT_TOKENS) {
                    return Err(self.invalid(
                        format!("providers.{name}.{key}"),
                        format!(
                            "must be at most {MAX_COMPACT_AT_TOKENS}: no model's context window \
                             is larger; keep it a few thousand tokens under your model's window"
                        ),
                    ));
                }
            }
            if background.is_some_and(|n| n < MIN_COMPACT_AT_TOKENS) {
                return Err(self.invalid(
                    format!("providers.{name}.background_compact_at_tokens"),
                    format!(
                        "must be at least {MIN_COMPACT_AT_TOKENS}: lower would compact the \
                         context after every turn"
                    ),
                ));
            }
            if let (Some(b), c) = (background, compact.unwrap_or(100_000))
                && b > c
            {
                return Err(self.invalid(
                    format!("providers.{name}.background_compact_at_tokens"),
                    "must not be above compact_at_tokens",
                ));
            }
        }
        self.validate_secrets()?;
        self.validate_bots()
    }

    /// Resolves what the file refers to outside itself, as a start needs
    /// it: `token_env`, `secret_env` and `value_env` through `env` (which
    /// answers as `std::env::var` does; an empty value counts as unset),
    /// each `scripted` provider's script file, each `openai` provider's
    /// `api_key_env` and `headers_env` (trimmed of the whitespace around
    /// them; not the headers of one whose bots run on its `fallback`). Refuses two
    /// users with one token. Reports every problem, each naming its key;
    /// never a token or secret value.
    pub fn resolve_external(
        &self,
        env: impl Fn(&str) -> Result<String, std::env::VarError>,
    ) -> Result<ResolvedFleet, ConfigError> {
        const START: &str = " before starting the host";
        let f = &self.file;
        let mut problems = Vec::new();
        // a value that is not UTF-8 is set, just unusable: say so, rather
        // than "not set" to someone looking at it set
        let read = |problems: &mut Vec<ConfigError>, key: &str, var: &str| match env(var) {
            Ok(value) => Some(value).filter(|v| !v.is_empty()),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                problems.push(self.invalid(
                    key,
                    format!(
                        "environment variable {var} is set but its value is not valid UTF-8; \
                         set it to the value as plain text"
                    ),
                ));
                None
            }
        };
        let lookup = |problems: &mut Vec<ConfigError>,
                      key: String,
                      var: &str,
                      names: provider::EnvKey<'_>,
                      hint: &str| {
            // not a name (most often the credential itself, pasted in):
            // said without the value
            if let Err(problem) = provider::env_var_problem(&names, var) {
                problems.push(self.invalid(key, problem));
                return None;
            }
            let before = problems.len();
            let value = read(problems, &key, var);
            if value.is_none() && problems.len() == before {
                problems.push(self.invalid(
                    key,
                    format!("environment variable {var} is not set (or is empty); set it{hint}"),
                ));
            }
            value
        };
        let mut tokens: Vec<(String, String)> = Vec::new();
        for (i, u) in f.users.iter().enumerate() {
            let (key, token) = match (&u.token, &u.token_env) {
                (Some(t), _) => (format!("users[{i}].token"), Some(t.clone())),
                (None, Some(var)) => {
                    let key = format!("users[{i}].token_env");
                    let names = provider::EnvKey {
                        field: "token_env",
                        holds: "a token",
                        example: "ALICE_TOKEN",
                    };
                    (key.clone(), lookup(&mut problems, key, var, names, START))
                }
                (None, None) => (format!("users[{i}].token"), None),
            };
            let Some(token) = token else { continue };
            if let (None, Some(var)) = (&u.token, &u.token_env)
                && let Some(problem) = token_problem(&token)
            {
                // the rule, never the value
                problems.push(self.invalid(
                    key,
                    format!("the value of environment variable {var} {problem}"),
                ));
                continue;
            }
            match tokens.iter().find(|(_, t)| *t == token) {
                Some((other, _)) => problems.push(self.invalid(key, same_token(&u.id, other))),
                None => tokens.push((u.id.clone(), token)),
            }
        }
        let mut scripts = BTreeMap::new();
        let mut api_keys = BTreeMap::new();
        let mut provider_headers = BTreeMap::new();
        for (name, p) in &f.providers {
            match p {
                ProviderConfig::Scripted { script, .. } => match self.load_script(script) {
                    Ok(s) => {
                        scripts.insert(name.clone(), s);
                    }
                    Err(message) => {
                        problems.push(self.invalid(format!("providers.{name}.script"), message));
                    }
                },
                ProviderConfig::Openai {
                    api_key_env,
                    fallback,
                    headers_env,
                    ..
                } => {
                    let key_name = format!("providers.{name}.api_key_env");
                    let key = match (api_key_env, fallback) {
                        (None, _) => None,
                        // unset with a fallback: its bots run offline (announced at start)
                        (Some(var), Some(_)) => read(&mut problems, &key_name, var),
                        (Some(var), None) => lookup(
                            &mut problems,
                            key_name.clone(),
                            var,
                            provider::API_KEY_ENV,
                            ", or remove api_key_env for a server without keys",
                        ),
                    };
                    let key = match (key, api_key_env) {
                        (Some(key), Some(var)) => match provider::api_key(&key, var) {
                            Ok(key) => key,
                            Err(problem) => {
                                problems.push(self.invalid(key_name, problem));
                                None
                            }
                        },
                        (key, _) => key,
                    };
                    // its bots run on the fallback: its headers are not needed
                    let offline = api_key_env.is_some() && fallback.is_some() && key.is_none();
                    let mut values = Vec::new();
                    for (header, var) in headers_env.iter().filter(|_| !offline) {
                        let key = format!("providers.{name}.headers_env.\"{header}\"");
                        let field = format!("headers_env.{header:?}");
                        let names = provider::EnvKey {
                            field: &field,
                            holds: "a header's value",
                            example: "GATEWAY_KEY",
                        };
                        let Some(value) = lookup(&mut problems, key.clone(), var, names, START)
                        else {
                            continue;
                        };
                        match provider::header_env_value(header, var, &value) {
                            Ok(value) => values.push((header.clone(), value)),
                            Err(problem) => problems.push(self.invalid(key, problem)),
                        }
                    }
                    provider_headers.insert(name.clone(), values);
                    api_keys.insert(name.clone(), key);
                }
            }
        }
        let mut hooks = Vec::new();
        for (i, b) in f.bots.iter().enumerate() {
            for (j, h) in b.hooks.iter().enumerate() {
                let secret = match (&h.secret, &h.secret_env) {
                    (Some(s), _) => Some(s.clone()),
                    (None, Some(var)) => {
                        let key = format!("bots[{i}].hooks[{j}].secret_env");
                        let names = provider::EnvKey {
                            field: "secret_env",
                            holds: "a secret",
                            example: "HOOK_SECRET",
                        };
                        match lookup(&mut problems, key.clone(), var, names, START) {
                            // senders sign with the secret as they have it: a line
                            // break an env file left would fail every signature
                            Some(s) if s.trim() != s => {
                                problems.push(self.invalid(
                                    key,
                                    format!(
                                        "the value of environment variable {var} (the secret of \
                                         hook {:?}) starts or ends with whitespace (a line \
                                         break or carriage return from the file it came from?); \
                                         senders sign with the secret alone, so every delivery \
                                         would fail its signature: set it to the secret alone",
                                        h.name
                                    ),
                                ));
                                None
                            }
                            // the inline minimum; the message names the rule, never the value
                            Some(s) if s.chars().count() < MIN_HOOK_SECRET => {
                                problems.push(self.invalid(
                                    key,
                                    format!(
                                        "the value of environment variable {var} (the secret of \
                                         hook {:?}) is too short; use at least {MIN_HOOK_SECRET} \
                                         characters",
                                        h.name
                                    ),
                                ));
                                None
                            }
                            found => found,
                        }
                    }
                    (None, None) => None,
                };
                if let Some(secret) = secret {
                    hooks.push(ResolvedHook {
                        bot: b.id.clone(),
                        name: h.name.clone(),
                        secret,
                        max_payload_bytes: h.payload_limit(f.host.max_body_bytes),
                    });
                }
            }
        }
        let mut secrets = Vec::new();
        for (i, sec) in f.secrets.iter().enumerate() {
            let value = match (&sec.value, &sec.value_env) {
                (Some(v), _) => Some(v.clone()),
                (None, Some(var)) => {
                    let key = format!("secrets[{i}].value_env");
                    let names = provider::EnvKey {
                        field: "value_env",
                        holds: "a secret",
                        example: "GITHUB_TOKEN",
                    };
                    let value = lookup(&mut problems, key.clone(), var, names, START);
                    // the rule, never the value
                    match value.as_deref().and_then(bots::secret_value_problem) {
                        Some(problem) => {
                            problems.push(self.invalid(
                                key,
                                format!("the value of environment variable {var} {problem}"),
                            ));
                            None
                        }
                        None => value,
                    }
                }
                (None, None) => None,
            };
            if let Some(v) = value {
                secrets.push((sec.name.clone(), v));
            }
        }
        match problems.len() {
            0 => Ok(ResolvedFleet {
                tokens,
                hooks,
                secrets,
                scripts,
                api_keys,
                provider_headers,
            }),
            1 => Err(problems.remove(0)),
            _ => Err(ConfigError::Several(problems)),
        }
    }

    /// A scripted provider's script: the embedded offline script for the
    /// embedded fleet, else the file, resolved against the fleet file's
    /// directory. The error says which path was read and why it failed.
    fn load_script(&self, script: &Path) -> Result<botfleet_actors::model::Script, String> {
        use botfleet_actors::model::Script;
        if self.base_dir.is_none() && script == Path::new(EMBEDDED_OFFLINE_PATH) {
            return Script::parse(EMBEDDED_OFFLINE_SCRIPT, EMBEDDED_OFFLINE_PATH)
                .map_err(|e| e.to_string());
        }
        let path = self.resolve(script);
        let bytes = std::fs::read(&path).map_err(|e| {
            let full = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
            if script.is_relative() {
                // a copied fleet file keeps its relative script paths
                format!(
                    "cannot read {} ({}): {e}; a relative script path is read from the fleet \
                     file's folder: copy the script there too, or give its absolute path",
                    script.display(),
                    full.display()
                )
            } else {
                format!("cannot read {}: {e}", full.display())
            }
        })?;
        let text = utf8_text(bytes).map_err(|why| format!("{}: {why}", path.display()))?;
        Script::parse(&text, &path.display().to_string()).map_err(|e| e.to_string())
    }

    /// Puts each user's time zone (`[[users]] timezone`, checked by
    /// `validate`) in `settings`.
    pub fn set_user_timezones(&self, settings: &mut botfleet_actors::FleetSettings) {
        for u in &self.file.users {
            let (Ok(id), Some(Ok(tz))) = (
                botfleet_memory::UserId::new(u.id.as_str()),
                u.timezone
                    .as_deref()
                    .map(botfleet_actors::FleetSettings::parse_timezone),
            ) else {
                continue;
            };
            settings.user_timezones.insert(id, tz);
        }
    }

    /// Puts the display name of each of the file's bots in `settings`
    /// (`fleet_names`): the names the next start gives them back.
    pub fn set_fleet_names(&self, settings: &mut botfleet_actors::FleetSettings) {
        for b in &self.file.bots {
            if let Ok(id) = botfleet_memory::BotId::new(b.id.as_str()) {
                settings.fleet_names.insert(id, b.name.clone());
            }
        }
    }

    /// The context settings of each provider.
    pub fn context_settings(
        &self,
    ) -> std::collections::HashMap<String, botfleet_actors::ContextSettings> {
        self.file
            .providers
            .iter()
            .map(|(name, p)| {
                let (encoding, compact, background) = p.context_keys();
                let mut c = botfleet_actors::ContextSettings::default();
                if let Some(e) = encoding.and_then(botfleet_memory::Encoding::parse) {
                    c.encoding = e;
                }
                if let Some(n) = compact {
                    c.compact_at_tokens = n;
                    c.background_compact_at_tokens = n - n / 5;
                }
                if let Some(n) = background {
                    c.background_compact_at_tokens = n;
                }
                (name.clone(), c)
            })
            .collect()
    }

    pub(super) fn provider_names(&self) -> String {
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

/// Whether `name` can name a provider: 1 to 64 ASCII letters, digits,
/// `_` and `-`, the first a letter or digit (a bare TOML key, shown in
/// banners and `GET /v1/bots`).
fn valid_provider_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

/// What is wrong with a user's token, if anything. A request carries it
/// in its `Authorization` header, which is trimmed and must be printable
/// ASCII: a token that is not could never log in.
fn token_problem(token: &str) -> Option<&'static str> {
    if token.trim().is_empty() {
        Some("is empty or only whitespace; use at least 8 characters")
    } else if token.trim() != token {
        Some(
            "starts or ends with whitespace, which a request cannot send (the Authorization header is trimmed); remove it",
        )
    } else if !token.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        Some(
            "has a character other than printable ASCII, which an Authorization header cannot carry",
        )
    } else if token.len() < 8 {
        Some("is too short; use at least 8 characters")
    } else {
        None
    }
}

/// Two users with one token: the token would log in as only one of them.
/// Names both, never the token.
fn same_token(user: &str, other: &str) -> String {
    format!(
        "user {user:?} has the same token as user {other:?}; give each user a token of their own"
    )
}

/// `url` as a config error may show it: whatever stands between its
/// scheme and its last `@` (the userinfo, which may hold a password with
/// an unescaped `/`) becomes `***`. For a URL that is not http(s) too,
/// which the model's redactor (`shown_base_url`, private to the actors
/// crate) is not reached with: config errors reach the terminal and logs.
fn without_userinfo(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    match url.rfind('@') {
        Some(at) if at >= start => format!("{}***{}", &url[..start], &url[at..]),
        Some(_) | None => url.to_owned(),
    }
}

/// A TOML file's bytes as text, or where they stop being UTF-8 (QA: "stream
/// did not contain valid UTF-8" said neither where nor what to do; an
/// editor saving in Latin-1 or UTF-16 makes such a file).
fn utf8_text(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
        let start = bytes[..at]
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |p| p + 1);
        // valid UTF-8 up to `at`: its characters are counted
        let column = String::from_utf8_lossy(&bytes[start..at]).chars().count() + 1;
        format!(
            "the file is not UTF-8 text: the bytes at line {line}, column {column} are not \
             UTF-8 (TOML is UTF-8); save the file as UTF-8"
        )
    })
}
