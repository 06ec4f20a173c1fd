//! The web page in a real browser, when the host does not answer for a
//! while: a message written after one still unconfirmed reaches the bot
//! after it, and once a request is answered again the change stream,
//! backing off after its failures, connects again at once rather than at
//! its next try (up to 30 s later).
//!
//! (QA, 2026-12-07: each unconfirmed message was sent again on its own
//! timer while a later one went at once, so the bot read them in the other
//! order; a reply the host stored showed ~20 s late while the header read
//! "reconnecting".)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::json;

use crate::support::browser::Browser;
use crate::support::browser::ENTER;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::process::poll;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::fleet_with_r;

/// Messages to bots fail as if the host were gone while `window.down`
/// holds; the change stream, open already, stays.
const MESSAGES_LOST: &str = r#"
    window.down = true;
    const f = window.fetch;
    window.fetch = function (url, opts) {
      const message = opts && opts.method === "POST" && String(url).includes("/messages");
      if (window.down && message) return Promise.reject(new TypeError("Failed to fetch"));
      return f.apply(this, arguments);
    };"#;

/// Before the page's scripts: the change stream cannot connect while
/// `window.streamDown` holds, and each of its tries is timed in
/// `window.tries` (ms since the epoch: tabs compare them).
const STREAM_DOWN: &str = r#"
    window.streamDown = true;
    window.tries = [];
    const f = window.fetch;
    window.fetch = function (url, opts) {
      if (String(url).includes("/v1/events")) {
        window.tries.push(Date.now());
        if (window.streamDown) return Promise.reject(new TypeError("Failed to fetch"));
      }
      return f.apply(this, arguments);
    };"#;

/// The browser on alice's DM with the echo bot `r`, live, where "written
/// first" went unanswered ([`MESSAGES_LOST`], still down); the DM's
/// session. `None` when the browser is not installed.
async fn first_unconfirmed() -> Option<(Browser, TestHost, String)> {
    let (browser, host) = ui_page::start(fleet_with_r(SCRIPT)).await?;
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    browser.js(MESSAGES_LOST, json!([])).await;
    browser
        .type_in(".composer textarea", &format!("written first{ENTER}"))
        .await;
    browser
        .wait_text(".outbox li.unconfirmed", "Not confirmed yet")
        .await;
    Some((browser, host, session))
}

#[tokio::test]
async fn a_message_written_after_an_unconfirmed_one_reaches_the_bot_after_it() {
    let Some((browser, host, session)) = first_unconfirmed().await else {
        return;
    };
    // the host answers again; the next message is written before the
    // first one's resend (2 s after its failure) comes
    browser.js("window.down = false", json!([])).await;
    browser
        .type_in(".composer textarea", &format!("written second{ENTER}"))
        .await;
    let texts = poll(30, async || {
        let texts = ui_page::user_texts(&host, &session).await;
        if texts.len() >= 2 {
            Ok(texts)
        } else {
            Err(format!("{texts:?}"))
        }
    })
    .await;
    assert_eq!(texts, ["written first", "written second"]);
    ui_page::finish(browser, host).await;
}

#[tokio::test]
async fn the_change_stream_connects_again_once_a_request_is_answered() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    browser.before_page_scripts(STREAM_DOWN).await;
    ui_page::open_dm(&browser, &host, "r").await;
    // four failed tries (1 + 2 + 4 s of waits between them): the next
    // waits 8 s
    browser
        .wait_js(
            "four failed tries of the change stream",
            "return window.tries.length >= 4",
            json!([]),
        )
        .await;
    let sent_at = browser
        .js("window.streamDown = false; return Date.now()", json!([]))
        .await
        .as_f64()
        .unwrap();
    browser
        .type_in(".composer textarea", &format!("are you back{ENTER}"))
        .await;
    browser.wait_text(".log", "echo: are you back").await;
    browser.find("#conn.live").await;
    let tries = browser.js("return window.tries", json!([])).await;
    let next = tries
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_f64())
        .find(|&t| t > sent_at)
        .unwrap_or_else(|| panic!("no try after the message: {tries}"));
    // woken by the answered request (at least 1 s after the wait began),
    // not at the end of its 8 s wait
    assert!(
        next - sent_at < 6000.0,
        "the stream tried again {} ms after the host answered: {tries}",
        next - sent_at
    );
    ui_page::finish(browser, host).await;
}

