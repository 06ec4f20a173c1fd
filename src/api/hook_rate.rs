//! `[[bots.hooks]] deliveries_per_minute`: how many new deliveries one
//! webhook admits. Every delivery is a write through the store's one
//! writer and wakes its bot: 400 signed deliveries from 16 threads were all
//! admitted in 0.7 s, and one captured request, replayed under fresh
//! delivery ids, could flood a bot the same way. A token bucket per hook,
//! holding a minute's worth, keeps a sender's bursts and refuses a flood
//! with `429 rate_limited` and `Retry-After`, as a user's messages are
//! (`message_rate.rs`).
//!
//! Only an accepted delivery takes a token: a sender's retry of one
//! already admitted (its delivery id, or its signature replayed) is
//! answered `duplicate` however empty the bucket.
//!
//! [`Seen`] is the other half of that guard: the signatures of a hook's
//! recent deliveries, so that a captured request sent again under a fresh
//! delivery id is answered as the delivery it repeats rather than admitted
//! again. It is bounded ([`MAX_REMEMBERED`] per hook) and kept in memory as
//! a cache of the store's (`memory/src/store/signatures.rs`, written with
//! each delivery's admission, bounded alike): it holds only deliveries
//! admitted, and the store answers for those before a restart
//! (docs/security.md, Webhooks).
//!
//! Deliveries of one signature take turns ([`SignatureTurns`]), from the
//! lookup of the signature to the answer of the admission: each finds the
//! one before it admitted (and is its duplicate) or not (and may be
//! admitted itself). Looked up, remembered, then admitted without turns, a
//! request that came in between took a delivery still in flight for one
//! admitted: it was admitted on its own, without the signature's row, even
//! when the first was then refused for the rate (`429`).

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;
use std::time::Duration;

use botfleet_memory::InputDigest;
use tokio::time::Instant;

use super::ApiError;
use super::ApiState;
use super::HookSecret;

/// The config key, as errors name it.
pub(crate) const KEY: &str = "bots[].hooks[].deliveries_per_minute";

/// A hook's deliveries per minute when fleet.toml sets none.
pub const DEFAULT_DELIVERIES_PER_MINUTE: u32 = 120;

/// Most signatures remembered per hook, in memory and in the store (the
/// oldest are forgotten first): about 1 MB in memory, 2 MB in the store.
pub(crate) const MAX_REMEMBERED: usize = 10_000;

/// One hook's bucket.
#[derive(Debug)]
pub(crate) struct HookRate {
    per_minute: u32,
    /// Tokens as of an instant; `None` while full.
    bucket: Mutex<Option<(f64, Instant)>>,
}

/// A token taken for a delivery: [`HookRate::give_back`] returns it when
/// the delivery was not accepted after all.
#[derive(Debug)]
#[must_use = "give the token back when the delivery was not accepted"]
pub(crate) struct Taken;

impl HookRate {
    /// `per_minute` deliveries a minute (at least 1), up to a minute's
    /// worth at once.
    pub(crate) fn new(per_minute: u32) -> Self {
        Self {
            per_minute: per_minute.max(1),
            bucket: Mutex::new(None),
        }
    }

    fn capacity(&self) -> f64 {
        f64::from(self.per_minute)
    }

    /// Tokens added per second.
    fn refill(&self) -> f64 {
        f64::from(self.per_minute) / 60.0
    }

    fn lock(&self) -> MutexGuard<'_, Option<(f64, Instant)>> {
        // each change is one assignment of the whole bucket
        self.bucket.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tokens there are now.
    fn tokens(&self, bucket: Option<(f64, Instant)>, now: Instant) -> f64 {
        match bucket {
            None => self.capacity(),
            Some((tokens, at)) => {
                let elapsed = now.saturating_duration_since(at).as_secs_f64();
                (tokens + elapsed * self.refill()).min(self.capacity())
            }
        }
    }

    /// Takes a token for a delivery, or says how long until one is there.
    pub(crate) fn try_take(&self) -> Result<Taken, Duration> {
        let now = Instant::now();
        let mut bucket = self.lock();
        let tokens = self.tokens(*bucket, now);
        if tokens >= 1.0 {
            *bucket = Some((tokens - 1.0, now));
            return Ok(Taken);
        }
        *bucket = Some((tokens, now));
        Err(Duration::from_secs_f64((1.0 - tokens) / self.refill()))
    }

    /// Returns the token of a delivery that was not accepted.
    pub(crate) fn give_back(&self, _taken: Taken) {
        let now = Instant::now();
        let mut bucket = self.lock();
        let tokens = (self.tokens(*bucket, now) + 1.0).min(self.capacity());
        *bucket = (tokens < self.capacity()).then_some((tokens, now));
    }

