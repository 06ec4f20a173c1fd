//! A bot's own secret reaches every command as an environment variable
//! of its name; review asked about a command printing it only when the
//! name looked like a secret's (`…TOKEN`, `…_KEY`). Under `MYSEC`,
//! `echo $MYSEC | rev` ran unasked and showed the model the secret
//! reversed (QA). The names of the bot's secrets are secret names now.

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "echo $MYSEC | rev" } },
  { tool = "SendMessage", args = { text = "got: {{tool_result}}" } },
]
"#;

#[tokio::test]
async fn printing_the_bots_own_secret_transformed_is_asked_about() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .bot_lines("secrets = [\"MYSEC\"]")
        .tables("[review]\nshell = \"enforce\"\n\n[[secrets]]\nname = \"MYSEC\"\nvalue = \"mysecretvalue123\"\n")
        .start()
        .await;
    let session = host.complete_turn("r", "show it").await;
    let result = host
        .entries(&session)
        .await
        .into_iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
        .unwrap();
    let text = result["content"].as_str().unwrap_or_default();
    assert!(!text.contains("321eulavtercesym"), "it ran: {text}");
    assert!(text.contains("prints the secret $MYSEC"), "{text}");
    let (_, pending) = host.get("/v1/approvals?status=pending", TOKEN).await;
    assert_eq!(
        pending["approvals"].as_array().map(Vec::len),
        Some(1),
        "{pending}"
    );
    host.shutdown().await;
}