/// A message written while an earlier one is unconfirmed waits behind it
/// and is never sent; after a reload (with the network back) it goes once
/// the earlier one is answered, and a refusal of it (too long) reads as
/// "Not sent", with Edit and Discard. (Review: kept as in flight, it came
/// back as "may have reached", and the refusal left it "Not confirmed"
/// with only a Retry that could only fail again.)
#[tokio::test]
async fn a_message_that_waited_and_never_left_is_refused_as_not_sent_after_a_reload() {
    let Some((browser, host, session)) = first_unconfirmed().await else {
        return;
    };
    // over the host's 32,000 characters: it waits behind the first
    browser
        .js(
            "document.querySelector('.composer textarea').value = 'x'.repeat(32001)",
            json!([]),
        )
        .await;
    browser.type_in(".composer textarea", ENTER).await;
    browser
        .wait_js(
            "two messages kept, the second never sent",
            r#"const kept = JSON.parse(localStorage.getItem("botfleet.outbox") || "[]");
               return kept.length === 2 && kept.some((r) => r.text.length === 32001);"#,
            json!([]),
        )
        .await;

    // the reloaded page has the network back
    browser.js("location.reload()", json!([])).await;
    browser
        .wait_js(
            "the long message refused as not sent, with Edit and Discard",
            r#"const li = [...document.querySelectorAll(".outbox li")].find((l) => l.classList.contains("unsent"));
               if (!li) return null;
               const buttons = [...li.querySelectorAll("button")].map((b) => b.textContent);
               return buttons.includes("Edit") && buttons.includes("Discard") ? buttons : null;"#,
            json!([]),
        )
        .await;
    assert_eq!(
        ui_page::user_texts(&host, &session).await,
        ["written first"]
    );
    ui_page::finish(browser, host).await;
}

/// The tab that reads the change stream for the browser's other tabs
/// backs off after its failures; once the host answers a request of
/// another tab, that tab asks it to try now. (The wake reached only the
/// tab that made the request: the tabs sharing the stream read
/// "reconnecting" up to 30 s after the host came back: review.)
#[tokio::test]
async fn another_tabs_answered_request_wakes_the_shared_change_stream() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    // tab A reads the stream (the first tab takes the lead) and cannot
    // connect
    browser.before_page_scripts(STREAM_DOWN).await;
    ui_page::open_dm(&browser, &host, "r").await;
    let leader = browser.tab().await;
    browser
        .wait_js(
            "five failed tries of the change stream",
            "return window.tries.length >= 5",
            json!([]),
        )
        .await;
    // the host answers again; tab B, opened now, follows A's stream, and
    // its requests are answered (A's next try is up to 16 s away)
    let up_at = browser
        .js("window.streamDown = false; return Date.now()", json!([]))
        .await
        .as_f64()
        .unwrap();
    browser.new_tab().await;
    browser.go(&format!("{}/#/bots/r", host.url)).await;
    browser
        .type_in(".composer textarea", &format!("from another tab{ENTER}"))
        .await;
    browser.switch_to(&leader).await;
    let tries = browser
        .wait_js(
            "a try of the stream after the host came back",
            "return window.tries.some((t) => t > arguments[0]) ? window.tries : null",
            json!([up_at]),
        )
        .await;
    let next = tries
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_f64())
        .find(|&t| t > up_at)
        .unwrap();
    assert!(
        next - up_at < 6000.0,
        "the leading tab tried again {} ms after the host answered: {tries}",
        next - up_at
    );
    ui_page::finish(browser, host).await;
}

/// Clicks the button reading `label` in the outbox's bubble whose text
/// starts with `text`.
async fn click_in_bubble(browser: &Browser, text: &str, label: &str) {
    browser
        .wait_js(
            "the bubble's button",
            r#"const li = [...document.querySelectorAll(".outbox li")].find((l) => l.textContent.includes(arguments[0]));
               const b = li && [...li.querySelectorAll("button")].find((b) => b.textContent === arguments[1]);
               if (!b) return null;
               b.click();
               return true;"#,
            json!([text, label]),
        )
        .await;
}