    /// The refusal of a delivery that finds no token, `wait` before one
    /// is there.
    pub(crate) fn refusal(&self, bot: &str, hook: &str, wait: Duration) -> ApiError {
        // whole seconds, rounded up: a sender that waits `Retry-After`
        // finds a token
        let retry_after_s = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
        ApiError::RateLimited {
            message: format!(
                "webhook {hook} of bot {bot} reached the limit of {per} deliveries a minute \
                 that its deliveries_per_minute allows (a minute's worth at once, then as the \
                 minute refills them); nothing of this delivery was saved: \
                 send it again (same X-Botfleet-Delivery) in {retry_after_s} s, or ask the \
                 operator to raise deliveries_per_minute of this hook in fleet.toml",
                per = self.per_minute,
            ),
            limit: "deliveries_per_minute",
            key: KEY,
            retry_after_s,
        }
    }
}

/// Signatures of a hook's recent deliveries, each with the delivery id it
/// first came under: the same signature under another id is a replay of
/// that delivery (the same body, signed at the same time).
#[derive(Debug, Default)]
pub(crate) struct Seen {
    by_tag: HashMap<Vec<u8>, (String, Instant)>,
    /// Tags in the order they were first remembered.
    order: VecDeque<Vec<u8>>,
}

impl Seen {
    /// The delivery id `tag` was first seen under, if it is remembered.
    pub(crate) fn known(&mut self, tag: &[u8]) -> Option<String> {
        let now = Instant::now();
        self.forget_expired(now);
        self.by_tag
            .get(tag)
            .filter(|(_, until)| *until > now)
            .map(|(first, _)| first.clone())
    }

    /// The delivery id `tag` was first seen under, if it is remembered;
    /// else it is remembered now under `delivery` for `keep`.
    pub(crate) fn first_or_remember(
        &mut self,
        tag: &[u8],
        delivery: &str,
        keep: Duration,
    ) -> Option<String> {
        let now = Instant::now();
        self.forget_expired(now);
        if let Some((first, until)) = self.by_tag.get(tag)
            && *until > now
        {
            return Some(first.clone());
        }
        if self
            .by_tag
            .insert(tag.to_vec(), (delivery.to_owned(), now + keep))
            .is_none()
        {
            self.order.push_back(tag.to_vec());
        }
        while self.order.len() > MAX_REMEMBERED {
            if let Some(oldest) = self.order.pop_front() {
                self.by_tag.remove(&oldest);
            }
        }
        None
    }

    /// Forgets the oldest tags while they are expired.
    fn forget_expired(&mut self, now: Instant) {
        while let Some(oldest) = self.order.front() {
            if self
                .by_tag
                .get(oldest)
                .is_some_and(|(_, until)| *until > now)
            {
                break;
            }
            if let Some(oldest) = self.order.pop_front() {
                self.by_tag.remove(&oldest);
            }
        }
    }
}

/// A delivery's signature, as the ledger and the store know it.
pub(crate) struct Signed {
    /// The ledger source of the hook's deliveries.
    pub(crate) source: String,
    /// What the store keeps of the signature (not the signature itself).
    pub(crate) signature: InputDigest,
    /// The digest of the delivery's admission.
    pub(crate) digest: InputDigest,
    /// The signature (the HMAC), as the memory keeps it.
    pub(crate) tag: Vec<u8>,
}

/// The delivery `signed` first came with, if it is remembered: by this
/// process (the memory), else by the store (what came before a restart),
/// then remembered in the memory for what is left of its window. `None`:
/// no delivery of it was admitted, and the caller may admit this one with
/// the signature's row in the store. Called in the signature's turn
/// ([`SignatureTurns`]).
pub(crate) async fn first_delivery(
    state: &ApiState,
    secret: &HookSecret,
    signed: &Signed,
    now_ms: i64,
) -> Result<Option<String>, ApiError> {
    if let Some(first) = secret.seen().known(&signed.tag) {
        return Ok(Some(first));
    }
    let stored = state
        .fleet
        .store()
        .remembered_signature(&signed.source, &signed.signature, &signed.digest)
        .await?;
    Ok(stored.map(|(first, until_ms)| {
        let left = u64::try_from(until_ms.saturating_sub(now_ms)).unwrap_or(0);
        let left = Duration::from_millis(left.max(1));
        secret
            .seen()
            .first_or_remember(&signed.tag, &first, left)
            .unwrap_or(first)
    }))
}

/// Turns of the deliveries of one signature (see the module's doc): a
/// lock per signature that some request holds or waits for, gone when
/// none does.
#[derive(Debug, Default)]
pub(crate) struct SignatureTurns {
    by_tag: Mutex<Locks>,
}

