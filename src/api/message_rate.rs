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
//! empty the bucket: the ledger is asked before a request is refused. A
//! request whose key another request of the user is being admitted under
//! takes no token either: it is that message again (or a conflict), and
//! the ledger has no row for it yet (QA, 2026-12-05: 50 clients sending
//! one message at once held a token each while the first was written,
//! and other messages of the user, and some of the copies, were refused
//! `429` with two messages accepted).

use std::collections::HashMap;
use std::collections::VecDeque;
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
    keys: Arc<Mutex<Keys>>,
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

/// A user's `Idempotency-Key`, as [`Keys`] holds it.
type UserKey = (UserId, String);

/// The keys whose requests take no token: those requests are being
/// admitted under, and those of messages accepted within the last
/// [`RECENT`] (a client's retries come within it; later ones find their
/// message in the ledger when the bucket is empty). At most a minute's
/// worth of accepted messages per user are remembered: what the rate
/// lets through.
#[derive(Debug, Default)]
struct Keys {
    /// Keys being admitted under, with how many requests hold each.
    flying: HashMap<UserKey, usize>,
    /// Keys of messages accepted lately, with when.
    recent: HashMap<UserKey, Instant>,
    /// `recent` in the order accepted, to forget the oldest first.
    order: VecDeque<(Instant, UserKey)>,
}

/// How long the key of an accepted message is remembered.
const RECENT: Duration = Duration::from_secs(60);

impl Keys {
    /// Forgets the keys accepted more than [`RECENT`] before `now`.
    fn forget_old(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front()
            && now.saturating_duration_since(*at) > RECENT
        {
            if let Some((at, key)) = self.order.pop_front()
                && self.recent.get(&key) == Some(&at)
            {
                self.recent.remove(&key);
            }
        }
    }
}

/// A request being admitted under an `Idempotency-Key`: the key is in
/// [`Keys::flying`] until it is dropped.
#[derive(Debug)]
struct Flight {
    keys: Arc<Mutex<Keys>>,
    key: UserKey,
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = keys.flying.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                keys.flying.remove(&self.key);
            }
        }
    }
}

/// What [`MessageRate::admit`] let through: a token (none for a retry
/// of a message accepted or being admitted), and the request's key
/// marked as being admitted. [`Admission::settle`] it with the outcome.
#[derive(Debug)]
#[must_use = "settle the admission with whether the message was accepted"]
pub(crate) struct Admission {
    token: Option<Taken>,
    flight: Option<Flight>,
}

impl Admission {
    /// Gives the token back unless the message was `accepted`, remembers
    /// the key of an accepted one, and lets the key go.
    pub(crate) fn settle(self, rate: &MessageRate, accepted: bool) {
        if let Some(token) = self.token
            && !accepted
        {
            rate.give_back(token);
        }
        if let Some(flight) = &self.flight
            && accepted
        {
            let now = Instant::now();
            let mut keys = flight.keys.lock().unwrap_or_else(PoisonError::into_inner);
            keys.forget_old(now);
            keys.recent.insert(flight.key.clone(), now);
            keys.order.push_back((now, flight.key.clone()));
        }
    }
}

impl MessageRate {
    /// `per_minute` messages per user and minute (at least 1), up to a
    /// minute's worth at once.
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute: per_minute.max(1),
            buckets: Arc::default(),
            keys: Arc::default(),
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

    /// Marks `key` of `user` as being admitted (the caller holds `keys`).
    fn fly(&self, keys: &mut Keys, key: UserKey) -> Flight {
        *keys.flying.entry(key.clone()).or_insert(0) += 1;
        Flight {
            keys: self.keys.clone(),
            key,
        }
    }

