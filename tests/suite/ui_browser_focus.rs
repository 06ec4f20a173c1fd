//! The web page in a real browser: where the keyboard's focus goes when
//! the button pressed goes away. Approve or Deny on an approval card (in a
//! conversation, and on the approvals page, where a decided approval
//! leaves the list) leaves the focus on what the decision did or on what
//! is next, never on the page's body, where a keyboard or screen reader
//! user would start over from the top of the page. ("Stop turn" and a
//! notice's Retry: `ui_browser_views`.) Toasts stay while they are read,
//! and the newest stays in view when a card grows.
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::Value;
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::ui_page;
use crate::support::ui_page::fleet_with_r;

/// WebDriver's key code of Escape.
pub const ESCAPE: &str = "\u{E00C}";

const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// What holds the focus: `body`, or the focused element's tag, classes
/// and text (its first 40 characters).
pub async fn focused(browser: &Browser) -> Value {
    browser
        .js(
            r#"const a = document.activeElement;
               if (!a || a === document.body) return "body";
               return `${a.tagName.toLowerCase()}.${[...a.classList].join(".")} ${a.textContent.trim().slice(0, 40)}`;"#,
            json!([]),
        )
        .await
}

/// Approve on a card in the conversation leaves the focus on the card's
/// new status; Deny on the approvals page, whose list then drops the
/// approval, moves it to the next approval's status line (not its
/// Approve: a second Enter approved an action the person had not read,
/// QA 2026-12-05), and the last one's to the page's title. (Each left the
/// focus on the page's body.)
#[tokio::test]
async fn a_decision_leaves_the_focus_on_what_it_did() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    ui_page::ask(
        &host,
        &session,
        "run `env`",
        "reads secrets",
        "env",
        600_000,
    )
    .await;
    ui_page::open(&browser, &host, "#/bots/r").await;
    browser
        .wait_js(
            "the card's Approve",
            "return document.querySelector('.log .approval-card button.primary')",
            json!([]),
        )
        .await;
    browser.click(".log .approval-card button.primary").await;
    browser
        .wait_text(".log .approval-card .status", "Approved")
        .await;
    let at = focused(&browser).await;
    assert!(
        at.as_str().unwrap().starts_with("p.status Approved"),
        "{at}"
    );

    // two more waiting: Deny on the first moves the focus to the second's
    // status
    ui_page::ask(&host, &session, "run `id`", "reads ids", "id", 600_000).await;
    ui_page::ask(&host, &session, "run `w`", "reads users", "w", 600_000).await;
    browser.go(&format!("{}/#/approvals", host.url)).await;
    browser
        .wait_js(
            "two approvals listed",
            "return document.querySelectorAll('.approvals article').length === 2",
            json!([]),
        )
        .await;
    browser.click(".approvals article button.danger").await;
    browser
        .wait_js(
            "one approval left",
            "return document.querySelectorAll('.approvals article').length === 1",
            json!([]),
        )
        .await;
    let at = focused(&browser).await;
    assert!(
        at.as_str()
            .unwrap()
            .starts_with("p.status Waiting for your decision"),
        "{at}"
    );
    let on_the_last = browser
        .js(
            "return document.querySelector('.approvals article').contains(document.activeElement)",
            json!([]),
        )
        .await;
    assert_eq!(on_the_last, json!(true));
    // the last one denied: nothing is left to focus but the title
    browser.click(".approvals article button.danger").await;
    browser
        .wait_text(".approvals", "Nothing is waiting for you.")
        .await;
    assert_eq!(focused(&browser).await, json!("h1. Approvals"));
    ui_page::finish(browser, host).await;
}

/// An error's toast stays until dismissed, and a note's does not go while
/// the pointer is on it. (An error went after 8 s, however long it was to
/// read; a note with an action went from under the pointer.) The page's
/// own `toast`, with its timers watched: an error sets none.
#[tokio::test]
async fn toasts_stay_while_they_are_read() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    let timers = browser
        .js_async(
            r##"const done = arguments[arguments.length - 1];
               import("/ui/dom.js").then((m) => {
                 const [setT, clearT] = [window.setTimeout, window.clearTimeout];
                 const set = [];
                 const cleared = [];
                 window.setTimeout = (fn, ms) => { const id = setT(fn, ms); if (ms > 1000) set.push(id); return id; };
                 window.clearTimeout = (id) => { cleared.push(id); clearT(id); };
                 try {
                   m.toast("the host refused it: say less", { error: true });
                   const afterError = set.length;
                   m.toast("Saved.");
                   const note = document.querySelector("#toasts .toast:not(.error)");
                   note.dispatchEvent(new MouseEvent("mouseenter"));
                   done({ afterError, notes: set.length, held: cleared.includes(set[0]) });
                 } finally {
                   window.setTimeout = setT;
                   window.clearTimeout = clearT;
                 }
               }, (e) => done(String(e)));"##,
            json!([]),
        )
        .await;
    assert_eq!(timers, json!({"afterError": 0, "notes": 1, "held": true}));
    ui_page::finish(browser, host).await;
}

/// Something drawn that grows after it was shown (an approval card gets
/// its exact action from the host) keeps the newest in view when the
/// person was at the end, and leaves the view alone when they had
/// scrolled up. (The newest scrolled out of view under the grown card.)
#[tokio::test]
async fn a_card_that_grows_keeps_the_end_in_view() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    for n in 0..30 {
        host.send("r", &format!("message {n}"), None).await;
    }
    ui_page::open_dm(&browser, &host, "r").await;
    browser.wait_text(".log", "echo: message 29").await;
    // grows the last entry by 600 px, then answers (a frame later, once
    // the page saw it) how far the view is from the end
    let grow = r#"const done = arguments[arguments.length - 1];
                  const t = document.querySelector(".timeline");
                  // the last entry shown (a step's is hidden)
                  const last = [...document.querySelectorAll(".log > li")].filter((li) => li.offsetHeight > 0).pop();
                  const block = document.createElement("div");
                  block.style.height = "600px";
                  last.append(block);
                  requestAnimationFrame(() => requestAnimationFrame(() =>
                    done(Math.round(t.scrollHeight - t.scrollTop - t.clientHeight))));"#;
    let to_end = "const t = document.querySelector('.timeline'); t.scrollTop = t.scrollHeight; \
                  t.dispatchEvent(new Event('scroll')); return t.scrollHeight - t.clientHeight";
    let overflow = browser.js(to_end, json!([])).await;
    assert!(
        overflow.as_i64().unwrap() > 0,
        "nothing to scroll: {overflow}"
    );
    let gap = browser.js_async(grow, json!([])).await;
    assert!(gap.as_i64().unwrap() < 120, "{gap} px from the end");
    // scrolled up: left where it is
    browser
        .js(
            "const t = document.querySelector('.timeline'); t.scrollTop = 0; t.dispatchEvent(new Event('scroll')); return true",
            json!([]),
        )
        .await;
    let gap = browser.js_async(grow, json!([])).await;
    assert!(gap.as_i64().unwrap() > 600, "{gap} px from the end");
    ui_page::finish(browser, host).await;
}