/// Each signature's lock, and how many requests hold or wait for it.
type Locks = HashMap<Vec<u8>, (Arc<tokio::sync::Mutex<()>>, usize)>;

/// A request's turn with its signature, until dropped.
pub(crate) struct Turn {
    // dropped first: the lock is free before its entry may go
    _held: tokio::sync::OwnedMutexGuard<()>,
    _waiting: Waiting,
}

/// A request counted among those that hold or wait for a signature's
/// lock; dropped (the request's turn over, or its wait given up), the
/// last one removes the lock.
struct Waiting {
    turns: Arc<SignatureTurns>,
    tag: Vec<u8>,
}

impl SignatureTurns {
    fn lock(&self) -> MutexGuard<'_, Locks> {
        // each change leaves the map consistent before it can panic
        self.by_tag.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The turn of `tag`, once the requests before it with the same
    /// signature have had theirs.
    pub(crate) async fn take(self: &Arc<Self>, tag: &[u8]) -> Turn {
        let lock = {
            let mut by_tag = self.lock();
            let (lock, count) = by_tag.entry(tag.to_vec()).or_default();
            *count += 1;
            Arc::clone(lock)
        };
        let waiting = Waiting {
            turns: Arc::clone(self),
            tag: tag.to_vec(),
        };
        Turn {
            _held: lock.lock_owned().await,
            _waiting: waiting,
        }
    }

    /// How many signatures have a lock now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut by_tag = self.turns.lock();
        if let Some((_, count)) = by_tag.get_mut(&self.tag) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                by_tag.remove(&self.tag);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A minute's worth at once, then one token every 60/n seconds; a
    /// token given back is there again.
    #[tokio::test(start_paused = true)]
    async fn a_burst_of_a_minute_then_the_refill() {
        let rate = HookRate::new(6);
        let taken: Vec<Taken> = (0..6).map(|_| rate.try_take().unwrap()).collect();
        let wait = rate.try_take().unwrap_err();
        assert_eq!(wait, Duration::from_secs(10));
        let e = rate.refusal("r", "gh", wait);
        assert!(
            e.to_string().contains("6 deliveries") && e.to_string().contains("in 10 s"),
            "{e}"
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        let one = rate.try_take().unwrap();
        assert!(rate.try_take().is_err());
        rate.give_back(one);
        let _again = rate.try_take().unwrap();
        assert!(rate.try_take().is_err());
        drop(taken);
        // a full minute later the whole burst is there again
        tokio::time::advance(Duration::from_secs(60)).await;
        for _ in 0..6 {
            let _t = rate.try_take().unwrap();
        }
        assert!(rate.try_take().is_err());
    }

    /// A signature is answered with the delivery it first came under while
    /// it is remembered; an expired one is new again, and the oldest go
    /// first past the cap.
    #[tokio::test(start_paused = true)]
    async fn signatures_are_remembered_for_a_while() {
        let mut seen = Seen::default();
        let hour = Duration::from_secs(3600);
        assert_eq!(seen.first_or_remember(b"a", "d1", hour), None);
        assert_eq!(
            seen.first_or_remember(b"a", "d2", hour).as_deref(),
            Some("d1")
        );
        assert_eq!(seen.known(b"a").as_deref(), Some("d1"));
        assert_eq!(seen.known(b"b"), None);
        tokio::time::advance(hour).await;
        assert_eq!(seen.known(b"a"), None);
        assert_eq!(seen.first_or_remember(b"a", "d5", hour), None);
        for i in 0..=MAX_REMEMBERED {
            let _ = seen.first_or_remember(format!("t{i}").as_bytes(), "d", hour);
        }
        assert!(seen.by_tag.len() <= MAX_REMEMBERED && seen.order.len() <= MAX_REMEMBERED);
        assert_eq!(
            seen.first_or_remember(b"a", "d6", hour),
            None,
            "the oldest went"
        );
    }

    /// Requests of one signature take turns, others do not wait for them,
    /// and a lock goes with the last request that held or waited for it
    /// (one that gave up its wait included).
    #[tokio::test]
    async fn one_signature_at_a_time() {
        let turns = Arc::new(SignatureTurns::default());
        let first = turns.take(b"a").await;
        let _other = turns.take(b"b").await;
        let waiter = tokio::spawn({
            let turns = Arc::clone(&turns);
            async move { turns.take(b"a").await }
        });
        let given_up = {
            let turns = Arc::clone(&turns);
            tokio::spawn(async move { turns.take(b"a").await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished() && !given_up.is_finished());
        given_up.abort();
        assert!(given_up.await.is_err_and(|e| e.is_cancelled()));
        drop(first);
        let second = waiter.await.unwrap();
        assert_eq!(turns.len(), 2);
        drop(second);
        assert_eq!(turns.len(), 1, "a's lock went with its last request");
    }
}
