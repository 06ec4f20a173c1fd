//! A bot taken out of fleet.toml: after a restart it takes no more
//! messages (API, SendToAgent, rooms, routines), its conversations stay
//! readable, and listing it again brings it back.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;

const SCRIPT: &str = r#"
[[rule]]
bot = "r"
match = "^ask b"
steps = [ { tool = "SendToAgent", args = { agent = "b", text = "are you there?" } },
          { tool = "SendMessage", args = { text = "asked b" } } ]

[[rule]]
bot = "b"
match = "slow topic"
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "b, much later" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

fn bot<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .unwrap_or_else(|| panic!("no bot {id} in {list:#}"))
}

/// Sends `text` to `bot` and waits for the turn that answers it; returns
/// the DM session's id.
async fn talk(host: &TestHost, bot: &str, text: &str, key: &str) -> String {
    let (status, v) = host.send(bot, text, Some(key)).await;
    assert_eq!(status, 202, "{v}");
    let session = v["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, v["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    session
}

#[tokio::test]
async fn a_bot_removed_from_the_config_takes_no_more_work_until_it_is_listed_again() {
    let tools = &["SendMessage", "SendToAgent"];
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", tools)
        .bot("b", "s", tools)
        .start()
        .await;
    let b_dm = talk(&host, "b", "hello", "k1").await;
    let (status, v) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "pair", "members": ["r", "b"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{v}");

    // a discussion where b has the floor when the host stops...
    let (status, slow) = host
        .post_raw(
            "/v1/groups/pair/messages",
            Some(TOKEN),
            Some("k0"),
            json!({"text": "slow topic"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{slow}");
    host.wait_running("b").await;

    // b leaves the config
    let fleet = host.shutdown().await.without_bot("b");
    fleet.write();
    let host = restart(fleet).await;
    // ...resumes without it, and ends
    host.wait_turn_end(
        slow["session"].as_str().unwrap(),
        slow["seq"].as_i64().unwrap(),
    )
    .await;
    let (_, list) = host.get("/v1/bots", TOKEN).await;
    assert!(bot(&list, "b")["removed_at"].is_i64(), "{list:#}");
    assert!(bot(&list, "r")["removed_at"].is_null(), "{list:#}");
    // and the CLI's list says so
    let (code, out, err) = crate::support::process::cli(&["bots"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("b "))
        .unwrap_or_default();
    assert!(line.contains("removed"), "{out}");

    // a person's message is refused, saying why and what to do
    let (status, v) = host.send("b", "still there?", Some("k2")).await;
    assert_eq!(status, 409, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no longer in the fleet's config") && message.contains("fleet.toml"),
        "{message}"
    );
    // what it said is kept
    assert_eq!(deliveries(&host.entries(&b_dm).await), vec!["b here"]);

    // another bot's message is refused to the bot, which can tell its person
    let r_dm = talk(&host, "r", "ask b", "k3").await;
    let entries = host.entries(&r_dm).await;
    let refused = entries
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "SendToAgent")
        .unwrap_or_else(|| panic!("no SendToAgent result in {entries:#?}"));
    assert!(
        refused.to_string().contains("no longer in the fleet"),
        "{refused:#}"
    );
    assert_eq!(deliveries(&entries), vec!["asked b"]);

    // a discussion goes on without it
    let (status, v) = host
        .post_raw(
            "/v1/groups/pair/messages",
            Some(TOKEN),
            Some("k4"),
            json!({"text": "plans?"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    let timeline = v["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&timeline, v["seq"].as_i64().unwrap())
        .await;
    let authors: Vec<Value> = host
        .entries(&timeline)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "delivery")
        .map(|e| e["author"].clone())
        .collect();
    assert!(!authors.is_empty(), "r spoke");
    assert!(authors.iter().all(|a| a == "r"), "{authors:?}");
    // asked for by name, it is not addressed, and the person is told why
    let (status, v) = host
        .post_raw(
            "/v1/groups/pair/messages",
            Some(TOKEN),
            Some("k6"),
            json!({"text": "@b only you"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["addressed"], json!([]), "{v}");
    host.wait_turn_end(&timeline, v["seq"].as_i64().unwrap())
        .await;
    let codes: Vec<Value> = host
        .entries(&timeline)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "notice" && e["seq"].as_i64() > v["seq"].as_i64())
        .map(|e| e["code"].clone())
        .collect();
    assert!(codes.contains(&json!("removed_member")), "{codes:?}");
    // and a new room cannot take it
    let (status, v) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "again", "members": ["r", "b"]}).to_string(),
        )
        .await;
    assert_eq!(status, 409, "{v}");
    // nor a routine
    let (status, v) = host
        .http
        .put(format!("{}/v1/bots/b/routines/daily", host.url))
        .bearer_auth(TOKEN)
        .json(&json!({"cron": "0 8 * * *", "timezone": "UTC", "prompt": "report"}))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 409, "{v:?}");

    // listed again, it answers
    let fleet = host.shutdown().await.bot("b", "s", tools);
    fleet.write();
    let host = restart(fleet).await;
    let (_, list) = host.get("/v1/bots", TOKEN).await;
    assert!(bot(&list, "b")["removed_at"].is_null(), "{list:#}");
    talk(&host, "b", "back?", "k5").await;
    assert_eq!(
        deliveries(&host.entries(&b_dm).await),
        vec!["b here", "b here"]
    );
    host.shutdown().await;
}
