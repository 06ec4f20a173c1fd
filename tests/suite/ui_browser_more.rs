//! The web page in a real browser, where there is more than it shows at
//! once or more than it can do: the approvals page draws a page of 100
//! and says when more are waiting, with "Show more" (it drew the first
//! 100 and said nothing of the rest, while the badge counted 105), and a
//! notice's Retry that the host will not run (a later turn already
//! answered its messages) says so instead of staying a button every
//! click of which fails (QA, 2026-12-05 and 2026-12-06).
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use botfleet_memory::ApprovalId;
use botfleet_memory::Mutation;
use botfleet_memory::NewApproval;
use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use crate::support::browser::Browser;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;

/// Writes `n` pending approvals of Shell calls (`echo 0`, `echo 1`, …)
/// of bot `r` in `session`.
async fn ask(host: &crate::support::fleet::TestHost, session: &str, n: usize) {
    let asks = (0..n)
        .map(|i| {
            let id = ApprovalId::new_v7();
            Mutation::RequestApproval(Box::new(NewApproval {
                id,
                bot: "r".parse().unwrap(),
                session: session.parse().unwrap(),
                turn: None,
                call_id: format!("call_{id}"),
                tool: "Shell".into(),
                fingerprint: format!("run step {i}"),
                summary: format!("run step {i}"),
                reason: "asks first".into(),
                action: json!({"tool": "Shell", "args": {"command": format!("echo {i}")}}),
                ttl_ms: 600_000,
                max_pending: 1_000,
            }))
        })
        .collect();
    ui_page::write(host, asks).await;
}

