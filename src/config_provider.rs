//! Reading `[providers.NAME]`: the table is read into one flat struct of
//! every key (so a wrong type is reported at its key, with its line:
//! serde's internally tagged enums buffer the table and lose both), then
//! `kind` picks the variant and the keys the other kind has are refused.

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
    #[serde(default)]
    timeout_s: Option<u64>,
    #[serde(default)]
    call_timeout_s: Option<u64>,
    #[serde(default)]
    max_response_bytes: Option<u64>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_retries: Option<u32>,
    #[serde(default)]
    fallback: Option<String>,
    #[serde(default)]
    script: Option<PathBuf>,
    #[serde(default)]
    encoding: Option<String>,
    #[serde(default)]
    compact_at_tokens: Option<u64>,
    #[serde(default)]
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
            ("max_retries", self.max_retries.is_some()),
            ("fallback", self.fallback.is_some()),
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
                "max_retries",
                "fallback",
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
        Ok(match kind {
            ProviderKind::Openai => ProviderConfig::Openai {
                base_url: raw.base_url.ok_or_else(|| missing("base_url", kind))?,
                model: raw.model.ok_or_else(|| missing("model", kind))?,
                api_key_env: raw.api_key_env,
                timeout_s: raw.timeout_s,
                call_timeout_s: raw.call_timeout_s,
                max_response_bytes: raw.max_response_bytes,
                stream: raw.stream,
                max_retries: raw.max_retries,
                fallback: raw.fallback,
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
