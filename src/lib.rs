//! botfleet: a host process that runs a fleet of long-lived LLM bots.
//!
//! This package is the host: configuration, the HTTP API and web page, the
//! CLI, and the wiring of the fleet. The runtime is in
//! [`botfleet_actors`]; durable state and recall in [`botfleet_memory`].
//! Read docs/architecture.md first.

pub mod api;
pub mod cli;
pub mod client;
pub mod config;
pub mod host;
mod http_server;
pub mod sandbox;
mod serde_words;
mod shell_words;

pub use botfleet_actors as actors;
pub use botfleet_actors::model;
pub use botfleet_actors::tools;
pub use botfleet_memory as memory;
