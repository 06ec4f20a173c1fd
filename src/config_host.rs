//! `[host]` of fleet.toml: where the host keeps its data, where it
//! listens, and the limits of its API.

use std::path::PathBuf;

use serde::Deserialize;

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
    #[serde(
        default = "default_max_body",
        deserialize_with = "super::numbers::at_least_usize::<{ super::limits::MIN_BODY_BYTES as u64 }, _>"
    )]
    pub max_body_bytes: usize,
    /// Longest message text the API accepts, in characters.
    #[serde(
        default = "default_max_text",
        deserialize_with = "super::numbers::at_least_usize::<{ super::limits::MIN_TEXT_CHARS as u64 }, _>"
    )]
    pub max_text_chars: usize,
    /// Seconds an API connection has to send a whole request head (from
    /// its start, or from the end of its previous response) before it is
    /// closed.
    #[serde(
        default = "default_header_timeout",
        deserialize_with = "super::numbers::positive_u64"
    )]
    pub header_timeout_s: u64,
    /// Seconds a request may take to be answered, its body included
    /// (`/v1/events` streams excepted).
    #[serde(
        default = "default_request_timeout",
        deserialize_with = "super::numbers::positive_u64"
    )]
    pub request_timeout_s: u64,
    /// Most API connections open at once; past it new ones wait.
    #[serde(
        default = "default_max_connections",
        deserialize_with = "super::numbers::at_least_u32::<{ super::limits::MIN_CONNECTIONS as u64 }, _>"
    )]
    pub max_connections: u32,
    /// Most `/v1/events` streams one user may hold open (the web page
    /// holds one per tab); all users together hold at most
    /// `max_connections` less a quarter kept for other requests.
    #[serde(
        default = "default_max_streams_per_user",
        deserialize_with = "super::numbers::positive_u32"
    )]
    pub max_streams_per_user: u32,
    /// Most messages one user may send (to bots and rooms, all together)
    /// per minute: a token bucket holding a minute's worth, so one user's
    /// flood cannot fill the store's one writer that every other user's
    /// messages and turns wait on. Past it the API answers `429
    /// rate_limited` with `Retry-After`.
    #[serde(
        default = "default_user_messages_per_minute",
        deserialize_with = "super::numbers::positive_u32"
    )]
    pub user_messages_per_minute: u32,
    /// Most requests with a bearer token no user has that one client
    /// address (an IPv6 one's /64) may send per minute; past it, every
    /// request of that address that needs a token is answered `429
    /// rate_limited` with `Retry-After` until its minute is over, so
    /// tokens cannot be guessed as fast as the host answers.
    #[serde(
        default = "default_unknown_tokens_per_minute",
        deserialize_with = "super::numbers::positive_u32"
    )]
    pub unknown_tokens_per_minute: u32,
    /// Most bytes of request bodies one user may have arriving at once
    /// (each counted by its declared length, or `max_body_bytes` when it
    /// declares none): every body arriving is held in memory until it
    /// ends. Past it the API answers `429 rate_limited` with
    /// `Retry-After`, the body unread. At least `max_body_bytes`.
    #[serde(
        default = "default_body_bytes_per_user",
        deserialize_with = "super::numbers::at_least_usize::<{ super::limits::MIN_BODY_BYTES as u64 }, _>"
    )]
    pub body_bytes_per_user: usize,
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
fn default_header_timeout() -> u64 {
    30
}
fn default_request_timeout() -> u64 {
    60
}
fn default_max_connections() -> u32 {
    512
}
fn default_max_streams_per_user() -> u32 {
    16
}
fn default_user_messages_per_minute() -> u32 {
    600
}
fn default_unknown_tokens_per_minute() -> u32 {
    30
}
fn default_body_bytes_per_user() -> usize {
    8 * 1024 * 1024
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
            header_timeout_s: default_header_timeout(),
            request_timeout_s: default_request_timeout(),
            max_connections: default_max_connections(),
            max_streams_per_user: default_max_streams_per_user(),
            user_messages_per_minute: default_user_messages_per_minute(),
            unknown_tokens_per_minute: default_unknown_tokens_per_minute(),
            body_bytes_per_user: default_body_bytes_per_user(),
        }
    }
}
