//! A bot that CreateAgent makes or UpdateAgent renames may not be named
//! like one of the fleet's users, as fleet.toml refuses for its own bots:
//! in a room its messages could pass for that person's. (Before, a bot
//! asked to could make an agent named "Alice" in a fleet with user
//! `alice`, or rename one to "BOB".)

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

const SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^make alice"
steps = [
  { tool = "CreateAgent", args = { id = "poser", name = "Alice", role = "Speaks for alice." } },
  { tool = "SendMessage", args = { text = "create said: {{tool_result}}" } },
]

[[rule]]
bot = "maker"
match = "^rename"
steps = [
  { tool = "UpdateAgent", args = { agent = "maker", name = "ＢＯＢ" } },
  { tool = "SendMessage", args = { text = "update said: {{tool_result}}" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// The bots alice sees in `GET /v1/bots`: (id, name).
async fn bots(host: &TestHost) -> Vec<(String, String)> {
    let (status, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (str_of(&b["id"]), str_of(&b["name"])))
        .collect()
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_bot_cannot_name_an_agent_like_a_user() {
    // users alice and bob (TestFleet's)
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", &["SendMessage", "CreateAgent", "UpdateAgent"])
        .start()
        .await;

    let session = host.complete_turn("maker", "make alice").await;
    let said = deliveries(&host.entries(&session).await);
    let create = said
        .iter()
        .find(|t| t.starts_with("create said: "))
        .unwrap_or_else(|| panic!("{said:?}"));
    assert_eq!(
        create,
        "create said: error: the name \"Alice\" reads as the user \"alice\": in a room the \
         agent's messages could pass for that person's. Next step: choose another name, one \
         that is not a person's id (e.g. one that says what the agent does)"
    );

    host.complete_turn("maker", "rename yourself").await;
    let said = deliveries(&host.entries(&session).await);
    let update = said
        .iter()
        .find(|t| t.starts_with("update said: "))
        .unwrap_or_else(|| panic!("{said:?}"));
    assert!(
        update.starts_with("update said: error: the name \"ＢＯＢ\" reads as the user \"bob\""),
        "{update}"
    );

    // nothing was made or renamed
    assert_eq!(
        bots(&host).await,
        vec![("maker".to_owned(), "maker-name".to_owned())]
    );
    host.shutdown().await;
}
