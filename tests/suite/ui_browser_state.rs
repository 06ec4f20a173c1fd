//! The web page in a real browser: what it says about where things stand.
//! A bot paused by its daily budget reads paused, not working; a link
//! into a long transcript loads a page around its entry and pages from
//! there; logging out right after activity sends nothing without a token;
//! a bot list whose first load was refused says why and loads on a click;
//! messages that arrive below a view scrolled up are said.
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use botfleet_memory::EntryKind;
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::append_notices;
use crate::support::ui_page::fleet_with_r;

/// A bot out of its daily token budget, with a message that came after the
/// budget's notice: the page says it is paused until the budget's reset,
/// in its header and under the conversation. (It read "1 queued" and
/// "working on it": the page never read `paused_until`.)
#[tokio::test]
async fn a_paused_bot_reads_paused_until_its_budget_resets() {
    let fleet = TestFleet::new()
        .midday()
        .script("s", SCRIPT)
        .bot("cheap", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 1");
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let (_, dm) = host.get("/v1/bots/cheap/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    // the first message spends the budget; the second is told it waits
    host.send("cheap", "first", None).await;
    host.wait_turn_end(&session, 1).await;
    host.send("cheap", "second", None).await;
    host.wait_for(&session, |entries| {
        entries
            .iter()
            .find(|e| e["code"] == "budget_exhausted")
            .cloned()
    })
    .await;
    // the third gets no notice of its own
    let (status, third) = host.send("cheap", "third", None).await;
    assert_eq!(status, 202, "{third}");
    assert!(third["paused_until"].is_i64(), "{third}");

    ui_page::open(&browser, &host, "#/bots/cheap").await;
    browser
        .wait_text(".conv-head h1 .state", "paused until")
        .await;
    browser
        .wait_text(".timeline .working", "Paused until")
        .await;
    let shown = browser
        .js(
            r#"return {
                 working: document.querySelector(".timeline .working").textContent.includes("working on it"),
                 list: document.querySelector(".list a[href='#/bots/cheap'] .state").textContent.startsWith("paused until"),
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(shown, json!({"working": false, "list": true}));
    ui_page::finish(browser, host).await;
}

/// A link to entry 100 of 1,500 (what a search hit opens) shows a page
/// around it, not everything after it; "Show newer messages" pages
/// forward, "Jump to the newest" shows the end, which then follows live.
/// (It loaded every entry after the linked one, up to 50,000.)
#[tokio::test]
async fn a_link_into_a_long_transcript_loads_a_page_around_its_entry() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    append_notices(&host, &session, 1_500).await;
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let last = dm["last_seq"].as_i64().unwrap();

    ui_page::open(&browser, &host, "#/bots/r?seq=100").await;
    browser.find(".log li.target[data-seq='100']").await;
    // the keyboard goes on from it (QA: the focus was left on the body)
    browser
        .wait_js(
            "the linked entry focused",
            "return document.activeElement && document.activeElement.dataset.seq === '100'",
            json!([]),
        )
        .await;
    // [at most a page of entries, the first one's seq, the last one's]
    let seqs = "const s = [...document.querySelectorAll('.log li')].map((li) => Number(li.dataset.seq)); \
                return [s.length <= 200, s[0], s[s.length - 1]]";
    let window = browser.js(seqs, json!([])).await;
    assert_eq!(window, json!([true, 1, 200]), "entries held");
    let buttons = browser
        .js(
            "return [!document.querySelector('.timeline .earlier').hidden, !document.querySelector('.timeline .later').hidden]",
            json!([]),
        )
        .await;
    assert_eq!(buttons, json!([false, true]), "[earlier, newer] shown");

    // forward a page
    browser.click(".timeline .later button:not(.link)").await;
    browser
        .wait_js(
            "the next page",
            "const l = document.querySelectorAll('.log li'); return Number(l[l.length - 1].dataset.seq) === 400",
            json!([]),
        )
        .await;
    let hash = "return location.hash";
    assert_eq!(browser.js(hash, json!([])).await, json!("#/bots/r?seq=100"));
    // to the newest, which follows live; the address no longer names the
    // entry, so a reload opens the end (QA, 2026-12-04: it went back to
    // entry 100)
    browser.click(".timeline .later button.link").await;
    browser
        .wait_js(
            "the newest page",
            "const l = document.querySelectorAll('.log li'); return l.length && Number(l[l.length - 1].dataset.seq) === arguments[0]",
            json!([last]),
        )
        .await;
    assert_eq!(
        browser.js(seqs, json!([])).await,
        json!([true, last - 199, last])
    );
    assert_eq!(browser.count(".timeline .later:not([hidden])").await, 0);
    assert_eq!(browser.js(hash, json!([])).await, json!("#/bots/r"));
    let back = "return history.length";
    let entries = browser.js(back, json!([])).await;
    // the page before is dropped: it shows the newest entries too
    browser
        .js(
            "document.getElementById('main').replaceChildren(); location.reload(); return true;",
            json!([]),
        )
        .await;
    browser
        .wait_js(
            "the newest page after a reload",
            "const l = document.querySelectorAll('.log li'); return l.length && Number(l[l.length - 1].dataset.seq) === arguments[0]",
            json!([last]),
        )
        .await;
    assert_eq!(
        browser.js(back, json!([])).await,
        entries,
        "no history entry added"
    );
    append_notices(&host, &session, 1).await;
    browser
        .wait_js(
            "a new entry, live",
            "const l = document.querySelectorAll('.log li'); return Number(l[l.length - 1].dataset.seq) === arguments[0]",
            json!([last + 1]),
        )
        .await;
    ui_page::finish(browser, host).await;
}

/// Records in `window.tokenless` each request the page sends with an
/// Authorization header that holds no token, and keeps in the body's
/// `data-busy` (an attribute: the test's waits see the document) how much
/// the page has yet to do: its timeouts of at most 2 s (the debounced
/// reloads, the short waits between loads) neither run nor dropped, and
/// its requests not yet answered in full (the change stream aside, which
/// is read as long as it lasts). Its errors' toasts stay 8 s: longer.
const WATCH_REQUESTS: &str = r#"
    window.tokenless = [];
    const [setT, clearT, f] = [window.setTimeout, window.clearTimeout, window.fetch];
    const timers = new Set();
    let requests = 0;
    const show = () => { document.body.dataset.busy = String(timers.size + requests); };
    window.setTimeout = function (fn, ms, ...rest) {
      const id = setT.call(window, () => {
        if (timers.delete(id)) show();
        if (typeof fn === "function") fn(...rest);
      }, ms);
      if (!(Number(ms) > 2000)) { timers.add(id); show(); }
      return id;
    };
    window.clearTimeout = function (id) {
      if (timers.delete(id)) show();
      return clearT.call(window, id);
    };
    window.fetch = function (url, opts) {
      const auth = opts && opts.headers && opts.headers.Authorization;
      if (auth !== undefined && !/^Bearer \S/.test(auth)) window.tokenless.push(String(url));
      const answer = f.apply(this, arguments);
      if (String(url).includes("/v1/events")) return answer;
      requests++;
      show();
      // counted down a task after the body is read: what the page does
      // with the answer (a toast) is done by then
      const done = () => setT.call(window, () => { requests--; show(); }, 0);
      return answer.then((r) => {
        const text = r.text.bind(r);
        r.text = () => { const t = text(); t.then(done, done); return t; };
        return r;
      }, (e) => { done(); throw e; });
    };
    show();
"#;

/// "Log out" right after a change signal: the bots' reload that signal
/// scheduled is dropped, so no request goes out without a token and no
/// error shows. (A red "the Authorization header must be `Bearer
/// <token>`" appeared on the sign-in page.)
#[tokio::test]
async fn logging_out_right_after_activity_sends_nothing_without_a_token() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    browser.js(WATCH_REQUESTS, json!([])).await;
    // the reply arrives on a change signal: log out at that moment
    host.send("r", "hello", None).await;
    browser
        .wait_js(
            "the reply, then Log out",
            r#"const seen = [...document.querySelectorAll(".log .text")].some((t) => t.textContent === "echo: hello");
               if (seen) document.getElementById("logout").click();
               return seen"#,
            json!([]),
        )
        .await;
    browser.find("#token").await;
    // the reloads the signals scheduled (0.7 s, 1.2 s after them) ran or
    // were dropped, and what the page asked was answered, on a slow
    // machine too (a fixed 2.5 s could end before a late one ran)
    browser
        .wait_js(
            "nothing left to run or answered after Log out",
            "return document.body.dataset.busy === '0'",
            json!([]),
        )
        .await;
    let after = browser
        .js(
            r#"return {
                 tokenless: window.tokenless,
                 errors: [...document.querySelectorAll(".toast.error")].map((t) => t.textContent),
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(after, json!({"tokenless": [], "errors": []}));
    ui_page::finish(browser, host).await;
}

/// The bot list's first load refused (the host answered 429, as it does
/// to an address locked out for guessing tokens, or to a request it could
/// not serve): the list says why and offers to try again, and a click
/// loads it (QA: it read "Loading…" for good, the error only a toast).
#[tokio::test]
async fn a_bot_list_whose_first_load_failed_says_why_and_loads_on_a_click() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    browser.sign_in(&host.url, TOKEN).await;
    browser.find(".list a[href='#/bots/r']").await;
    // from the next load of the page on, its reads of the bot list are
    // refused until the test lets them through; the change stream and the
    // rest go through
    browser
        .before_page_scripts(
            "const real = window.fetch;
             window.refuseBots = true;
             window.fetch = (url, opts) => {
               const path = new URL(String(url), location.href).pathname;
               if (path === '/v1/bots' && window.refuseBots) {
                 return Promise.resolve(new Response(JSON.stringify({error: {
                   code: 'rate_limited', message: 'too many requests from your address; try again in 60 s'}}),
                   {status: 429, headers: {'content-type': 'application/json', 'retry-after': '60'}}));
               }
               return real(url, opts);
             };",
        )
        .await;
    // (a new document: `go` to the address it shows would only move to
    // its fragment)
    browser
        .js(
            "setTimeout(() => location.reload(), 0); return true;",
            json!([]),
        )
        .await;
    browser
        .wait_text(
            ".list [role=alert]",
            "Your bots could not be loaded: too many requests from your address; try again in 60 s",
        )
        .await;
    browser
        .wait_text(".list [role=alert] button", "Try again")
        .await;
    assert_eq!(browser.count(".list a").await, 0);
    browser
        .js("window.refuseBots = false; return true;", json!([]))
        .await;
    browser.click(".list [role=alert] button").await;
    browser.find(".list a[href='#/bots/r']").await;
    assert_eq!(browser.count(".list [role=alert]").await, 0);
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// Appends notices `texts` to `session`, as the host appends them.
async fn notices(host: &TestHost, session: &str, texts: &[&str]) {
    let kinds = texts.iter().map(|text| EntryKind::Notice {
        code: "test".into(),
        text: (*text).into(),
        retry_turn: None,
    });
    ui_page::append(host, session, "system", kinds).await;
}

/// Where the conversation's view stands: its scroll position, whether it
/// shows the end, and the "new messages below" button's text when shown.
async fn view(browser: &Browser) -> serde_json::Value {
    browser
        .js(
            r#"const t = document.querySelector(".timeline");
               const b = document.querySelector(".timeline .new-below button");
               return {
                 top: Math.round(t.scrollTop),
                 at_end: t.scrollHeight - t.scrollTop - t.clientHeight < 2,
                 below: b && !b.hidden ? b.textContent : null,
               }"#,
            json!([]),
        )
        .await
}

/// Scrolled up in a long conversation, messages that arrive leave the
/// view where it is and are said: a "new messages below" button, in a
/// status region, counts them; it goes to the newest and goes away, and
/// so does scrolling to the end. (Nothing said that anything came: QA.)
#[tokio::test]
async fn messages_arriving_below_a_scrolled_up_view_are_said() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    append_notices(&host, &session, 80).await;
    ui_page::open_dm(&browser, &host, "r").await;
    browser.wait_text(".log .notice", "notice 79").await;
    let status = browser
        .js(
            "const s = document.querySelector('.timeline .new-below'); return s && s.getAttribute('role')",
            json!([]),
        )
        .await;
    assert_eq!(status, json!("status"));
    let scroll_up = "const t = document.querySelector('.timeline'); t.scrollTop = 100";
    browser.js(scroll_up, json!([])).await;
    let shown = "const b = document.querySelector('.timeline .new-below button'); \
                 return b && !b.hidden && b.textContent === arguments[0]";

    notices(&host, &session, &["late one"]).await;
    browser.wait_text(".log .notice", "late one").await;
    browser
        .wait_js(
            "the new message said",
            shown,
            json!(["1 new message below"]),
        )
        .await;
    assert_eq!(
        view(&browser).await,
        json!({"top": 100, "at_end": false, "below": "1 new message below"}),
        "the view stays where it was"
    );
    notices(&host, &session, &["late two", "late three"]).await;
    browser
        .wait_js("three said", shown, json!(["3 new messages below"]))
        .await;
    browser.click(".timeline .new-below button").await;
    browser
        .wait_js(
            "the newest in view, the button gone",
            "const t = document.querySelector('.timeline'); \
             const b = document.querySelector('.timeline .new-below button'); \
             return b.hidden && t.scrollHeight - t.scrollTop - t.clientHeight < 2",
            json!([]),
        )
        .await;

    // scrolled up again: reaching the end by scrolling takes it away
    browser.js(scroll_up, json!([])).await;
    notices(&host, &session, &["late four"]).await;
    browser
        .wait_js(
            "the new message said",
            shown,
            json!(["1 new message below"]),
        )
        .await;
    browser
        .js(
            "const t = document.querySelector('.timeline'); t.scrollTop = t.scrollHeight",
            json!([]),
        )
        .await;
    browser
        .wait_js(
            "the button gone at the end",
            "return document.querySelector('.timeline .new-below button').hidden",
            json!([]),
        )
        .await;
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}
