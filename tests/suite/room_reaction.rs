//! A room member's ReactToMessage would reach nobody: the member's turn
//! runs in its own session of the room, which the room's people do not
//! read, and the room's input shows no seqs to aim at. The tool is not
//! offered in rooms, and a call anyway is refused within the turn,
//! saying to answer with SendMessage.
//!
//! (Before, the call answered "reacted 👍 to message 1" and wrote the
//! reaction into the member's private room session, on that session's
//! entry 1 (the room's input to it, not the person's message): nobody
//! in the room ever saw it. QA.)

use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::session_of;

const SCRIPT: &str = r#"
[[rule]]
bot = "p"
match = "REACTNOW"
steps = [
  { tool = "ReactToMessage", args = { seq = 1, emoji = "👍" } },
  { tool = "SendMessage", args = { text = "react: {{tool_result}}" } },
]

[[rule]]
steps = [ { text = "nothing to add" } ]
"#;

#[tokio::test]
async fn a_room_members_reaction_is_refused_saying_to_use_send_message() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p", "s", &["SendMessage", "ReactToMessage"])
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let (status, body) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "rx", "members": ["p", "q"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let room = body["id"].as_str().unwrap_or("rx").to_owned();
    let (_, run) = host.discuss(TOKEN, &room, "@p REACTNOW").await;
    let said: Vec<&str> = run
        .iter()
        .filter(|e| e["kind"] == "delivery" && e["author"] == "p")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(said.len(), 1, "{run:#?}");
    assert!(
        said[0].starts_with("react: ")
            && said[0].contains("the tool ReactToMessage is not available in a group room's turns")
            && said[0].contains("say so with SendMessage"),
        "{}",
        said[0]
    );
    // no reaction anywhere: not on the room's timeline, not in the
    // member's own session of the room
    assert!(run.iter().all(|e| e["kind"] != "reaction"), "{run:#?}");
    let own = session_of("p", botfleet::memory::SessionKind::Group, &room);
    let entries = host.entries(&own).await;
    assert!(!entries.is_empty());
    assert!(
        entries.iter().all(|e| e["kind"] != "reaction"),
        "{entries:#?}"
    );
    host.shutdown().await;
}
