//! A bot must be able to speak: CreateAgent and UpdateAgent refuse a tool
//! list without SendMessage, as fleet.toml does.

use serde_json::json;

use super::agents::ALL;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

/// Regression: fleet.toml refuses a bot without SendMessage, but a bot
/// could create one with CreateAgent, or take SendMessage from one (itself
/// included) with UpdateAgent. Both are refused with the fix named; the
/// API lists no such bot and the tools stay as they were.
#[tokio::test]
async fn agents_without_send_message_are_refused() {
    let script = r#"
[[rule]]
bot = "boss"
match = "^hire"
steps = [
  { tool = "CreateAgent", args = { name = "Mute", role = "Says nothing.", tools = ["SendToAgent"] } },
  { tool = "SendMessage", args = { text = "create: {{tool_result}}" } },
  { tool = "UpdateAgent", args = { agent = "boss", tools = ["SendToAgent", "UpdateAgent"] } },
  { tool = "SendMessage", args = { text = "update: {{tool_result}}" } },
]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("boss", "s", ALL)
        .start()
        .await;
    let session = host.complete_turn("boss", "hire a mute").await;
    let said = deliveries(&host.entries(&session).await);
    let fix = "again with \"SendMessage\" in `tools`";
    for (what, tool) in [("create: ", "CreateAgent"), ("update: ", "UpdateAgent")] {
        let line = said.iter().find(|d| d.starts_with(what)).unwrap();
        assert!(
            line.contains("would not include SendMessage: it could not speak to anyone")
                && line.contains(&format!("call {tool} {fix}")),
            "{line}"
        );
    }
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let ids: Vec<&str> = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["boss"], "no mute bot was created");
    let (_, boss) = host.get("/v1/bots/boss", TOKEN).await;
    assert_eq!(boss["tools"], json!(ALL), "{boss}");
    host.shutdown().await;
}
