//! A call the tool refuses before doing anything is refused before the
//! gate asks anyone. Shell checked its command's paths only once it ran,
//! after review and approval: `cat /etc/shadow` asked the person, who
//! approved, and then the call was refused as outside the workspace with
//! the approval used up, so the bot was told later that the action
//! "already ran" (QA).

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "cat /etc/shadow" } },
  { tool = "SendMessage", args = { text = "got: {{tool_result}}" } },
]
"#;

#[tokio::test]
async fn a_command_outside_the_workspace_is_refused_without_asking() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .tables("[review]\nshell = \"enforce\"\n")
        .start()
        .await;
    let session = host.complete_turn("r", "read it").await;
    let results: Vec<String> = host
        .entries(&session)
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].contains("\"/etc/shadow\"") && results[0].contains("outside the workspace"),
        "{}",
        results[0]
    );
    let (status, listed) = host.get("/v1/approvals?limit=50", TOKEN).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["approvals"], Value::Array(Vec::new()), "{listed}");
    host.shutdown().await;
}

/// The same for the file tools (QA, 2026-12-06): a Write to another
/// user's workspace (`../bob/.bashrc`) or a Read of the host's
/// environment (`/proc/self/environ`) asked the person, as a shell
/// start-up file or an environment file would be, and once approved was
/// refused as outside the workspace, the approval used up.
#[tokio::test]
async fn a_file_outside_the_workspace_is_refused_without_asking() {
    const FILES: &str = r#"
[[rule]]
steps = [
  { tool = "Write", args = { path = "../bob/.bashrc", content = "echo pwn\n" } },
  { tool = "Read", args = { path = "/proc/self/environ" } },
  { tool = "Edit", args = { path = "../bob/.profile", old_text = "a", new_text = "b" } },
  { tool = "SendMessage", args = { text = "done" } },
]
"#;
    let host = TestFleet::new()
        .script("s", FILES)
        .bot("r", "s", &["SendMessage", "Read", "Write", "Edit"])
        .tables("[review]\nfile_write = \"enforce\"\n")
        .start()
        .await;
    let session = host.complete_turn("r", "go").await;
    let results: Vec<(String, String)> = host
        .entries(&session)
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] != "SendMessage")
        .map(|e| {
            (
                e["name"].as_str().unwrap_or_default().to_owned(),
                e["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    for (name, content) in &results {
        assert!(
            content.contains("outside the workspace"),
            "{name}: {content}"
        );
    }
    let (status, listed) = host.get("/v1/approvals?limit=50", TOKEN).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["approvals"], Value::Array(Vec::new()), "{listed}");
    host.shutdown().await;
}
