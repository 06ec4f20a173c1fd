//! `host.user_messages_per_minute`: how many messages one user may send,
//! to bots and rooms together. Every admission is a write through the
//! store's one writer, which every user's messages and every bot's turns
//! queue on: one user's flood (64 clients sending 31,000-character
//! messages) held another user's message 1–2 s at admission alone in a
//! debug build, and more as the flooded bots' contexts grew. A token
//! bucket per user, holding a minute's worth, keeps each user to their
//! share: a person typing, or a script of theirs sending a burst, never
//! meets it.
//!
//! Only an accepted message takes a token. A retry of one already
//! accepted (the same `Idempotency-Key`) is answered `duplicate` however
//! empty the bucket: the ledger is asked before a request is refused.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;
use std::time::Duration;

use botfleet_memory::Store;
use botfleet_memory::UserId;
use tokio::time::Instant;

use super::error::ApiError;

/// The config key, as errors name it.
pub(crate) const KEY: &str = "host.user_messages_per_minute";

/// Each user's bucket, shared by every clone of the API state.
#[derive(Debug, Clone)]
pub struct MessageRate {
    per_minute: u32,
    buckets: Arc<Mutex<HashMap<UserId, Bucket>>>,
}

/// One user's tokens as of `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A token taken for a message: [`MessageRate::give_back`] returns it
/// when the message was not accepted after all.
#[derive(Debug)]
#[must_use = "give the token back when the message was not accepted"]
pub(crate) struct Taken {
    user: UserId,
}

impl MessageRate {
    /// `per_minute` messages per user and minute (at least 1), up to a
    /// minute's worth at once.
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute: per_minute.max(1),
            buckets: Arc::default(),
        }
    }

    fn capacity(&self) -> f64 {
        f64::from(self.per_minute)
    }

    /// Tokens added per second.
    fn refill(&self) -> f64 {
        f64::from(self.per_minute) / 60.0
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<UserId, Bucket>> {
        // each change is one assignment of a whole bucket: a poisoned
        // lock holds whole buckets
        self.buckets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a token for a message of `user`, or says how long until one
    /// is there.
    fn try_take(&self, user: &UserId) -> Result<Taken, Duration> {
        let now = Instant::now();
        let (capacity, refill) = (self.capacity(), self.refill());
        let mut buckets = self.lock();
        let bucket = buckets.entry(user.clone()).or_insert(Bucket {
            tokens: capacity,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        let tokens = (bucket.tokens + elapsed * refill).min(capacity);
        if tokens >= 1.0 {
            *bucket = Bucket {
                tokens: tokens - 1.0,
                at: now,
            };
            return Ok(Taken { user: user.clone() });
        }
        *bucket = Bucket { tokens, at: now };
        Err(Duration::from_secs_f64((1.0 - tokens) / refill))
    }

    /// Returns the token of a message that was not accepted (a duplicate,
    /// a conflict, an error): only accepted messages count.
    pub(crate) fn give_back(&self, taken: Taken) {
        let capacity = self.capacity();
        let mut buckets = self.lock();
        if let Some(bucket) = buckets.get_mut(&taken.user) {
            bucket.tokens = (bucket.tokens + 1.0).min(capacity);
            // a full bucket holds nothing worth keeping
            if bucket.tokens >= capacity {
                buckets.remove(&taken.user);
            }
        }
    }

    /// Admits a message of `user` to the rate: a token, or `None` for a
    /// retry of a message already accepted under `key` (the admission
    /// answers it `duplicate`, or `conflict` for another text), or
    /// `429 rate_limited` naming [`KEY`].
    pub(crate) async fn admit(
        &self,
        store: &Store,
        user: &UserId,
        key: Option<&str>,
    ) -> Result<Option<Taken>, ApiError> {
        let wait = match self.try_take(user) {
            Ok(taken) => return Ok(Some(taken)),
            Err(wait) => wait,
        };
        if let Some(key) = key
            && key_used(store, user, key).await?
        {
            return Ok(None);
        }
        // whole seconds, rounded up: a client that waits `Retry-After`
        // finds a token
        let retry_after_s = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Err(ApiError::RateLimited {
            message: format!(
                "you sent {per} messages in the last minute, all that {KEY} allows one user \
                 (to bots and rooms together); nothing of this request was saved: send it \
                 again in {retry_after_s} s, or ask the operator to raise {KEY} in fleet.toml",
                per = self.per_minute,
            ),
            limit: "user_messages_per_minute",
            key: KEY,
            retry_after_s: retry_after_s.max(1),
        })
    }
}

/// Whether `user` already used the `Idempotency-Key` `key` for a message
/// (keys name one of a user's messages across bots and rooms, as the
/// ledger keeps them: `source` is `user:<id>` for both).
async fn key_used(store: &Store, user: &UserId, key: &str) -> Result<bool, ApiError> {
    Ok(store.ledger_has_key(&format!("user:{user}"), key).await?)
}
