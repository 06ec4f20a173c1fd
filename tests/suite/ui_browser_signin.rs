//! Signing in again on the web page, in a real browser: a page whose token
//! the host refuses (fleet.toml's token changed since the browser kept
//! it) keeps its address, and once the person pastes the new token it
//! opens what they had opened (a bookmark, a link to a conversation).
//!
//! (Before, the refusal dropped the address: signed in again, the person
//! landed on the bot list and had to find the conversation again.)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::json;

use crate::support::browser::Browser;
use crate::support::browser::ENTER;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;

/// From now on the page's every request is refused as a host that no
/// longer knows its token refuses it, the page's own reads first (it
/// moves to the room list).
async fn refuse_every_request(browser: &Browser) {
    browser
        .js(
            "window.fetch = () => Promise.resolve(new Response(
               JSON.stringify({error: {code: 'unauthorized', message: 'unknown token'}}),
               {status: 401, headers: {'content-type': 'application/json'}}));
             location.hash = '#/rooms';
             return true;",
            json!([]),
        )
        .await;
}

/// From now on the page's sends (its POSTs) get no answer, as from a
/// host that is away; its reads still go through.
async fn sends_get_no_answer(browser: &Browser) {
    browser
        .js(
            "const real = window.fetch;
             window.fetch = (url, opts) => opts && opts.method === 'POST'
               ? Promise.reject(new TypeError('Failed to fetch'))
               : real(url, opts);
             return true;",
            json!([]),
        )
        .await;
}

/// The browser on alice's DM with `r`, live, whose sends from now on get
/// no answer, and `text` sent there: its bubble waits unconfirmed.
async fn with_unconfirmed(text: &str) -> Option<(Browser, TestHost)> {
    let (browser, host) = ui_page::start(ui_page::fleet_with_r(SCRIPT)).await?;
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    sends_get_no_answer(&browser).await;
    browser
        .type_in(".detail .composer textarea", &format!("{text}{ENTER}"))
        .await;
    browser.wait_text(".outbox", text).await;
    Some((browser, host))
}

