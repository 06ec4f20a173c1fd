//! A new user's first hour: the example fleet on the offline model as the
//! README tour runs it, and what the API and CLI say to the first
//! mistakes (a wrong bot or memory id, a body that is not JSON).

use std::collections::HashMap;

use botfleet::host::HostOptions;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::process::cli;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

/// `text` with `from` replaced by `to`, checking `from` is there (so a
/// change to the example fleet fails here, not somewhere obscure).
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "the example fleet has no {from:?}");
    text.replacen(from, to, 1)
}

/// The example fleet (examples/fleet.toml and its offline script, as a
/// new user copies them) with no API key in the environment, so its bots
/// run on the offline model; on a free port, in a temporary data
/// directory, with alice's token the suite's, after `change`.
async fn example_fleet(change: impl Fn(String) -> String) -> TestHost {
    let fleet = TestFleet::new();
    let dir = fleet.path();
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("scripts/offline.toml"),
        botfleet::config::EMBEDDED_OFFLINE_SCRIPT,
    )
    .unwrap();
    let data = dir.join("data").display().to_string();
    let text = botfleet::config::EMBEDDED_FLEET.to_owned();
    let text = edit(
        &text,
        "data_dir = \"./botfleet-data\"",
        &format!("data_dir = {data:?}"),
    );
    let text = edit(
        &text,
        "listen = \"127.0.0.1:7878\"",
        "listen = \"127.0.0.1:0\"",
    );
    let text = edit(
        &text,
        "token = \"alice-secret\"",
        &format!("token = \"{TOKEN}\""),
    );
    let path = dir.join("fleet.toml");
    std::fs::write(&path, change(text)).unwrap();
    let host = botfleet::host::start(HostOptions {
        fleet: Some(path),
        data_dir: None,
        listen: None,
        env: Some(HashMap::new()),
        ..Default::default()
    })
    .await
    .unwrap();
    TestHost {
        url: host.url(),
        host: Some(host),
        fleet,
        http: reqwest::Client::new(),
    }
}

/// Sends `text` to `bot` as alice and returns what the bot delivered in
/// the turn that answered it (which must complete).
async fn reply(host: &TestHost, bot: &str, text: &str) -> Vec<String> {
    let (status, sent) = host.send(bot, text, None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap();
    let seq = sent["seq"].as_i64().unwrap();
    let end = host.wait_turn_end(session, seq).await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(session).await;
    let turn = end["turn"].clone();
    let of_turn: Vec<Value> = entries.into_iter().filter(|e| e["turn"] == turn).collect();
    deliveries(&of_turn)
}

/// Regression: the offline script's note rule said "Saved to
/// notes/last-note.md." whatever the Write answered — also when the write
/// failed, and when it waited for approval (the example fleet with
/// `reviewer = "main"` and no API key: the reviewer is the offline model,
/// whose script had no review rule, so every action went to a person as
/// "not a valid verdict"). The reply follows the Write's answer, and the
/// offline reviewer says why a person decides.
#[tokio::test]
async fn the_offline_note_reply_says_what_the_write_did() {
    // a write that fails: the note's path is a folder
    let host = example_fleet(|t| t).await;
    let workspace = host.fleet.path().join("data/workspace/alice");
    std::fs::create_dir_all(workspace.join("notes/last-note.md")).unwrap();
    let said = reply(&host, "assistant", "note: buy milk").await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("(offline) The note was not saved. Write answered: error: "),
        "{said:?}"
    );
    // … and one that works
    std::fs::remove_dir(workspace.join("notes/last-note.md")).unwrap();
    let said = reply(&host, "assistant", "note: buy milk").await;
    assert_eq!(said, ["Saved to notes/last-note.md."]);
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes/last-note.md")).unwrap(),
        "note: buy milk\n"
    );
    host.shutdown().await;

    // the reviewer enabled, with no API key: the offline model reviews
    let host = example_fleet(|t| edit(&t, "# reviewer = \"main\"", "reviewer = \"main\"")).await;
    let workspace = host.fleet.path().join("data/workspace/alice");
    let said = reply(&host, "assistant", "note: buy tea").await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with(
            "(offline) Not saved yet: writing notes/last-note.md waits for your approval"
        ),
        "{said:?}"
    );
    assert!(!workspace.join("notes/last-note.md").exists());
    let (_, pending) = host.get("/v1/approvals", TOKEN).await;
    let pending = pending["approvals"].as_array().unwrap().clone();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let reason = pending[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the offline scripted model cannot judge actions"),
        "a verdict of the offline reviewer, not a parse failure: {reason}"
    );
    // what the reply says to do works: approve, then send the note again
    let id = pending[0]["id"].as_str().unwrap();
    let (status, body) = host
        .post_raw(
            &format!("/v1/approvals/{id}"),
            Some(TOKEN),
            None,
            r#"{"decision": "approve"}"#,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, dm) = host.get("/v1/bots/assistant/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    let told = host
        .wait_for(&session, |entries| {
            entries
                .iter()
                .rev()
                .find(|e| {
                    e["kind"] == "delivery"
                        && e["text"]
                            .as_str()
                            .is_some_and(|t| t.starts_with("(offline) I have your decision."))
                })
                .cloned()
        })
        .await;
    host.wait_for(&session, |entries| {
        entries
            .iter()
            .find(|e| e["kind"] == "turn_end" && e["turn"] == told["turn"])
            .cloned()
    })
    .await;
    let said = reply(&host, "assistant", "note: buy tea").await;
    assert_eq!(said, ["Saved to notes/last-note.md."]);
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes/last-note.md")).unwrap(),
        "note: buy tea\n"
    );
    // a Shell command the rules allow waits too, and is not shown as run
    let said = reply(&host, "assistant", "ls").await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("(offline) I have not listed the workspace: running `ls -la` waits"),
        "{said:?}"
    );
    host.shutdown().await;
}

