//! UpdateAgent on a bot made by CreateAgent that its owner removed
//! (`DELETE /v1/bots/{bot}`): refused, naming that the bot was removed by
//! its owner, and nothing of the bot changes. (Before, the call answered
//! "updated helper (role); it applies from its next turn" for a bot that
//! runs no turns, and wrote its record; an UpdateAgent that read the bot
//! before the removal and committed after it wrote the record back
//! without `removed_at`, bringing the bot back: the writer now refuses
//! it, `agents_removed_tests.rs` in the actors crate.)

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

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
match = "^update helper"
steps = [
  { tool = "UpdateAgent", args = { agent = "helper", role = "Helps more." } },
  { tool = "SendMessage", args = { text = "update: {{tool_result}}" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

const MAKER_TOOLS: &[&str] = &["SendMessage", "CreateAgent", "UpdateAgent"];

#[tokio::test]
async fn update_agent_refuses_a_bot_its_owner_removed() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", MAKER_TOOLS)
        .start()
        .await;
    let (_, end) = host.end_turn("maker", "mkagent now").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (status, removed) = host
        .call(reqwest::Method::DELETE, "/v1/bots/helper", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{removed}");
    assert!(removed["settings"]["removed_at"].is_i64(), "{removed:#}");

    let (dm, end) = host.end_turn("maker", "update helper please").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&dm).await;
    let result = entries
        .iter()
        .rev()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "UpdateAgent")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    assert_eq!(result["is_error"], true, "{result}");
    let said = result["content"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("error: helper was removed by its owner")
            && said.contains("nothing was changed"),
        "{said}"
    );
    let told = deliveries(&entries);
    assert!(
        told.last()
            .is_some_and(|t| t.starts_with("update: error: helper was removed by its owner")),
        "{told:?}"
    );

    // nothing of it changed, and it stays removed
    let (status, helper) = host.get("/v1/bots/helper", TOKEN).await;
    assert_eq!(status, 200, "{helper}");
    assert_eq!(helper["role"], "Helps.", "{helper:#}");
    assert_eq!(helper["settings"], removed["settings"], "{helper:#}");
    host.shutdown().await;
}
