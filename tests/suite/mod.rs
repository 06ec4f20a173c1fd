//! The integration suite, compiled as one binary by `tests/all.rs`.

mod agents;
mod batching;
mod cli;
mod context;
mod crash;
mod groups;
mod hooks;
mod host;
mod loops;
mod memory;
mod openai_faults;
mod openai_host;
mod openai_provider;
mod routines;
mod routines_api;
mod secrets;
