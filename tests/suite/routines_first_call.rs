//! What the routine view tells of a run that is
//! running but not stored yet (its first model call).

use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;
use crate::support::routines::once_in;

/// A routine's input makes the model think for a minute before it
/// answers (cut short by a cancel); anything else is noted.
const SLOW_FIRST: &str = r#"
[[rule]]
match = "SLOWLY"
steps = [ { tool = "SendMessage", args = { text = "done" }, delay_ms = 60000 } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// The routine `r`'s routine view answers, once `pick` finds something in it.
async fn routine_view(
    host: &crate::support::fleet::TestHost,
    pick: impl Fn(&Value) -> bool,
) -> Value {
    host.wait_get("/v1/bots/r/routines", |v| {
        let r = &v["routines"][0];
        pick(r).then(|| r.clone())
    })
    .await
}

/// Regression: while a routine's run made its first model call (a slow
/// model; the turn is stored with its first step), `GET
/// /v1/bots/{bot}/routines` said `last_status: "waiting"` and `last_turn:
/// null` — "no turn has taken it yet, e.g. the bot is busy" — and
/// `botfleet routines` showed `waiting`, while `GET /v1/bots/{bot}/turns`
/// listed that turn `running` with the fire as its input. The view now
/// names the running turn, as the turn endpoints do.
#[tokio::test]
async fn a_run_on_its_first_model_call_is_running_in_the_routine_view() {
    let host = TestFleet::new()
        .script("s", SLOW_FIRST)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (status, body) = host
        .call(
            reqwest::Method::PUT,
            "/v1/bots/r/routines/slow",
            TOKEN,
            Some(json!({"cron": once_in(3), "timezone": "UTC", "prompt": "SLOWLY, please"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let defined = body["routine"]["updated_at"].clone();
    let running = host
        .wait_get("/v1/bots/r/turns", |v| {
            v["turns"]
                .as_array()?
                .iter()
                .find(|t| t["status"] == "running")
                .cloned()
        })
        .await;
    assert_eq!(
        running["checkpoint"],
        Value::Null,
        "not stored yet: {running}"
    );

    let (status, body) = host.get("/v1/bots/r/routines", TOKEN).await;
    assert_eq!(status, 200, "{body}");
    let routine = &body["routines"][0];
    assert_eq!(
        (
            &routine["name"],
            &routine["last_status"],
            &routine["last_turn"],
            &routine["last_error"]
        ),
        (
            &json!("slow"),
            &json!("running"),
            &running["id"],
            &Value::Null
        ),
        "{body}"
    );
    // the fire changed no part of the definition: `updated_at` stays (it
    // moved with every fire, QA 2026-12-06)
    assert_eq!(routine["updated_at"], defined, "{body}");
    let (code, out, err) = cli(&["routines", "r"], host.url.as_str(), TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let row = out.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("slow ") && row.contains(" running "),
        "{out}"
    );

    // cancelled, the run is that turn, ended
    let (status, body) = host
        .call(reqwest::Method::POST, "/v1/bots/r/cancel", TOKEN, None)
        .await;
    assert_eq!((status, &body["cancelled"]), (200, &json!(true)), "{body}");
    let ended = routine_view(&host, |r| r["last_status"] != "running").await;
    assert_eq!(
        (&ended["last_status"], &ended["last_turn"]),
        (&json!("cancelled"), &running["id"]),
        "{ended}"
    );

    // retried, the run is the retry, running from its first model call
    // (the view told the cancelled turn until the retry ended, QA
    // 2026-12-06)
    let first = running["id"].as_str().unwrap_or_default();
    let (status, body) = host
        .call(
            reqwest::Method::POST,
            &format!("/v1/turns/{first}/retry"),
            TOKEN,
            None,
        )
        .await;
    assert!((200..300).contains(&status), "{status} {body}");
    let retry = host
        .wait_get("/v1/bots/r/turns", |v| {
            v["turns"]
                .as_array()?
                .iter()
                .find(|t| t["status"] == "running" && t["id"] != running["id"])
                .cloned()
        })
        .await;
    let (status, body) = host.get("/v1/bots/r/routines", TOKEN).await;
    assert_eq!(status, 200, "{body}");
    let routine = &body["routines"][0];
    assert_eq!(
        (&routine["last_status"], &routine["last_turn"]),
        (&json!("running"), &retry["id"]),
        "{body}"
    );
    host.shutdown().await;
}
