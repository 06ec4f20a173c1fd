//! The store's health as its writer and the indexer saw it, for
//! `GET /healthz` (docs/operations.md, "Monitoring"), and the gate that
//! keeps a failure repeated many times a second from flooding the log.
//!
//! - A damaged database (`SQLITE_CORRUPT`, `SQLITE_NOTADB`) seen by the
//!   writer once is latched until the host stops: only the writes that
//!   happen to touch a damaged page fail by themselves, so without the
//!   latch the API went on accepting messages (`202`) that the documented
//!   recovery, a restore from a backup, then loses with no client told.
//!   Latched, every write is refused with [`StoreError::Damaged`] and the
//!   API answers `503 storage_error`: clients keep their Idempotency-Key
//!   and send again after the restore.
//! - The last storage failure of a write (full disk, failing disk, a
//!   deleted file, damage) and whether a write succeeded since.
//! - Derived data that stopped until a restart (the search index's or the
//!   JSONL mirror's directory deleted while the host runs).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use chrono::DateTime;
use chrono::SecondsFormat;
use chrono::Utc;

use crate::error::StoreError;

/// How long a store failure keeps `/healthz` at `degraded` after writes
/// work again.
pub const DEGRADED_AFTER_FAILURE: Duration = Duration::from_secs(600);

/// How often a repeated identical failure is logged again (with the
/// count of its repeats since).
pub const REPEAT_LOG_EVERY: Duration = Duration::from_secs(60);

/// What `/healthz` says of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthState {
    /// Writes work and nothing stopped.
    Ok,
    /// Writes work, but one failed recently, or derived data (the search
    /// index, the JSONL mirror) stopped until a restart.
    Degraded,
    /// The store cannot save anything: its last write failed, or it is
    /// damaged or its file was deleted (until a restart).
    Failing,
}

impl HealthState {
    /// The word `/healthz` starts its answer with.
    pub fn word(self) -> &'static str {
        match self {
            HealthState::Ok => "ok",
            HealthState::Degraded => "degraded",
            HealthState::Failing => "failing",
        }
    }
}

/// The store's health now: its state and one line per reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthReport {
    /// The overall state.
    pub state: HealthState,
    /// Why, one line each (empty when `Ok`).
    pub reasons: Vec<String>,
}

impl HealthReport {
    /// Whether the store cannot save anything (`/healthz` answers `503`).
    pub fn failing(&self) -> bool {
        self.state == HealthState::Failing
    }

    /// The answer of `/healthz`: the state's word (`ok`, `degraded`,
    /// `failing`), then one line per reason.
    pub fn text(&self) -> String {
        let mut text = self.state.word().to_owned();
        for reason in &self.reasons {
            text.push('\n');
            text.push_str(reason);
        }
        if !self.reasons.is_empty() {
            text.push('\n');
        }
        text
    }
}

/// One failure: its kind (`disk_full`, `disk_io`, `file_gone`,
/// `damaged`), its message, and when it happened.
#[derive(Debug, Clone)]
struct Failure {
    kind: &'static str,
    message: String,
    at: DateTime<Utc>,
    seen: Instant,
}

#[derive(Debug, Default)]
struct State {
    /// The first damage seen: every write is refused until the host stops.
    damaged: Option<Failure>,
    /// The last storage failure of a write.
    last_failure: Option<Failure>,
    /// Whether a write succeeded after `last_failure`.
    written_since: bool,
    /// Derived data stopped until a restart, by part (`search index`,
    /// `JSONL mirror`).
    stopped: Vec<(&'static str, Failure)>,
    /// Writes the database had committed and no longer holds, found at
    /// the start (`Store::note_lost_writes`).
    lost: Option<Failure>,
}

/// The store's health; see the module docs. One per store, shared by its
/// writer, its indexer and the API (`Store::stats`).
#[derive(Debug, Default)]
pub struct StoreHealth {
    state: Mutex<State>,
    gate: LogGate,
}

impl StoreHealth {
    /// The damage latched by [`StoreHealth::note_write_failure`], as the
    /// error every write is answered with until the host stops.
    pub fn damaged(&self) -> Option<StoreError> {
        let state = self.lock();
        let failure = state.damaged.as_ref()?;
        Some(StoreError::Damaged {
            detail: failure.message.clone(),
        })
    }

    /// Notes a write that failed with `e`; errors that are no storage
    /// failure (a rejected write, a record not found) are not noted. A
    /// damaged database is latched.
    pub(crate) fn note_write_failure(&self, e: &StoreError) {
        let (kind, message) = match e {
            StoreError::DiskFull { detail } => ("disk_full", detail.clone()),
            StoreError::DiskIo { detail } => ("disk_io", detail.clone()),
            StoreError::FileGone { .. } => ("file_gone", e.to_string()),
            StoreError::Damaged { detail } => ("damaged", detail.clone()),
            StoreError::Sqlite(_)
            | StoreError::Io { .. }
            | StoreError::Corrupt { .. }
            | StoreError::WriterGone
            | StoreError::InUse { .. }
            | StoreError::HistoryGone { .. }
            | StoreError::SchemaTooNew { .. }
            | StoreError::SchemaOlder { .. }
            | StoreError::NotFound { .. }
            | StoreError::Rejected(_)
            | StoreError::Taken { .. }
            | StoreError::Id(_)
            | StoreError::Reader(_)
            | StoreError::NotWritable { .. }
            | StoreError::Foreign { .. } => return,
        };
        let failure = Failure {
            kind,
            message,
            at: Utc::now(),
            seen: Instant::now(),
        };
        let mut state = self.lock();
        if kind == "damaged" && state.damaged.is_none() {
            tracing::error!(
                detail = %failure.message,
                "the store's database is damaged: every write is refused from now on (the API answers 503 storage_error), so that nothing more is accepted that a restore would lose; stop the host and restore fleet.db from a backup (docs/operations.md, \"Backups and restore\")"
            );
            state.damaged = Some(failure.clone());
        }
        state.last_failure = Some(failure);
        state.written_since = false;
    }

