//! A webhook payload over the limit is refused naming the limit in force
//! and the setting that raises it, whether its length was declared in
//! `Content-Length` or not.
//!
//! (A declared length over `host.max_body_bytes` was refused by the host's
//! check of every route, "larger than 1048576 bytes; send less", where the
//! hook's limit was 64 KiB: a sender that trimmed to a megabyte was refused
//! again. And a hook with no `max_payload_bytes` under a small host limit
//! was told to raise `max_payload_bytes`, which may not exceed the host's.)

use botfleet::api::sign_hook;
use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SECRET: &str = "a-hook-secret-of-some-length";

const NOTE: &str = r#"
[[rule]]
steps = [ { text = "saw: {{input}}" } ]
"#;

/// Hook `own` with a limit of its own (1,024 bytes), hook `plain` with
/// none (so the host's 4,096), under a host limit of 4,096 bytes.
async fn host() -> TestHost {
    TestFleet::new()
        .script("s", NOTE)
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"own\"\nsecret = \"{SECRET}\"\nmax_payload_bytes = 1024\n\n\
             [[bots.hooks]]\nname = \"plain\"\nsecret = \"{SECRET}\"\n"
        ))
        .host("max_body_bytes = 4096")
        .start()
        .await
}

/// Posts a signed payload of `len` bytes to `hook` with its length
/// declared (reqwest sends `Content-Length` for a whole body).
async fn deliver(host: &TestHost, hook: &str, delivery: &str, len: usize) -> (u16, String) {
    let body = format!(r#"{{"blob":"{}"}}"#, "x".repeat(len - 11));
    assert_eq!(body.len(), len);
    let signature = sign_hook(SECRET.as_bytes(), body.as_bytes());
    let (status, answer) = host
        .post_hook(
            &format!("/v1/hooks/r/{hook}"),
            Some(delivery),
            Some(&signature),
            &body,
        )
        .await;
    let message = answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (status, message)
}

#[tokio::test]
async fn a_declared_length_over_the_host_limit_names_the_hooks_limit() {
    let host = host().await;
    let (status, message) = deliver(&host, "own", "d-1", 5_000).await;
    assert_eq!(status, 413, "{message}");
    assert!(
        message.contains("webhook \"own\"'s max_payload_bytes (1024 bytes)")
            && message.contains("raise max_payload_bytes under [[bots.hooks]] of bot \"r\""),
        "{message}"
    );
    // under the host's limit and over the hook's: the same answer
    let (status, message) = deliver(&host, "own", "d-2", 2_000).await;
    assert_eq!(status, 413, "{message}");
    assert!(
        message.contains("max_payload_bytes (1024 bytes)"),
        "{message}"
    );
    // a bot's message over the host's limit names the host's limit
    let resp = host
        .http
        .post(format!("{}/v1/bots/r/messages", host.url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("Idempotency-Key", "k-1")
        .body(format!(r#"{{"text":"{}"}}"#, "y".repeat(5_000)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    let answer: Value = resp.json().await.unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than 4096 bytes, the host's limit (max_body_bytes under [host]"),
        "{answer}"
    );
    // nothing was admitted
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let r = &bots["bots"][0];
    assert_eq!(r["id"], "r");
    assert_eq!(r["turns"]["completed"].as_i64().unwrap_or(0), 0, "{r}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_hook_limited_by_the_host_says_to_raise_the_hosts_limit() {
    let host = host().await;
    for (delivery, len) in [("d-1", 5_000), ("d-2", 4_097)] {
        let (status, message) = deliver(&host, "plain", delivery, len).await;
        assert_eq!(status, 413, "{message}");
        assert!(
            message.contains("webhook \"plain\"'s limit (4096 bytes")
                && message.contains("raise max_body_bytes under [host]")
                && !message.contains("raise max_payload_bytes"),
            "{len}: {message}"
        );
    }
    // at the limit: taken
    let (status, message) = deliver(&host, "plain", "d-3", 4_096).await;
    assert_eq!(status, 202, "{message}");
    host.shutdown().await;
}
