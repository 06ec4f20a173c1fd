//! Reading `[providers.NAME]`: the table is read into one flat struct of
//! every key (so a wrong type is reported at its key, with its line:
//! serde's internally tagged enums buffer the table and lose both), then
//! `kind` picks the variant and the keys the other kind has are refused.
//! Also the checks of an `openai` provider's `headers` and `headers_env`
//! (and of their values as read from the environment) and of its API key
//! as read from `api_key_env`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::ProviderConfig;

/// `kind` of a provider.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ProviderKind {
    /// `kind = "openai"`.
    Openai,
    /// `kind = "scripted"`.
    Scripted,
}

impl ProviderKind {
    fn name(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Scripted => "scripted",
        }
    }
}

/// Every key of either kind; see [`ProviderConfig`] for what each means.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    kind: ProviderKind,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default, deserialize_with = "super::numbers::positive_u64_opt")]
    timeout_s: Option<u64>,
    #[serde(default, deserialize_with = "super::numbers::positive_u64_opt")]
    call_timeout_s: Option<u64>,
    #[serde(
        default,
        deserialize_with = "super::numbers::at_least_u64_opt::<{ super::load::MIN_RESPONSE_BYTES }, _>"
    )]
    max_response_bytes: Option<u64>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_usage: Option<bool>,
    #[serde(default)]
    max_retries: Option<u32>,
    #[serde(default)]
    max_tokens_field: Option<String>,
    #[serde(default)]
    fallback: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    headers_env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    script: Option<PathBuf>,
    #[serde(default)]
    encoding: Option<String>,
    #[serde(
        default,
        deserialize_with = "super::numbers::at_least_u64_opt::<{ super::load::MIN_COMPACT_AT_TOKENS }, _>"
    )]
    compact_at_tokens: Option<u64>,
    #[serde(
        default,
        deserialize_with = "super::numbers::at_least_u64_opt::<{ super::load::MIN_COMPACT_AT_TOKENS }, _>"
    )]
    background_compact_at_tokens: Option<u64>,
}

/// Keys of every kind.
const COMMON_KEYS: [&str; 4] = [
    "kind",
    "encoding",
    "compact_at_tokens",
    "background_compact_at_tokens",
];

impl RawProvider {
    /// The keys of the other kind that are set.
    fn foreign_keys(&self) -> Vec<&'static str> {
        let openai = [
            ("base_url", self.base_url.is_some()),
            ("model", self.model.is_some()),
            ("api_key_env", self.api_key_env.is_some()),
            ("timeout_s", self.timeout_s.is_some()),
            ("call_timeout_s", self.call_timeout_s.is_some()),
            ("max_response_bytes", self.max_response_bytes.is_some()),
            ("stream", self.stream.is_some()),
            ("stream_usage", self.stream_usage.is_some()),
            ("max_retries", self.max_retries.is_some()),
            ("max_tokens_field", self.max_tokens_field.is_some()),
            ("fallback", self.fallback.is_some()),
            ("headers", self.headers.is_some()),
            ("headers_env", self.headers_env.is_some()),
        ];
        let scripted = [("script", self.script.is_some())];
        let foreign: &[(&'static str, bool)] = match self.kind {
            ProviderKind::Openai => &scripted,
            ProviderKind::Scripted => &openai,
        };
        foreign
            .iter()
            .filter(|(_, set)| *set)
            .map(|(k, _)| *k)
            .collect()
    }

