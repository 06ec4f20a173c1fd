//! The edges of the delivery and file tools, through a scripted bot: a
//! card with a `javascript:` url is refused and nothing reaches people; a
//! reaction on the bot's internal step or with a newline for an emoji is
//! refused; `~/` in a file tool's path is the workspace root, as in
//! Shell. (The card was delivered, the reactions were put on, and
//! `~/t.txt` was written in a directory named `~`.)

use serde_json::Value;

use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
match = "^edges"
steps = [
  { calls = [
    { tool = "SendMessage", args = { text = "Open it", card = { title = "Run", buttons = [ { label = "Go", url = "javascript:alert(1)" } ] } } },
    { tool = "ReactToMessage", args = { seq = 2, emoji = "👍" } },
    { tool = "ReactToMessage", args = { seq = 1, emoji = "a\nb" } },
    { tool = "Write", args = { path = "~/t.txt", content = "home" } },
  ] },
  { tool = "SendMessage", args = { text = "done" } },
]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// The tool results of `session`, in order: (is_error, content).
fn results(entries: &[Value]) -> Vec<(bool, String)> {
    entries
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| {
            (
                e["is_error"] == true,
                e["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn bad_cards_reactions_and_tilde_paths_are_handled() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "ReactToMessage", "Write"])
        .start()
        .await;
    let session = host.dm_after_hello("r").await;
    // seq 1: "hello"; seq 2: the bot's note "noted" (an assistant entry)
    let entries = host.entries(&session).await;
    assert_eq!(entries[1]["kind"], "assistant", "{entries:#?}");
    let (_, body) = host.send("r", "edges", None).await;
    let seq = body["seq"].as_i64().unwrap();
    host.wait_turn_end(&session, seq).await;
    let entries = host.entries(&session).await;
    let got = results(&entries);
    assert_eq!(got.len(), 5, "{got:#?}");
    assert!(
        got[0].0
            && got[0]
                .1
                .contains("`card.buttons[0].url` is \"javascript:alert(1)\""),
        "{got:#?}"
    );
    assert!(
        got[1].0 && got[1].1.contains("entry 2 is an assistant"),
        "{got:#?}"
    );
    assert!(
        got[2].0
            && got[2]
                .1
                .contains("has a control or space character (U+000A)"),
        "{got:#?}"
    );
    assert_eq!(got[3], (false, "wrote 4 bytes to t.txt".to_owned()));
    // nothing of the refused calls reached people
    assert!(
        !entries
            .iter()
            .any(|e| e["kind"] == "reaction" || !e["card"].is_null()),
        "{entries:#?}"
    );
    let ws = host.fleet.path().join("data/workspace/alice");
    assert_eq!(std::fs::read_to_string(ws.join("t.txt")).unwrap(), "home");
    assert!(!ws.join("~").exists());
    host.shutdown().await;
}
