//! Who a message is from. A subagent's report in its parent's DM is
//! labelled by the subagent's name next to its id (`botfleet transcript`,
//! the entries' `author_name`), and the parent reads which task it
//! reports on; a webhook's run that fails says so, naming the hook, not
//! "your message".
//!
//! (Before, eight reports read `#18 boss.sub-334003c86248 (bot): …`
//! alike, the parent read only "your subagent" and called CheckSubagent
//! to learn which task reported, and a failed webhook run's notice spoke
//! of a message nobody sent.)

use botfleet::api::sign_hook;
use botfleet_memory::BotId;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::process::cli;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::fleet_with_r;

/// `boss` delegates one task, "job six"; the subagent reports "six
/// done"; `boss` answers its report with what it read.
pub(super) const DELEGATE: &str = r#"
[[rule]]
bot = "boss"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "job six", prompt = "SUBTASK six" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "boss"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "READ {{input}}" } } ]

[[rule]]
match = "SUBTASK six"
steps = [ { tool = "SendMessage", args = { text = "six done" } } ]
"#;

/// Regression: the report was labelled by the subagent's id alone in
/// the CLI (`boss.sub-… (bot):`, no `author_name` in the entries) and
/// read by the parent as "your subagent", with no task named.
/// `boss` is asked to delegate ([`DELEGATE`]); its session and its
/// answer to the report, once there (`READ …`, the report as it read it).
pub(super) async fn delegate_and_read(host: &TestHost) -> (String, Value) {
    let (status, sent) = host.send("boss", "delegate please", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let read = host
        .wait_for(&session, |es| {
            es.iter()
                .find(|e| {
                    e["kind"] == "delivery"
                        && e["text"].as_str().is_some_and(|t| t.starts_with("READ"))
                })
                .cloned()
        })
        .await;
    (session, read)
}

#[tokio::test]
async fn a_subagents_report_is_labelled_by_its_name_and_names_its_task() {
    let host = TestFleet::new()
        .script("s", DELEGATE)
        .bot("boss", "s", &["SendMessage", "Task", "CheckSubagent"])
        .start()
        .await;
    let (session, read) = delegate_and_read(&host).await;
    let sub = host.wait_subagent_of("boss").await;
    let entries = host.entries(&session).await;
    let report = entries
        .iter()
        .find(|e| e["kind"] == "agent_message")
        .unwrap();
    // the entry names its author as `botfleet bots` does
    assert_eq!(
        (&report["from"], &report["author_name"], &report["text"]),
        (
            &Value::from(sub.as_str()),
            &Value::from("boss-name · job six"),
            &Value::from("six done")
        ),
        "{report}"
    );
    // so does the transcript, next to the id
    let (code, out, err) = cli(&["transcript", "boss"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let line = format!(
        "#{} boss-name · job six (bot {sub}): six done",
        report["seq"]
    );
    assert!(out.lines().any(|l| l == line), "{line:?} not in:\n{out}");
    // the parent read which task reported, by its title
    let text = read["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "Message from bot `{sub}`, your subagent for the task \"job six\": its report on that task"
        )),
        "{text}"
    );
    // a person's message carries no name: a person's id may be a bot's
    let user = entries
        .iter()
        .find(|e| e["kind"] == "user_message")
        .unwrap();
    assert_eq!(user["author_name"], Value::Null, "{user}");
    host.shutdown().await;
}

const SECRET: &str = "a-hook-secret-of-some-length";

/// Regression: a webhook's run that failed told of "your message" in its
/// notice, though no person sent one; it names the hook now, and keeps
/// its retry.
#[tokio::test]
async fn a_failed_webhook_run_names_the_hook_not_your_message() {
    let script = r#"
[[rule]]
match = "FAILME"
steps = [ { fail = "boom model error" } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\n"
        ))
        .start()
        .await;
    let payload = r#"{"action":"FAILME"}"#;
    let resp = host
        .http
        .post(format!("{}/v1/hooks/r/gh", host.url))
        .header("content-type", "application/json")
        .header("X-Botfleet-Delivery", "d-1")
        .header(
            "X-Botfleet-Signature",
            sign_hook(SECRET.as_bytes(), payload.as_bytes()),
        )
        .body(payload)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let body: Value = resp.json().await.unwrap();
    let session = SessionKey {
        bot: BotId::new("r").unwrap(),
        kind: SessionKind::Hook,
        peer: "gh".into(),
    }
    .id()
    .to_string();
    assert_eq!(body["session"], session.as_str(), "{body}");
    let end = host
        .wait_turn_end(&session, body["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "failed", "{end}");
    let notice = host
        .entries(&session)
        .await
        .into_iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap();
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains("webhook gh") && text.contains("boom") && !text.contains("your message"),
        "{text}"
    );
    assert_eq!(notice["retry_turn"], end["turn"], "{notice}");
    host.shutdown().await;
}

/// Regression: on the web page a message from a bot not in the viewer's
/// bot list (another user's bot; a finished subagent the list leaves
/// out) was labelled by its id alone, as if the id were its name. It is
/// labelled by the name its entry carries, with its id beside it.
///
/// Skipped, with the reason printed, when chromium or chromedriver is not
/// installed ([`ui_page::start`]).
#[tokio::test]
async fn the_web_page_names_a_bot_the_viewer_does_not_list() {
    let fleet = fleet_with_r(SCRIPT).bot_of("t", "s", &["SendMessage"], "bob");
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    let message = EntryKind::AgentMessage {
        from: BotId::new("t").unwrap(),
        text: "bob's bot says hi".into(),
        hop: 1,
        reply_session: None,
        chain: None,
        answers: false,
    };
    ui_page::append(&host, &session, "t", [message]).await;
    ui_page::open_dm(&browser, &host, "r").await;
    browser
        .wait_text(".log .bubble .text", "bob's bot says hi")
        .await;
    let shown = browser
        .js(
            r#"const li = [...document.querySelectorAll(".log li.entry")]
                 .find((li) => (li.querySelector(".bubble .text") || {}).textContent === "bob's bot says hi");
               return {
                 who: li.querySelector(".meta .who").textContent,
                 tags: [...li.querySelectorAll(".meta .tag")].map((t) => t.textContent),
                 id: (li.querySelector(".meta .bot-id") || {}).textContent || null,
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(
        shown,
        json!({"who": "t-name", "tags": ["bot"], "id": "@t"}),
        "{shown}"
    );
    ui_page::finish(browser, host).await;
}
