//! An action a person approved runs when the bot repeats it, without the
//! reviewer model asked again: the approval decides. (The model was asked
//! at the re-run too, and its "deny" the second time refused the approved
//! action, the approval left unused: QA, 2026-12-05.)
//!
//! The reviewer (an OpenAI-compatible server on loopback) answers "ask"
//! the first time and "deny" after; the bot (scripted) runs the Shell
//! command for "flip" and again when told its approval was approved. The
//! reviewer's call counts in the bot's token usage (it counted nowhere).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

const SCRIPT: &str = r#"
[[rule]]
match = "(?s)(^flip|approved approval)"
steps = [ { tool = "Shell", args = { command = "echo flip >> flip.txt" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

#[tokio::test]
async fn an_approved_action_is_not_reviewed_again_by_the_model() {
    let asked = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&asked);
    let reviewer = move |_: &Value| {
        let verdict = if count.fetch_add(1, Ordering::SeqCst) == 0 {
            json!({"decision": "ask", "reason": "writes a file"})
        } else {
            json!({"decision": "deny", "reason": "changed my mind"})
        };
        Reply::text(verdict.to_string()).usage(1000, 50)
    };
    let server = OpenAiServer::builder().responder(reviewer).start().await;
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .openai("rev", &server.base_url(), "max_retries = 0")
        .bot("r", "s", &["SendMessage", "Shell"])
        .tables("[review]\nshell = \"enforce\"\nreviewer = \"rev\"\n")
        .start()
        .await;
    let (status, sent) = host.send("r", "flip", None).await;
    assert_eq!(status, 202, "{sent}");
    let pending = host
        .wait_get("/v1/approvals?status=pending", |v| {
            v["approvals"].as_array()?.first().cloned()
        })
        .await;
    let id = pending["id"].as_str().unwrap();
    let (status, body) = host
        .post_raw(
            &format!("/v1/approvals/{id}"),
            Some(TOKEN),
            None,
            json!({"decision": "approve"}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // the bot repeats the call: it runs, and uses the approval
    let used = host
        .wait_get(&format!("/v1/approvals/{id}"), |v| {
            v["approval"]["consumed_at"].is_i64().then(|| v.clone())
        })
        .await;
    assert_eq!(used["approval"]["status"], "approved", "{used}");
    // (used with the call's start: its result is written after the run)
    let session = sent["session"].as_str().unwrap();
    let file = host.fleet.path().join("data/workspace/alice/flip.txt");
    host.wait_for(session, |es| {
        es.iter()
            .filter(|e| e["kind"] == "tool_result")
            .find(|e| {
                let said = e["content"].as_str().unwrap_or_default();
                !said.starts_with("not run") && said != "delivered"
            })
            .cloned()
    })
    .await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "flip\n");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the reviewer was asked again"
    );
    // its call counts in the bot's usage (the scripted bot's own calls
    // are small: the 1000 prompt tokens are the reviewer's)
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let today = &bots["bots"][0]["usage"]["today"];
    assert!(
        today["prompt_tokens"].as_u64().unwrap() >= 1000
            && today["completion_tokens"].as_u64().unwrap() >= 50,
        "{today}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
