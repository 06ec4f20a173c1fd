//! `host.unknown_tokens_per_minute`: a client that sends as many unknown
//! bearer tokens as a minute allows is refused, every request of it that
//! needs a token, the right token's too, with `429 rate_limited`,
//! `Retry-After` and the key to change, until its minute is over. Before,
//! a client could guess tokens as fast as the host answered (QA).

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::fleet::start_refused;
use crate::support::fleet::status_wait_body;

use super::user_fairness::fleet;

/// `GET /v1/bots` with `token` (none: no header): the status, the
/// `Retry-After` header and the body.
async fn list(host: &TestHost, token: Option<&str>) -> (u16, Option<String>, Value) {
    let mut req = host.http.get(format!("{}/v1/bots", host.url));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    status_wait_body(req.send().await.unwrap()).await
}

#[tokio::test]
async fn a_client_that_guessed_too_many_tokens_is_refused_for_the_minute() {
    let host = fleet("unknown_tokens_per_minute = 3").start().await;
    // no header and a malformed one guess nothing
    for _ in 0..5 {
        assert_eq!(list(&host, None).await.0, 401);
    }
    let (status, _, ok) = list(&host, Some(TOKEN)).await;
    assert_eq!(status, 200, "{ok}");
    for i in 0..3 {
        let (status, _, body) = list(&host, Some(&format!("guess-{i}"))).await;
        assert_eq!(status, 401, "{body}");
    }
    // the fourth guess, and the right token, are refused alike
    for token in ["guess-3", TOKEN] {
        let (status, retry_after, body) = list(&host, Some(token)).await;
        assert_eq!(status, 429, "{token}: {body}");
        let wait: u64 = retry_after.unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
        assert_eq!(body["error"]["code"], "rate_limited", "{body}");
        assert_eq!(body["error"]["key"], "host.unknown_tokens_per_minute");
        assert_eq!(body["error"]["retry_after_s"], wait, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("unknown token from your address")
                && message.contains("3 in a minute")
                && message.contains("whatever its token"),
            "{message}"
        );
    }
    // the CLI says the same, and exits 1
    let (code, _, err) = crate::support::process::cli(&["bots"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("host.unknown_tokens_per_minute"), "{err}");
    // `send` opens the event stream first: its 429 is this one, not "all
    // your event streams are in use" (QA)
    let (code, _, err) = crate::support::process::cli(&["send", "r", "hi"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("host.unknown_tokens_per_minute") && !err.contains("event streams"),
        "{err}"
    );
    host.shutdown().await;
}

/// Out-of-range values are refused at start, naming the key and the
/// range.
#[tokio::test]
async fn unknown_tokens_per_minute_out_of_range_is_refused_naming_the_key() {
    for (lines, says) in [
        (
            "unknown_tokens_per_minute = 0",
            "is 0 but must be 1 to 10000",
        ),
        (
            "unknown_tokens_per_minute = 10001",
            "is 10001 but must be 1 to 10000",
        ),
    ] {
        let e = start_refused(&fleet(lines), lines).await;
        assert!(
            e.contains("host.unknown_tokens_per_minute") && e.contains(says),
            "{lines}: {e}"
        );
    }
}
