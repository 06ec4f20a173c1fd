//! The integration suite, compiled as one binary by `tests/all.rs`.

mod batching;
mod cli;
mod crash;
mod host;
mod openai_faults;
mod openai_host;
mod openai_provider;
