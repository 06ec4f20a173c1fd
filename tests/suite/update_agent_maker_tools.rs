//! UpdateAgent keeps a bot made by CreateAgent within its maker's tools,
//! and a subagent within its parent's, as each start does
//! (`created_agent_tools.rs`, `subagents_config.rs`): it gives a made bot
//! no tool its maker lacks, and a tool it takes from a bot is taken from
//! the bots it made and from its subagents too.
//!
//! (Before, another bot with UpdateAgent gave a made bot a tool its maker
//! did not have: the call said "updated", the bot used the tool, and the
//! next restart took it away again with only a line in the host's log.
//! And a tool taken from a bot stayed with the bots it made and with its
//! subagents, which went on using it, until the next restart.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;

const SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^mkhelper"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
bot = "boss"
match = "^givewrite"
steps = [
  { tool = "UpdateAgent", args = { agent = "helper", tools = ["SendMessage", "Write"] } },
  { tool = "SendMessage", args = { text = "update said: {{tool_result}}" } },
]

[[rule]]
bot = "boss"
match = "^givereact"
steps = [
  { tool = "UpdateAgent", args = { agent = "helper", tools = ["SendMessage", "ReactToMessage"] } },
  { tool = "SendMessage", args = { text = "update said: {{tool_result}}" } },
]
"#;

/// `helper`'s tools in `GET /v1/bots`.
async fn helper_tools(host: &TestHost) -> Value {
    let (status, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "helper")
        .map(|b| b["tools"].clone())
        .unwrap_or_else(|| panic!("no helper in {list:#}"))
}

/// The UpdateAgent result of `boss`'s turn answering `text`.
async fn update_result(host: &TestHost, text: &str) -> Value {
    let (end, entries) = host.end_turn_as("boss", TOKEN, text).await;
    assert_eq!(end["status"], "completed", "{entries:#?}");
    entries
        .iter()
        .find(|e| {
            e["kind"] == "tool_result" && e["name"] == "UpdateAgent" && e["turn"] == end["turn"]
        })
        .cloned()
        .unwrap_or_else(|| panic!("no UpdateAgent result in {entries:#?}"))
}

#[tokio::test]
async fn update_agent_gives_a_made_bot_no_tool_its_maker_lacks() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot(
            "maker",
            "s",
            &["SendMessage", "CreateAgent", "ReactToMessage"],
        )
        .bot(
            "boss",
            "s",
            &["SendMessage", "UpdateAgent", "Write", "ReactToMessage"],
        )
        .start()
        .await;
    let (_, end) = host.end_turn("maker", "mkhelper now").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(helper_tools(&host).await, json!(["SendMessage"]));

    // boss has Write, maker does not: refused, naming the maker
    let refused = update_result(&host, "givewrite please").await;
    assert_eq!(refused["is_error"], true, "{refused:#}");
    let text = refused["content"].as_str().unwrap();
    assert!(
        text.contains("\"Write\"") && text.contains("maker") && text.contains("ReactToMessage"),
        "{text}"
    );
    assert_eq!(helper_tools(&host).await, json!(["SendMessage"]));

    // a tool both have is given
    let given = update_result(&host, "givereact please").await;
    assert_eq!(given["is_error"], false, "{given:#}");
    assert_eq!(
        helper_tools(&host).await,
        json!(["SendMessage", "ReactToMessage"])
    );

    // and kept: a start leaves helper as UpdateAgent left it
    let fleet = host.shutdown().await;
    let host = restart(fleet).await;
    assert_eq!(
        helper_tools(&host).await,
        json!(["SendMessage", "ReactToMessage"])
    );
    host.shutdown().await;
}

const CHAIN: &str = r#"
[[rule]]
bot = "boss"
match = "^mkhelper"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps.", tools = ["SendMessage", "Write", "CreateAgent", "Task"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
bot = "boss"
match = "^takewrite"
steps = [
  { tool = "UpdateAgent", args = { agent = "helper", tools = ["SendMessage", "CreateAgent", "Task"] } },
  { tool = "SendMessage", args = { text = "update said: {{tool_result}}" } },
]

[[rule]]
bot = "helper"
match = "^mkminion"
steps = [
  { tool = "CreateAgent", args = { id = "minion", name = "Minion", role = "Writes.", tools = ["SendMessage", "Write"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
bot = "helper"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "write later", prompt = "write a file later" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "minion"
match = "^dowrite"
steps = [
  { tool = "Write", args = { path = "minion.txt", content = "minion wrote" } },
  { tool = "SendMessage", args = { text = "write said: {{tool_result}}" } },
]

[[rule]]
match = "write a file later"
steps = [ { tool = "SendMessage", args = { text = "waiting" } } ]
"#;

/// The tools of bot `id` in `GET /v1/bots`.
async fn tools_of(host: &TestHost, id: &str) -> Value {
    let (status, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .map(|b| b["tools"].clone())
        .unwrap_or_else(|| panic!("no {id} in {list:#}"))
}

#[tokio::test]
async fn a_tool_taken_from_a_bot_is_taken_from_the_bots_it_made_and_its_subagents() {
    let host = TestFleet::new()
        .script("s", CHAIN)
        .bot(
            "boss",
            "s",
            &["SendMessage", "UpdateAgent", "CreateAgent", "Task", "Write"],
        )
        .start()
        .await;
    host.complete_turn("boss", "mkhelper now").await;
    host.complete_turn("helper", "mkminion now").await;
    host.complete_turn("helper", "delegate now").await;
    let sub = host.wait_subagent_of("helper").await;
    assert_eq!(
        tools_of(&host, "minion").await,
        json!(["SendMessage", "Write"])
    );
    assert_eq!(tools_of(&host, &sub).await, json!(["SendMessage", "Write"]));

    // boss takes Write from helper
    let (end, entries) = host.end_turn_as("boss", TOKEN, "takewrite now").await;
    assert_eq!(end["status"], "completed", "{entries:#?}");
    let result = entries
        .iter()
        .find(|e| {
            e["kind"] == "tool_result" && e["name"] == "UpdateAgent" && e["turn"] == end["turn"]
        })
        .unwrap_or_else(|| panic!("no UpdateAgent result in {entries:#?}"));
    assert_eq!(result["is_error"], false, "{result:#}");
    let said = result["content"].as_str().unwrap();
    assert!(
        said.contains("minion (now SendMessage)")
            && said.contains(&format!("{sub} (now SendMessage)")),
        "{said}"
    );
    assert_eq!(
        tools_of(&host, "helper").await,
        json!(["SendMessage", "CreateAgent", "Task"])
    );
    // at once, not at the next start
    assert_eq!(tools_of(&host, "minion").await, json!(["SendMessage"]));
    assert_eq!(tools_of(&host, &sub).await, json!(["SendMessage"]));
    let (end, entries) = host.end_turn_as("minion", TOKEN, "dowrite now").await;
    assert_eq!(end["status"], "completed", "{entries:#?}");
    let write = entries
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "Write")
        .unwrap_or_else(|| panic!("no Write result in {entries:#?}"));
    assert!(
        write["is_error"] == true && write["content"].as_str().unwrap().contains("no tool"),
        "{write:#}"
    );
    assert!(
        !host
            .fleet
            .path()
            .join("data/workspace/alice/minion.txt")
            .exists()
    );
    host.shutdown().await;
}
