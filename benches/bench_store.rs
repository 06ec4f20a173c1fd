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

/// Largest size the store's WAL file reaches, sampled every 20 ms on a
/// thread of its own until the returned counter is dropped.
#[allow(dead_code)] // included by every load bin; fleet-load reports it
pub fn watch_wal(dir: &Path) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
    use std::sync::atomic::Ordering::Relaxed;
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let weak = std::sync::Arc::downgrade(&peak);
    let wal = dir.join("fleet.db-wal");
    std::thread::spawn(move || {
        while let Some(peak) = weak.upgrade() {
            if let Ok(m) = std::fs::metadata(&wal) {
                peak.fetch_max(m.len(), Relaxed);
            }
            drop(peak);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    peak
}