#[tokio::test]
async fn the_approvals_page_shows_more_than_a_hundred_waiting() {
    let Some((browser, host)) = ui_page::start(ui_page::fleet_with_r(SCRIPT)).await else {
        return;
    };
    let (session, end) = host.end_turn("r", "hello").await;
    assert_eq!(end["status"], "completed", "{end}");
    ask(&host, &session, 105).await;

    ui_page::open(&browser, &host, "#/approvals").await;
    browser.wait_text(".more-approvals", "Showing 100").await;
    assert_eq!(browser.count(".approvals .panel").await, 100);
    browser.click(".more-approvals button").await;
    // the focus goes to the first card added (the button, hidden now,
    // dropped it to the page's body, QA)
    browser
        .wait_js(
            "all 105, the 101st holding the focus",
            "const cards = document.querySelectorAll('.approvals .panel'); return (cards.length === 105 && cards[100].contains(document.activeElement)) || null",
            json!([]),
        )
        .await;
    let more = browser
        .js(
            "return document.querySelector('.more-approvals').hidden",
            json!([]),
        )
        .await;
    assert_eq!(more, json!(true), "nothing more to show");
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

#[tokio::test]
async fn a_retry_the_host_will_not_run_is_no_button() {
    let Some((browser, host)) = ui_page::start(ui_page::fleet_with_r(SCRIPT)).await else {
        return;
    };
    let (_, end) = host.end_turn("r", "please fail").await;
    assert_eq!(end["status"], "failed", "{end}");
    // a later turn answers with the failed turn's message before the model
    let (_, end) = host.end_turn("r", "and now this").await;
    assert_eq!(end["status"], "completed", "{end}");

    ui_page::open_dm(&browser, &host, "r").await;
    // the page holds the later turn's end: the notice says it was
    // answered, offers no Retry (QA, 2026-12-06: one was offered on every
    // load, and each click failed) nor the terminal's command, which the
    // host refuses alike
    browser
        .wait_text(".entry.notice button", "Answered by a later turn")
        .await;
    assert_eq!(browser.count(".entry.notice .cli").await, 0);
    // a click asks nothing (no request: a refusal's line would come
    // only with its answer)
    count_retries(&browser).await;
    browser.click(".entry.notice button").await;
    assert_eq!(
        browser.js("return window.retries", json!([])).await,
        json!(0)
    );
    assert_eq!(browser.count(".entry.notice .why-not").await, 0);
    browser
        .wait_text(".entry.notice button", "Answered by a later turn")
        .await;
    ui_page::finish(browser, host).await;
}

/// A model that refuses a message holding "please fail" alone (the turn
/// fails), and answers any other with SendMessage once `gate` opens.
fn held_after_failure(request: &Value, gate: &watch::Receiver<bool>) -> Reply {
    if last_message(request).is_some_and(|m| m["role"] == "tool") {
        return Reply::text("");
    }
    let text = last_user_text(request).unwrap_or("").to_owned();
    if text.contains("please fail") && !text.contains("and now this") {
        return Reply::error(400, "this test refuses the first message");
    }
    let args = json!({ "text": "answered both" }).to_string();
    Reply::tool_call("call_1", "SendMessage", args).hold_until(gate.clone())
}

/// A Retry the host refuses while a later turn with the same messages
/// still runs (`409` with `transient`) stays a button: the toast says
/// why, and once that turn answered, it reads "Answered by a later turn"
/// and is no button. (The page told the two apart by matching the host's
/// words.)
#[tokio::test]
async fn a_retry_refused_while_a_later_turn_runs_stays_a_button() {
    let (open, gate) = watch::channel(false);
    let model = move |body: &Value| held_after_failure(body, &gate);
    let Some((browser, host, server)) = ui_page::start_with_model(model).await else {
        return;
    };
    let (session, end) = host.end_turn("r", "please fail").await;
    assert_eq!(end["status"], "failed", "{end}");
    let before = server.request_count();
    let (status, later) = host.send("r", "and now this", None).await;
    assert_eq!(status, 202, "{later}");
    server.wait_for_requests(before + 1).await;

    ui_page::open_dm(&browser, &host, "r").await;
    browser.click(".entry.notice button").await;
    browser.wait_text(".toast.error", "is running").await;
    browser
        .wait_js(
            "the Retry button on again",
            "const b = document.querySelector('.entry.notice button'); return b.textContent === 'Retry' && !b.hasAttribute('aria-disabled')",
            json!([]),
        )
        .await;
    assert_eq!(browser.count(".entry.notice .why-not").await, 0);

    open.send_replace(true);
    let end = host
        .wait_turn_end(&session, later["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    // that turn answered: the button says so as its end comes, without a
    // click that would fail, and again after a reload (it was a Retry
    // every click of which failed: QA, 2026-12-06)
    let gone = "const b = document.querySelector('.entry.notice button'); return (b.textContent === 'Answered by a later turn' && b.getAttribute('aria-disabled') === 'true') || null";
    browser
        .wait_js("the Retry marked answered", gone, json!([]))
        .await;
    // the page before is dropped: its button reads so too
    browser
        .js(
            "document.getElementById('main').replaceChildren(); location.reload(); return true",
            json!([]),
        )
        .await;
    browser.find(".detail .composer textarea").await;
    browser
        .wait_js("the Retry marked answered after a reload", gone, json!([]))
        .await;
    count_retries(&browser).await;
    browser.click(".entry.notice button").await;
    assert_eq!(
        browser.js("return window.retries", json!([])).await,
        json!(0)
    );
    assert_eq!(browser.count(".entry.notice .why-not").await, 0);
    assert_eq!(browser.count(".entry.notice .cli").await, 0);
    ui_page::finish(browser, host).await;
    server.shutdown().await;
}

/// A decision on the Approvals page leaves the focus on the next card's
/// status line, never on its Approve: a second Enter approved an action
/// the person had not read (QA, 2026-12-05).
#[tokio::test]
async fn a_decision_does_not_put_the_focus_on_the_next_approve() {
    let Some((browser, host)) = ui_page::start(ui_page::fleet_with_r(SCRIPT)).await else {
        return;
    };
    let (session, end) = host.end_turn("r", "hello").await;
    assert_eq!(end["status"], "completed", "{end}");
    ask(&host, &session, 3).await;
    ui_page::open(&browser, &host, "#/approvals").await;
    browser
        .wait_js(
            "three cards",
            "return document.querySelectorAll('.approvals .panel').length === 3 || null",
            json!([]),
        )
        .await;
    browser.click(".approvals .panel .actions button").await;
    browser
        .wait_js(
            "two cards left, the focus on a status line",
            "const a = document.activeElement; return (document.querySelectorAll('.approvals .panel').length === 2 && a.classList.contains('status') && a.tagName !== 'BUTTON') || null",
            json!([]),
        )
        .await;
    ui_page::finish(browser, host).await;
}

/// "More results" on the search page gives the focus to the first hit it
/// added (it was disabled while loading, which dropped the focus to the
/// page's body, QA).
#[tokio::test]
async fn more_results_gives_the_focus_to_the_first_hit_added() {
    let Some((browser, host)) = ui_page::start(ui_page::fleet_with_r(SCRIPT)).await else {
        return;
    };
    let mut last = None;
    for i in 0..55 {
        let (status, sent) = host.send("r", &format!("walrus {i}"), None).await;
        assert_eq!(status, 202, "{sent}");
        last = Some(sent);
    }
    let last = last.unwrap();
    host.wait_turn_end(
        last["session"].as_str().unwrap(),
        last["seq"].as_i64().unwrap(),
    )
    .await;
    super::recall::flush(&host).await;
    ui_page::open(&browser, &host, "#/search?q=walrus").await;
    browser
        .wait_js(
            "a first page of 50",
            "return document.querySelectorAll('.hits li').length === 50 || null",
            json!([]),
        )
        .await;
    browser.click("button.more").await;
    browser
        .wait_js(
            "more hits, the 51st holding the focus",
            "const hits = document.querySelectorAll('.hits li'); return (hits.length > 50 && hits[50].contains(document.activeElement)) || null",
            json!([]),
        )
        .await;
    ui_page::finish(browser, host).await;
}

/// Counts the page's requests to retry a turn from now on, in
/// `window.retries` (the page's `fetch`, wrapped).
async fn count_retries(browser: &Browser) {
    browser
        .js(
            "window.retries = 0; const f = window.fetch; \
             window.fetch = function (url) { if (String(url).endsWith('/retry')) window.retries++; return f.apply(this, arguments); }; \
             return true",
            json!([]),
        )
        .await;
}
