//! What every actor of a fleet shares: the store, the models, the tools,
//! the settings and the workspace. Read-only after start.

use std::collections::HashMap;
use std::sync::Arc;

use botfleet_memory::Store;

use crate::model::Model;
use crate::settings::FleetSettings;
use crate::tools::ToolRegistry;
use crate::tools::Workspace;

/// Shared, read-only context of a running fleet.
pub struct Runtime {
    /// The store.
    pub store: Store,
    /// Model providers by name (as in fleet.toml).
    pub models: HashMap<String, Arc<dyn Model>>,
    /// Every tool the host offers.
    pub tools: ToolRegistry,
    /// Settings.
    pub settings: FleetSettings,
    /// The workspace of files and Shell.
    pub workspace: Workspace,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("store", &self.store)
            .field("models", &self.models.keys().collect::<Vec<_>>())
            .field("tools", &self.tools)
            .finish()
    }
}
