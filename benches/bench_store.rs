//! What the load benchmarks (`fleet-load`, `group-load`, `agent-load`)
//! share: the `--sync` option and the store they open.

use std::path::Path;

use botfleet::memory::Store;
use botfleet::memory::StoreOptions;
use botfleet::memory::Synchronous;

/// SQLite synchronous mode (`--sync`): clap refuses any other value.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SyncMode {
    /// `synchronous=NORMAL`: survives a crash, may lose the last commits
    /// on power loss (the host's default).
    Normal,
    /// `synchronous=FULL`: every commit survives power loss.
    Full,
}

impl std::fmt::Display for SyncMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SyncMode::Normal => "normal",
            SyncMode::Full => "full",
        })
    }
}

impl serde::Serialize for SyncMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The benchmark's store in `dir`, with room in the change channel for
/// every signal of a burst.
pub fn open_store(dir: &Path, sync: SyncMode) -> Store {
    let synchronous = match sync {
        SyncMode::Normal => Synchronous::Normal,
        SyncMode::Full => Synchronous::Full,
    };
    Store::open(StoreOptions {
        synchronous,
        change_capacity: 1 << 20,
        ..StoreOptions::new(dir.join("fleet.db"))
    })
    .expect("open the benchmark's store")
}