/// Whether the outbox shows, after a reload, the bubbles in `texts`
/// (each by a piece of its text) as not sent with Discard offered.
async fn discard_offered(browser: &Browser, texts: &[&str]) {
    browser
        .wait_js(
            "each bubble refused as not sent, with Discard",
            r#"const bubbles = [...document.querySelectorAll(".outbox li")];
               return arguments[0].every((t) => {
                 const li = bubbles.find((l) => l.textContent.includes(t));
                 return li && li.classList.contains("unsent")
                   && [...li.querySelectorAll("button")].some((b) => b.textContent === "Discard");
               }) || null;"#,
            json!([texts]),
        )
        .await;
}

/// Before the page's scripts, in every load: messages whose text holds
/// `REFUSED` are refused (404, as for a room the sender left), and every
/// message fails as if the host were gone while `sessionStorage.down`
/// is "1".
const REFUSE_AND_DOWN: &str = r#"
    const f = window.fetch;
    window.fetch = function (url, opts) {
      const message = opts && opts.method === "POST" && String(url).includes("/messages");
      if (message && sessionStorage.getItem("down") === "1") return Promise.reject(new TypeError("Failed to fetch"));
      if (message && String(opts.body).includes("REFUSED")) {
        const body = JSON.stringify({ error: { code: "not_found", message: "refused for the test" } });
        return Promise.resolve(new Response(body, { status: 404, headers: { "content-type": "application/json" } }));
      }
      return f.apply(this, arguments);
    };"#;

/// Two refused messages are retried while the host cannot be reached:
/// the first goes unanswered, the second waits behind it. After a reload
/// (the network back) the second is refused again as not sent, with
/// Discard.
/// (Review: the waiting one was kept as tried, came back as possibly
/// stored, and its refusal left only a Retry that failed every time.)
#[tokio::test]
async fn refused_messages_retried_while_the_host_is_away_stay_discardable_after_a_reload() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    browser.before_page_scripts(REFUSE_AND_DOWN).await;
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    for text in ["REFUSED one", "REFUSED two"] {
        browser
            .type_in(".composer textarea", &format!("{text}{ENTER}"))
            .await;
    }
    discard_offered(&browser, &["REFUSED one", "REFUSED two"]).await;
    browser
        .js("sessionStorage.setItem('down', '1')", json!([]))
        .await;
    click_in_bubble(&browser, "REFUSED one", "Retry").await;
    browser
        .wait_text(".outbox li.unconfirmed", "Not confirmed yet")
        .await;
    click_in_bubble(&browser, "REFUSED two", "Retry").await;
    browser
        .js(
            "sessionStorage.setItem('down', '0'); location.reload()",
            json!([]),
        )
        .await;
    // (the first, unanswered once, may have reached the host: it stays
    // "not confirmed"; the second never left)
    discard_offered(&browser, &["REFUSED two"]).await;
    ui_page::finish(browser, host).await;
}

/// A message refused with a plain 409 (its key never stored) is retried
/// under a new key and stored: after a reload nothing of it is left in
/// the outbox. (Review: the record under the old key stayed, and the
/// reload showed the sent message as refused again.)
#[tokio::test]
async fn a_message_sent_again_under_a_new_key_leaves_nothing_behind() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    // the first try is refused with a plain 409, as for a bot that left
    browser
        .js(
            r#"window.refusals = 1;
               const f = window.fetch;
               window.fetch = function (url, opts) {
                 if (opts && opts.method === "POST" && String(url).includes("/messages") && window.refusals > 0) {
                   window.refusals--;
                   const body = JSON.stringify({ error: { code: "conflict", message: "refused for the test" } });
                   return Promise.resolve(new Response(body, { status: 409, headers: { "content-type": "application/json" } }));
                 }
                 return f.apply(this, arguments);
               };"#,
            json!([]),
        )
        .await;
    browser
        .type_in(".composer textarea", &format!("under a new key{ENTER}"))
        .await;
    click_in_bubble(&browser, "under a new key", "Retry").await;
    browser.wait_text(".log", "echo: under a new key").await;
    browser
        .wait_js(
            "nothing kept in localStorage",
            "return localStorage.getItem('botfleet.outbox') === null",
            json!([]),
        )
        .await;
    browser.js("location.reload()", json!([])).await;
    browser.wait_text(".log", "echo: under a new key").await;
    assert_eq!(browser.count(".outbox li").await, 0);
    assert_eq!(
        ui_page::user_texts(&host, &session).await,
        ["under a new key"]
    );
    ui_page::finish(browser, host).await;
}