    /// The keys `kind` has, for messages.
    fn keys_of(kind: ProviderKind) -> String {
        let own: &[&str] = match kind {
            ProviderKind::Openai => &[
                "base_url",
                "model",
                "api_key_env",
                "timeout_s",
                "call_timeout_s",
                "max_response_bytes",
                "stream",
                "stream_usage",
                "max_retries",
                "max_tokens_field",
                "fallback",
                "headers",
                "headers_env",
            ],
            ProviderKind::Scripted => &["script"],
        };
        COMMON_KEYS
            .iter()
            .chain(own)
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn missing(key: &str, kind: ProviderKind) -> String {
    format!(
        "missing field `{key}` (required for kind = \"{}\")",
        kind.name()
    )
}

impl TryFrom<RawProvider> for ProviderConfig {
    type Error = String;

    fn try_from(raw: RawProvider) -> Result<Self, String> {
        let kind = raw.kind;
        if let Some(key) = raw.foreign_keys().first() {
            return Err(format!(
                "unknown field `{key}` for kind = \"{}\", expected one of {}",
                kind.name(),
                RawProvider::keys_of(kind)
            ));
        }
        // api_key_env, model and max_tokens_field are checked where the
        // error can name their key, not this table (`config_load.rs`)
        Ok(match kind {
            ProviderKind::Openai => ProviderConfig::Openai {
                base_url: raw.base_url.ok_or_else(|| missing("base_url", kind))?,
                model: raw.model.ok_or_else(|| missing("model", kind))?,
                api_key_env: raw.api_key_env,
                timeout_s: raw.timeout_s,
                call_timeout_s: raw.call_timeout_s,
                max_response_bytes: raw.max_response_bytes,
                stream: raw.stream,
                stream_usage: raw.stream_usage,
                max_retries: raw.max_retries,
                max_tokens_field: raw.max_tokens_field,
                fallback: raw.fallback,
                headers: raw.headers.unwrap_or_default(),
                headers_env: raw.headers_env.unwrap_or_default(),
                encoding: raw.encoding,
                compact_at_tokens: raw.compact_at_tokens,
                background_compact_at_tokens: raw.background_compact_at_tokens,
            },
            ProviderKind::Scripted => ProviderConfig::Scripted {
                script: raw.script.ok_or_else(|| missing("script", kind))?,
                encoding: raw.encoding,
                compact_at_tokens: raw.compact_at_tokens,
                background_compact_at_tokens: raw.background_compact_at_tokens,
            },
        })
    }
}

/// Why `model` cannot be the name of a model: it is sent as written, so
/// spaces around it (`" grok-4 "`) made every call a 404 from the server,
/// after `check-config` said ok.
pub(super) fn model_problem(model: &str) -> Result<(), String> {
    let trimmed = model.trim();
    if trimmed.is_empty() {
        return Err(
            "it is empty; write the model's name as the server knows it, e.g. model = \"grok-4\""
                .to_owned(),
        );
    }
    if trimmed != model {
        return Err(format!(
            "{model:?} has spaces around it, and the server would be asked for a model of \
             that name; write model = {trimmed:?}"
        ));
    }
    if model.chars().any(char::is_control) {
        return Err(format!(
            "{model:?} holds a control character (a line break, a tab); write the model's \
             name alone"
        ));
    }
    Ok(())
}

/// Why `name`, given as `api_key_env`, is not the name of an environment
/// variable (`[A-Za-z_][A-Za-z0-9_]*`). The message never quotes a value
/// that is not a name: it is most often the key itself, pasted in.
pub(super) fn env_name_problem(name: &str) -> Result<(), String> {
    env_var_problem(&API_KEY_ENV, name).map_err(|problem| {
        if name.trim().is_empty() {
            format!("{problem}, or remove api_key_env for a server without keys")
        } else {
            problem
        }
    })
}

/// A fleet-file key that names an environment variable holding a
/// credential (`api_key_env`, `token_env`, `secret_env`, `value_env`, a
/// `headers_env` entry).
#[derive(Debug, Clone, Copy)]
pub(super) struct EnvKey<'a> {
    /// The key as the file spells it.
    pub field: &'a str,
    /// What the variable holds, with its article ("a key").
    pub holds: &'a str,
    /// A variable name to show.
    pub example: &'a str,
}

/// `api_key_env`'s words.
pub(super) const API_KEY_ENV: EnvKey<'static> = EnvKey {
    field: "api_key_env",
    holds: "a key",
    example: "OPENAI_API_KEY",
};