#[tokio::test]
async fn a_link_opened_with_a_changed_token_opens_after_signing_in_again() {
    let Some((browser, host)) = ui_page::start(ui_page::fleet_with_r(SCRIPT)).await else {
        return;
    };
    let (_, end) = host.end_turn("r", "hello there").await;
    assert_eq!(end["status"], "completed", "{end}");

    // the browser kept a token the host no longer knows, and opens a link
    // to the conversation with r
    browser.go(&format!("{}/#/bots/r", host.url)).await;
    browser
        .js(
            "localStorage.setItem('botfleet.token', 'the-old-token'); location.reload();",
            json!([]),
        )
        .await;
    browser
        .wait_text(".login [role=alert]", "The host refused your token")
        .await;
    let hash = browser.js("return location.hash", json!([])).await;
    assert_eq!(hash, json!("#/bots/r"), "the address stays");

    browser.type_in("#token", &format!("{TOKEN}{ENTER}")).await;
    browser.wait_text(".detail .log", "echo: hello there").await;
    let hash = browser.js("return location.hash", json!([])).await;
    assert_eq!(hash, json!("#/bots/r"));
    browser.find(".detail .composer textarea").await;

    // "Log out" still leaves nothing of the address
    browser.click("#logout").await;
    browser.find(".login #token").await;
    let hash = browser.js("return location.hash", json!([])).await;
    assert_eq!(hash, json!(""));
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// A message the page could not confirm (the host did not answer its
/// sends) when another request finds the token refused (the host came
/// back with another token in fleet.toml) is named on the sign-in page
/// with its text. (Before, the stream's or a list's refusal signed the
/// page out first, which dropped the message without a word: QA,
/// 2026-12-04.)
#[tokio::test]
async fn a_message_unconfirmed_when_the_token_is_refused_is_named_at_sign_in() {
    // the page's sends get no answer
    let Some((browser, host)) = with_unconfirmed("kept while the host was away").await else {
        return;
    };
    // then every request is refused, the page's own reads first
    refuse_every_request(&browser).await;
    browser
        .wait_text(".login [role=alert]", "may not have been sent")
        .await;
    browser
        .wait_text(".login [role=alert]", "“kept while the host was away”")
        .await;
    let alert = browser
        .js(
            "return document.querySelector('.login [role=alert]').textContent",
            json!([]),
        )
        .await;
    assert!(
        alert
            .as_str()
            .is_some_and(|a| a.starts_with("The host refused your token")),
        "{alert}"
    );
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// Text typed in a message box and not sent when the host refuses the
/// token is quoted on the sign-in page too: the sign-out drops the
/// drafts, and it went without a word (QA, 2026-12-05).
#[tokio::test]
async fn a_draft_typed_when_the_token_is_refused_is_quoted_at_sign_in() {
    let Some((browser, host)) = ui_page::start(ui_page::fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    browser
        .type_in(".detail .composer textarea", "a draft to keep")
        .await;
    refuse_every_request(&browser).await;
    browser
        .wait_text(".login [role=alert]", "“a draft to keep”")
        .await;
    let alert = browser
        .js(
            "return document.querySelector('.login [role=alert]').textContent",
            json!([]),
        )
        .await;
    assert!(
        alert
            .as_str()
            .is_some_and(|a| a.starts_with("The host refused your token")
                && a.contains("Text you typed and did not send")),
        "{alert}"
    );
    // a failed try at signing in (the host refuses every token still)
    // leaves it there (it replaced it, and the text was gone for good)
    browser
        .type_in("#token", &format!("the-old-token{ENTER}"))
        .await;
    browser
        .wait_text(".login [role=alert]", "does not know that token")
        .await;
    browser
        .wait_text(".login [role=alert]", "“a draft to keep”")
        .await;
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// The host refuses the token in another tab of the browser: this tab
/// says so, names its unconfirmed message and its draft with their text,
/// and keeps its address, as when the refusal comes to it. (Before, it
/// read "You logged out in another tab.", dropped the address, and the
/// message and the draft went without a word: QA, 2026-12-06.)
#[tokio::test]
async fn a_refusal_in_another_tab_names_this_tabs_unsent_text() {
    let Some((browser, host)) = ui_page::start(ui_page::fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    let a = browser.tab().await;
    // this tab's sends get no answer: one stays unconfirmed
    sends_get_no_answer(&browser).await;
    browser
        .type_in(
            ".detail .composer textarea",
            &format!("sent from the first tab{ENTER}"),
        )
        .await;
    browser
        .wait_text(".outbox", "sent from the first tab")
        .await;
    browser
        .type_in(".detail .composer textarea", "a draft in the first tab")
        .await;
    // another tab finds the token refused
    browser.new_tab().await;
    browser.go(&format!("{}/#/bots", host.url)).await;
    browser.find(".list a[href='#/bots/r']").await;
    refuse_every_request(&browser).await;
    browser
        .wait_text(".login [role=alert]", "The host refused your token")
        .await;
    browser.switch_to(&a).await;
    browser
        .wait_text(".login [role=alert]", "refused your token in another tab")
        .await;
    let alert = browser
        .js(
            "return document.querySelector('.login [role=alert]').textContent",
            json!([]),
        )
        .await;
    let alert = alert.as_str().unwrap_or_default();
    assert!(
        alert.contains("“sent from the first tab”")
            && alert.contains("“a draft in the first tab”")
            && !alert.starts_with("You logged out"),
        "{alert}"
    );
    assert_eq!(
        browser.js("return location.hash", json!([])).await,
        json!("#/bots/r"),
        "the address stays"
    );
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// Log out with a message the host has not confirmed, or text typed and
/// not sent, asks first, saying what this browser forgets; Stay keeps
/// all of it, Log out anyway signs out (QA: they were dropped without a
/// word).
#[tokio::test]
async fn log_out_asks_first_when_it_would_drop_what_was_written() {
    let Some((browser, host)) = with_unconfirmed("not confirmed yet").await else {
        return;
    };
    browser
        .type_in(".detail .composer textarea", "half a thought")
        .await;
    browser.click("#logout").await;
    browser
        .wait_text(
            ".logout-confirm",
            "Log out? This browser forgets 1 message the host has not confirmed and text you \
             typed and did not send in 1 conversation.",
        )
        .await;
    browser.click(".logout-confirm button:not(.danger)").await;
    assert_eq!(browser.count(".logout-confirm").await, 0);
    assert_eq!(browser.count("#token").await, 0);
    browser.wait_text(".outbox", "not confirmed yet").await;
    browser.click("#logout").await;
    browser.click(".logout-confirm button.danger").await;
    browser.find("#token").await;
    assert_eq!(browser.count(".logout-confirm").await, 0);
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}