/// Before the page's scripts: Web Locks refuse (the tab reads a stream
/// of its own), and the change stream never answers (it stays
/// "connecting").
const OWN_STREAM_CONNECTING: &str = r#"
    if (navigator.locks) navigator.locks.request = () => Promise.reject(new DOMException("refused for the test", "SecurityError"));
    const f = window.fetch;
    window.fetch = function (url, opts) {
      if (String(url).includes("/v1/events")) return new Promise(() => {});
      return f.apply(this, arguments);
    };"#;

/// A tab that could not share the stream (its lock refused) reads one of
/// its own: a request the host answers while that stream connects is
/// taken as answered. (Review: the tab still tried to wake a leader over
/// its closed channel, which threw inside the answered request, and a
/// stored message was shown as not sent, with Edit and Discard.)
#[tokio::test]
async fn a_tab_with_a_stream_of_its_own_takes_answered_requests_as_answered() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    browser.before_page_scripts(OWN_STREAM_CONNECTING).await;
    ui_page::open_dm(&browser, &host, "r").await;
    // past the page's loads by more than the second a tab waits between
    // two wakes of the stream (the message's answer must be the one)
    browser
        .js_async(
            "const done = arguments[arguments.length - 1]; setTimeout(() => done(true), 1200);",
            json!([]),
        )
        .await;
    browser
        .type_in(".composer textarea", &format!("on my own stream{ENTER}"))
        .await;
    poll(30, async || {
        let texts = ui_page::user_texts(&host, &session).await;
        if texts.is_empty() {
            Err("not stored yet".to_owned())
        } else {
            Ok(())
        }
    })
    .await;
    browser
        .wait_js(
            "the message confirmed: no bubble left in the outbox",
            "return document.querySelectorAll('.outbox li').length === 0",
            json!([]),
        )
        .await;
    ui_page::finish(browser, host).await;
}

/// The first message to a bot is refused for the rate limit, with a
/// Retry-After of 8 s (time enough for the test's click on a slow
/// machine); `window.posts` counts the messages sent.
const RATE_LIMITED: &str = r#"
    window.limited = true;
    window.posts = 0;
    const f = window.fetch;
    window.fetch = function (url, opts) {
      const message = opts && opts.method === "POST" && String(url).includes("/messages");
      if (message) window.posts += 1;
      if (window.limited && message) {
        window.limited = false;
        return Promise.resolve(new Response(JSON.stringify({ error: {
          code: "rate_limited", message: "too many messages; try again in 8 s" } }),
          { status: 429, headers: { "content-type": "application/json", "retry-after": "8" } }));
      }
      return f.apply(this, arguments);
    };"#;

/// A message refused for the rate limit: "Ask again now" before the
/// host's Retry-After sends nothing and says how long is left, and the
/// page sends it by itself once the wait is over. (QA: the button asked
/// at once, refused again and counted against the limit, though the
/// page's own resends kept to the wait.)
#[tokio::test]
async fn ask_again_now_keeps_to_the_hosts_retry_after() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    browser.js(RATE_LIMITED, json!([])).await;
    browser
        .type_in(".composer textarea", &format!("limited one{ENTER}"))
        .await;
    browser
        .wait_text(".outbox li.unconfirmed", "Not confirmed yet")
        .await;
    click_in_bubble(&browser, "limited one", "Ask again now").await;
    browser
        .wait_text("#toasts .toast", "The host asked to wait")
        .await;
    let posts = browser.js("return window.posts;", json!([])).await;
    assert_eq!(posts, json!(1), "asked again before the Retry-After");
    // sent by itself once the wait is over, and answered
    browser.wait_text(".log", "echo: limited one").await;
    let posts = browser.js("return window.posts;", json!([])).await;
    assert_eq!(posts, json!(2));
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}
