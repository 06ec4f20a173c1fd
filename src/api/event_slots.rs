//! The caps on open `GET /v1/events` streams. A stream holds its
//! connection for as long as its client stays, exempt from the request
//! timeout, so without caps one token holder could take every connection
//! the host accepts (`host.max_connections`) and leave the API silent for
//! everyone. Two caps apply when a stream opens:
//!
//! - per user, `host.max_streams_per_user` (a browser with the web page
//!   open holds one, shared by its tabs, or one per tab where it cannot
//!   share; a waiting `botfleet send` one): past it `429 too_many_streams`;
//! - in all, `host.max_connections` less a reserve (a quarter, at least
//!   [`MIN_RESERVE`]) that only ordinary requests can use, so they always
//!   find a connection: past it `503 streams_full`.
//!
//! An open stream holds a [`StreamSlot`] in its body; the counts drop when
//! the body is dropped, however the stream ends (the client went away, the
//! host stopped).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;

use botfleet_memory::UserId;

use super::ApiError;

/// Fewest connections kept from event streams for ordinary requests (a
/// web page makes a few at once beside its stream).
pub const MIN_RESERVE: u32 = 2;

/// Seconds a refused client is asked to wait before it tries again
/// (`Retry-After`): a slot frees when another stream ends, which a client
/// cannot see coming, and the web page retries after it, not at once.
pub(crate) const RETRY_AFTER_S: u32 = 10;

/// The counts of open event streams and their caps; clones share the
/// counts.
#[derive(Debug, Clone)]
pub struct EventStreams {
    per_user: u32,
    in_all: u32,
    max_connections: u32,
    open: Arc<Mutex<Open>>,
}

/// Open streams, in all and by user (users with none are not listed).
#[derive(Debug, Default)]
struct Open {
    in_all: u32,
    by_user: HashMap<UserId, u32>,
}

impl EventStreams {
    /// Caps for a host: `per_user` streams per user (`host.max_streams_per_user`),
    /// and in all what `max_connections` (`host.max_connections`) leaves
    /// past its reserve for ordinary requests (at least one stream).
    pub fn for_host(per_user: u32, max_connections: u32) -> Self {
        let reserve = (max_connections / 4).max(MIN_RESERVE);
        Self {
            per_user: per_user.max(1),
            in_all: max_connections.saturating_sub(reserve).max(1),
            max_connections,
            open: Arc::default(),
        }
    }

    /// Most streams open at once, all users together.
    pub fn in_all(&self) -> u32 {
        self.in_all
    }

    /// Takes a slot for a stream of `user`, or says which cap refuses it
    /// (the user's own first: closing their other streams is what helps).
    pub(crate) fn open(&self, user: &UserId) -> Result<StreamSlot, ApiError> {
        let mut open = lock(&self.open);
        let mine = open.by_user.get(user).copied().unwrap_or(0);
        if mine >= self.per_user {
            return Err(ApiError::TooManyStreams(format!(
                "you already have {mine} event streams open (GET /v1/events: a browser with the \
                 web page open holds one, shared by its tabs, and each waiting `botfleet send` \
                 one) and host.max_streams_per_user \
                 allows {}; close other tabs or clients and retry in {RETRY_AFTER_S} s, or ask \
                 the operator to raise host.max_streams_per_user in fleet.toml",
                self.per_user
            )));
        }
        if open.in_all >= self.in_all {
            return Err(ApiError::StreamsFull(format!(
                "the host has {} event streams open, all it allows: host.max_connections ({}) \
                 less {} connections kept for other requests; retry in {RETRY_AFTER_S} s (the \
                 page and the API work meanwhile, without live updates), or ask the operator \
                 to raise host.max_connections (keeping it under `ulimit -n`)",
                open.in_all,
                self.max_connections,
                self.max_connections.saturating_sub(self.in_all)
            )));
        }
        open.in_all += 1;
        *open.by_user.entry(user.clone()).or_default() += 1;
        Ok(StreamSlot {
            open: self.open.clone(),
            user: user.clone(),
        })
    }

    /// Streams open now: `(in all, of user)`.
    pub fn open_now(&self, user: &UserId) -> (u32, u32) {
        let open = lock(&self.open);
        (open.in_all, open.by_user.get(user).copied().unwrap_or(0))
    }
}

/// The counts, also after a panic elsewhere while they were locked: each
/// change is one statement, so a poisoned lock holds whole counts.
fn lock(open: &Mutex<Open>) -> MutexGuard<'_, Open> {
    open.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One open stream, counted until it is dropped.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    open: Arc<Mutex<Open>>,
    user: UserId,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = lock(&self.open);
        open.in_all = open.in_all.saturating_sub(1);
        if let Some(mine) = open.by_user.get_mut(&self.user) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                open.by_user.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn user(id: &str) -> UserId {
        UserId::new(id).unwrap()
    }

    #[test]
    fn a_quarter_of_the_connections_and_at_least_two_are_kept_for_requests() {
        let caps = |max| EventStreams::for_host(16, max).in_all();
        assert_eq!(
            [4, 5, 8, 9, 12, 512, 65_536].map(caps),
            [2, 3, 6, 7, 9, 384, 49_152]
        );
    }

    #[test]
    fn slots_are_counted_per_user_and_in_all_until_dropped() {
        let streams = EventStreams::for_host(2, 8);
        let (alice, bob, carol) = (user("alice"), user("bob"), user("carol"));
        let a1 = streams.open(&alice).unwrap();
        let _a2 = streams.open(&alice).unwrap();
        let e = streams.open(&alice).unwrap_err();
        assert!(matches!(e, ApiError::TooManyStreams(_)), "{e:?}");
        assert!(e.to_string().contains("2 event streams open"), "{e}");
        let _b = [streams.open(&bob).unwrap(), streams.open(&bob).unwrap()];
        let _c = [streams.open(&carol).unwrap(), streams.open(&carol).unwrap()];
        assert_eq!(streams.open_now(&alice), (6, 2));
        let e = streams.open(&user("dave")).unwrap_err();
        assert!(matches!(e, ApiError::StreamsFull(_)), "{e:?}");
        assert!(e.to_string().contains("host.max_connections (8)"), "{e}");
        drop(a1);
        assert_eq!(streams.open_now(&alice), (5, 1));
        let _d = streams.open(&user("dave")).unwrap();
        assert_eq!(streams.open_now(&user("dave")), (6, 1));
    }
}