/// Regression (README tour, step 6): "Shell commands of that bot see
/// `$GITHUB_TOKEN`", but no bot of the example fleet listed the secret.
/// The tour's `assistant` does, and the example fleet still starts.
#[tokio::test]
async fn the_example_assistant_lists_the_tour_secret() {
    let host = example_fleet(|t| t).await;
    let (status, bot) = host.get("/v1/bots/assistant", TOKEN).await;
    assert_eq!(status, 200, "{bot}");
    assert_eq!(bot["settings"]["secrets"], json!(["GITHUB_TOKEN"]), "{bot}");
    host.shutdown().await;
}

/// Regression: a 404 for a wrong bot or memory id named only the HTTP
/// route to list them, and `botfleet` passed it on to CLI users as is.
/// Each names the CLI command too.
#[tokio::test]
async fn not_found_hints_name_the_route_and_the_command() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (status, v) = host.get("/v1/bots/nobot", TOKEN).await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(
        v["error"]["message"],
        "no bot \"nobot\" for you; list your bots with GET /v1/bots or `botfleet bots`"
    );
    let (code, _, err) = cli(&["send", "nobot", "hi"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    // the CLI names its command alone
    assert!(
        err.contains("list your bots with `botfleet bots`") && !err.contains("/v1/"),
        "{err}"
    );
    // a room (the group routes and `botfleet group`)
    let (status, v) = host.get("/v1/groups/noroom", TOKEN).await;
    assert_eq!(status, 404, "{v}");
    let (code, _, err) = cli(&["group", "send", "noroom", "hi"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("list your rooms with `botfleet group list`") && !err.contains("/v1/"),
        "{err}"
    );
    // a bot the scheduler does not know (the routines routes)
    let (status, v) = host.get("/v1/bots/nobot/routines", TOKEN).await;
    assert_eq!(status, 404, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("or `botfleet bots`")),
        "{v}"
    );

    let resp = host
        .http
        .delete(format!("{}/v1/memory/m-abcdefghijkl", host.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    let v: Value = resp.json().await.unwrap();
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with("with GET /v1/bots/{bot}/memory or `botfleet memory BOT`"),
        "{v}"
    );
    host.shutdown().await;
}

/// Regression: `curl -d 'hello'` and a form body `-d 'text=hi'` were told
/// "the body must be a JSON object (not an array, a string, a number or
/// nothing)" — they are none of those; they are not JSON. They are told
/// so, with where the parser stopped; a JSON value that is not an object
/// still gets the object message.
#[tokio::test]
async fn a_body_that_is_not_json_is_told_so() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    for body in ["hello", "text=hi", "[\"unclosed\""] {
        let (status, v) = host
            .post_raw("/v1/bots/r/messages", Some(TOKEN), None, body)
            .await;
        assert_eq!(status, 400, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("the body is not valid JSON for a message (")
                && message.contains(" at line 1 column ")
                && message.ends_with(r#"send {"text": "..."}"#),
            "{body}: {message}"
        );
    }
    for body in ["\"hello\"", "[\"hi\"]", "42", ""] {
        let (status, v) = host
            .post_raw("/v1/bots/r/messages", Some(TOKEN), None, body)
            .await;
        assert_eq!(status, 400, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("the body must be a JSON object for a message"),
            "{body}: {message}"
        );
    }
    host.shutdown().await;
}

/// Regression: a body starting with a BOM was told only "not valid JSON
/// (expected value at line 1 column 1)", not what is wrong; and a
/// message of nothing but a zero-width space or a BOM was admitted (202)
/// while whitespace alone is refused as empty.
#[tokio::test]
async fn a_bom_and_an_invisible_message_are_told_clearly() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (status, v) = host
        .post_raw(
            "/v1/bots/r/messages",
            Some(TOKEN),
            None,
            "\u{feff}{\"text\": \"hi\"}",
        )
        .await;
    assert_eq!(status, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("the body starts with a byte order mark (BOM")
            && message.contains("remove it"),
        "{message}"
    );
    // (and control characters alone: QA, a NUL was taken and echoed)
    for text in [
        "\u{200b}",
        "\u{feff}",
        " \u{200b}\u{2060} ",
        "\u{0}",
        "\u{1b}\u{7f} \u{85}",
    ] {
        let (status, v) = host
            .post_raw(
                "/v1/bots/r/messages",
                Some(TOKEN),
                None,
                json!({ "text": text }).to_string(),
            )
            .await;
        assert_eq!(status, 400, "{text:?}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("`text` is empty"),
            "{text:?}: {message}"
        );
    }
    // a visible text with invisible characters in it is kept as sent
    let (status, v) = host
        .post_raw(
            "/v1/bots/r/messages",
            Some(TOKEN),
            None,
            json!({ "text": "hi\u{200b}" }).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    host.shutdown().await;
}

/// Regression: the scripted model counted only a step's text as completion
/// tokens, so a turn that only calls SendMessage (every reply of the
/// offline model) generated 0 tokens and `daily_token_budget` under-counted.
#[tokio::test]
async fn a_send_message_only_turn_counts_completion_tokens() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let said = reply(&host, "r", "hello there, how are you today?").await;
    assert_eq!(said, ["echo: hello there, how are you today?"]);
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let r = &bots["bots"][0];
    assert_eq!(r["id"], "r", "{bots}");
    let completion = r["usage"]["today"]["completion_tokens"]
        .as_u64()
        .unwrap_or_default();
    // `{"text":"echo: hello there, how are you today?"}` and the name
    // SendMessage: 59 characters, 4 to a token
    assert!(completion >= 14, "{}", r["usage"]);
    host.shutdown().await;
}
