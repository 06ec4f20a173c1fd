//! WAL checkpoints off the writer's path.
//!
//! SQLite's automatic checkpoint runs inside the committing connection, so
//! the writer would stall for the checkpoint's copy and fsync while every
//! caller waits. The writer's auto-checkpoint is turned off instead, and
//! this thread runs a `PASSIVE` checkpoint (which never blocks the writer
//! or readers) on its own connection every few hundred milliseconds.
//!
//! A WAL starts over from its beginning only when a write begins after
//! *every* frame was copied. Under steady writes that never happens by
//! itself: this thread copies up to the newest commit it sees, and the
//! writer has committed more by the time it finishes, so the file would
//! grow by every frame written (hundreds of MB a minute at full load,
//! each write landing on fresh pages). When the WAL holds more than
//! `restart_frames`, this thread checkpoints every 10 ms until it lags by
//! little, then asks the writer to checkpoint the remainder itself between
//! two groups (~1,000 frames and the checkpoint's fsyncs: some tens of ms,
//! during which commits wait), and the writer's next commit restarts the
//! WAL, which then stays within a few times `restart_frames`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use rusqlite::Connection;

/// How often to checkpoint (the default of `StoreOptions`).
pub(crate) const PERIOD: Duration = Duration::from_millis(250);

/// One `PASSIVE` checkpoint: (frames in the WAL, frames copied into the
/// database). Never waits for the writer or readers.
pub(crate) fn passive(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok((row.get(1)?, row.get(2)?))
    })
}

/// The checkpoint thread's settings.
#[derive(Clone)]
pub(crate) struct Checkpoints {
    pub(crate) path: PathBuf,
    pub(crate) period: Duration,
    /// WAL frames past which the writer is asked to catch up.
    pub(crate) restart_frames: i64,
    /// Read and cleared by the writer after its next group.
    pub(crate) catch_up: Arc<AtomicBool>,
    /// Where the largest WAL seen is recorded.
    pub(crate) stats: Arc<super::WriterStats>,
}

/// Frames committed during one back-to-back checkpoint below which the
/// writer is asked to finish: its share is then a few ms of copying.
const CATCH_UP_FRAMES: i64 = 1024;

/// Pause between back-to-back checkpoints (at most the period): short
/// enough to converge (~10 ms of writes is a few hundred frames), long
/// enough not to spin when a reader pins the WAL and nothing can be copied.
const BACK_TO_BACK: Duration = Duration::from_millis(10);

impl Checkpoints {
    /// Runs until `stop` is dropped or signalled: a [`Checkpoints::tick`]
    /// every period, or back to back while the WAL is past the limit.
    pub(crate) fn run(self, stop: Receiver<()>) {
        let conn = match self.connect() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "checkpointer cannot open the database; the WAL will grow until restart");
                return;
            }
        };
        // WAL frames at the previous checkpoint, while past the limit
        let mut previous: Option<i64> = None;
        let mut wait = self.period;
        while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(wait) {
            wait = self.tick(&conn, &mut previous);
        }
    }

    /// The connection checkpoints run on. It never creates the database:
    /// the store made it before this thread started, so a missing file was
    /// deleted since, and an empty one made here would pose as the store
    /// (the writer would see it as the database "replaced by another file").
    pub(crate) fn connect(&self) -> rusqlite::Result<Connection> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )?;
        let _ = conn.busy_timeout(Duration::from_millis(100));
        Ok(conn)
    }

    /// One checkpoint; returns how long to wait before the next.
    /// `previous` holds the WAL's frames at the checkpoint before, while
    /// the WAL is past `restart_frames`.
    ///
    /// Past `restart_frames` the checkpoints run back to back (10 ms
    /// apart), each copying what was committed during the one before, until
    /// that is at most [`CATCH_UP_FRAMES`]; then the writer is asked to copy
    /// the rest.
    pub(crate) fn tick(&self, conn: &Connection, previous: &mut Option<i64>) -> Duration {
        let log = match passive(conn) {
            Ok((log, _)) => {
                self.stats
                    .wal_frames_peak
                    .fetch_max(u64::try_from(log).unwrap_or(0), Ordering::Relaxed);
                log
            }
            Err(e) => {
                tracing::debug!(error = %e, "passive checkpoint skipped");
                return self.period;
            }
        };
        if log <= self.restart_frames {
            *previous = None;
            return self.period;
        }
        let wait = match previous.map(|p| log - p) {
            // little committed since (or nothing: the writer is idle and
            // catches up after its next group). This thread then waits
            // a period: a checkpoint of its own running at the same time
            // would make the writer's answer busy, and the WAL could not
            // start over
            Some(grew) if grew <= CATCH_UP_FRAMES => {
                self.catch_up.store(true, Ordering::Relaxed);
                self.period
            }
            _ => BACK_TO_BACK.min(self.period),
        };
        *previous = Some(log);
        wait
    }
}
