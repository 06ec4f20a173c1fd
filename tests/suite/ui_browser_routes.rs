//! The web page in a real browser: a conversation's approval card shows
//! the exact action (its summary cuts a long command in the middle), an
//! address named like a built-in JavaScript name is "No such page", and a
//! search hit says whether a bot or a person wrote it.
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::Value;
use serde_json::json;

use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::fleet_with_r;

/// A long Shell command in a DM: a harmless start, 3,000 spaces, then
/// what it ends with. The card in the conversation shows the action
/// whole, with its end, under "Exact action" (the same value the
/// approvals page shows), and its Approve button is there. (Before, the
/// card showed only the summary, cut in the middle, and Approve/Deny.)
#[tokio::test]
async fn a_conversation_approval_card_shows_the_exact_action() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    let command = format!("echo harmless{}; echo TAIL-MARKER", " ".repeat(3000));
    // as the gate cuts it: the end is not in the summary
    let summary = "run `echo harmless … (3018 characters left out) …`";
    ui_page::ask(
        &host,
        &session,
        summary,
        "runs a command",
        &command,
        600_000,
    )
    .await;

    ui_page::open_dm(&browser, &host, "r").await;
    let exact = browser
        .wait_js(
            "the exact action in the conversation's approval card",
            "const pre = document.querySelector('.log .approval-card details pre');
             return pre && pre.textContent;",
            json!([]),
        )
        .await;
    let exact: Value = serde_json::from_str(exact.as_str().unwrap()).unwrap();
    assert_eq!(
        exact,
        json!({"tool": "Shell", "args": {"command": command}})
    );
    browser.click(".log .approval-card details summary").await;
    let card = browser
        .js(
            "const card = document.querySelector('.log .approval-card');
             return { text: card.innerText, buttons: [...card.querySelectorAll('.actions button')].map((b) => b.textContent) };",
            json!([]),
        )
        .await;
    assert!(
        card["text"]
            .as_str()
            .unwrap()
            .contains("; echo TAIL-MARKER"),
        "{card}"
    );
    assert_eq!(card["buttons"], json!(["Approve", "Deny"]), "{card}");
    ui_page::finish(browser, host).await;
}

/// Collects the page's uncaught errors and rejected promises in
/// `window.__errors`.
const CATCH_ERRORS: &str = r#"window.__errors = [];
  window.addEventListener("error", (e) => window.__errors.push(String(e.message)));
  window.addEventListener("unhandledrejection", (e) => window.__errors.push(String(e.reason)));"#;

/// `#/__proto__`, `#/hasOwnProperty`, `#/constructor`, `#/toString` and
/// `#/valueOf` are "No such page", without an uncaught error. (Before,
/// the page looked them up among its views' names as inherited
/// properties: some threw a TypeError, the others showed nothing, and the
/// page before stayed.)
#[tokio::test]
async fn addresses_named_like_built_in_names_are_no_such_page() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open(&browser, &host, "#/approvals").await;
    browser.wait_text("#main h1", "Approvals").await;
    browser.js(CATCH_ERRORS, json!([])).await;
    for name in [
        "__proto__",
        "hasOwnProperty",
        "constructor",
        "toString",
        "valueOf",
    ] {
        // from a page that is not "No such page"
        browser.js("location.hash = '#/approvals'", json!([])).await;
        browser.wait_text("#main h1", "Approvals").await;
        browser
            .js("location.hash = arguments[0]", json!([format!("#/{name}")]))
            .await;
        browser
            .wait_js(
                &format!("\"No such page\" at #/{name}"),
                "const h1 = document.querySelector('#main h1');
                 return (h1 && h1.textContent === 'No such page') || window.__errors.length > 0;",
                json!([]),
            )
            .await;
        let errors = browser.js("return window.__errors", json!([])).await;
        assert_eq!(errors, json!([]), "#/{name}");
        let title = browser
            .js(
                "return document.querySelector('#main h1').textContent",
                json!([]),
            )
            .await;
        assert_eq!(title, "No such page", "#/{name}");
    }
    ui_page::finish(browser, host).await;
}

/// A search hit names its author as the timeline does: the bot's reply
/// with a "bot" tag, the person's own message as "You" without one.
/// (Before, a hit had only a name, so a bot named like a person passed
/// for them.)
#[tokio::test]
async fn a_search_hit_says_whether_a_bot_or_a_person_wrote_it() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    super::recall::said_and_indexed(&host, "r", "wombat here").await;

    ui_page::open(&browser, &host, "#/search?q=wombat").await;
    browser.wait_text(".hits", "echo: wombat here").await;
    let hits = browser
        .js(
            "return [...document.querySelectorAll('.hits .hit')].map((li) => ({
               snippet: li.querySelector('.snippet').textContent,
               who: li.querySelector('.meta .who').textContent,
               speaker: [...li.querySelectorAll('.meta .tag.speaker')].map((t) => t.textContent),
             }))",
            json!([]),
        )
        .await;
    let hit = |reply: bool| -> Value {
        hits.as_array()
            .unwrap()
            .iter()
            .find(|h| h["snippet"].as_str().unwrap().contains("echo:") == reply)
            .unwrap_or_else(|| panic!("no hit (reply: {reply}) in {hits}"))
            .clone()
    };
    let reply = hit(true);
    assert_eq!(reply["speaker"], json!(["bot"]), "{hits}");
    let own = hit(false);
    assert_eq!(own["who"], "You", "{hits}");
    assert_eq!(own["speaker"], json!([]), "{hits}");
    ui_page::finish(browser, host).await;
}
