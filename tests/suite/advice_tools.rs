//! A tool's advice names only tools its caller may call (QA: a bot
//! without Shell that read a missing file was told to list the directory
//! with Shell; one with CheckSubagent but no Task was told to "start one
//! with Task"; DESIGN §4: errors tell the model the next step).

use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
bot = "checker"
steps = [
  { calls = [
    { tool = "CheckSubagent", args = {} },
    { tool = "CheckSubagent", args = { id = "nobody" } },
  ] },
  { tool = "SendMessage", args = { text = "checked" } },
]

[[rule]]
steps = [
  { tool = "Read", args = { path = "missing.txt" } },
  { tool = "SendMessage", args = { text = "read" } },
]
"#;

/// The results of the tool calls (but SendMessage) of `bot`'s turn.
async fn results(host: &crate::support::fleet::TestHost, bot: &str) -> Vec<String> {
    let dm = host.complete_turn(bot, "go").await;
    host.entries(&dm)
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] != "SendMessage")
        .map(|e| e["content"].as_str().map(str::to_owned).unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn advice_names_only_tools_the_caller_has() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("reader", "s", &["SendMessage", "Read"])
        .bot("sheller", "s", &["SendMessage", "Read", "Shell"])
        .bot("checker", "s", &["SendMessage", "CheckSubagent"])
        .start()
        .await;
    let without = results(&host, "reader").await;
    assert_eq!(without.len(), 1, "{without:?}");
    assert!(
        without[0].contains("missing.txt") && !without[0].contains("Shell"),
        "{without:?}"
    );
    let with = results(&host, "sheller").await;
    assert!(with[0].contains("Shell `ls`"), "{with:?}");
    let checked = results(&host, "checker").await;
    assert_eq!(checked.len(), 2, "{checked:?}");
    assert_eq!(checked[0], "you have not delegated anything");
    assert!(
        checked[1].contains("you have no subagent \"nobody\"") && !checked[1].contains("Task"),
        "{checked:?}"
    );
    host.shutdown().await;
}
