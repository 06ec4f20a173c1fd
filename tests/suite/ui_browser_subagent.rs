//! A subagent on the web page, in a real browser: `#/bots/{sub}` shows its
//! task conversation with its parent (the task, the parent's steering,
//! its progress and its report), read-only and saying so, live, with how
//! its task stands (done, failed) in its header and in the bot list; its
//! "Direct messages" tab (`#/bots/{sub}/dm`) is the person's DM with it;
//! search hits open each where it is, and its messages in its parent's
//! conversation link to its page.
//!
//! (Before, the page opened a subagent on the person's DM with it, empty
//! unless they wrote to it: "No messages yet", as if it had done
//! nothing, and its badge read "idle" for a finished or stopped task.)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::Value;
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::browser::ENTER;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::ui_page;

const SCRIPT: &str = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "find the answer", prompt = "work out the answer" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "^doomed"
steps = [
  { tool = "Task", args = { description = "doomed job", prompt = "DOOMED work" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "^slow"
steps = [
  { tool = "Task", args = { description = "slow job", prompt = "SLOW work" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "^p\\.sub-"
steps = [
  { tool = "MessageSubagent", args = { id = "{{input}}", text = "also say 43" } },
  { tool = "SendMessage", args = { text = "steered" } },
]

[[rule]]
bot = "p"
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]

[[rule]]
match = "work out the answer"
steps = [
  { text = "thinking", tool = "SendMessage", args = { text = "working on it" } },
  { tool = "SendMessage", args = { text = "the answer is 42" } },
]

[[rule]]
match = "also say 43"
steps = [ { tool = "SendMessage", args = { text = "43 too" } } ]

[[rule]]
match = "SLOW work"
steps = [
  { tool = "SendMessage", args = { text = "starting slow" } },
  { delay_ms = 60000, tool = "SendMessage", args = { text = "slow done" } },
]

[[rule]]
match = "DOOMED"
steps = [ { fail = "the endpoint answered 500" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// What the conversation shows: its header's state badge, its current
/// tab, its log's text, whether it has a message box and its read-only
/// line.
async fn shown(browser: &Browser) -> Value {
    browser
        .js(
            r#"const q = (css) => document.querySelector(css);
               return {
                 state: q(".conv-title .state")?.textContent ?? null,
                 tab: q(".conv-tabs a[aria-current=page]")?.textContent ?? null,
                 log: q(".detail .log")?.innerText ?? null,
                 composer: q(".detail .composer") !== null,
                 read_only: q(".detail .read-only")?.textContent ?? null,
               };"#,
            json!([]),
        )
        .await
}

/// The links of the search hits, each `[text, href]`.
async fn hit_links(browser: &Browser) -> Vec<(String, String)> {
    let links = browser
        .js(
            "return [...document.querySelectorAll('.hits a')].map((a) => [a.textContent, a.getAttribute('href')])",
            json!([]),
        )
        .await;
    serde_json::from_value(links).unwrap()
}

#[tokio::test]
async fn a_subagent_opens_on_its_task_read_only_with_its_state() {
    let fleet = TestFleet::new().script("s", SCRIPT).bot(
        "p",
        "s",
        &["SendMessage", "Task", "MessageSubagent"],
    );
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    host.send_until_reports("p", "delegate please", 1).await;
    let sub = host.wait_subagent_of("p").await;

    // its report in its parent's conversation links to its page
    ui_page::open(&browser, &host, "#/bots/p").await;
    browser.wait_text(".detail .log", "the answer is 42").await;
    let href = browser
        .js(
            "return document.querySelector('.detail .log .agent .task-link')?.getAttribute('href') ?? null",
            json!([]),
        )
        .await;
    assert_eq!(href, json!(format!("#/bots/{sub}")));
    browser.click(".detail .log .agent .task-link").await;
    // the subagent's Task view: its parent's log, left, held both texts
    browser
        .wait_js(
            "the task view with its report",
            r#"const tab = document.querySelector(".conv-tabs a[aria-current=page]");
               const log = document.querySelector(".detail .log");
               return tab && tab.textContent === "Task" && log
                 && log.textContent.includes("work out the answer")
                 && log.textContent.includes("the answer is 42");"#,
            json!([]),
        )
        .await;
    let view = shown(&browser).await;
    let log = view["log"].as_str().unwrap();
    // the task as its parent gave it, then the progress and the report
    let task = log
        .find("work out the answer")
        .unwrap_or_else(|| panic!("{view:#}"));
    let progress = log
        .find("working on it")
        .unwrap_or_else(|| panic!("{view:#}"));
    let report = log.find("the answer is 42").unwrap();
    assert!(task < progress && progress < report, "{view:#}");
    assert!(log.to_lowercase().contains("task from p"), "{view:#}");
    assert_eq!(view["state"], "done", "{view:#}");
    assert_eq!(view["tab"], "Task", "{view:#}");
    // no message box: it says it is read-only, and where to write
    assert_eq!(view["composer"], false, "{view:#}");
    let read_only = view["read_only"]
        .as_str()
        .unwrap_or_else(|| panic!("{view:#}"));
    assert!(read_only.starts_with("Read-only."), "{view:#}");
    assert!(read_only.contains("Direct messages"), "{view:#}");
    // the list's badge says how its task ended, not "idle"
    browser
        .wait_text(&format!(r#".list li[data-bot="{sub}"] .state"#), "done")
        .await;

    // its parent steers it: the page follows the task live
    let (status, sent) = host.send("p", &sub, None).await;
    assert_eq!(status, 202, "{sent}");
    browser.wait_text(".detail .log", "also say 43").await;
    browser.wait_text(".detail .log", "43 too").await;

    // the person's own DM with it is the other tab, and takes messages
    browser.click(".conv-tabs a:not([aria-current])").await;
    browser.find(".detail .composer textarea").await;
    let view = shown(&browser).await;
    assert_eq!(view["tab"], "Direct messages", "{view:#}");
    assert_eq!(view["read_only"], Value::Null, "{view:#}");
    let hash = browser.js("return location.hash", json!([])).await;
    assert_eq!(hash, json!(format!("#/bots/{sub}/dm")));
    browser
        .type_in(".detail .composer textarea", &format!("hi sub{ENTER}"))
        .await;
    browser.wait_text(".detail .log", "echo: hi sub").await;
    let view = shown(&browser).await;
    assert!(
        !view["log"]
            .as_str()
            .unwrap()
            .contains("work out the answer"),
        "the DM is not the task: {view:#}"
    );
    // and back on the task, the DM is not there
    browser.click(".conv-tabs a:not([aria-current])").await;
    browser.wait_text(".detail .log", "43 too").await;
    let view = shown(&browser).await;
    assert_eq!(view["tab"], "Task", "{view:#}");
    assert!(
        !view["log"].as_str().unwrap().contains("hi sub"),
        "{view:#}"
    );

    // a search hit opens where it is: the task's in the task, the DM's in
    // the DM
    super::recall::flush(&host).await;
    browser
        .go(&format!("{}/#/search?q=43+OR+sub", host.url))
        .await;
    browser.wait_text(".hits", "43 too").await;
    browser.wait_text(".hits", "hi sub").await;
    let links = hit_links(&browser).await;
    let href_of = |text: &str| -> &str {
        links
            .iter()
            .find(|(t, _)| t.contains(text))
            .map(|(_, href)| href.as_str())
            .unwrap_or_else(|| panic!("no hit {text:?} in {links:?}"))
    };
    assert!(
        href_of("43 too").starts_with(&format!("#/bots/{sub}?seq=")),
        "{links:?}"
    );
    assert!(
        href_of("echo: hi sub").starts_with(&format!("#/bots/{sub}/dm?seq=")),
        "{links:?}"
    );

    // a subagent whose task failed says so
    let (status, sent) = host.send("p", "doomed now", None).await;
    assert_eq!(status, 202, "{sent}");
    let doomed = host
        .wait_get("/v1/bots", |v| {
            v["bots"]
                .as_array()?
                .iter()
                .find(|b| b["subagent_status"] == "failed")
                .map(|b| b["id"].clone())
        })
        .await;
    let doomed = doomed.as_str().unwrap();
    browser.go(&format!("{}/#/bots/{doomed}", host.url)).await;
    browser.wait_text(".detail .log", "DOOMED work").await;
    browser
        .wait_text(".detail .log", "the endpoint answered 500")
        .await;
    browser.wait_text(".conv-title .state", "failed").await;
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// What the page opens a subagent with: `GET /v1/bots/{sub}/session`
/// names its task conversation (`task`: session, parent, status,
/// last_seq) beside the person's DM; a bot of fleet.toml has no `task`.
#[tokio::test]
async fn the_session_of_a_subagent_names_its_task() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p", "s", &["SendMessage", "Task", "MessageSubagent"])
        .start()
        .await;
    host.send_until_reports("p", "delegate please", 1).await;
    let sub = host.wait_subagent_of("p").await;
    let (status, answer) = host.get(&format!("/v1/bots/{sub}/session"), TOKEN).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["kind"], "dm", "{answer}");
    assert_eq!(answer["last_seq"], 0, "nobody wrote to it: {answer}");
    let task = &answer["task"];
    assert_eq!(task["parent"], "p", "{answer}");
    assert_eq!(task["status"], "done", "{answer}");
    assert_ne!(task["session"], answer["session"], "{answer}");
    // the session it names holds the task and the report, to its end
    let (status, page) = host
        .get(
            &format!("/v1/sessions/{}/entries", task["session"].as_str().unwrap()),
            TOKEN,
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["kind"], "subagent", "{page}");
    assert_eq!(page["last_seq"], task["last_seq"], "{page}");
    let entries = page["entries"].as_array().unwrap();
    assert_eq!(entries[0]["origin"], "task from p", "{page}");
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "delivery" && e["text"] == "the answer is 42"),
        "{page}"
    );

    let (status, answer) = host.get("/v1/bots/p/session", TOKEN).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer.get("task"), None, "{answer}");
    host.shutdown().await;
}

/// A subagent's task turn the person stops on the page fails its task
/// (its parent is told, with a `botfleet retry` command) and leaves a
/// `turn_cancelled` notice in the task, whose Retry starts it again.
/// (Before, there was no such notice: the page had a button of its own,
/// "Retry its task", and the CLI and the API showed only the turn's end:
/// QA, 2026-12-05.)
#[tokio::test]
async fn a_subagent_task_stopped_on_the_page_is_retried_there() {
    let fleet = TestFleet::new().script("s", SCRIPT).bot(
        "p",
        "s",
        &["SendMessage", "Task", "MessageSubagent"],
    );
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let (status, sent) = host.send("p", "slow please", None).await;
    assert_eq!(status, 202, "{sent}");
    let sub = host.wait_subagent_of("p").await;
    ui_page::open(&browser, &host, &format!("#/bots/{sub}")).await;
    browser.wait_text(".detail .log", "starting slow").await;
    browser
        .click(".conv-head > button.danger:not([hidden])")
        .await;
    browser
        .wait_text(".stop-confirm", "Retry on its notice, in the task")
        .await;
    browser.click(".stop-confirm button.danger").await;
    browser.wait_text(".conv-title .state", "failed").await;
    browser
        .wait_text(".entry.notice", "The task was stopped before it finished")
        .await;
    browser.click(".entry.notice button").await;
    browser
        .wait_text(".entry.notice button", "Queued again")
        .await;
    // its task runs again, where it was stopped
    browser.wait_text(".conv-title .state", "working").await;
    let status = host
        .wait_get("/v1/bots", |v| {
            v["bots"]
                .as_array()?
                .iter()
                .find(|b| b["id"] == sub.as_str() && b["subagent_status"] == "running")
                .map(|b| b["subagent_status"].clone())
        })
        .await;
    assert_eq!(status, "running");
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// At 320 px a subagent's long id beside its name goes to its own line
/// instead of squeezing the name to nothing, and the line stays inside
/// its bubble (QA: "Maker · quick job" was drawn a letter a line under
/// `@maker.sub-7d5436f89a05`, and the time stuck out of the bubble).
#[tokio::test]
async fn a_long_id_beside_a_name_wraps_on_a_narrow_screen() {
    let script = format!(
        "[[rule]]\nbot = \"research-assistant\"\nmatch = \"^delegate\"\nsteps = [\n  \
         {{ tool = \"Task\", args = {{ description = \"quick job\", prompt = \"work out the \
         answer\" }} }},\n  {{ tool = \"SendMessage\", args = {{ text = \"delegated\" }} }},\n]\n\n\
         {SCRIPT}"
    );
    let fleet = TestFleet::new().script("s", &script).bot(
        "research-assistant",
        "s",
        &["SendMessage", "Task", "MessageSubagent"],
    );
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    host.send_until_reports("research-assistant", "delegate please", 1)
        .await;
    ui_page::open(&browser, &host, "#/bots/research-assistant").await;
    browser.wait_text(".detail .log", "the answer is 42").await;
    browser.resize(320, 568).await;
    let sizes = browser
        .wait_js(
            "the report's name line laid out",
            r#"const meta = [...document.querySelectorAll('.detail .log .meta')]
                 .find((m) => m.querySelector('.bot-id'));
               if (!meta) return null;
               const who = meta.querySelector('.who').getBoundingClientRect();
               const bubble = meta.closest('.bubble').getBoundingClientRect();
               const right = Math.max(...[...meta.children].map((c) => c.getBoundingClientRect().right));
               return { who: who.width, right, bubble: bubble.right };"#,
            json!([]),
        )
        .await;
    let who = sizes["who"].as_f64().unwrap();
    assert!(who >= 40.0, "the name is squeezed: {sizes}");
    assert!(
        sizes["right"].as_f64().unwrap() <= sizes["bubble"].as_f64().unwrap() + 1.0,
        "the line sticks out of its bubble: {sizes}"
    );
    ui_page::finish(browser, host).await;
}
