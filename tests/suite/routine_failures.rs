//! A routine whose run fails is seen where routines are looked at:
//! `GET /v1/bots/{bot}/routines` gives the last run's status, turn and
//! error (the turn its last fire started), not only when it last fired.

use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::routines::FAILING;
use crate::support::routines::once_in;

/// Regression: after a routine's run failed, the routine view showed
/// `last_fire` moved on and nothing else; a user who looks at routines
/// (and not at every turn of the bot) never learnt it failed.
#[tokio::test]
async fn a_failed_run_shows_in_the_routine_view() {
    let host = TestFleet::new()
        .script("s", FAILING)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (status, body) = host
        .call(
            reqwest::Method::PUT,
            "/v1/bots/r/routines/failer",
            TOKEN,
            Some(
                json!({"cron": once_in(3), "timezone": "UTC", "prompt": "FAILME now",
                        "silent_ok": false}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    // before its first fire there is no run to tell of
    assert_eq!(body["routine"]["last_status"], Value::Null, "{body}");
    assert_eq!(body["routine"]["last_turn"], Value::Null, "{body}");

    let failed = host
        .wait_get("/v1/bots/r/turns", |v| {
            v["turns"]
                .as_array()?
                .iter()
                .find(|t| t["status"] == "failed")
                .cloned()
        })
        .await;
    let (status, body) = host.get("/v1/bots/r/routines", TOKEN).await;
    assert_eq!(status, 200, "{body}");
    let routine = &body["routines"][0];
    assert_eq!(routine["name"], "failer", "{body}");
    assert_eq!(
        (
            &routine["last_status"],
            &routine["last_turn"],
            routine["last_error"].as_str().map(|e| e.contains("boom")),
        ),
        (&json!("failed"), &failed["id"], Some(true)),
        "{body}"
    );
    // the failure notice in the routine's session names the routine, not
    // "your message"
    let session = failed["session"].as_str().unwrap();
    let notice = host
        .entries(session)
        .await
        .into_iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap();
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains("routine failer") && !text.contains("your message"),
        "{text}"
    );
    assert_eq!(notice["retry_turn"], failed["id"], "{notice}");

    // once the routine is gone its runs are not retried: its prompt is no
    // one's instruction any more (QA: after an owner change removed a
    // former owner's routine, the new owner re-ran its prompt)
    let (status, body) = host
        .call(
            reqwest::Method::DELETE,
            "/v1/bots/r/routines/failer",
            TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let turn = failed["id"].as_str().unwrap();
    refused_retry(&host, turn, "routine \"failer\", which r no longer has").await;
    // nor are its runs printed as a routine's the bot has (QA: exit 0)
    let (code, out, err) = crate::support::process::cli(
        &["transcript", "r", "--routine", "failer"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("bot r has no routine \"failer\""), "{err}");

    // nor once a routine of its name is made again: that one is another,
    // and the run's prompt was the one before's (QA, 2026-12-05: the
    // retry was taken, and ran the old prompt)
    let (status, body) = host
        .call(
            reqwest::Method::PUT,
            "/v1/bots/r/routines/failer",
            TOKEN,
            Some(json!({"cron": "0 0 1 1 *", "timezone": "UTC", "prompt": "something else"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["routine"]["last_status"], Value::Null, "{body}");
    refused_retry(&host, turn, "replaced by another of its name since").await;
    host.shutdown().await;
}

/// Asserts a retry of `turn` is refused (`409`) saying `why`.
async fn refused_retry(host: &TestHost, turn: &str, why: &str) {
    let (status, body) = host
        .call(
            reqwest::Method::POST,
            &format!("/v1/turns/{turn}/retry"),
            TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(why), "{message}");
}

/// Regression (QA): a failed run retried after the routine's later run
/// completed was refused as "a later turn of this conversation … had
/// these messages in its context and already answered; … send a new
/// message instead". The later run did not hold the failed run's prompt
/// (a routine's next run takes the place of the runs that failed before
/// it), and nobody sends messages into a routine's session. The refusal
/// says what happened and what can be done.
#[tokio::test]
async fn a_failed_run_a_later_run_replaced_is_refused_saying_so() {
    let host = TestFleet::new()
        .script("s", FAILING)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let put = |prompt: &'static str| {
        let host = &host;
        async move {
            host.call(
                reqwest::Method::PUT,
                "/v1/bots/r/routines/flip",
                TOKEN,
                Some(json!({"cron": once_in(2), "timezone": "UTC", "prompt": prompt})),
            )
            .await
        }
    };
    let (status, body) = put("FAILME first").await;
    assert_eq!(status, 201, "{body}");
    let failed = host
        .wait_get("/v1/bots/r/turns", |v| {
            v["turns"]
                .as_array()?
                .iter()
                .find(|t| t["status"] == "failed")
                .cloned()
        })
        .await;
    let (status, body) = put("second, fine").await;
    assert_eq!(status, 200, "{body}");
    host.wait_get("/v1/bots/r/turns", |v| {
        v["turns"]
            .as_array()?
            .iter()
            .find(|t| t["status"] == "completed")
            .cloned()
    })
    .await;
    let turn = failed["id"].as_str().unwrap();
    let (status, body) = host
        .call(
            reqwest::Method::POST,
            &format!("/v1/turns/{turn}/retry"),
            TOKEN,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("a later run of this routine")
            && message.contains("ran in this run's place")
            && !message.contains("send a new message"),
        "{message}"
    );
    host.shutdown().await;
}
