//! Test support shared by the integration suite (`tests/all.rs`).

pub mod browser;
pub mod clocked;
pub mod fleet;
pub mod openai_server;
pub mod process;
