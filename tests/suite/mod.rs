//! The integration suite, compiled as one binary by `tests/all.rs`.

mod agents;
mod approvals;
mod batching;
mod cli;
mod context;
mod crash;
mod data_lock;
mod groups;
mod hooks;
mod host;
mod loops;
mod memory;
mod memory_update;
mod openai_faults;
mod openai_host;
mod openai_provider;
mod recall;
mod recall_faults;
mod review;
mod review_ttl;
mod retry;
mod routines;
mod routines_api;
mod secrets;
mod ui;
mod ui_browser;
