//! Settings of an [`OpenAiModel`](super::OpenAiModel): where it sends, with what credentials,
//! and how long and how often it tries.

use std::fmt;
use std::time::Duration;

use reqwest::Url;

use super::MaxTokensField;
use super::redact;
use super::redact::shown_base_url;

/// Settings of an [`OpenAiModel`](super::OpenAiModel). Build with [`OpenAiOptions::new`] and
/// override fields with struct update syntax.
#[derive(Clone)]
pub struct OpenAiOptions {
    /// API root, e.g. `http://127.0.0.1:8000/v1` (a trailing `/` is fine).
    pub base_url: String,
    /// Model name sent with each request (`grok-4`, `gpt-4.1`, `qwen3:8b`).
    pub model: String,
    /// Bearer token, read from the environment by the caller. `None` or an
    /// empty string sends no `Authorization` header (Ollama, llama.cpp).
    pub api_key: Option<String>,
    /// Time allowed for the response headers, then for each silence between
    /// two pieces of a streamed body, or for a whole non-streamed body.
    /// Default 120 s.
    pub timeout: Duration,
    /// Time allowed for the whole call: every attempt, and the waits
    /// between them. Default 300 s.
    pub call_timeout: Duration,
    /// Most bytes of an answer (text and tool-call arguments), of a
    /// non-streamed body, and of one streamed event. Default 4 MiB.
    pub max_response_bytes: usize,
    /// Time allowed to open the TCP (and TLS) connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Attempts after the first one. Default 4.
    pub max_retries: u32,
    /// First backoff delay; it doubles per attempt. Default 500 ms.
    pub backoff_base: Duration,
    /// Longest backoff delay, and the longest `Retry-After` honoured.
    /// Default 30 s.
    pub backoff_max: Duration,
    /// First backoff delay after a 429 without `Retry-After`; it doubles
    /// per attempt up to `backoff_max`. Default 2 s: rate limits are
    /// counted per minute, so the short backoff of other failures would
    /// spend the retries inside the same minute.
    pub rate_limit_backoff_base: Duration,
    /// Ask for a streamed (SSE) response. Default `true`.
    pub stream: bool,
    /// With `stream`, ask for the token counts in a last chunk
    /// (`stream_options: {"include_usage": true}`). Default `true`;
    /// `false` sends no `stream_options`, for servers and proxies that
    /// refuse the field (older vLLM and TGI): an answer without usage has
    /// its tokens counted by the engine.
    pub stream_usage: bool,
    /// Extra headers sent with every request (`OpenAI-Organization`,
    /// `HTTP-Referer`); values are treated as secrets.
    pub extra_headers: Vec<(String, String)>,
    /// Sampling temperature; the server's default when `None`.
    pub temperature: Option<f32>,
    /// The request field of the token limit (compaction and extraction
    /// set one). Default `max_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// The provider's name in the fleet file (`[providers.NAME]`), so an
    /// error can name the key to change; `None` outside a fleet. With a
    /// name, the provider's errors say which provider failed, the URL and
    /// the likely fix ([`super::super::ModelError::AtProvider`]).
    pub provider: Option<String>,
    /// The environment variable the key was read from (`api_key_env`), so
    /// an error about the key can name it; `None` when not known.
    pub api_key_env: Option<String>,
    /// The provider's `compact_at_tokens` as the fleet file sets it, so the
    /// advice on a request that outgrew the model's window names a value
    /// below the one in use; `None`: the default.
    pub compact_at_tokens: Option<u64>,
}

impl OpenAiOptions {
    /// Default of [`OpenAiOptions::timeout`].
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
    /// Default of [`OpenAiOptions::call_timeout`].
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);
    /// Default of [`OpenAiOptions::max_response_bytes`].
    pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
    /// Default of [`OpenAiOptions::rate_limit_backoff_base`].
    pub const DEFAULT_RATE_LIMIT_BACKOFF_BASE: Duration = Duration::from_secs(2);

    /// Options with the defaults above for `model` at `base_url`, no key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiOptions {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout: Self::DEFAULT_TIMEOUT,
            call_timeout: Self::DEFAULT_CALL_TIMEOUT,
            max_response_bytes: Self::DEFAULT_MAX_RESPONSE_BYTES,
            connect_timeout: Duration::from_secs(10),
            max_retries: 4,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            rate_limit_backoff_base: Self::DEFAULT_RATE_LIMIT_BACKOFF_BASE,
            stream: true,
            stream_usage: true,
            extra_headers: Vec::new(),
            temperature: None,
            max_tokens_field: MaxTokensField::MaxTokens,
            provider: None,
            api_key_env: None,
            compact_at_tokens: None,
        }
    }
}

impl OpenAiOptions {
    /// Every credential these options send, as the provider hides them in
    /// what it says: the key, the extra header values, and the base URL's
    /// password (as written and percent-decoded) with the basic-auth value
    /// made of its userinfo. Secrets shorter than 4 chars are left out.
    /// The host scrubs them from tool results (a bot may read the fleet
    /// file or the host's environment).
    pub fn credentials(&self) -> Vec<String> {
        redact::secrets_of(self, Url::parse(&self.base_url).ok().as_ref())
    }
}

/// Redacts the key and header values.
impl fmt::Debug for OpenAiOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("OpenAiOptions")
            .field("base_url", &shown_base_url(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("call_timeout", &self.call_timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("rate_limit_backoff_base", &self.rate_limit_backoff_base)
            .field("stream", &self.stream)
            .field("stream_usage", &self.stream_usage)
            .field("extra_headers", &header_names)
            .field("temperature", &self.temperature)
            .field("max_tokens_field", &self.max_tokens_field)
            .field("provider", &self.provider)
            .field("api_key_env", &self.api_key_env)
            .finish()
    }
}
