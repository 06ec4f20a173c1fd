//! The bounded pool of read-only connections. Readers see the last
//! committed state (WAL snapshot isolation) and never block the writer.

use std::path::PathBuf;

use parking_lot::Condvar;
use parking_lot::Mutex;
use rusqlite::Connection;
use rusqlite::OpenFlags;

use crate::error::Result;
use crate::error::StoreError;

/// Statements each read connection keeps prepared. Every query of this
/// file, approvals.rs, rooms.rs, routines.rs and the memory layers fits, so
/// a connection prepares each statement once in its life (rusqlite's
/// default of 16 made the least recently used ones re-prepare).
const READER_STATEMENTS: usize = 96;

/// A bounded pool of read-only connections, opened on demand and kept for
/// the life of the store.
///
/// At most `max` connections exist; a read that finds all of them busy
/// waits for one instead of opening another. A connection is costly to
/// open (it reads the whole schema on its first statement) and its
/// prepared statements are only worth keeping if the connection lives, so
/// an unbounded pool that dropped its overflow after a burst of reads
/// paid both again at the next burst.
pub(crate) struct ReaderPool {
    path: PathBuf,
    slots: Mutex<Slots>,
    freed: Condvar,
    max: usize,
}

struct Slots {
    idle: Vec<Connection>,
    /// Connections that exist (idle or lent out).
    open: usize,
}

/// A lent connection; goes back to the pool when dropped, even if the read
/// panicked.
struct Lent<'a> {
    pool: &'a ReaderPool,
    conn: Option<Connection>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.slots.lock().idle.push(conn);
            self.pool.freed.notify_one();
        }
    }
}

impl ReaderPool {
    pub(crate) fn new(path: PathBuf, max: usize) -> Self {
        Self {
            path,
            slots: Mutex::new(Slots {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
            max: max.max(1),
        }
    }

    fn open(&self) -> Result<Connection> {
        let c = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )?;
        c.busy_timeout(std::time::Duration::from_secs(5))?;
        // bundled SQLite has STAT4: without the query planner stability
        // guarantee every range query (`seq > ?`) is re-prepared at each
        // run (~4x its cost)
        c.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        c.set_prepared_statement_cache_capacity(READER_STATEMENTS);
        Ok(c)
    }

    /// Takes an idle connection, opens one if fewer than `max` exist, or
    /// waits for one to come back.
    fn lend(&self) -> Result<Lent<'_>> {
        loop {
            if let Some(lent) = self.try_lend() {
                return lent;
            }
            let mut slots = self.slots.lock();
            while slots.idle.is_empty() && slots.open >= self.max {
                self.freed.wait(&mut slots);
            }
        }
    }

    /// Connections that exist (idle or lent out).
    #[cfg(test)]
    pub(crate) fn open_connections(&self) -> usize {
        self.slots.lock().open
    }

    /// Takes an idle connection, or opens one if fewer than `max` exist;
    /// `None` while every connection is lent out (no waiting).
    fn try_lend(&self) -> Option<Result<Lent<'_>>> {
        let mut slots = self.slots.lock();
        if let Some(conn) = slots.idle.pop() {
            return Some(Ok(Lent {
                pool: self,
                conn: Some(conn),
            }));
        }
        if slots.open >= self.max {
            return None;
        }
        slots.open += 1;
        drop(slots);
        Some(match self.open() {
            Ok(conn) => Ok(Lent {
                pool: self,
                conn: Some(conn),
            }),
            Err(e) => {
                self.slots.lock().open -= 1;
                self.freed.notify_one();
                Err(e)
            }
        })
    }

    /// Runs `f` on a pooled connection if one is at hand without waiting
    /// (idle, or one more may be opened); otherwise gives `f` back.
    pub(crate) fn try_with<T, F>(&self, f: F) -> std::result::Result<Result<T>, F>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        match self.try_lend() {
            None => Err(f),
            Some(Err(e)) => Ok(Err(e)),
            Some(Ok(lent)) => Ok(match lent.conn.as_ref() {
                Some(conn) => f(conn),
                None => Err(StoreError::Reader("reader connection missing".into())),
            }),
        }
    }

    /// Runs `f` on a pooled connection (blocking; waits while every
    /// connection is busy).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let lent = self.lend()?;
        match lent.conn.as_ref() {
            Some(conn) => f(conn),
            None => Err(StoreError::Reader("reader connection missing".into())),
        }
    }
}
