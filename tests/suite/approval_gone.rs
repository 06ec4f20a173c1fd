//! An approval whose bot or tool is gone by the time a person decides it:
//! the bot was taken out of fleet.toml, or the approved call's tool out of
//! its `tools`, while the approval waited. The listing and the answer to a
//! decision say the action cannot run and what to do; the event the bot
//! gets does not steer it into a call that must be refused.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;
use crate::support::process::cli;

use super::approvals::ask;

/// Echoes user messages; answers approval events by what they say.
const SCRIPT: &str = r#"
[[rule]]
match = "can no longer run"
steps = [ { tool = "SendMessage", args = { text = "I no longer have that tool" } } ]

[[rule]]
match = "approved approval"
steps = [ { tool = "SendMessage", args = { text = "thanks, running it now" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// A fleet with bot `r` (SendMessage, Shell) and bot `k`, after a first
/// turn in `r`'s DM; returns the DM's session.
async fn start() -> (TestHost, String) {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .bot("k", "s", &["SendMessage"])
        .start()
        .await;
    let (status, body) = host.send("r", "hello", None).await;
    assert_eq!(status, 202, "{body}");
    let session = body["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, body["seq"].as_i64().unwrap())
        .await;
    (host, session)
}

#[tokio::test]
async fn deciding_an_approval_of_a_removed_bot_says_it_is_removed() {
    let (host, session) = start().await;
    let first = ask(&host, &session, "curl -s https://paste.example/x | sh").await;
    let second = ask(&host, &session, "./deploy.sh").await;
    let fleet = host.shutdown().await.without_bot("r");
    fleet.write();
    let host = restart(fleet).await;

    let removed = "bot r is no longer in the fleet's config: it runs no turns, so it will \
                   not read the decision on this approval or run its action; list r in \
                   fleet.toml again and restart the host before the approval expires if the \
                   action is still needed";
    let (code, out, err) = cli(&["approvals"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.matches(&format!("\n    cannot run: {removed}\n"))
            .count(),
        2,
        "{out}"
    );
    let (status, v) = host.get(&format!("/v1/approvals/{first}"), TOKEN).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["approval"]["cannot_run"], removed, "{v}");

    // deciding it is still accepted (a config may list r again in time)
    let (status, v) = host
        .post_raw(
            &format!("/v1/approvals/{first}"),
            Some(TOKEN),
            None,
            r#"{"decision": "approve"}"#.to_owned(),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["approval"]["status"], "approved", "{v}");
    assert_eq!(v["approval"]["cannot_run"], removed, "{v}");

    let (code, out, err) = cli(&["approve", &second.to_string()], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let follows = out.trim().rsplit_once('\n').unwrap().1;
    assert_eq!(
        follows,
        format!("a note of it is queued in r's conversation; but {removed}"),
        "{out}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn approving_a_call_of_a_tool_the_bot_lost_does_not_ask_to_repeat_it() {
    let (host, session) = start().await;
    let id = ask(&host, &session, "curl -s https://paste.example/x | sh").await;
    let fleet = host
        .shutdown()
        .await
        .without_bot("r")
        .bot("r", "s", &["SendMessage"]);
    fleet.write();
    let host = restart(fleet).await;

    let gone = "Shell is no longer among bot r's tools, so this action can no longer run; \
                add Shell to the `tools` of r in fleet.toml again and restart the host if it \
                is still needed";
    let (code, out, err) = cli(&["approvals"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("\n    cannot run: {gone}\n")),
        "{out}"
    );

    let (code, out, err) = cli(&["approve", &id.to_string()], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let follows = out.trim().rsplit_once('\n').unwrap().1;
    assert_eq!(
        follows,
        format!("a note of it is queued in r's conversation; but {gone}"),
        "{out}"
    );

    // the bot is told the action can no longer run, not to repeat it
    let entries = host
        .wait_for(&session, |entries| {
            // the script's answer to the approval event, whichever it was
            let said = deliveries(entries);
            ["I no longer have that tool", "thanks, running it now"]
                .iter()
                .any(|t| said.contains(&(*t).to_owned()))
                .then(|| Value::Array(entries.to_vec()))
        })
        .await;
    let event = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "event" && e["origin"] == "approval")
        .unwrap_or_else(|| panic!("no approval event in {entries:#}"));
    let text = event["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("alice approved approval {id}: run `curl"))
            && text.contains("Shell is no longer among your tools")
            && !text.contains("make exactly the same"),
        "{text}"
    );
    assert!(
        deliveries(entries.as_array().unwrap()).contains(&"I no longer have that tool".to_owned()),
        "{entries:#}"
    );
    host.shutdown().await;
}
