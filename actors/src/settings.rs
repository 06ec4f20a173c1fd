//! Runtime settings of a fleet (the `[runtime]` part of fleet.toml).

use std::path::PathBuf;
use std::time::Duration;

use crate::tools::ToolLimits;

/// How the fleet behaves.
#[derive(Debug, Clone)]
pub struct FleetSettings {
    /// Quiet time after a user message before its turn starts, so rapid
    /// messages fold into one turn. Zero turns batching off.
    pub debounce: Duration,
    /// Longest a first message waits while more keep arriving.
    pub debounce_max: Duration,
    /// Idle time after which a bot's actor is stopped (its state stays in
    /// the store).
    pub idle_timeout: Duration,
    /// Most model steps in one turn.
    pub max_steps: u32,
    /// Most starts of one turn (first run plus restarts after crashes)
    /// before it fails for good.
    pub max_turn_attempts: i64,
    /// Entries of a session kept in memory and sent as context.
    pub context_entries: usize,
    /// The fleet workspace (files and Shell).
    pub workspace: PathBuf,
    /// Limits of tools.
    pub tool_limits: ToolLimits,
}

impl FleetSettings {
    /// Defaults with the given workspace.
    pub fn new(workspace: PathBuf) -> Self {
        Self {
            debounce: Duration::from_millis(500),
            debounce_max: Duration::from_millis(2000),
            idle_timeout: Duration::from_secs(300),
            max_steps: 40,
            max_turn_attempts: 3,
            context_entries: 200,
            workspace,
            tool_limits: ToolLimits::default(),
        }
    }
}
