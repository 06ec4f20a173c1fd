//! The web page in many tabs of one browser: the tabs share one change
//! stream. Each tab held a `GET /v1/events` stream of its own, and a
//! browser opens at most 6 HTTP/1.1 connections to a host: with 5 or 6
//! tabs open, the other requests of every tab waited for a connection (a
//! tab loaded its conversation after a minute, or never). Here the user
//! may hold 3 streams (`host.max_streams_per_user = 3`): with a stream per
//! tab the 4th tab on was refused and had no live updates.
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use std::time::Duration;

use botfleet_memory::EntryKind;
use futures::StreamExt;
use futures::stream::BoxStream;

use crate::support::browser::Browser;
use crate::support::browser::ENTER;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::process::poll;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::fleet_with_r;

/// The tabs of the test: more than a browser's 6 connections to a host.
const TABS: usize = 7;
/// Streams alice may hold.
const CAP: usize = 3;
/// Longest a stream may take to open, or the host to answer it.
const BOUND: Duration = Duration::from_secs(20);

/// An open stream, read up to its `ready` event; it closes when dropped.
struct Open(#[allow(dead_code)] BoxStream<'static, reqwest::Result<bytes::Bytes>>);

/// Opens alice's `GET /v1/events` on a connection of its own: `None` when
/// the host refuses it `429 too_many_streams` (she holds [`CAP`]).
async fn stream(host: &TestHost) -> Option<Open> {
    let send = host
        .http
        .get(format!("{}/v1/events", host.url))
        .bearer_auth(TOKEN)
        .send();
    let resp = tokio::time::timeout(BOUND, send)
        .await
        .expect("GET /v1/events not answered")
        .unwrap();
    if resp.status() == 429 {
        let body = resp.text().await.unwrap();
        assert!(body.contains("too_many_streams"), "{body}");
        return None;
    }
    assert_eq!(resp.status(), 200, "GET /v1/events");
    let mut bytes = resp.bytes_stream().boxed();
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains("event: ready") {
        let chunk = tokio::time::timeout(BOUND, bytes.next())
            .await
            .expect("no ready event")
            .expect("the stream ended before its ready event")
            .unwrap();
        got.extend_from_slice(&chunk);
    }
    Some(Open(bytes))
}

/// The streams alice's page holds open: [`CAP`] less those the test can
/// open before the host refuses one (they close again on return).
async fn page_streams(host: &TestHost) -> usize {
    let mut mine = Vec::new();
    while mine.len() < CAP {
        match stream(host).await {
            Some(open) => mine.push(open),
            None => break,
        }
    }
    CAP - mine.len()
}

/// Opens the page at `base` (the host's address) and `hash` in a new tab
/// (signed in: the browser keeps the token) and waits for its message
/// box; returns the tab's handle.
async fn open_tab(browser: &Browser, base: &str, hash: &str) -> String {
    let tab = browser.new_tab().await;
    browser.go(&format!("{base}/{hash}")).await;
    browser.find(".composer textarea").await;
    tab
}

/// The names of the page's Web Locks, held and waited for, in all tabs.
async fn locks(browser: &Browser) -> serde_json::Value {
    browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               navigator.locks.query().then((q) => done({
                 held: q.held.map((l) => l.name),
                 pending: q.pending.map((l) => l.name),
               }));"#,
            serde_json::json!([]),
        )
        .await
}

/// A notice the host appends to alice's DM with r: the page shows it only
/// if a change signal (or a stream's `ready`) reaches the tab.
async fn notice(host: &TestHost, session: &str, text: &str) {
    let kind = EntryKind::Notice {
        code: "test".into(),
        text: text.into(),
        retry_turn: None,
    };
    ui_page::append(host, session, "system", [kind]).await;
}

