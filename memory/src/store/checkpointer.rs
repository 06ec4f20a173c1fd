//! WAL checkpoints off the writer's path.
//!
//! SQLite's automatic checkpoint runs inside the committing connection, so
//! the writer would stall for the checkpoint's copy and fsync while every
//! caller waits. The writer's auto-checkpoint is turned off instead, and
//! this thread runs a `PASSIVE` checkpoint (which never blocks the writer
//! or readers) on its own connection every few hundred milliseconds.

use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use rusqlite::Connection;

/// How often to checkpoint.
const PERIOD: Duration = Duration::from_millis(250);

/// Runs until `stop` is dropped or signalled.
pub(crate) fn run(path: PathBuf, stop: Receiver<()>) {
    let conn = match Connection::open(&path) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "checkpointer cannot open the database; the WAL will grow until restart");
            return;
        }
    };
    let _ = conn.busy_timeout(Duration::from_millis(100));
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(PERIOD) {
        let r: rusqlite::Result<(i64, i64, i64)> =
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            });
        if let Err(e) = r {
            tracing::debug!(error = %e, "passive checkpoint skipped");
        }
    }
}
