//! `GET /v1/bots` under a busy fleet: what the bots are doing comes from
//! what they publish, not from asking each of them, so a bot whose actor
//! is behind on its messages is still listed as running its turn; and when
//! no router runs, the list says it cannot tell instead of showing every
//! bot idle.

use botfleet_memory::BotId;
use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
match = "^long"
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "finally" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

/// Wake-ups sent to the running bot: each makes its actor read its inbox
/// from the store, so its mailbox is seconds behind.
const WAKE_UPS: usize = 100_000;

fn bot<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["bots"]
        .as_array()
        .and_then(|bots| bots.iter().find(|b| b["id"] == id))
        .unwrap_or_else(|| panic!("no bot {id} in {list:#}"))
}

/// Bot `r` runs a long turn while its actor has a long backlog of
/// messages. The list shows it active and running that turn, and the
/// idle bot `q` idle, both with their live state known. The list used to
/// ask each bot through the router, waiting up to 2 s for each, and show
/// a bot that did not answer in time as idle (`active: false`,
/// `running_turn: null`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_list_shows_a_busy_bot_running_its_turn() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let (status, _) = host.send("r", "long job", None).await;
    assert_eq!(status, 202);
    host.wait_running("r").await;
    let fleet = &host.host.as_ref().unwrap().fleet;
    let r = BotId::new("r").unwrap();
    for _ in 0..WAKE_UPS {
        fleet.wake(r.clone()).unwrap();
    }

    let (status, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{list:#}");
    let r_now = bot(&list, "r");
    assert_eq!(r_now["active"], true, "{list:#}");
    assert!(r_now["running_turn"].is_string(), "{list:#}");
    assert_eq!(r_now["live"], true, "{list:#}");
    let q_now = bot(&list, "q");
    assert_eq!(
        (&q_now["active"], &q_now["running_turn"], &q_now["live"]),
        (&Value::Bool(false), &Value::Null, &Value::Bool(true)),
        "{list:#}"
    );
    host.shutdown().await;
}

/// With no router running (it stopped), which bots are awake and what
/// they run is not known: the list answers 503 saying so, and to retry,
/// where it used to show every bot idle.
#[tokio::test]
async fn the_bot_list_says_it_cannot_tell_when_no_router_runs() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (status, _) = host.send("r", "long job", None).await;
    assert_eq!(status, 202);
    host.wait_running("r").await;
    let router = host
        .host
        .as_ref()
        .unwrap()
        .fleet
        .runtime()
        .router()
        .unwrap();
    router
        .stop_and_wait(Some("test".into()), None)
        .await
        .unwrap();

    let (status, answer) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 503, "{answer:#}");
    assert_eq!(answer["error"]["code"], "unavailable", "{answer:#}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not known") && message.contains("retry"),
        "{message}"
    );
    host.shutdown().await;
}