/// From the open tab (the first), opens the other six on `base`; in the
/// last, sends a message and sees the reply, then sees a notice the host
/// writes, live, as the fourth tab does. The first tab and all seven.
async fn open_seven_and_talk(
    browser: &Browser,
    host: &TestHost,
    base: &str,
    session: &str,
) -> (String, Vec<String>) {
    let first = browser.tab().await;
    let mut tabs = vec![first.clone()];
    for _ in 1..TABS {
        tabs.push(open_tab(browser, base, "#/bots/r").await);
    }
    browser.find("#conn.live").await;
    browser
        .type_in(".composer textarea", &format!("from the last tab{ENTER}"))
        .await;
    browser.wait_text(".log", "echo: from the last tab").await;
    notice(host, session, "written while seven tabs are open").await;
    browser
        .wait_text(".log", "written while seven tabs are open")
        .await;
    browser.switch_to(&tabs[3]).await;
    browser.find("#conn.live").await;
    browser
        .wait_text(".log", "written while seven tabs are open")
        .await;
    (first, tabs)
}

/// Closes tab `first`, the one holding the stream; then what the host
/// writes shows live in the last tab and in the second, and the page holds
/// one stream again.
async fn close_the_leader(
    browser: &Browser,
    host: &TestHost,
    session: &str,
    first: &str,
    tabs: &[String],
) {
    browser.switch_to(first).await;
    browser.close_tab().await;
    browser.switch_to(&tabs[TABS - 1]).await;
    notice(host, session, "written after the first tab closed").await;
    browser
        .wait_text(".log", "written after the first tab closed")
        .await;
    browser.find("#conn.live").await;
    browser.switch_to(&tabs[1]).await;
    browser
        .wait_text(".log", "written after the first tab closed")
        .await;
    poll(BOUND.as_secs(), async || match page_streams(host).await {
        1 => Ok(()),
        n => Err(format!("the page holds {n} streams after the hand-over")),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seven_tabs_share_one_change_stream_and_hand_it_over() {
    let fleet = fleet_with_r(SCRIPT).host(&format!("max_streams_per_user = {CAP}"));
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;

    // the first tab, alone, reads the stream
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    // the last tab is live (a stream of its own past the 3rd was refused
    // 429 too_many_streams: "no live updates"), sends, and sees the reply;
    // what the host writes after reaches it, and another tab, live
    let (first, tabs) = open_seven_and_talk(&browser, &host, &host.url, &session).await;

    // all seven tabs hold one stream between them: one tab holds the
    // lock, six wait for it; its name does not carry the token
    assert_eq!(page_streams(&host).await, 1, "streams the page holds");
    let before = locks(&browser).await;
    let held = before["held"].as_array().unwrap();
    let pending = before["pending"].as_array().unwrap();
    assert_eq!(held.len(), 1, "{before}");
    assert_eq!(pending.len(), TABS - 1, "{before}");
    assert!(pending.iter().all(|name| *name == held[0]), "{before}");
    assert!(!before.to_string().contains(TOKEN), "{before}");

    // the first tab leads (it held the stream alone): closed, another tab
    // opens the stream, and what the host writes still shows up live
    // one stream again (the closed tab's slot frees when the host sees
    // its connection closed), read by the one tab holding the lock
    close_the_leader(&browser, &host, &session, &first, &tabs).await;
    let after = locks(&browser).await;
    assert_eq!(after["held"].as_array().unwrap().len(), 1, "{after}");
    assert_eq!(
        after["pending"].as_array().unwrap().len(),
        TABS - 2,
        "{after}"
    );

    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// The host's name in [`tabs_over_plain_http_to_a_lan_name_share_one_stream`]:
/// chromium resolves it to the loopback address, and a page from it is
/// not a secure context (it is not localhost), as a host on a LAN reached
/// over plain http is not.
const LAN_NAME: &str = "botfleet-lan.test";

/// Over plain http to a name that is not localhost, the page has no Web
/// Locks (nor SubtleCrypto): each tab read a stream of its own, so the
/// 4th tab on was refused here, and with 5 or 6 tabs a browser's other
/// requests to the host waited for a connection. The tabs now elect their
/// leader with a lease in localStorage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tabs_over_plain_http_to_a_lan_name_share_one_stream() {
    let Some((browser, host, lan, session)) = lan_page().await else {
        return;
    };
    // the last tab is live, sends, and sees the reply and what the host
    // writes after it; so does another tab
    let (first, tabs) = open_seven_and_talk(&browser, &host, &lan, &session).await;
    // the seven tabs hold one stream between them
    poll(BOUND.as_secs(), async || match page_streams(&host).await {
        1 => Ok(()),
        n => Err(format!("the page holds {n} streams with seven tabs open")),
    })
    .await;

    // the first tab leads (it was alone when it claimed the lease): closed,
    // it gives the lease up, another tab opens the stream at once (not when
    // the lease would have run out), and what the host writes shows live
    close_the_leader(&browser, &host, &session, &first, &tabs).await;
    // nothing the page keeps names the token
    let kept = browser
        .js(
            "return Object.keys(localStorage).filter((k) => k.startsWith('botfleet.events.'));",
            serde_json::json!([]),
        )
        .await;
    assert_eq!(kept.as_array().map(Vec::len), Some(1), "{kept}");
    assert!(!kept.to_string().contains(TOKEN), "{kept}");

    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// The page over plain http at [`LAN_NAME`], signed in, on alice's DM with
/// r, live: the browser, the host, the page's base address and the DM's
/// session. `None` when there is no browser.
async fn lan_page() -> Option<(Browser, TestHost, String, String)> {
    let resolve = format!("--host-resolver-rules=MAP {LAN_NAME} 127.0.0.1");
    let browser = Browser::start_with_args(&[resolve]).await?;
    let host = fleet_with_r(SCRIPT)
        .host(&format!("max_streams_per_user = {CAP}"))
        .start()
        .await;
    let lan = host.url.replace("127.0.0.1", LAN_NAME);
    assert_ne!(lan, host.url, "the host's address is {}", host.url);
    let session = host.dm_after_hello("r").await;

    browser.sign_in(&lan, TOKEN).await;
    browser.go(&format!("{lan}/#/bots/r")).await;
    browser.find(".composer textarea").await;
    let context = browser
        .js(
            "return [window.isSecureContext, typeof navigator.locks];",
            serde_json::json!([]),
        )
        .await;
    assert_eq!(
        context,
        serde_json::json!([false, "undefined"]),
        "the page at {lan} is meant to be a plain-http page without Web Locks"
    );
    browser.find("#conn.live").await;
    Some((browser, host, lan, session))
}

/// Over plain http, a leader tab that goes without saying so (it crashed,
/// or the browser closed it without its pagehide: here its way out is
/// made to reach nobody) left its lease in localStorage, and the other
/// tabs showed "live" with no signal reaching them until the lease ran
/// out, 75 s later. The tab in front pings the leader and takes the lease
/// when it does not answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_tab_gone_without_a_word_is_replaced_within_seconds() {
    let Some((browser, host, lan, session)) = lan_page().await else {
        return;
    };
    let first = browser.tab().await;
    let second = open_tab(&browser, &lan, "#/bots/r").await;
    browser.find("#conn.live").await;
    // the first tab leads (it was alone); nothing it does from now on
    // reaches the other tab: no lease removed, no message posted
    browser.switch_to(&first).await;
    browser
        .js(
            "Storage.prototype.removeItem = function () {};
             Storage.prototype.setItem = function () {};
             BroadcastChannel.prototype.postMessage = function () {};
             return true;",
            serde_json::json!([]),
        )
        .await;
    browser.close_tab().await;
    browser.switch_to(&second).await;
    notice(&host, &session, "written after the leader went silently").await;
    browser
        .wait_text(".log", "written after the leader went silently")
        .await;
    browser.find("#conn.live").await;
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// Reports, on a BroadcastChannel, the paths a tab fetched since a mark:
/// installed in tab A, read from tab B while A is hidden (WebDriver runs
/// scripts in the tab in front only). "mark" starts over; any message is
/// answered with a report, and so is each request A makes.
const PROBE: &str = r#"
performance.setResourceTimingBufferSize(100000);
window.probeMark = Infinity;
const probe = new BroadcastChannel("botfleet-test-probe");
const report = () => {
  const since = performance
    .getEntriesByType("resource")
    .filter((e) => e.startTime > window.probeMark)
    .map((e) => new URL(e.name).pathname);
  probe.postMessage({ hidden: document.hidden, since });
};
probe.onmessage = (ev) => {
  if (ev.data === "mark") window.probeMark = performance.now();
  report();
};
new PerformanceObserver(report).observe({ type: "resource" });
"#;

/// Posts `ask` to tab A's probe and waits for a report that `until` (a
/// function body over `r`) accepts; returns it.
async fn probe(browser: &Browser, ask: &str, until: &str) -> serde_json::Value {
    let script = format!(
        r#"const [ask, ms] = [arguments[0], arguments[1]];
           const done = arguments[arguments.length - 1];
           const probe = new BroadcastChannel("botfleet-test-probe");
           let last = null;
           const timer = setTimeout(() => {{ probe.close(); done({{ timedOut: last }}); }}, ms);
           probe.onmessage = (ev) => {{
             last = ev.data;
             const r = ev.data;
             if ({until}) {{ clearTimeout(timer); probe.close(); done(r); }}
           }};
           probe.postMessage(ask);"#
    );
    let got = browser
        .js_async(
            &script,
            serde_json::json!([ask, crate::support::browser::WAIT.as_millis() as u64]),
        )
        .await;
    assert!(
        got.get("timedOut").is_none(),
        "tab A never reported {until}: {got}"
    );
    got
}

/// A hidden tab does not download the whole bot list at the change
/// signals of a busy fleet (every open tab did, at least every 2.8 s:
/// half a megabyte for a thousand bots); it fetches it when shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_tab_fetches_the_bot_list_when_shown_not_at_each_signal() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    host.dm_after_hello("r").await;
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    let a = browser.tab().await;
    browser.js(PROBE, serde_json::json!([])).await;
    // tab B in front: A is hidden
    open_tab(&browser, &host.url, "#/bots/r").await;
    browser.find("#conn.live").await;
    probe(&browser, "mark", "r.hidden && r.since.length === 0").await;

    // the bot's turn signals; A refreshes its approvals badge after them
    // (1.2 s after the last), its bot list would come first (0.7 s)
    host.send("r", "while A is hidden", None).await;
    browser.wait_text(".log", "echo: while A is hidden").await;
    let seen = probe(&browser, "report", "r.since.includes('/v1/approvals')").await;
    assert_eq!(seen["hidden"], true, "{seen}");
    let fetched: Vec<&str> = seen["since"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert!(
        !fetched.contains(&"/v1/bots"),
        "the hidden tab fetched the bot list at the signals: {fetched:?}"
    );
    assert!(
        fetched.iter().any(|p| p.ends_with("/entries")),
        "the hidden tab's conversation follows the signals: {fetched:?}"
    );

    // shown again, it fetches the list at once
    browser.switch_to(&a).await;
    // (a request's timing entry may come after what it draws: the page's
    // own PerformanceObserver says when, not a change of the document)
    let shown = browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               const bots = () => performance.getEntriesByType("resource")
                 .some((e) => e.startTime > window.probeMark && new URL(e.name).pathname === "/v1/bots");
               if (bots()) return done(true);
               const observer = new PerformanceObserver(() => { if (bots()) { observer.disconnect(); done(true); } });
               observer.observe({ type: "resource" });
               setTimeout(() => { observer.disconnect(); done(false); }, arguments[0]);"#,
            serde_json::json!([crate::support::browser::WAIT.as_millis() as u64]),
        )
        .await;
    assert_eq!(shown, true, "tab A did not fetch the bot list when shown");
    ui_page::finish(browser, host).await;
}
