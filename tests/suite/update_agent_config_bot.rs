//! UpdateAgent on a bot of fleet.toml: the change applies from the bot's
//! next turn, and the host's next start sets the bot again as the file
//! has it; the call's result says so, and that a lasting change is an
//! edit of the fleet file. (Before, it answered "updated b (role); it
//! applies from its next turn" and a restart quietly put the old role
//! back.) A bot made by CreateAgent is in no file: its change lasts, and
//! its result says nothing of a restart.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;

const SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^mkagent"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "made" } },
]

[[rule]]
bot = "maker"
match = "^update"
steps = [
  { calls = [
    { tool = "UpdateAgent", args = { agent = "b", role = "Checks twice." } },
    { tool = "UpdateAgent", args = { agent = "helper", role = "Helps more." } },
  ] },
  { tool = "SendMessage", args = { text = "updated" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// The role `bot` has now.
async fn role_of(host: &TestHost, bot: &str) -> Value {
    let (status, b) = host.get(&format!("/v1/bots/{bot}"), TOKEN).await;
    assert_eq!(status, 200, "{b}");
    b["role"].clone()
}

#[tokio::test]
async fn update_agent_of_a_fleet_toml_bot_says_it_lasts_until_the_next_start() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", &["SendMessage", "CreateAgent", "UpdateAgent"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    host.complete_turn("maker", "mkagent now").await;
    let dm = host.complete_turn("maker", "update both").await;
    let results: Vec<String> = host
        .entries(&dm)
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "UpdateAgent")
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        results,
        vec![
            "updated b (role); it applies from its next turn, until the host restarts: b is \
             defined in fleet.toml, which sets its name, role and tools again at each start \
             (for a lasting change, ask the person to edit the fleet file)"
                .to_owned(),
            "updated helper (role); it applies from its next turn".to_owned(),
        ]
    );
    assert_eq!(role_of(&host, "b").await, "Checks twice.");

    // as said: the start sets b as fleet.toml has it; helper keeps its change
    let host = restart(host.shutdown().await).await;
    assert_eq!(role_of(&host, "b").await, "Test bot b.");
    assert_eq!(role_of(&host, "helper").await, "Helps more.");
    host.shutdown().await;
}

const TAKES_BACK: &str = r#"
[[rule]]
bot = "maker"
match = "^rename"
steps = [
  { tool = "UpdateAgent", args = { agent = "maker", name = "Zed" } },
  { tool = "SendMessage", args = { text = "renamed" } },
]

[[rule]]
bot = "maker"
match = "^take"
steps = [
  { calls = [
    { tool = "CreateAgent", args = { id = "copy", name = "maker-name", role = "Copies." } },
    { tool = "CreateAgent", args = { id = "other", name = "b-name", role = "Copies." } },
  ] },
  { tool = "SendMessage", args = { text = "tried" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// Regression (QA): a fleet.toml bot renamed by UpdateAgent left its file's
/// name free for CreateAgent, and the next start stopped on the clash
/// ("… both answer to …"): the whole fleet down until the operator edited
/// the file. The name the start gives back is taken as well.
#[tokio::test]
async fn a_fleet_toml_bots_name_stays_taken_while_it_is_renamed() {
    let host = TestFleet::new()
        .script("s", TAKES_BACK)
        .bot("maker", "s", &["SendMessage", "CreateAgent", "UpdateAgent"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    host.complete_turn("maker", "rename yourself").await;
    let dm = host.complete_turn("maker", "take the names").await;
    let results: Vec<String> = host
        .entries(&dm)
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "CreateAgent")
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].contains(
            "the agent maker (named \"Zed\" now, and \"maker-name\" again when the host \
             restarts: its name in fleet.toml) already answers to"
        ),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("the agent b (\"b-name\")") && !results[1].contains("fleet.toml"),
        "{}",
        results[1]
    );
    // nothing was made, and the next start goes through
    let host = restart(host.shutdown().await).await;
    let (status, _) = host.get("/v1/bots/copy", TOKEN).await;
    assert_eq!(status, 404);
    let (_, maker) = host.get("/v1/bots/maker", TOKEN).await;
    assert_eq!(maker["name"], "maker-name", "{maker}");
    host.shutdown().await;
}

const SELF_CUT: &str = r#"
[[rule]]
bot = "maker"
match = "^mkagent"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps.", tools = ["SendMessage", "Read"] } },
  { tool = "SendMessage", args = { text = "made" } },
]

[[rule]]
bot = "maker"
match = "^drop read"
steps = [
  { tool = "UpdateAgent", args = { agent = "maker", tools = ["SendMessage", "CreateAgent", "UpdateAgent"] } },
  { tool = "SendMessage", args = { text = "dropped" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// A fleet.toml bot that drops a tool of its own gets it back at the next
/// start, but the bots it made keep the cut; the result says both
/// (QA, 2026-12-06: after "until the host restarts" it named the cut
/// bots without a word on it, and a model took their cut for undone by a
/// restart too).
#[tokio::test]
async fn a_fleet_toml_bots_cut_of_its_own_tools_lasts_for_the_bots_it_made() {
    let tools = &["SendMessage", "CreateAgent", "UpdateAgent", "Read"];
    let host = TestFleet::new()
        .script("s", SELF_CUT)
        .bot("maker", "s", tools)
        .start()
        .await;
    host.complete_turn("maker", "mkagent now").await;
    let dm = host.complete_turn("maker", "drop read").await;
    let result = host
        .entries(&dm)
        .await
        .into_iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "UpdateAgent")
        .and_then(|e| e["content"].as_str().map(str::to_owned))
        .unwrap_or_default();
    assert!(
        result.contains("until the host restarts")
            && result.ends_with(
                "; the bots it made and its subagents keep only its tools, and keep that cut \
                 after a restart (nothing gives them their tools back by itself): helper (now \
                 SendMessage)"
            ),
        "{result}"
    );

    let host = restart(host.shutdown().await).await;
    let tools_of = async |bot: &str| {
        let (_, b) = host.get(&format!("/v1/bots/{bot}"), TOKEN).await;
        b["tools"].clone()
    };
    assert_eq!(tools_of("maker").await, serde_json::json!(tools));
    assert_eq!(tools_of("helper").await, serde_json::json!(["SendMessage"]));
    host.shutdown().await;
}
