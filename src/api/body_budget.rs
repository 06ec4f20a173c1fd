//! `host.body_bytes_per_user`: how many bytes of request bodies one user
//! may have arriving at once. A body is read whole before its request is
//! handled, so each one arriving holds up to `host.max_body_bytes` of the
//! host's memory until it ends or `host.request_timeout_s` runs out: one
//! user's 400 connections, each sending 1 MiB less 20 bytes of a 1 MiB
//! body and then nothing, took the host from 77 MB to 543 MB (QA). The
//! rate of messages does not bound it (those requests are never
//! admitted), nor the cap on streams.
//!
//! A request counts the length it declares (`Content-Length`), or
//! `host.max_body_bytes` when it declares none (chunked): it may send that
//! much. The bytes are the user's from before the body is read until the
//! request is answered; past the budget a request is refused `429
//! rate_limited` at once, its body unread. A request without a body, or
//! without a token of a user (refused by authentication before its body
//! is read), counts nothing; a webhook's route, which takes no token,
//! has its own smaller limit (`max_payload_bytes`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;

use axum::extract::Request;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use botfleet_memory::UserId;

use super::ApiState;
use super::error::ApiError;

/// The config key, as errors name it.
pub(crate) const KEY: &str = "host.body_bytes_per_user";

/// Seconds a refused client is told to wait: a body arriving at a normal
/// pace ends within it.
const RETRY_AFTER_S: u64 = 1;

/// Each user's body bytes arriving, shared by every clone of the API
/// state.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    per_user: u64,
    max_body: u64,
    held: Arc<Mutex<HashMap<UserId, u64>>>,
}

/// Bytes of a user's budget, given back when dropped (the request
/// answered, or dropped with its connection).
#[derive(Debug)]
struct Held {
    held: Arc<Mutex<HashMap<UserId, u64>>>,
    user: UserId,
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = held.get_mut(&self.user) {
            *n = n.saturating_sub(self.bytes);
            if *n == 0 {
                held.remove(&self.user);
            }
        }
    }
}

impl BodyBudget {
    /// `per_user` bytes of bodies arriving per user, each body counted as
    /// at most `max_body` (`host.max_body_bytes`).
    pub fn new(per_user: usize, max_body: usize) -> Self {
        Self {
            per_user: per_user as u64,
            max_body: max_body as u64,
            held: Arc::default(),
        }
    }

    /// The bytes a request with `headers` may send: its declared length,
    /// the most a body may be when it declares none but says it has one,
    /// else nothing. (A declared length over the limit was refused before.)
    fn expected(&self, headers: &HeaderMap) -> u64 {
        if let Some(length) = headers.get(header::CONTENT_LENGTH) {
            return length
                .to_str()
                .ok()
                .and_then(|l| l.trim().parse::<u64>().ok())
                .map_or(self.max_body, |l| l.min(self.max_body));
        }
        if headers.contains_key(header::TRANSFER_ENCODING) {
            self.max_body
        } else {
            0
        }
    }

    /// Takes `bytes` of `user`'s budget, or refuses the request.
    fn take(&self, user: &UserId, bytes: u64) -> Result<Held, ApiError> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let now = held.get(user).copied().unwrap_or(0);
        if now.saturating_add(bytes) > self.per_user {
            return Err(ApiError::RateLimited {
                message: format!(
                    "your requests' bodies still arriving hold {now} bytes, and this one's \
                     {bytes} more would pass {KEY} = {}: finish or close the uploads you have \
                     open, then send it again (nothing was saved)",
                    self.per_user
                ),
                limit: "body_bytes_per_user",
                key: KEY,
                retry_after_s: RETRY_AFTER_S,
            });
        }
        *held.entry(user.clone()).or_insert(0) += bytes;
        Ok(Held {
            held: Arc::clone(&self.held),
            user: user.clone(),
            bytes,
        })
    }
}

/// The budget as a middleware over the API: a request of a user with a
/// body holds its bytes until it is answered.
pub(crate) async fn limit_bodies(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let budget = &state.limits.bodies;
    let bytes = budget.expected(request.headers());
    if bytes == 0 || request.uri().path().starts_with(super::HOOKS_PREFIX) {
        return next.run(request).await;
    }
    let user = super::auth::bearer_user(request.headers(), &state.tokens).cloned();
    let Some(user) = user else {
        // refused by authentication, its body unread
        return next.run(request).await;
    };
    match budget.take(&user, bytes) {
        Ok(held) => {
            let response = next.run(request).await;
            drop(held);
            response
        }
        Err(refused) => {
            let mut refused = refused.into_response();
            super::mark_answer(&mut refused);
            refused
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str) -> UserId {
        UserId::new(id).unwrap()
    }

    #[test]
    fn a_users_bodies_arriving_are_bounded_and_given_back() {
        let budget = BodyBudget::new(3_000, 1_024);
        let alice = user("alice");
        let a = budget.take(&alice, 1_024).unwrap();
        let b = budget.take(&alice, 1_024).unwrap();
        let refused = budget.take(&alice, 1_024).unwrap_err();
        let text = refused.to_string();
        assert!(
            text.contains("hold 2048 bytes") && text.contains("host.body_bytes_per_user = 3000"),
            "{text}"
        );
        // another user's budget is their own
        let _bob = budget.take(&user("bob"), 1_024).unwrap();
        drop(a);
        let _c = budget.take(&alice, 1_024).unwrap();
        drop(b);
        assert_eq!(budget.held.lock().unwrap().get(&alice), Some(&1_024));
    }

    #[test]
    fn a_body_counts_its_declared_length_or_the_most_a_body_may_be() {
        let budget = BodyBudget::new(8_192, 1_024);
        let mut headers = HeaderMap::new();
        assert_eq!(budget.expected(&headers), 0);
        headers.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        assert_eq!(budget.expected(&headers), 1_024);
        headers.insert(header::CONTENT_LENGTH, "10".parse().unwrap());
        assert_eq!(budget.expected(&headers), 10);
        headers.insert(header::CONTENT_LENGTH, "999999".parse().unwrap());
        assert_eq!(budget.expected(&headers), 1_024);
    }
}
