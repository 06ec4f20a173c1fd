//! A person's secret, put in an argument by their bot's Shell command, is
//! readable by every other command on the machine (`ps`,
//! `/proc/<pid>/cmdline`): another person's bot that lists processes gets
//! it scrubbed, in its tool result and its transcript (the vault's
//! fleet-wide set of people's secrets, actors/src/vault.rs). Without the
//! Shell sandbox, or on a host that cannot give its commands a private
//! /proc: with it a command lists only its own processes
//! (suite::shell_pid_namespace), so this runs with the sandbox off.

use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::process::poll;

/// Runs the input as a Shell command and sends back what it printed.
const SCRIPT: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "{{input}}" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;

/// The review would ask before these commands; here they run.
const NO_REVIEW: &str = "[review]\nshell = \"off\"\n";

/// Bob's secret, stored through the API.
const BOB_VALUE: &str = "bob-api-secret-value-77777";

/// The entries of `session` as the user of `token` reads them.
async fn entries_as(host: &TestHost, token: &str, session: &str) -> Vec<serde_json::Value> {
    botfleet::client::Client::new(&host.url, token)
        .unwrap()
        .entries_after(session, 0)
        .await
        .unwrap()
}

#[tokio::test]
async fn another_persons_secret_in_a_command_line_is_scrubbed_from_a_bots_process_list() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("a1", "s", &["SendMessage", "Shell"])
        .bot_of("b1", "s", &["SendMessage", "Shell"], "bob")
        .bot_lines("secrets = [\"BOB_SECRET\"]")
        .tables(NO_REVIEW)
        .runtime(
            "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\nshell_sandbox = \"off\"\n",
        )
        .start()
        .await;
    let put = host
        .http
        .put(format!("{}/v1/secrets/BOB_SECRET", host.url))
        .bearer_auth(BOB_TOKEN)
        .body(json!({ "value": BOB_VALUE }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status().as_u16(), 200);

    // bob's bot runs a command with the secret in its arguments, which
    // lasts until the test lets it end
    let bob_ws = host.fleet.path().join("data/workspace/bob");
    let sent = host
        .post_text(
            "/v1/bots/b1/messages",
            BOB_TOKEN,
            "touch started; sh -c 'while [ ! -e stop ]; do sleep 0.05; done' worker \"$BOB_SECRET\"; echo finished",
        )
        .await;
    let bob_session = sent["session"].as_str().unwrap().to_owned();
    let bob_seq = json!(sent["seq"].as_i64().unwrap());
    let started = bob_ws.join("started");
    poll(30, async || {
        if started.exists() {
            Ok(())
        } else {
            Err(format!("{} never appeared", started.display()))
        }
    })
    .await;

    // alice's bot lists the processes while it runs
    let (session, end) = host.end_turn("a1", "ps -eo pid,args | grep worker").await;
    assert_eq!(end["status"], "completed", "{end}");
    let alices = host.entries(&session).await;
    let out = deliveries(&alices).pop().unwrap();
    // it saw bob's command, scrubbed
    assert!(out.contains("worker [redacted]"), "{out}");
    assert!(
        !out.contains(BOB_VALUE),
        "alice's bot read bob's secret: {out}"
    );
    let transcript = serde_json::to_string(&entries_as(&host, TOKEN, &session).await).unwrap();
    assert!(
        !transcript.contains(BOB_VALUE),
        "alice's transcript (tool result) carries bob's secret: {transcript}"
    );

    // bob's command ends; its own output is scrubbed as before
    std::fs::write(bob_ws.join("stop"), "").unwrap();
    let bobs = poll(30, async || {
        let entries = entries_as(&host, BOB_TOKEN, &bob_session).await;
        if entries.iter().any(|e| {
            e["kind"] == "turn_end" && e["inputs"].as_array().is_some_and(|a| a.contains(&bob_seq))
        }) {
            Ok(entries)
        } else {
            Err(format!("bob's turn never ended: {entries:#?}"))
        }
    })
    .await;
    let out = deliveries(&bobs).pop().unwrap();
    assert!(out.contains("finished"), "{out}");
    assert!(!serde_json::to_string(&bobs).unwrap().contains(BOB_VALUE));
    host.shutdown().await;
}