    /// A token for a message of `user`, none for one whose `key` a request
    /// let through is being admitted under or whose message was accepted
    /// lately; or how long until a token is there. The key is marked as
    /// being admitted only for a request let through: a copy sent
    /// alongside one refused here takes a token of its own (else each
    /// message sent twice at once would pass the rate once for free).
    fn claim(&self, user: &UserId, key: Option<&str>) -> Result<Admission, Duration> {
        let Some(key) = key else {
            let token = self.try_take(user)?;
            return Ok(Admission {
                token: Some(token),
                flight: None,
            });
        };
        let key = (user.clone(), key.to_owned());
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        keys.forget_old(Instant::now());
        let passed = keys.recent.contains_key(&key) || keys.flying.contains_key(&key);
        let token = if passed {
            None
        } else {
            Some(self.try_take(user)?)
        };
        let flight = self.fly(&mut keys, key);
        Ok(Admission {
            token,
            flight: Some(flight),
        })
    }

    /// Admits a message of `user` to the rate: a token; none for a retry
    /// of a message accepted or being admitted under `key` (the admission
    /// answers it `duplicate`, or `conflict` for another text); or
    /// `429 rate_limited` naming [`KEY`].
    pub(crate) async fn admit(
        &self,
        store: &Store,
        user: &UserId,
        key: Option<&str>,
    ) -> Result<Admission, ApiError> {
        let wait = match self.claim(user, key) {
            Ok(admission) => return Ok(admission),
            Err(wait) => wait,
        };
        if let Some(key) = key
            && key_used(store, user, key).await?
        {
            let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
            let flight = self.fly(&mut keys, (user.clone(), key.to_owned()));
            return Ok(Admission {
                token: None,
                flight: Some(flight),
            });
        }
        // whole seconds, rounded up: a client that waits `Retry-After`
        // finds a token
        let retry_after_s = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Err(ApiError::RateLimited {
            message: format!(
                "you reached the limit of {per} messages a minute that {KEY} allows one user \
                 (to bots and rooms together, a minute's worth at once, then as the minute \
                 refills them); nothing of this request was saved: send it again in \
                 {retry_after_s} s, or ask the operator to raise {KEY} in fleet.toml",
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The copies of a message take no token while a copy let through is
    /// being admitted and for a minute after it was accepted; a copy sent
    /// beside one refused for the rate is refused too (no key is marked
    /// for a refused request), and other keys take tokens as ever.
    #[tokio::test(start_paused = true)]
    async fn copies_take_no_token_and_refused_ones_mark_nothing() {
        let rate = MessageRate::new(2);
        let alice = UserId::new("alice").unwrap();
        let first = rate.claim(&alice, Some("k")).unwrap();
        assert!(first.token.is_some());
        // a copy while the first is being admitted
        let copy = rate.claim(&alice, Some("k")).unwrap();
        assert!(copy.token.is_none());
        copy.settle(&rate, false);
        first.settle(&rate, true);
        // accepted: its copies take nothing for a minute
        let copy = rate.claim(&alice, Some("k")).unwrap();
        assert!(copy.token.is_none());
        copy.settle(&rate, false);
        let other = rate.claim(&alice, Some("other")).unwrap();
        assert!(other.token.is_some());
        other.settle(&rate, true);
        // the bucket is empty: a new key is refused, and so is its copy
        // sent beside it
        assert!(rate.claim(&alice, Some("new")).is_err());
        assert!(rate.claim(&alice, Some("new")).is_err());
        assert!(rate.claim(&alice, None).is_err());
        // bob has his own bucket
        let bob = UserId::new("bob").unwrap();
        rate.claim(&bob, Some("new")).unwrap().settle(&rate, true);
        // a minute on, the keys are forgotten (the ledger answers their
        // copies from then on) and the bucket full again
        tokio::time::advance(RECENT + Duration::from_secs(1)).await;
        let copy = rate.claim(&alice, Some("k")).unwrap();
        assert!(copy.token.is_some());
        copy.settle(&rate, false);
        let keys = rate.keys.lock().unwrap();
        assert!(keys.flying.is_empty(), "{keys:?}");
        assert!(!keys.recent.contains_key(&(alice, "k".to_owned())));
    }
}
