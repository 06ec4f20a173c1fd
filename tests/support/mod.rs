//! Test support shared by the integration suite (`tests/all.rs`).

pub mod browser;
pub mod clocked;
pub mod fleet;
pub mod memory_model;
pub mod openai_server;
pub mod process;
pub mod routines;
pub mod shared_room;
pub mod ui_page;
