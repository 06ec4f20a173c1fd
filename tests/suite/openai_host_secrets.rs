//! A model server's error text is cleaned of every credential the host
//! knows, not only of the provider's own key. Regression: a server
//! answering 400 with other secrets in its body (another user's token, a
//! webhook's signing secret, a `[[secrets]]` value, a user's secret set
//! through the API) had them copied verbatim into the `turn_failed`
//! notice, the transcript, the turn's error and the log. They are cleaned
//! before the body is cut to its 4 KiB, so one the cut runs through shows
//! no start either.

use serde_json::json;

use super::openai_edges::raw_server;
use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

/// The signing secret of bot `r`'s webhook.
const HOOK_SECRET: &str = "hook-signing-secret-0123456789";
/// The fleet file's `[[secrets]]` value (bot `r` does not list it).
const FLEET_SECRET: &str = "zq-fleet-secret-value-0123456789";
/// Alice's own value of a secret bot `r` lists, set through the API.
const API_SECRET: &str = "alice-api-secret-0123456789";

#[tokio::test]
async fn a_model_servers_error_shows_none_of_the_hosts_credentials() {
    let (address, _) = raw_server(|_| {
        let head = format!(
            "bad request quokka: tokens {BOB_TOKEN} {TOKEN}, hook {HOOK_SECRET}, api {API_SECRET}; "
        );
        // the fleet secret crosses the 4096th byte, where the body is cut
        let pad = "x".repeat(4096 - head.len() - 10);
        (400, "text/plain", format!("{head}{pad}{FLEET_SECRET} tail"))
    })
    .await;
    let host = TestFleet::new()
        .openai("main", &format!("http://{address}/v1"), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .bot_lines(&format!(
            "secrets = [\"MY_API\"]\n\n[[bots.hooks]]\nname = \"gh\"\nsecret = \"{HOOK_SECRET}\""
        ))
        .tables(&format!(
            "[[secrets]]\nname = \"DEPLOY_KEY\"\nvalue = \"{FLEET_SECRET}\""
        ))
        .start()
        .await;
    let put = host
        .http
        .put(format!("{}/v1/secrets/MY_API", host.url))
        .bearer_auth(TOKEN)
        .body(json!({ "value": API_SECRET }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200, "{}", put.text().await.unwrap());

    let (session, end) = host.end_turn("r", "hello").await;
    assert_eq!(end["status"], "failed", "{end}");
    let turn = end["turn"].as_str().unwrap();
    let (_, record) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    let error = record["turn"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("HTTP 400") && error.contains("bad request quokka: tokens "),
        "{record:#}"
    );
    let entries = host.entries(&session).await;
    let notice = entries
        .iter()
        .find(|e| e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    assert!(
        notice["text"].as_str().unwrap().contains("quokka"),
        "{notice}"
    );
    let shown = format!("{record}\n{}", serde_json::to_string(&entries).unwrap());
    for secret in [BOB_TOKEN, TOKEN, HOOK_SECRET, API_SECRET] {
        assert!(!shown.contains(secret), "shows {secret}: {shown}");
    }
    // nothing of the secret the cut ran through, however little
    for len in 4..=FLEET_SECRET.len() {
        let start = &FLEET_SECRET[..len];
        assert!(!shown.contains(start), "shows {start:?}: {shown}");
    }
    host.shutdown().await;
}

/// The same for the reviewer model: its failure becomes the reason of the
/// approval a person reads. Regression: the reviewer's call (and
/// compaction's and fact extraction's) went through the provider's own
/// cleaning only, so a server echoing another user's token put it into
/// the approval's reason.
#[tokio::test]
async fn a_reviewer_models_error_shows_none_of_the_hosts_credentials() {
    let (address, _) = raw_server(|_| {
        (
            400,
            "text/plain",
            format!("reviewer refused wombat: {BOB_TOKEN} hook {HOOK_SECRET}"),
        )
    })
    .await;
    let script = "[[rule]]\nmatch = \"^list\"\n\
                  steps = [ { tool = \"Shell\", args = { command = \"ls\" } } ]\n\n\
                  [[rule]]\nsteps = [ { tool = \"SendMessage\", args = { text = \"ok\" } } ]\n";
    let host = TestFleet::new()
        .script("s", script)
        .openai("rev", &format!("http://{address}/v1"), "max_retries = 0")
        .bot("r", "s", &["SendMessage", "Shell"])
        .bot_lines(&format!(
            "\n[[bots.hooks]]\nname = \"gh\"\nsecret = \"{HOOK_SECRET}\""
        ))
        .tables("[review]\nshell = \"enforce\"\nreviewer = \"rev\"\n")
        .start()
        .await;
    host.end_turn("r", "list the files").await;
    let (status, listed) = host.get("/v1/approvals?status=pending", TOKEN).await;
    assert_eq!(status, 200, "{listed}");
    let reason = listed["approvals"][0]["reason"]
        .as_str()
        .unwrap_or_else(|| panic!("an approval: {listed:#}"));
    assert!(
        reason.contains("reviewer model failed") && reason.contains("wombat"),
        "{reason}"
    );
    for secret in [BOB_TOKEN, HOOK_SECRET] {
        assert!(!reason.contains(secret), "shows {secret}: {reason}");
    }
    host.shutdown().await;
}
