//! The daily token budget's pause as the API shows it: `paused_until` in
//! `GET /v1/bots` and in the answer to a message.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;

const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "answer" } } ]
"#;

/// The bot `id` in `bots`.
fn bot<'a>(bots: &'a Value, id: &str) -> &'a Value {
    bots["bots"]
        .as_array()
        .and_then(|bs| bs.iter().find(|b| b["id"] == id))
        .unwrap_or_else(|| panic!("no bot {id}: {bots:#}"))
}

/// Regression: the turn that spent a bot's daily budget (924 of 300
/// tokens) left it unpaused: `GET /v1/bots` showed `paused_until: null`
/// and the answer to the next message had no `paused_until` (so `botfleet
/// send` waited for a reply), until that message's turn found the budget
/// spent. The bot pauses as the turn that spends the budget ends; and a
/// bot that is not active (after a restart) shows the pause its stored
/// usage means.
#[tokio::test]
async fn the_turn_that_spends_the_budget_pauses_the_bot_at_its_end() {
    let fleet = TestFleet::new()
        .midday()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 300")
        .bot("q", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 300");
    let host = fleet.start().await;
    let mut sessions = Vec::new();
    for id in ["r", "q"] {
        let (status, first) = host.send(id, "hello", None).await;
        // (its answer may say the bot is paused: when the turn over it,
        // which spends the budget, ends before the answer is made)
        assert_eq!(status, 202, "{first}");
        let session = first["session"].as_str().unwrap().to_owned();
        let end = host
            .wait_turn_end(&session, first["seq"].as_i64().unwrap())
            .await;
        assert_eq!(end["status"], "completed", "{end}");
        sessions.push(session);
    }

    // each turn answered and spent its bot's budget: the bots are paused
    // now, until the next UTC midnight
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let mut until = None;
    for id in ["r", "q"] {
        let b = bot(&bots, id);
        let today = &b["usage"]["today"];
        let used =
            today["prompt_tokens"].as_u64().unwrap() + today["completion_tokens"].as_u64().unwrap();
        assert!(used >= 300, "one turn spends the budget: {b:#}");
        let at = b["paused_until"]
            .as_i64()
            .unwrap_or_else(|| panic!("paused once the turn ended: {b:#}"));
        let now = host.fleet.now_ms();
        let day = 86_400_000;
        assert!(at > now && at - now <= day && at % day == 0, "{b:#}");
        until = Some(at);
    }
    let until = until.unwrap();

    // the very next message is told so, and waits
    let (status, second) = host.send("r", "and again", None).await;
    assert_eq!(status, 202, "{second}");
    assert_eq!(second["paused_until"], until, "{second}");
    let session = &sessions[0];
    host.wait_for(session, |es| {
        es.iter()
            .find(|e| e["kind"] == "notice" && e["code"] == "budget_exhausted")
            .cloned()
    })
    .await;
    let es = host.entries(session).await;
    assert_eq!(deliveries(&es), vec!["answer".to_owned()], "{es:#?}");
    assert_eq!(
        es.iter().filter(|e| e["kind"] == "turn_end").count(),
        1,
        "{es:#?}"
    );

    // restarted, q (nothing waiting for it) is not active until a message
    // comes: its stored usage still says it is paused, and so does the
    // answer to a message
    let fleet = host.shutdown().await;
    let host = restart(fleet).await;
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let q = bot(&bots, "q");
    assert_eq!(q["active"], false, "{q:#}");
    assert_eq!(q["paused_until"], until, "{q:#}");
    let (status, again) = host.send("q", "still there?", None).await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(again["paused_until"], until, "{again}");
    host.shutdown().await;
}

/// Regression (QA): SendToAgent to a bot paused by its daily budget said
/// only "its reply will arrive later", so the sender told its person a
/// reply was coming soon. The message is still admitted (it runs after the
/// pause); the result says when at the earliest, and why.
#[tokio::test]
async fn a_message_to_a_paused_bot_says_when_it_can_answer() {
    let script = r#"
[[rule]]
bot = "a"
match = "ask w"
steps = [
  { tool = "SendToAgent", args = { agent = "w", text = "hello paused w" } },
  { tool = "SendMessage", args = { text = "a: {{tool_result}}" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "answer" } } ]
"#;
    let host = TestFleet::new()
        .midday()
        .script("s", script)
        .bot("w", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 300")
        .bot("a", "s", &["SendMessage", "SendToAgent"])
        .start()
        .await;
    let (_, end) = host.end_turn("w", "hello").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    assert!(bot(&bots, "w")["paused_until"].is_i64(), "{bots:#}");

    let (session, end) = host.end_turn("a", "ask w").await;
    assert_eq!(end["status"], "completed", "{end}");
    let said = deliveries(&host.entries(&session).await);
    let said = said.last().unwrap();
    assert!(
        said.starts_with("a: delivered to w as message ")
            && said.contains(", but not before ")
            && said.contains("UTC: w is paused until then by its daily token budget"),
        "{said}"
    );
    host.shutdown().await;
}
