//! The web page in a real browser: headless Chromium driven through
//! chromedriver's WebDriver API. Signs in, talks to a bot (the reply and an
//! approval arrive live over the change signals), approves, saves a secret
//! from a card, retries a failed turn, shows the internal steps, checks
//! that markup in messages stays text, searches, and logs out. Approval
//! cards show their approval's newest state (in older pages too, once
//! used, once expired), and each tab keeps the account it signed in with.
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed (Debian: `apt-get install chromium chromium-driver`;
//! scripts/test.sh installs them where it can).

use botfleet_memory::ApprovalId;
use botfleet_memory::Mutation;
use serde_json::Value;
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::browser::ENTER;
use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::append_notices;
use crate::support::ui_page::fleet_with_r;

/// A pending approval of bot `r` in `session` to run `env`, created as
/// the gate does; it expires after `ttl_ms`.
async fn ask_for(host: &TestHost, session: &str, ttl_ms: i64) -> ApprovalId {
    let reason = "dumps the environment, which holds secrets";
    ui_page::ask(host, session, "run `env`", reason, "env", ttl_ms).await
}

/// [`ask_for`] an approval that waits for ten minutes.
async fn ask(host: &TestHost, session: &str) -> ApprovalId {
    ask_for(host, session, 600_000).await
}

/// The approved action runs: the approval is used, which appends no card
/// (a notice stands for the tool's result that would follow).
async fn run_approved(host: &TestHost, id: ApprovalId, session: &str) {
    ui_page::write(host, vec![Mutation::ConsumeApproval { id }]).await;
    append_notices(host, session, 1).await;
}

/// Runs the page's own `tickExpiries` over `#main` an hour from now (the
/// page's ticker runs every 15 s); answers whether each button matching
/// `css` is disabled.
async fn tick_an_hour_later(browser: &Browser, css: &str) -> Value {
    browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               import("/ui/cards.js").then((m) => {
                 const now = Date.now;
                 Date.now = () => now.call(Date) + 3600000;
                 try { m.tickExpiries(document.getElementById("main")); } finally { Date.now = now; }
                 done([...document.querySelectorAll(arguments[0])].map((b) => b.disabled));
               }, (e) => done(String(e)));"#,
            json!([css]),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_works_in_a_browser() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();

    // sign in: a wrong token is refused, the right one kept
    browser.go(&format!("{}/", host.url)).await;
    browser.type_in("#token", &format!("wrong{ENTER}")).await;
    browser
        .wait_text(".login [role=alert]", "does not know")
        .await;
    browser
        .js("document.getElementById('token').value = ''", json!([]))
        .await;
    browser.type_in("#token", &format!("{TOKEN}{ENTER}")).await;
    browser.click(".list a[href='#/bots/r']").await;

    // a message and its reply, live; the sent message shows once
    browser
        .type_in(".composer textarea", &format!("hello there{ENTER}"))
        .await;
    browser.wait_text(".log", "echo: hello there").await;
    assert_eq!(browser.count(".log li.mine").await, 1);
    // the turn's tokens reach the bot list (usage records, not numbers)
    browser
        .wait_js(
            "the bot's tokens of today in the list",
            r#"const t = document.querySelector(".list a[href='#/bots/r'] .sub").textContent;
               return /· [1-9][0-9.,]*K? tokens today$/.test(t) ? t : null"#,
            json!([]),
        )
        .await;
    assert_eq!(browser.count(".outbox li").await, 0);
    browser
        .wait_js(
            "the live indicator",
            "return document.querySelector('#conn.live')",
            json!([]),
        )
        .await;

    // an approval appears while the page is open; approve it
    let approval = ask(&host, &session).await;
    browser.wait_text(".log .approval", "run `env`").await;
    browser.wait_text("#approval-count", "1").await;
    browser.click(".log .approval button.primary").await;
    browser.wait_text(".log .approval", "Approved").await;
    let (_, a) = host.get(&format!("/v1/approvals/{approval}"), TOKEN).await;
    assert_eq!(a["approval"]["status"], "approved", "{a}");
    // the action runs: the card says so, though no card entry is added
    run_approved(&host, approval, &session).await;
    browser
        .wait_text(".log .approval", "Approved · the action ran")
        .await;

    // a secret card: the value goes to /v1/secrets, never into the chat
    browser
        .type_in(".composer textarea", &format!("token card{ENTER}"))
        .await;
    browser
        .type_in(".card.secret input[type=password]", "s3cret-value")
        .await;
    browser.click(".card.secret button[type=submit]").await;
    browser
        .wait_text(".card.secret", "Saved GITHUB_TOKEN")
        .await;
    let (_, secrets) = host.get("/v1/secrets", TOKEN).await;
    assert_eq!(secrets["secrets"][0]["name"], "GITHUB_TOKEN", "{secrets}");
    let entries = host.entries(&session).await;
    assert!(
        !serde_json::to_string(&entries)
            .unwrap()
            .contains("s3cret-value")
    );

    // a failed turn offers Retry, which runs the input again
    browser
        .type_in(".composer textarea", &format!("please fail{ENTER}"))
        .await;
    browser.click(".log .notice button").await;
    browser
        .wait_js(
            "a second failure notice",
            "return document.querySelectorAll('.log .notice.bad').length === 2",
            json!([]),
        )
        .await;

    // markup in messages stays text
    let markup = "<img src=x onerror=\"window.pwned=1\"> <b>bold?</b>";
    browser
        .type_in(".composer textarea", &format!("{markup}{ENTER}"))
        .await;
    browser.wait_text(".log", "echo: <img src=x").await;
    assert_eq!(browser.count(".log img, .log b").await, 0);
    assert_eq!(
        browser.js("return window.pwned ?? null", json!([])).await,
        Value::Null
    );

    // the bot's internal steps show on demand
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.log .internal').offsetParent",
                json!([])
            )
            .await,
        Value::Null
    );
    browser.click(".conv-head .switch input").await;
    browser
        .wait_text(".log .internal", "thinking about it")
        .await;
    browser
        .wait_js(
            "internal steps shown",
            "return document.querySelector('.log .internal').offsetParent !== null",
            json!([]),
        )
        .await;

    // the approvals page and the secrets page list what happened
    browser
        .go(&format!("{}/#/approvals?show=all", host.url))
        .await;
    browser.wait_text(".approvals .panel", "Approved").await;
    browser.go(&format!("{}/#/secrets", host.url)).await;
    browser.wait_text("table", "GITHUB_TOKEN").await;

    // search marks the matches
    browser.go(&format!("{}/#/search?q=hello", host.url)).await;
    browser.wait_text(".hits mark", "hello").await;
    // the same search again (the address does not change) searches again
    browser
        .js(
            "document.querySelector('.hits').dataset.stale = '1'",
            json!([]),
        )
        .await;
    browser.click(".searchbar button[type=submit]").await;
    browser
        .wait_js(
            "new results of the same search",
            "return document.querySelector('.hits:not([data-stale])')",
            json!([]),
        )
        .await;

    // nothing rendered a missing value
    let text = browser
        .js(
            "return document.getElementById('main').innerText",
            json!([]),
        )
        .await;
    let text = text.as_str().unwrap_or_default();
    for bad in ["undefined", "null", "[object Object]", "NaN"] {
        assert!(!text.contains(bad), "the page shows {bad:?}: {text}");
    }

    // no script errors, no CSP refusals
    ui_page::no_page_errors(&browser).await;

    // log out forgets the token
    browser.click("#logout").await;
    browser.find("#token").await;
    assert_eq!(
        browser
            .js("return localStorage.getItem('botfleet.token')", json!([]))
            .await,
        Value::Null
    );
    ui_page::finish(browser, host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_cards_show_the_approvals_state() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    // the conversation starts with a message (a DM's session starts so)
    host.send("r", "hello", None).await;
    host.wait_turn_end(&session, 1).await;
    // an approval approved and used, more than a page of entries ago
    let used = ask(&host, &session).await;
    let (status, body) = host
        .post_raw(
            &format!("/v1/approvals/{used}"),
            Some(TOKEN),
            None,
            json!({"decision": "approve"}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    run_approved(&host, used, &session).await;
    append_notices(&host, &session, 210).await;
    // and one waiting now
    ask(&host, &session).await;

    ui_page::open(&browser, &host, "#/bots/r").await;
    browser
        .wait_text(".log .approval", "Approve this action?")
        .await;
    assert_eq!(browser.count(".log .approval").await, 1);

    // the older page holds the used approval's pending and approved
    // entries, in that order: the newest status wins
    browser.click(".timeline .earlier").await;
    browser
        .wait_js(
            "the used approval's card, approved and run, without buttons",
            r#"const cards = document.querySelectorAll(".log .approval");
               return cards.length === 2
                 && cards[0].textContent.includes("Approved · the action ran")
                 && !cards[0].querySelector("button")"#,
            json!([]),
        )
        .await;

    // the waiting approval's time runs out: its buttons stop working, in
    // the conversation and on the approvals page
    assert_eq!(
        tick_an_hour_later(&browser, ".log .approval button").await,
        json!([true, true])
    );
    browser.go(&format!("{}/#/approvals", host.url)).await;
    browser
        .wait_text(".approvals .panel", "Approve this action?")
        .await;
    assert_eq!(
        tick_an_hour_later(&browser, ".approvals button").await,
        json!([true, true])
    );
    ui_page::finish(browser, host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tab_keeps_the_account_it_signed_in_with() {
    let fleet = fleet_with_r(SCRIPT).bot_of("b", "s", &["SendMessage"], "bob");
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };

    // a token that is not ASCII cannot be a header: said so, not sent
    browser.go(&format!("{}/", host.url)).await;
    browser.find("#token").await;
    browser
        .js(
            "const i = document.getElementById('token'); i.value = 'tökén'; i.form.requestSubmit()",
            json!([]),
        )
        .await;
    browser
        .wait_text(".login [role=alert]", "a token is ASCII text")
        .await;
    browser
        .js("document.getElementById('token').value = ''", json!([]))
        .await;
    browser.type_in("#token", &format!("{TOKEN}{ENTER}")).await;
    browser.find(".list a[href='#/bots/r']").await;

    // an address with a broken %-escape is a page that does not exist
    browser.go(&format!("{}/#/bots/%E0%A4%A", host.url)).await;
    browser.wait_text("main h1", "No such page").await;

    // tab A shows alice's DM; tab B logs out, then signs in as bob
    browser.go(&format!("{}/#/bots/r", host.url)).await;
    browser.find(".composer textarea").await;
    let a = browser.tab().await;
    let b = browser.new_tab().await;
    browser.go(&format!("{}/", host.url)).await;
    browser.click("#logout").await;
    browser.find("#token").await;
    browser.switch_to(&a).await;
    browser
        .wait_text(".login [role=alert]", "logged out in another tab")
        .await;
    browser.switch_to(&b).await;
    browser
        .type_in("#token", &format!("{BOB_TOKEN}{ENTER}"))
        .await;
    browser.find(".list a[href='#/bots/b']").await;
    browser.close_tab().await;
    // tab A follows: bob's bots, not a screen of alice's sending as bob
    browser.switch_to(&a).await;
    browser.find(".list a[href='#/bots/b']").await;
    assert_eq!(browser.count(".list a[href='#/bots/r']").await, 0);
    assert_eq!(
        browser.js("return location.hash", json!([])).await,
        json!("#/bots")
    );

    // the host stops knowing the token this tab holds (fleet.toml
    // changed): a message sent then is reported as not sent. The message
    // is sent in the task that changes the token: a request of the page's
    // own made in between (a list load, the change stream) is refused
    // first and signs the tab out before a message could be typed (seen
    // on a loaded machine)
    browser.go(&format!("{}/#/bots/b", host.url)).await;
    browser.find(".composer textarea").await;
    let sent = browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               import("/ui/api.js").then((m) => {
                 const area = document.querySelector(".composer textarea");
                 if (!area) { done("no message box"); return; }
                 m.auth.save("revoked-token");
                 area.value = "are you there?";
                 area.form.requestSubmit();
                 done(true);
               }, (e) => done(String(e)));"#,
            json!([]),
        )
        .await;
    assert_eq!(sent, json!(true), "the message was not sent: {sent}");
    browser
        .wait_text(".login [role=alert]", "was not sent")
        .await;
    browser
        .wait_text(".login [role=alert]", "are you there?")
        .await;

    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// A bot out of its daily token budget: the page shows the notice, and
/// stops saying the bot is working on the message that waits for tomorrow.
/// (The "working" line stayed forever: only a turn end cleared it.)
#[tokio::test]
async fn a_paused_bot_is_not_shown_as_working() {
    let fleet = TestFleet::new()
        .midday()
        .script("s", SCRIPT)
        .bot("cheap", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 1");
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    ui_page::open(&browser, &host, "#/bots").await;
    browser.click(".list a[href='#/bots/cheap']").await;
    // the first message spends the budget
    browser
        .type_in(".composer textarea", &format!("first{ENTER}"))
        .await;
    browser.wait_text(".log", "echo: first").await;
    // the second waits for tomorrow, and the page says so
    browser
        .type_in(".composer textarea", &format!("second{ENTER}"))
        .await;
    browser
        .wait_text(".log .notice", "daily token budget")
        .await;
    browser
        .wait_js(
            "the working line hidden",
            "const w = document.querySelector('.timeline .working'); return w && w.hidden ? true : null",
            json!([]),
        )
        .await;
    ui_page::finish(browser, host).await;
}

/// The approvals badge counts a pending approval and, as an expiry sends
/// no change signal, counts again when it expires.
#[tokio::test]
async fn the_approvals_badge_counts_again_when_an_approval_expires() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    // the page is signed in and hears the change signals before the
    // approval is asked: its time runs from a change signal the page
    // answers at once, not from a browser's start and a sign-in (on a
    // loaded machine those took longer than its time, and it expired
    // before the page had counted it); 10 s is short of the page wait
    // (20 s) for its expiry after that
    ui_page::open(&browser, &host, "#/bots").await;
    browser.find("#conn.live").await;
    ask_for(&host, &session, 10_000).await;
    browser
        .wait_js(
            "the badge counting one approval",
            "const b = document.getElementById('approval-count'); return !b.hidden && b.textContent === '1'",
            json!([]),
        )
        .await;
    browser
        .wait_js(
            "the badge hidden after the approval expired",
            "return document.getElementById('approval-count').hidden",
            json!([]),
        )
        .await;
    ui_page::finish(browser, host).await;
}
