//! Calls of one step that change the same bot: the step's calls commit
//! together, and each wrote the bot's whole record as the store had it
//! before the step, so the last write won. Two UpdateAgent calls on one
//! bot kept only the second change, and a bot's role change undid the
//! tool cut its maker's UpdateAgent made in the same step (QA): all were
//! answered "updated". Each call now starts from what the step's earlier
//! calls wrote.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^make"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps.", tools = ["SendMessage", "Read"] } },
  { tool = "SendMessage", args = { text = "made" } },
]

[[rule]]
bot = "maker"
match = "^both"
steps = [
  { calls = [
    { tool = "UpdateAgent", args = { agent = "helper", name = "Helper Renamed" } },
    { tool = "UpdateAgent", args = { agent = "helper", role = "Role set in the same step." } },
  ] },
  { tool = "SendMessage", args = { text = "updated" } },
]

[[rule]]
bot = "maker"
match = "^cut"
steps = [
  { calls = [
    { tool = "UpdateAgent", args = { agent = "maker", tools = ["SendMessage", "CreateAgent", "UpdateAgent"] } },
    { tool = "UpdateAgent", args = { agent = "helper", role = "Role after the cut." } },
  ] },
  { tool = "SendMessage", args = { text = "cut" } },
]

[[rule]]
bot = "maker"
match = "^by new name"
steps = [
  { calls = [
    { tool = "UpdateAgent", args = { agent = "helper", name = "Quill" } },
    { tool = "UpdateAgent", args = { agent = "Quill", role = "Addressed by its new name." } },
  ] },
  { tool = "SendMessage", args = { text = "renamed" } },
]

[[rule]]
bot = "maker"
match = "^twins"
steps = [
  { calls = [
    { tool = "CreateAgent", args = { id = "twin-one", name = "Twin", role = "One." } },
    { tool = "CreateAgent", args = { id = "twin-two", name = "Twin", role = "Two." } },
  ] },
  { tool = "SendMessage", args = { text = "twins" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

async fn bot(host: &TestHost, id: &str) -> Value {
    let (status, b) = host.get(&format!("/v1/bots/{id}"), TOKEN).await;
    assert_eq!(status, 200, "{b}");
    b
}

#[tokio::test]
async fn calls_of_one_step_on_one_bot_all_apply() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot(
            "maker",
            "s",
            &["SendMessage", "CreateAgent", "UpdateAgent", "Read"],
        )
        .start()
        .await;
    host.complete_turn("maker", "make helper").await;

    host.complete_turn("maker", "both changes").await;
    let helper = bot(&host, "helper").await;
    assert_eq!(
        (&helper["name"], &helper["role"]),
        (
            &Value::from("Helper Renamed"),
            &Value::from("Role set in the same step.")
        ),
        "{helper}"
    );

    host.complete_turn("maker", "cut tools").await;
    let helper = bot(&host, "helper").await;
    assert_eq!(helper["role"], "Role after the cut.", "{helper}");
    assert_eq!(
        helper["tools"],
        serde_json::json!(["SendMessage"]),
        "{helper}"
    );
    assert_eq!(helper["name"], "Helper Renamed", "{helper}");

    // a name given in the step addresses the bot in the step's next call
    host.complete_turn("maker", "by new name").await;
    let helper = bot(&host, "helper").await;
    assert_eq!(
        (&helper["name"], &helper["role"]),
        (
            &Value::from("Quill"),
            &Value::from("Addressed by its new name.")
        ),
        "{helper}"
    );

    // a name made in the step is taken for the step's next call
    let dm = host.complete_turn("maker", "twins").await;
    let results: Vec<String> = host
        .entries(&dm)
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "CreateAgent")
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    // the conversation's last two: this turn's
    let [.., one, two] = results.as_slice() else {
        panic!("{results:?}");
    };
    assert!(one.starts_with("created agent twin-one"), "{one}");
    assert!(two.contains("already answers to \"Twin\""), "{two}");
    let (status, _) = host.get("/v1/bots/twin-two", TOKEN).await;
    assert_eq!(status, 404);
    host.shutdown().await;
}
