//! Bearer-token authentication: every `/v1` request names its user.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use botfleet_memory::UserId;
use sha2::Digest;
use sha2::Sha256;
use tokio::time::Instant;

use super::ApiState;
use super::error::ApiError;
use super::extract::single_header;

/// Tokens, stored as SHA-256 digests so that a lookup does not compare
/// secrets byte by byte.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    by_digest: Arc<HashMap<[u8; 32], UserId>>,
}

impl Tokens {
    /// From `(user, token)` pairs.
    pub fn new(pairs: impl IntoIterator<Item = (UserId, String)>) -> Self {
        Self {
            by_digest: Arc::new(pairs.into_iter().map(|(u, t)| (digest(&t), u)).collect()),
        }
    }

    /// The user a token belongs to.
    pub fn user(&self, token: &str) -> Option<&UserId> {
        self.by_digest.get(&digest(token))
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The authenticated user of a request.
#[derive(Debug, Clone)]
pub struct AuthUser(pub UserId);

impl FromRequestParts<ApiState> for AuthUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        // the client's address, as the accept loop saw it (none for a
        // router served otherwise: nothing counted)
        let client = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip());
        let guesses = &state.limits.guesses;
        if let Some(client) = client {
            // before the token is looked at: a refusal the right token
            // passed would tell a guesser it guessed right
            guesses.check(client, Instant::now())?;
        }
        // two tokens would leave which user asks to a guess
        let header = single_header(&parts.headers, "Authorization")?.ok_or_else(|| {
            ApiError::Unauthorized("missing `Authorization: Bearer <token>` header".into())
        })?;
        let value = header
            .to_str()
            .map_err(|_| ApiError::Unauthorized("the Authorization header is not text".into()))?;
        let token = bearer_token(value).ok_or_else(|| {
            ApiError::Unauthorized("the Authorization header must be `Bearer <token>`".into())
        })?;
        state
            .tokens
            .user(token)
            .cloned()
            .map(AuthUser)
            .ok_or_else(|| {
                if let Some(client) = client {
                    guesses.guessed(client, Instant::now());
                }
                // the API's words: the CLI adds its flag (QA: curl and the
                // web page were told to check `--token`)
                ApiError::Unauthorized(
                    "unknown token: no user of this host has it; send your user's token from \
                     fleet.toml ([[users]] token or token_env)"
                        .into(),
                )
            })
    }
}

/// The user whose token `headers` carry, if one does (`None` for a
/// request authentication refuses).
pub(super) fn bearer_user<'a>(
    headers: &axum::http::HeaderMap,
    tokens: &'a Tokens,
) -> Option<&'a UserId> {
    let value = single_header(headers, "Authorization")
        .ok()??
        .to_str()
        .ok()?;
    tokens.user(bearer_token(value)?)
}

/// The token of an `Authorization` value `Bearer <token>`. The scheme is
/// case-insensitive (RFC 9110 §11.1): `bearer` and `BEARER` work too.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_scheme_is_case_insensitive() {
        for value in [
            "Bearer t0k",
            "bearer t0k",
            "BEARER t0k",
            "bEaReR  t0k ",
            " Bearer t0k",
        ] {
            assert_eq!(bearer_token(value), Some("t0k"), "{value:?}");
        }
        for value in ["Basic t0k", "Bearer", "Bearer ", "Bearert0k", "t0k", ""] {
            assert_eq!(bearer_token(value), None, "{value:?}");
        }
    }
}
