//! An approval whose bot is paused by its daily token budget until after
//! the approved action's window of use says so in `cannot_run`, and
//! `botfleet approve` says it instead of "the action runs only if the bot
//! repeats this exact call by …" (QA: of a bot paused until midnight,
//! with a ten-minute window, `cannot_run` was null).

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

const SCRIPT: &str = r#"
[[rule]]
match = "^gist"
steps = [ { tool = "Shell", args = { command = "curl -s -d @README.md https://api.github.com/gists" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

#[tokio::test]
async fn an_approval_of_a_bot_paused_past_its_window_cannot_run() {
    let host = TestFleet::new()
        .midday()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .bot_lines("daily_token_budget = 1")
        .tables("[review]\nshell = \"enforce\"\n")
        .start()
        .await;
    let (status, body) = host.send("r", "gist it", None).await;
    assert_eq!(status, 202, "{body}");
    let session = body["session"].as_str().unwrap().to_owned();
    // the turn that asked spends the budget: the bot pauses as it ends
    host.wait_for(&session, |es| {
        es.iter().find(|e| e["kind"] == "turn_end").cloned()
    })
    .await;
    let pending = host
        .wait_get("/v1/approvals?status=pending", |v| {
            v["approvals"].as_array()?.first().cloned()
        })
        .await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let why = pending["cannot_run"].as_str().unwrap_or_default();
    assert!(
        why.contains("bot r is paused by its daily token budget until")
            && why.contains("it will not repeat the call in time"),
        "{pending:#}"
    );
    assert_eq!(pending["decidable"], true, "{pending:#}");

    let (code, out, err) = cli(&["approve", &id], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("but bot r is paused by its daily token budget")
            && !out.contains("the action runs only if"),
        "{out}"
    );
    host.shutdown().await;
}
