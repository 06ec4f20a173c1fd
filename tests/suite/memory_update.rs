//! A memory update inside a turn stays where the turn's first request put
//! it, right after the turn's inputs: the turn's steps follow it. (At the
//! end of every request it read as a new message after each tool result;
//! the offline model started over at each step and sent the same reply 40
//! times until the step limit failed the turn, with the update's text in
//! every copy.)

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

const SCRIPT: &str = r#"
[[rule]]
match = "^remember (.*)"
steps = [
  { tool = "Remember", args = { text = "{{1}}" } },
  { tool = "SendMessage", args = { text = "noted" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

#[tokio::test]
async fn a_memory_update_is_answered_once_and_not_echoed() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .runtime("debounce_ms = 0\nextract_memory = false\n")
        .bot("a", "s", &["SendMessage", "Remember"])
        .start()
        .await;
    let (_, first) = host.send("a", "remember I like coffee", None).await;
    let session = first["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, first["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");

    // the next turn of the same context sees the fact as an update
    let (_, second) = host.send("a", "hi there", None).await;
    let end = host
        .wait_turn_end(&session, second["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["deliveries"], 1, "{end}");
    let entries: Vec<Value> = host.entries(&session).await;
    assert_eq!(deliveries(&entries), ["noted", "echo: hi there"]);
    host.shutdown().await;
}