/// Why `name`, given for `key`, is not the name of an environment
/// variable: empty, written as a shell expands it (`$NAME`), or something
/// that is not a name at all: most often the credential itself, pasted
/// in, which is never shown (QA: `token_env`, `secret_env`, `value_env`
/// and `headers_env` printed it back in "environment variable … is not
/// set").
pub(super) fn env_var_problem(key: &EnvKey<'_>, name: &str) -> Result<(), String> {
    let EnvKey {
        field,
        holds,
        example,
    } = key;
    let is_name = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if is_name(name) {
        return Ok(());
    }
    let takes = format!(
        "{field} takes the NAME of an environment variable that holds {holds} (letters, digits \
         and _, e.g. \"{example}\")"
    );
    if name.trim().is_empty() {
        return Err(format!("it is empty; {takes}"));
    }
    let bare = name.trim();
    let bare = bare
        .strip_prefix("${")
        .and_then(|s| s.strip_suffix('}'))
        .or_else(|| bare.strip_prefix('$'))
        .unwrap_or(bare);
    if is_name(bare) {
        // a name, written as a shell would expand it or with spaces
        return Err(format!(
            "{takes}, written as it is: {field} = \"{bare}\" (no $, braces or spaces)"
        ));
    }
    let the = holds.replacen("a ", "the ", 1);
    Err(format!(
        "this is not a variable name, it looks like {holds} itself (the value is not shown); \
         {takes}. Never write {the} into the fleet file: export it, e.g. `export \
         {example}=...`, and set {field} = \"{example}\" (if {the} was shared along with this \
         file, replace it)"
    ))
}

/// Headers botfleet sets itself (or must not be set by hand), with what
/// to use instead.
const RESERVED_HEADERS: &[(&str, &str)] = &[
    ("authorization", "give the key with api_key_env"),
    ("content-type", "botfleet sends JSON"),
    ("accept", "botfleet asks for SSE or JSON as `stream` says"),
    ("content-length", "the HTTP client sets it"),
    ("transfer-encoding", "the HTTP client sets it"),
    ("host", "it follows base_url"),
    ("connection", "the HTTP client sets it"),
];

/// The endpoint botfleet adds to a provider's `base_url` itself.
const ENDPOINT: &str = "/chat/completions";

/// What is wrong with `base_url` (an http(s) URL, shown as given: its
/// userinfo already hidden) that names the endpoint rather than the API
/// root, as a URL copied from a provider's docs or a curl example does:
/// botfleet adds `/chat/completions` itself, so every request went to
/// `…/chat/completions/chat/completions` and every turn failed with a
/// 404. `None` for an API root.
pub(super) fn base_url_problem(base_url: &str) -> Option<String> {
    let end = base_url.find(['?', '#']).unwrap_or(base_url.len());
    let (path, query) = base_url.split_at(end);
    let root = path.trim_end_matches('/').strip_suffix(ENDPOINT)?;
    Some(format!(
        "{base_url:?} ends in {ENDPOINT}, which botfleet adds itself; give the API root: \
         {:?}",
        format!("{root}{query}")
    ))
}

/// What is wrong with header `name` of a provider's `headers`, whose value
/// is `value`; `None` when it can be sent. The message never quotes the
/// value (it may be a credential).
pub(super) fn header_problem(name: &str, value: &str) -> Option<String> {
    // RFC 9110 `token`: what reqwest accepts as a header name
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(tchar) {
        return Some(format!(
            "{name:?} is not a header name; use letters, digits and - (e.g. \"X-Title\")"
        ));
    }
    let lower = name.to_ascii_lowercase();
    if let Some((_, instead)) = RESERVED_HEADERS.iter().find(|(n, _)| *n == lower) {
        return Some(format!("header {name:?} is set by botfleet; {instead}"));
    }
    if value.trim().is_empty() {
        return Some(format!(
            "header {name:?} has an empty value; give one, or remove the header"
        ));
    }
    // visible ASCII and spaces: what every server reads the same way
    if !value
        .chars()
        .all(|c| c == ' ' || c == '\t' || c.is_ascii_graphic())
    {
        return Some(format!(
            "the value of header {name:?} holds a line break, a control character or a \
             non-ASCII character; header values are single-line ASCII"
        ));
    }
    None
}

