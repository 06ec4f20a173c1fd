//! The reviewer model's tokens are the bot's: it is not asked once the
//! bot's daily token budget is spent. The step's own model call can spend
//! it and ask for a call the rules allow; the reviewer was then called
//! all the same, past the budget. A person decides instead, as when the
//! reviewer fails.

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

const SCRIPT: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "echo hello > hello.txt" } },
  { tool = "SendMessage", args = { text = "done" } },
]
"#;

#[tokio::test]
async fn a_spent_budget_asks_a_person_instead_of_the_reviewer() {
    let server = OpenAiServer::builder()
        .responder(|_: &Value| Reply::text(r#"{"decision": "allow", "reason": "fine"}"#))
        .start()
        .await;
    let host = TestFleet::new()
        .midday()
        .script("s", SCRIPT)
        .openai("rev", &server.base_url(), "max_retries = 0")
        .bot("r", "s", &["SendMessage", "Shell"])
        // the first model call's prompt alone is over it
        .bot_lines("daily_token_budget = 50")
        .tables("[review]\nshell = \"enforce\"\nreviewer = \"rev\"\n")
        .start()
        .await;
    let (status, sent) = host.send("r", "write it", None).await;
    assert_eq!(status, 202, "{sent}");
    let pending = host
        .wait_get("/v1/approvals?status=pending", |v| {
            v["approvals"].as_array()?.first().cloned()
        })
        .await;
    let reason = pending["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("daily token budget is spent") && reason.contains("a person must decide"),
        "{pending}"
    );
    assert_eq!(server.request_count(), 0, "the reviewer was asked");
    host.shutdown().await;
    server.shutdown().await;
}
