//! Webhook deliveries that race: many identical requests (one sender's
//! retries, or a captured request replayed under fresh delivery ids) sent
//! at once through the HTTP API. Exactly one is admitted (one event, one
//! `202`); every other is answered as its duplicate with the same seq;
//! the signature is in the store with the admission (a replay after a
//! restart is a duplicate too); and when the hook's rate is spent none is
//! admitted past it.

use botfleet::api::sign_hook;
use futures::future::join_all;
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;

const SECRET: &str = "a-hook-secret-for-races";

/// Identical requests sent at once, per burst.
const BURST: usize = 48;

/// The model takes a note of what it saw, and does not reply.
const NOTE: &str = r#"
[[rule]]
steps = [ { text = "saw: {{input}}" } ]
"#;

/// Bot `r` with the hook `gh`, `extra` lines added to the hook.
fn hooked_fleet(extra: &str) -> TestFleet {
    TestFleet::new()
        .script("s", NOTE)
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\n{extra}"
        ))
}

/// Posts `body`, signed over the body only, under `delivery`: the status
/// and the answer.
async fn deliver(host: &TestHost, delivery: &str, body: &str) -> (u16, Value) {
    let signature = sign_hook(SECRET.as_bytes(), body.as_bytes());
    host.post_hook("/v1/hooks/r/gh", Some(delivery), Some(&signature), body)
        .await
}

/// [`BURST`] deliveries of `body` at once: under the one id `first` when
/// `same_id`, else under `first`, `first-1`, `first-2`, …
async fn burst(host: &TestHost, first: &str, body: &str, same_id: bool) -> Vec<(u16, Value)> {
    let ids: Vec<String> = (0..BURST)
        .map(|i| {
            if same_id || i == 0 {
                first.to_owned()
            } else {
                format!("{first}-{i}")
            }
        })
        .collect();
    join_all(ids.iter().map(|id| deliver(host, id, body))).await
}

/// The webhook events in the hook's session.
async fn events(host: &TestHost, session: &str) -> Vec<Value> {
    host.entries(session)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "event")
        .collect()
}

/// The one `202` of `answers` (and that there is one); every other answer
/// is a `200 duplicate` of it (same seq).
fn one_admitted(answers: &[(u16, Value)]) -> Value {
    let admitted: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == 202)
        .map(|(_, answer)| answer)
        .collect();
    assert_eq!(admitted.len(), 1, "{answers:#?}");
    let first = admitted[0].clone();
    for (status, answer) in answers.iter().filter(|(status, _)| *status != 202) {
        assert_eq!(
            (*status, &answer["status"], &answer["seq"]),
            (200, &Value::from("duplicate"), &first["seq"]),
            "{answer}"
        );
    }
    first
}

/// Regression: the signature was looked up, then remembered in memory,
/// then admitted with its store row; a request that came between found it
/// remembered and was admitted on its own, without the row (its
/// admission could even commit first and answer `202` to a replay). Each
/// burst of identical requests now admits one event, answered `202` once
/// and `duplicate` (same seq) to every other, and the signature is in the
/// store: after a restart a replay under a new id is still a duplicate.
#[tokio::test]
async fn identical_deliveries_at_once_admit_one_event() {
    let host = hooked_fleet("").start().await;
    let body = r#"{"action":"opened","n":1}"#;
    let answers = burst(&host, "same-1", body, true).await;
    let first = one_admitted(&answers);
    assert_eq!(first.get("replay_of"), None, "{first}");
    let session = first["session"].as_str().unwrap().to_owned();
    // a captured request replayed under fresh ids, all at once
    let body = r#"{"action":"opened","n":2}"#;
    let answers = burst(&host, "fresh-1", body, false).await;
    let second = one_admitted(&answers);
    // the one answered `accepted` is the delivery admitted, not a replay
    // of another whose own answer says `duplicate`
    assert_eq!(second.get("replay_of"), None, "{answers:#?}");
    assert_eq!(events(&host, &session).await.len(), 2);
    host.wait_turn_end(&session, second["seq"].as_i64().unwrap())
        .await;

    let host = restart(host.shutdown().await).await;
    for (delivery, body, first) in [
        ("again-1", r#"{"action":"opened","n":1}"#, &first),
        ("again-2", r#"{"action":"opened","n":2}"#, &second),
    ] {
        let (status, again) = deliver(&host, delivery, body).await;
        assert_eq!(
            (status, &again["status"], &again["seq"]),
            (200, &Value::from("duplicate"), &first["seq"]),
            "{again}"
        );
    }
    assert_eq!(events(&host, &session).await.len(), 2);
    host.shutdown().await;
}

/// Regression: with the hook's rate spent, the first of identical
/// requests was refused (`429`, "nothing of this delivery was saved") and
/// forgot the signature, while those that came meanwhile found it
/// remembered, took it for a delivery admitted already and were admitted
/// past the rate, without the signature's row: a later replay under a new
/// id was then admitted again. Now none is admitted: each is `429`.
#[tokio::test]
async fn identical_deliveries_at_once_meet_a_spent_rate_together() {
    let host = hooked_fleet("deliveries_per_minute = 1\n").start().await;
    let (status, first) = deliver(&host, "spend", r#"{"n":0}"#).await;
    assert_eq!(status, 202, "{first}");
    let session = first["session"].as_str().unwrap().to_owned();
    let body = r#"{"n":1}"#;
    for same_id in [true, false] {
        let answers = burst(&host, if same_id { "s" } else { "f" }, body, same_id).await;
        for (status, answer) in &answers {
            assert_eq!(*status, 429, "{answers:#?}");
            assert_eq!(answer["error"]["code"], "rate_limited", "{answer}");
        }
    }
    assert_eq!(events(&host, &session).await.len(), 1);
    host.shutdown().await;
}