/// The first header of `headers` whose name another one repeats, ignoring
/// case (HTTP header names are case-insensitive; TOML keys are not).
pub(super) fn repeated_header(headers: &BTreeMap<String, String>) -> Option<(&str, &str)> {
    let names: Vec<&str> = headers.keys().map(String::as_str).collect();
    repeated_name(&names)
}

/// The first of `names` another one repeats, ignoring case.
fn repeated_name<'a>(names: &[&'a str]) -> Option<(&'a str, &'a str)> {
    names.iter().enumerate().find_map(|(i, a)| {
        names[i + 1..]
            .iter()
            .find(|b| a.eq_ignore_ascii_case(b))
            .map(|b| (*a, *b))
    })
}

/// What is wrong with a provider's `headers_env` (header name to
/// environment variable) beside its `headers`; `None` when nothing is.
/// Names are checked as in `headers`; a header may be given in one of the
/// two only.
pub(super) fn headers_env_problem(
    headers: &BTreeMap<String, String>,
    headers_env: &BTreeMap<String, String>,
) -> Option<String> {
    for (name, var) in headers_env {
        // the name's rules; the value comes from the variable at start
        if let Some(problem) = header_problem(name, "checked at start") {
            return Some(problem);
        }
        if var.is_empty()
            || var.contains('=')
            || var.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Some(format!(
                "header {name:?}: {var:?} is not an environment variable name; name the \
                 variable that holds the value (e.g. \"GATEWAY_KEY\")"
            ));
        }
    }
    for name in headers_env.keys() {
        if let Some(inline) = headers.keys().find(|h| h.eq_ignore_ascii_case(name)) {
            return Some(format!(
                "header {name:?} is also in `headers` (as {inline:?}; names ignore case); give \
                 it in one of them"
            ));
        }
    }
    let names: Vec<&str> = headers_env.keys().map(String::as_str).collect();
    repeated_name(&names).map(|(a, b)| {
        format!("headers {a:?} and {b:?} are one header (names ignore case); keep one")
    })
}

/// The value of header `name` read from environment variable `var`, as
/// it is sent: without the whitespace around it, and checked as a value
/// of `headers` is. The message names the header and the variable, never
/// the value.
pub(super) fn header_env_value(name: &str, var: &str, value: &str) -> Result<String, String> {
    let value = value.trim();
    match header_problem(name, value) {
        Some(problem) => Err(format!("{problem} (read from environment variable {var})")),
        None => Ok(value.to_owned()),
    }
}

/// The API key read from environment variable `var`, without the
/// whitespace around it (a key pasted with a space or a line break, or
/// read from a file with its newline); `None` when nothing else is left.
/// A key with whitespace or a control character inside is refused: no
/// provider issues one, so it is a mistake (two keys, a broken paste).
/// The message names the variable, never the value.
pub(super) fn api_key(value: &str, var: &str) -> Result<Option<String>, String> {
    let key = value.trim();
    if key.is_empty() {
        return Err(format!(
            "environment variable {var} holds only whitespace; set it to the API key"
        ));
    }
    if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the value of environment variable {var} has whitespace or a control character \
             inside it; an API key has none: set {var} to the key alone"
        ));
    }
    Ok(Some(key.to_owned()))
}

#[cfg(test)]
#[path = "config_provider_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "config_provider_field_tests.rs"]
mod field_tests;
