//! The API and the CLI as docs/api.md and docs/openapi.yaml describe them
//! (round 21's contract tester, H3):
//! - a turn of a bot its owner removed cannot be retried: `409` saying
//!   so (before: `200 {"requeued": 1}`, and the input waited for good);
//! - what a bot removed by its owner is refused says it was removed by
//!   its owner, not "list it in fleet.toml again" (no config listed it);
//! - a tab in an `Idempotency-Key` or a `--nonce` is refused (before:
//!   accepted, against the spec's printable-ASCII pattern);
//! - a `401` carries `WWW-Authenticate: Bearer` (RFC 6750 §3);
//! - `GET /v1/bots` gives a subagent's status (`subagent_status`).

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::process::cli;

const SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^mkagent"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
bot = "maker"
match = "^task"
steps = [
  { tool = "Task", args = { description = "quick job", prompt = "SUBTASK quick" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "maker"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]

[[rule]]
match = "SUBTASK quick"
steps = [ { tool = "SendMessage", args = { text = "REPORT done" } } ]

[[rule]]
bot = "helper"
match = "^slow"
steps = [
  { tool = "SendMessage", args = { text = "starting" } },
  { delay_ms = 120000, tool = "SendMessage", args = { text = "much later" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// A host where alice's `maker` (fleet.toml) made `helper` with
/// CreateAgent.
async fn with_helper() -> TestHost {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot(
            "maker",
            "s",
            &["SendMessage", "SendToAgent", "CreateAgent", "Task"],
        )
        .start()
        .await;
    let (_, end) = host.end_turn("maker", "mkagent now").await;
    assert_eq!(end["status"], "completed", "{end}");
    host
}

/// The row of `id` in `GET /v1/bots`.
async fn listed(host: &TestHost, id: &str) -> Value {
    let (status, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no bot {id} in {list:#}"))
}

/// The message of a `409` answer, checked to say the bot was removed by
/// its owner and nothing of fleet.toml.
fn says_removed_by_owner(status: u16, answer: &Value) -> String {
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["code"], "conflict", "{answer}");
    let said = answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        said.contains("removed by its owner") && !said.contains("fleet.toml"),
        "{said}"
    );
    said
}

#[tokio::test]
async fn a_bot_removed_by_its_owner_is_refused_a_retry_a_routine_and_a_room_saying_so() {
    let host = with_helper().await;
    // a room with helper, made while it could still be added
    let (status, room) = host.create_room(TOKEN, "duo", &["maker", "helper"]).await;
    assert_eq!(status, 201, "{room}");
    // helper is in a long turn when its owner removes it: the turn ends
    // cancelled
    let (status, slow) = host.send("helper", "slow please", None).await;
    assert_eq!(status, 202, "{slow}");
    let dm = slow["session"].as_str().unwrap().to_owned();
    host.wait_running("helper").await;
    let (status, removed) = host
        .call(reqwest::Method::DELETE, "/v1/bots/helper", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{removed}");
    let end = host.wait_turn_end(&dm, slow["seq"].as_i64().unwrap()).await;
    assert_eq!(end["status"], "cancelled", "{end}");
    let turn = end["turn"].as_str().unwrap().to_owned();

    // its turn is not retried: nothing would ever answer the input
    let (status, refused) = host
        .post_raw(&format!("/v1/turns/{turn}/retry"), Some(TOKEN), None, "{}")
        .await;
    let said = says_removed_by_owner(status, &refused);
    assert!(said.contains(&turn) && said.contains("helper"), "{said}");
    assert_eq!(listed(&host, "helper").await["queued"], 0);
    // nor through the CLI (the web page's Retry uses the same route)
    let (code, out, err) = cli(&["retry", &turn], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("was removed by its owner"), "{err}");
    assert_eq!(listed(&host, "helper").await["queued"], 0);

    // a routine is refused, saying why (not "list it in fleet.toml again")
    let (status, refused) = host
        .call(
            reqwest::Method::PUT,
            "/v1/bots/helper/routines/daily",
            TOKEN,
            Some(json!({"cron": "0 8 * * *", "timezone": "UTC", "prompt": "report"})),
        )
        .await;
    says_removed_by_owner(status, &refused);
    // so is a new room with it
    let (status, refused) = host
        .call(
            reqwest::Method::POST,
            "/v1/groups",
            TOKEN,
            Some(json!({"name": "again", "members": ["maker", "helper"]})),
        )
        .await;
    says_removed_by_owner(status, &refused);
    // and a room it is in says so when it is mentioned
    let (status, posted) = host
        .post_raw(
            &format!("/v1/groups/{}/messages", room["id"].as_str().unwrap()),
            Some(TOKEN),
            Some("mention-1"),
            json!({"text": "@helper are you there?"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{posted}");
    assert_eq!(posted["removed_mentions"], json!(["helper"]), "{posted}");
    let timeline = posted["session"].as_str().unwrap().to_owned();
    let notice = host
        .wait_for(&timeline, |entries| {
            entries
                .iter()
                .find(|e| e["kind"] == "notice" && e["code"] == "removed_member")
                .cloned()
        })
        .await;
    let text = notice["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("@helper was removed by its owner") && !text.contains("config"),
        "{notice:#}"
    );
}

#[tokio::test]
async fn a_tab_in_an_idempotency_key_or_a_nonce_is_refused() {
    let host = with_helper().await;
    let (status, refused) = host.send("maker", "tabbed", Some("a\tb")).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], "bad_request", "{refused}");
    let said = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("Idempotency-Key") && said.contains("tab"),
        "{said}"
    );
    // the same key without the tab is a key like any other
    let (status, sent) = host.send("maker", "plain", Some("a b")).await;
    assert_eq!(status, 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&dm, sent["seq"].as_i64().unwrap()).await;

    // the CLI refuses it before sending anything: a usage error
    let (_, dm) = host.get("/v1/bots/maker/session", TOKEN).await;
    let before = dm["last_seq"].clone();
    let (code, out, err) = cli(
        &["send", "maker", "tabbed", "--nonce", "a\tb"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--nonce") && err.contains("tab"), "{err}");
    let (_, dm) = host.get("/v1/bots/maker/session", TOKEN).await;
    assert_eq!(dm["last_seq"], before, "{dm}");
}

#[tokio::test]
async fn a_401_carries_a_bearer_challenge() {
    let host = with_helper().await;
    for token in [None, Some("wrong-token")] {
        let mut req = host.http.get(format!("{}/v1/bots", host.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 401, "{token:?}");
        let challenge = resp
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        assert_eq!(
            challenge.as_deref(),
            Some(r#"Bearer realm="botfleet""#),
            "{token:?}"
        );
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    }
    // an answer that is not a 401 has none
    let resp = host
        .http
        .get(format!("{}/v1/bots", host.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.headers().get("www-authenticate").is_none());
}

#[tokio::test]
async fn the_bot_list_gives_a_subagents_status() {
    let host = with_helper().await;
    let (status, sent) = host.send("maker", "task please", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    // its report is written with the end of its task
    host.wait_for(&session, |es| {
        es.iter().find(|e| e["kind"] == "agent_message").cloned()
    })
    .await;
    let sub = host.wait_subagent_of("maker").await;
    assert_eq!(listed(&host, &sub).await["subagent_status"], "done");
    for other in ["maker", "helper"] {
        let row = listed(&host, other).await;
        assert!(
            row.as_object().unwrap().contains_key("subagent_status")
                && row["subagent_status"].is_null(),
            "{row:#}"
        );
    }
}
