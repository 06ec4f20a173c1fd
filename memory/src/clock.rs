//! Wall-clock time, injected so that tests can move it by hand.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering;

use chrono::DateTime;
use chrono::Utc;

/// A source of wall-clock time in milliseconds since the Unix epoch.
///
/// Durations inside the runtime use tokio's clock (which tests pause); this
/// trait is for times that are *stored* (entry timestamps, TTLs, routine fire
/// times), so that a test can set them without sleeping.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// The same instant as a UTC date-time.
    fn now(&self) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_millis(self.now_ms()).unwrap_or_default()
    }
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        Utc::now().timestamp_millis()
    }
}

/// A clock that only moves when told to. Cheap to clone; clones share time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    ms: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            ms: Arc::new(AtomicI64::new(start.timestamp_millis())),
        }
    }

    /// Moves the clock forward (or backward, for a negative value).
    pub fn advance_ms(&self, delta: i64) {
        self.ms.fetch_add(delta, Ordering::SeqCst);
    }

    /// Sets the clock to an instant.
    pub fn set(&self, at: DateTime<Utc>) {
        self.ms.store(at.timestamp_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.ms.load(Ordering::SeqCst)
    }
}