    /// Notes a committed write.
    pub(crate) fn note_written(&self) {
        let mut state = self.lock();
        if state.last_failure.is_some() {
            state.written_since = true;
        }
    }

    /// Notes that `part` (`search index`, `JSONL mirror`) stopped until
    /// the host restarts, and why. Noted once per part.
    pub(crate) fn note_stopped(&self, part: &'static str, why: String) {
        let mut state = self.lock();
        if state.stopped.iter().any(|(p, _)| *p == part) {
            return;
        }
        state.stopped.push((
            part,
            Failure {
                kind: "stopped",
                message: why,
                at: Utc::now(),
                seen: Instant::now(),
            },
        ));
    }

    /// Notes, until the host stops, that the database lost committed
    /// writes (`Store::note_lost_writes`).
    pub(crate) fn note_lost(&self, detail: String) {
        self.lock().lost = Some(Failure {
            kind: "lost",
            message: detail,
            at: Utc::now(),
            seen: Instant::now(),
        });
    }

    /// The state and its reasons now.
    pub fn report(&self) -> HealthReport {
        let state = self.lock();
        let mut reasons = Vec::new();
        let mut worst = HealthState::Ok;
        if let Some(d) = &state.damaged {
            worst = HealthState::Failing;
            reasons.push(format!(
                "store: damaged since {} ({}): every write is refused; stop the host and restore fleet.db from a backup (docs/operations.md, \"Backups and restore\")",
                stamp(d.at),
                d.message
            ));
        } else if let Some(f) = &state.last_failure {
            if !state.written_since {
                worst = HealthState::Failing;
                reasons.push(format!(
                    "store: the last write failed at {} ({}: {}); nothing was written since",
                    stamp(f.at),
                    f.kind,
                    f.message
                ));
            } else if f.seen.elapsed() < DEGRADED_AFTER_FAILURE {
                worst = HealthState::Degraded;
                reasons.push(format!(
                    "store: a write failed at {} ({}: {}); writes succeeded since",
                    stamp(f.at),
                    f.kind,
                    f.message
                ));
            }
        }
        if let Some(f) = &state.lost {
            if worst == HealthState::Ok {
                worst = HealthState::Degraded;
            }
            reasons.push(format!("store: found at {}: {}", stamp(f.at), f.message));
        }
        for (part, f) in &state.stopped {
            if worst == HealthState::Ok {
                worst = HealthState::Degraded;
            }
            reasons.push(format!("{part}: stopped at {}: {}", stamp(f.at), f.message));
        }
        HealthReport {
            state: worst,
            reasons,
        }
    }

    /// Whether a failure logged as `message` should be logged now: the
    /// first time, then once per [`REPEAT_LOG_EVERY`] with the count of
    /// its repeats since (`Some(repeats)`); `None` to stay silent.
    pub(crate) fn log_now(&self, message: &str) -> Option<u64> {
        self.gate.log_now(message)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // a panic while holding it leaves plain data, still usable
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Keeps a failure repeated many times a second (a retry loop, a timer)
/// to one log line per [`REPEAT_LOG_EVERY`], with a count.
#[derive(Debug, Default)]
pub(crate) struct LogGate {
    /// Message → when it was last logged, and repeats since.
    seen: Mutex<HashMap<String, (Instant, u64)>>,
}

/// Distinct messages remembered; older ones are forgotten past it.
const GATE_CAP: usize = 64;

impl LogGate {
    /// See [`StoreHealth::log_now`].
    pub(crate) fn log_now(&self, message: &str) -> Option<u64> {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        if let Some((last, repeats)) = seen.get_mut(message) {
            if now.duration_since(*last) < REPEAT_LOG_EVERY {
                *repeats += 1;
                return None;
            }
            let told = *repeats;
            *last = now;
            *repeats = 0;
            return Some(told);
        }
        if seen.len() >= GATE_CAP {
            seen.retain(|_, (last, _)| now.duration_since(*last) < REPEAT_LOG_EVERY);
        }
        if seen.len() < GATE_CAP {
            seen.insert(message.to_owned(), (now, 0));
        }
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_is_latched_and_a_failure_is_reported_until_a_write_succeeds() {
        let health = StoreHealth::default();
        assert_eq!(health.report().state, HealthState::Ok);
        health.note_write_failure(&StoreError::DiskFull {
            detail: "database or disk is full".into(),
        });
        let report = health.report();
        assert_eq!(report.state, HealthState::Failing, "{report:?}");
        assert!(report.reasons[0].contains("disk_full"), "{report:?}");
        health.note_written();
        assert_eq!(health.report().state, HealthState::Degraded);
        assert!(health.damaged().is_none());
        health.note_write_failure(&StoreError::Damaged {
            detail: "database disk image is malformed".into(),
        });
        health.note_written();
        assert!(matches!(health.damaged(), Some(StoreError::Damaged { .. })));
        assert_eq!(health.report().state, HealthState::Failing);
        health.note_write_failure(&StoreError::Rejected("a caller's race".into()));
        assert!(health.report().reasons[0].contains("malformed"));
    }

    #[test]
    fn a_repeated_message_is_logged_once_until_the_minute_is_over() {
        let gate = LogGate::default();
        assert_eq!(gate.log_now("a"), Some(0));
        assert_eq!(gate.log_now("a"), None);
        assert_eq!(gate.log_now("a"), None);
        assert_eq!(gate.log_now("b"), Some(0));
    }
}
