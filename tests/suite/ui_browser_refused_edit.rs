//! A message the host refuses on the web page for what it is (here:
//! longer than `host.max_text_chars`) offers Edit and Discard: its text
//! goes back in the message box as written, to change and send again.
//! Not Retry: sent again as it is, it is refused again (QA, 2026-12-06).
//!
//! (Before, the refused bubble offered Retry, which sent the same text to
//! the same refusal, and Discard, which lost it: the person was told to
//! split the message and had no way to get it back but selecting it in
//! the bubble.)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::json;

use crate::support::browser::Browser;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;

#[tokio::test]
async fn a_refused_message_goes_back_in_the_box_with_edit() {
    let fleet = ui_page::fleet_with_r(SCRIPT).host("max_text_chars = 100");
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    // two paragraphs, blank lines and all, over the limit
    let long = format!("{}\n\n\n\nsecond part  ", "a".repeat(120));
    submit(&browser, &long).await;
    browser
        .wait_text(
            ".outbox .unsent",
            "the message has 135 characters; the limit is 100: split it into several messages",
        )
        .await;
    let buttons = browser
        .js(
            "return [...document.querySelectorAll('.outbox .unsent button')].map((b) => b.textContent)",
            json!([]),
        )
        .await;
    assert_eq!(buttons, json!(["Edit", "Discard"]));
    // the refusal is in a live region: a screen reader says it (QA: the
    // outbox was silent)
    let live = browser
        .js(
            "return document.querySelector('.outbox .unsent').closest('[aria-live]')?.getAttribute('aria-live') ?? null",
            json!([]),
        )
        .await;
    assert_eq!(live, json!("polite"));
    browser.click(".outbox .unsent button:nth-of-type(1)").await;
    // back in the box as the person wrote it (the send trimmed its end),
    // and the refused bubble is gone
    let shown = browser
        .wait_js(
            "the text back in the box",
            r#"const t = document.querySelector(".composer textarea");
               return document.querySelectorAll(".outbox .entry").length === 0 && t.value ? [t.value, document.activeElement === t] : null;"#,
            json!([]),
        )
        .await;
    assert_eq!(shown, json!([long.trim_end(), true]));
    // changed, it goes
    submit(&browser, "the short version").await;
    browser
        .wait_text(".detail .log", "echo: the short version")
        .await;

    // after Discard the focus is on the conversation: never on the page's
    // body, where keyboard users start over (the pressed button was taken
    // away)
    submit(&browser, &long).await;
    browser
        .wait_text(".outbox .unsent", "the limit is 100")
        .await;
    browser.click(".outbox .unsent button:nth-of-type(2)").await;
    let at = browser
        .wait_js(
            "discarded",
            "return document.querySelectorAll('.outbox .entry').length === 0 ? document.activeElement.className : null",
            json!([]),
        )
        .await;
    assert_eq!(at, json!("timeline"));
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// Puts `text` in the message box and sends it, as the person's Send does.
async fn submit(browser: &Browser, text: &str) {
    browser
        .js(
            r#"const t = document.querySelector(".composer textarea");
               t.value = arguments[0];
               t.form.requestSubmit();"#,
            json!([text]),
        )
        .await;
}
