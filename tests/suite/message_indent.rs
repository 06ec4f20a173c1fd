//! A message keeps its first line's indentation. Blank lines around it
//! go, but a pasted code block that starts indented stays as written, in
//! a DM, in a room and in what a bot sends back.
//!
//! (Before, every message was trimmed: `    def f():` was stored and
//! shown as `def f():`, its body still indented under it.)

use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const ECHO: &str = r#"
[[rule]]
bot = "echo"
steps = [ { tool = "SendMessage", args = { text = "{{input}}" } } ]

[[rule]]
steps = [ { text = "nothing to add" } ]
"#;

const CODE: &str = "    def f():\n        return 1";

#[tokio::test]
async fn a_message_keeps_its_first_lines_indentation() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("echo", "s", &["SendMessage"])
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("echo", &format!("\n \n{CODE}\n\n")).await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    let asked: Vec<_> = entries
        .iter()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(asked, vec![json!(CODE)], "{entries:#?}");
    assert_eq!(
        crate::support::fleet::deliveries(&entries),
        vec![CODE.to_owned()]
    );

    let (status, room) = host.create_room(TOKEN, "code", &["a", "b"]).await;
    assert_eq!(status, 201, "{room}");
    host.discuss(TOKEN, "code", &format!("{CODE}\n")).await;
    let (status, page) = host.get("/v1/groups/code/entries?after=0", TOKEN).await;
    assert_eq!(status, 200, "{page}");
    let texts: Vec<_> = page["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(texts, vec![json!(CODE)], "{page:#}");
    host.shutdown().await;
}
