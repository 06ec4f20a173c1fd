//! Read of a credentials file is reviewed as `cat` of it is: the
//! workspace is HOME for Shell, so `.env` and `.ssh/id_rsa` are the same
//! files. Read returned a private key that `cat` asked about, with no
//! approval and no review log row (QA, 2026-12-05).

use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

use super::review::workspace;

const SCRIPT: &str = r#"
[[rule]]
match = "approved approval"
steps = [
  { tool = "Read", args = { path = ".env" } },
  { tool = "SendMessage", args = { text = "after the approval: {{tool_result}}" } },
]

[[rule]]
match = "^read notes"
steps = [
  { tool = "Read", args = { path = "notes.txt" } },
  { tool = "SendMessage", args = { text = "notes: {{tool_result}}" } },
]

[[rule]]
match = "^read"
steps = [
  { tool = "Read", args = { path = ".env" } },
  { tool = "SendMessage", args = { text = "asked: {{tool_result}}" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

#[tokio::test]
async fn a_read_of_credentials_waits_for_approval() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Read"])
        .tables("[review]\nshell = \"enforce\"\n")
        .start()
        .await;
    let ws = workspace(&host);
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join(".env"), "DB_PASSWORD=hunter2-qa\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "plain notes\n").unwrap();

    // an ordinary file is read at once
    let (notes_session, _) = host.end_turn("r", "read notes").await;
    let entries = host.entries(&notes_session).await;
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "delivery" && e["text"] == "notes: plain notes"),
        "{entries:#?}"
    );

    let (status, sent) = host.send("r", "read the env", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let pending = host
        .wait_get("/v1/approvals?status=pending", |v| {
            v["approvals"].as_array()?.first().cloned()
        })
        .await;
    assert_eq!(pending["summary"], "read .env", "{pending:#}");
    assert!(
        pending["reason"]
            .as_str()
            .unwrap()
            .contains("an environment file with secrets"),
        "{pending:#}"
    );
    let asked = host.wait_delivery(&session, "asked:").await;
    assert!(!asked.contains("hunter2"), "{asked}");

    // approved, the same Read returns the file
    let id = pending["id"].as_str().unwrap();
    let (status, body) = host
        .call(
            reqwest::Method::POST,
            &format!("/v1/approvals/{id}"),
            TOKEN,
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let after = host.wait_delivery(&session, "after the approval").await;
    assert!(after.contains("hunter2-qa"), "{after}");
    host.shutdown().await;
}
