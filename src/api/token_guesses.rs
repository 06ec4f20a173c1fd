//! `host.unknown_tokens_per_minute`: how many requests with a bearer token
//! no user has one client may send in a minute. Past it, every request of
//! that client that needs a token is answered `429 rate_limited` with
//! `Retry-After`, the right token's too, until its minute is over: a
//! refusal that let the right token through would tell a guesser when it
//! guessed right. Before, a client could try tokens as fast as the host
//! answered (QA: nothing slowed a guesser down).
//!
//! A client is its address: an IPv4 address, or the /64 network of an
//! IPv6 one (one host holds a whole /64). Only an unknown token counts: a
//! request with no `Authorization` header or a malformed one guesses
//! nothing. A person who mistypes a token a few times never meets it; a
//! script of theirs with a stale token hears why it is refused, and that
//! the minute's end lets it in again.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

use tokio::time::Instant;

use super::error::ApiError;

/// The config key, as errors name it.
pub(crate) const KEY: &str = "host.unknown_tokens_per_minute";

/// The window each client's count covers.
const WINDOW: Duration = Duration::from_secs(60);

/// Most clients counted at once: past it, clients whose minute is over
/// are forgotten first, and a new client is not counted while every one
/// held is in its minute (a bound on memory that an attacker with many
/// addresses cannot push past; each one it holds is still refused).
const MAX_CLIENTS: usize = 100_000;

/// The unknown tokens of each client in its current minute, shared by
/// every clone of the API state.
#[derive(Debug, Clone)]
pub struct TokenGuesses {
    per_minute: u32,
    clients: Arc<Mutex<HashMap<IpAddr, Window>>>,
}

/// A client's count since `started`.
#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    count: u32,
}

impl TokenGuesses {
    /// Allows `per_minute` unknown tokens per client and minute.
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute,
            clients: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Refuses a request of `client` once it sent `per_minute` unknown
    /// tokens in its current minute, saying when it may try again.
    pub(crate) fn check(&self, client: IpAddr, now: Instant) -> Result<(), ApiError> {
        let client = client_of(client);
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(window) = clients.get(&client) else {
            return Ok(());
        };
        let ends = window.started + WINDOW;
        if window.count < self.per_minute || ends <= now {
            return Ok(());
        }
        // rounded up: a client that waits as told is let in
        let wait = ends.duration_since(now);
        let retry_after_s = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Err(ApiError::RateLimited {
            message: format!(
                "too many requests with an unknown token from your address: {} in a minute, \
                 past {KEY} = {}. Every request from it is refused for the next \
                 {retry_after_s} s, whatever its token; then send your user's token from \
                 fleet.toml ([[users]] token or token_env)",
                window.count, self.per_minute
            ),
            limit: "unknown_tokens_per_minute",
            key: KEY,
            retry_after_s,
        })
    }

    /// Counts an unknown token sent by `client` at `now`.
    pub(crate) fn guessed(&self, client: IpAddr, now: Instant) {
        let client = client_of(client);
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&client) {
            clients.retain(|_, w| w.started + WINDOW > now);
            if clients.len() >= MAX_CLIENTS {
                tracing::warn!(
                    clients = clients.len(),
                    "unknown tokens from more addresses than the host counts at once in a minute: this one is not counted"
                );
                return;
            }
        }
        let window = clients.entry(client).or_insert(Window {
            started: now,
            count: 0,
        });
        if window.started + WINDOW <= now {
            *window = Window {
                started: now,
                count: 0,
            };
        }
        window.count = window.count.saturating_add(1);
        if window.count == self.per_minute {
            tracing::warn!(
                %client,
                count = window.count,
                key = KEY,
                "a client sent as many unknown tokens as a minute allows: its requests are refused until its minute is over"
            );
        }
    }
}

/// The client `addr` counts as: itself for IPv4 (and IPv4 mapped into
/// IPv6), its /64 network for IPv6.
fn client_of(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut seg = v6.segments();
                seg[4..].fill(0);
                IpAddr::V6(seg.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::net::Ipv4Addr;
    use std::net::Ipv6Addr;

    use super::*;

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_is_refused_after_its_guesses_until_its_minute_is_over() {
        let guesses = TokenGuesses::new(3);
        let start = Instant::now();
        for _ in 0..3 {
            assert!(guesses.check(v4(1), start).is_ok());
            guesses.guessed(v4(1), start);
        }
        let refused = guesses
            .check(v4(1), start + Duration::from_millis(10_500))
            .unwrap_err();
        let ApiError::RateLimited {
            retry_after_s,
            key,
            ref message,
            ..
        } = refused
        else {
            panic!("{refused:?}");
        };
        assert_eq!((retry_after_s, key), (50, KEY));
        assert!(message.contains("3 in a minute"), "{message}");
        // another client is not held back
        assert!(guesses.check(v4(2), start).is_ok());
        // the minute over, the client is let in, and counts from 0
        let later = start + WINDOW;
        assert!(guesses.check(v4(1), later).is_ok());
        guesses.guessed(v4(1), later);
        assert!(guesses.check(v4(1), later).is_ok());
    }

    #[test]
    fn an_ipv6_client_is_its_64_network_and_a_mapped_ipv4_its_address() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_of(a), client_of(b));
        assert_ne!(client_of(a), client_of(c));
        let mapped = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 7).to_ipv6_mapped());
        assert_eq!(client_of(mapped), v4(7));
        assert_eq!(
            client_of(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        );
    }
}
