//! The web page in a real browser: an approval whose action cannot run as
//! things stand (the host's `cannot_run`: its bot was taken out of
//! fleet.toml, or the call's tool out of the bot's `tools`, while it
//! waited) says why and what to do, on the approvals page and on its card
//! in the conversation; Approve is disabled, described by that reason,
//! and Deny still decides it. (Both cards offered Approve as if the action
//! would run.)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::Value;
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;

/// What the host says of a pending Shell call of bot `r`, which does not
/// have Shell.
const TOOL_GONE: &str = "Shell is no longer among bot r's tools, so this action can no longer \
                         run; add Shell to the `tools` of r in fleet.toml again and restart \
                         the host if it is still needed";

/// What the host says of a pending approval of bot `r`, taken out of the
/// fleet's config.
const BOT_GONE: &str = "bot r is no longer in the fleet's config: it runs no turns, so it will \
                        not read the decision on this approval or run its action; list r in \
                        fleet.toml again and restart the host before the approval expires if \
                        the action is still needed";

/// The approval cards under `root` (a CSS selector) as the person reads
/// and can use them: the `cannot_run` line, and for each button its
/// label, whether it is disabled and the text describing it.
async fn cards(browser: &Browser, root: &str) -> Value {
    browser
        .js(
            r#"return [...document.querySelectorAll(arguments[0] + " .approval-card")].map((card) => ({
                 cannot_run: card.querySelector(".cannot-run")?.textContent ?? null,
                 buttons: [...card.querySelectorAll(".actions button")].map((b) => ({
                   label: b.textContent,
                   disabled: b.disabled,
                   described: b.getAttribute("aria-describedby")
                     ? document.getElementById(b.getAttribute("aria-describedby"))?.textContent ?? "(missing)"
                     : null,
                 })),
               }))"#,
            json!([root]),
        )
        .await
}

/// One card that says `why` it cannot run, with Approve disabled and
/// described by it, and Deny.
fn cannot_run_card(why: &str) -> Value {
    let line = format!("Cannot run: {why}");
    json!([{
        "cannot_run": line,
        "buttons": [
            {"label": "Approve", "disabled": true, "described": line},
            {"label": "Deny", "disabled": false, "described": null},
        ],
    }])
}

/// Asks, in the session `session` of `host`'s bot, for approval of the
/// Shell command `env`, good for ten minutes; its id.
async fn ask_env(
    host: &crate::support::fleet::TestHost,
    session: &str,
) -> botfleet::memory::ApprovalId {
    ui_page::ask(
        host,
        session,
        "run `env`",
        "it runs a command",
        "env",
        600_000,
    )
    .await
}

/// The status of approval `id` as the API reports it.
async fn status(host: &TestHost, id: &str) -> Value {
    let (code, v) = host.get(&format!("/v1/approvals/{id}"), TOKEN).await;
    assert_eq!(code, 200, "{v}");
    v["approval"]["status"].clone()
}

#[tokio::test]
async fn an_approval_whose_tool_is_gone_says_so_and_cannot_be_approved() {
    // r has SendMessage only: a Shell call of it cannot run
    let fleet = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"]);
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    let id = ask_env(&host, &session).await.to_string();

    // the card in the conversation (the record it asks for carries it)
    ui_page::open_dm(&browser, &host, "r").await;
    browser
        .wait_text(".log .approval", &format!("Cannot run: {TOOL_GONE}"))
        .await;
    assert_eq!(cards(&browser, ".log").await, cannot_run_card(TOOL_GONE));

    // the approvals page; Deny still decides it
    browser.go(&format!("{}/#/approvals", host.url)).await;
    browser
        .wait_text(".approvals .panel", &format!("Cannot run: {TOOL_GONE}"))
        .await;
    assert_eq!(
        cards(&browser, ".approvals").await,
        cannot_run_card(TOOL_GONE)
    );
    browser.click(".approvals button.danger").await;
    host.wait_get(&format!("/v1/approvals/{id}"), |v| {
        (v["approval"]["status"] == "denied").then(|| v.clone())
    })
    .await;
    ui_page::finish(browser, host).await;
}

#[tokio::test]
async fn an_approval_of_a_removed_bot_says_so_and_cannot_be_approved() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .bot("k", "s", &["SendMessage"])
        .start()
        .await;
    let session = host.dm_after_hello("r").await;
    let id = ask_env(&host, &session).await.to_string();
    // while r is listed with Shell, the action can run: Approve is offered
    ui_page::open(&browser, &host, "#/approvals").await;
    browser.wait_text(".approvals .panel", "run `env`").await;
    assert_eq!(
        cards(&browser, ".approvals").await,
        json!([{
            "cannot_run": null,
            "buttons": [
                {"label": "Approve", "disabled": false, "described": null},
                {"label": "Deny", "disabled": false, "described": null},
            ],
        }])
    );
    // r taken out of fleet.toml while its approval waits
    let fleet = host.shutdown().await.without_bot("r");
    fleet.write();
    let host = restart(fleet).await;

    ui_page::open(&browser, &host, "#/approvals").await;
    browser
        .wait_text(".approvals .panel", &format!("Cannot run: {BOT_GONE}"))
        .await;
    assert_eq!(
        cards(&browser, ".approvals").await,
        cannot_run_card(BOT_GONE)
    );
    assert_eq!(status(&host, &id).await, "pending");
    ui_page::finish(browser, host).await;
}

/// An approval asked in alice's DM with a bot fleet.toml then gave to
/// bob can no longer be decided (the host refuses it with a 409): its
/// card says why and offers neither Approve nor Deny (Deny was offered,
/// and refused when pressed: QA, 2026-12-05).
#[tokio::test]
async fn an_approval_of_a_bot_given_away_offers_no_decision() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .start()
        .await;
    let session = host.dm_after_hello("r").await;
    ask_env(&host, &session).await;
    let fleet =
        host.shutdown()
            .await
            .without_bot("r")
            .bot_of("r", "s", &["SendMessage", "Shell"], "bob");
    fleet.write();
    let host = restart(fleet).await;
    ui_page::open(&browser, &host, "#/approvals").await;
    browser
        .wait_text(".approvals .panel", "now belongs to another user")
        .await;
    let shown = cards(&browser, ".approvals").await;
    assert_eq!(shown[0]["buttons"], json!([]), "{shown}");
    // it does not wait for her: the status says so, the badge counts none
    browser
        .wait_text(".approvals .panel", "Cannot be decided")
        .await;
    // counted (`0`), not merely not yet counted
    browser
        .wait_js(
            "the badge counting none",
            "const b = document.getElementById('approval-count'); return b.hidden && b.textContent === '0'",
            json!([]),
        )
        .await;
    let title = browser
        .js(
            "return document.querySelector('.approvals .card-title').textContent",
            json!([]),
        )
        .await;
    assert!(
        title.as_str().is_some_and(|t| t.starts_with("Action ")),
        "asks to approve: {title}"
    );
    // nor its card in the conversation, which she still reads (QA: it
    // offered Deny there)
    browser
        .go(&format!("{}/#/sessions/{session}", host.url))
        .await;
    browser
        .wait_text(".log .approval", "now belongs to another user")
        .await;
    let shown = cards(&browser, ".log").await;
    assert_eq!(shown[0]["buttons"], json!([]), "{shown}");
    ui_page::finish(browser, host).await;
}
