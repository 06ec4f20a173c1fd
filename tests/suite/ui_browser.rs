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

use std::path::PathBuf;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

use botfleet_memory::ApprovalId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewApproval;
use botfleet_memory::NewEntry;
use reqwest::Method;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SCRIPT: &str = r#"
[[rule]]
match = "(?i)token card"
steps = [ { tool = "SendMessage", args = { text = "I need a token.", card = { type = "secret_request", name = "GITHUB_TOKEN", description = "repo scope" } } } ]

[[rule]]
match = "(?i)please fail"
steps = [ { fail = "the endpoint answered 500" } ]

[[rule]]
steps = [ { text = "thinking about it", tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// How long a condition may take to become true in the page.
const WAIT: Duration = Duration::from_secs(20);
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
const ENTER: &str = "\u{E007}";

fn find_program(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// A WebDriver session on a chromedriver child process.
struct Browser {
    http: reqwest::Client,
    session: String,
    base: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// None (after printing why) when the browser is not installed.
    async fn start() -> Option<Browser> {
        let chromium = find_program("BOTFLEET_CHROMIUM", &["chromium", "chromium-browser"]);
        let driver = find_program("BOTFLEET_CHROMEDRIVER", &["chromedriver"]);
        let (Some(chromium), Some(driver)) = (chromium, driver) else {
            eprintln!(
                "skipping the browser test: chromium and chromedriver are not installed \
                 (apt-get install chromium chromium-driver; scripts/test.sh does it)"
            );
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut browser = Browser {
            http: reqwest::Client::new(),
            session: String::new(),
            base: format!("http://127.0.0.1:{port}"),
            driver: child,
            _profile: profile,
        };
        for _ in 0..200 {
            let up = browser
                .http
                .get(format!("{}/status", browser.base))
                .send()
                .await
                .is_ok();
            if up {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1200,900",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!(
            "--user-data-dir={}",
            browser._profile.path().display()
        )])
        .collect::<Vec<_>>();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let resp: Value = browser
            .http
            .post(format!("{}/session", browser.base))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        browser.session = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver did not start a session: {resp}"))
            .to_owned();
        Some(browser)
    }

    async fn cmd(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value, Value> {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut req = self.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let ok = resp.status().is_success();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if ok { Ok(v["value"].clone()) } else { Err(v) }
    }

    async fn go(&self, url: &str) {
        self.cmd(Method::POST, "/url", Some(json!({ "url": url })))
            .await
            .unwrap();
    }

    async fn js(&self, script: &str, args: Value) -> Value {
        self.cmd(
            Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
        .unwrap_or_else(|e| panic!("script failed: {e}"))
    }

    /// Runs `script` as an async WebDriver script: it calls its last
    /// argument with the result.
    async fn js_async(&self, script: &str, args: Value) -> Value {
        self.cmd(
            Method::POST,
            "/execute/async",
            Some(json!({"script": script, "args": args})),
        )
        .await
        .unwrap_or_else(|e| panic!("script failed: {e}"))
    }

    /// The handle of the current tab.
    async fn tab(&self) -> String {
        let v = self.cmd(Method::GET, "/window", None).await.unwrap();
        v.as_str().unwrap().to_owned()
    }

    /// Opens a tab (of the same profile: same localStorage) and switches
    /// to it; returns its handle.
    async fn new_tab(&self) -> String {
        let v = self
            .cmd(Method::POST, "/window/new", Some(json!({"type": "tab"})))
            .await
            .unwrap();
        let handle = v["handle"].as_str().unwrap().to_owned();
        self.switch_to(&handle).await;
        handle
    }

    async fn switch_to(&self, handle: &str) {
        self.cmd(Method::POST, "/window", Some(json!({ "handle": handle })))
            .await
            .unwrap();
    }

    /// Closes the current tab (switch to another one after).
    async fn close_tab(&self) {
        self.cmd(Method::DELETE, "/window", None).await.unwrap();
    }

    /// Signs in on the page at `url` with `token`.
    async fn sign_in(&self, url: &str, token: &str) {
        self.go(&format!("{url}/")).await;
        self.type_in("#token", &format!("{token}{ENTER}")).await;
        self.find("#top:not([hidden])").await;
    }

    /// Waits for the first element matching `css`.
    async fn find(&self, css: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let found = self
                .cmd(
                    Method::POST,
                    "/element",
                    Some(json!({"using": "css selector", "value": css})),
                )
                .await;
            if let Ok(v) = found
                && let Some(id) = v[ELEMENT].as_str()
            {
                return id.to_owned();
            }
            if tokio::time::Instant::now() > deadline {
                let page = self.js("return document.body.innerText", json!([])).await;
                panic!("no element {css} in the page: {page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.js(
            "arguments[0].scrollIntoView({block: 'center'})",
            json!([{ ELEMENT: id }]),
        )
        .await;
        self.cmd(
            Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    async fn type_in(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.cmd(
            Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        )
        .await
        .unwrap_or_else(|e| panic!("typing in {css}: {e}"));
    }

    /// Waits until `script` returns something truthy; returns it.
    async fn wait_js(&self, what: &str, script: &str, args: Value) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let v = self.js(script, args.clone()).await;
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                Value::Array(_) | Value::Object(_) => true,
            };
            if truthy {
                return v;
            }
            if tokio::time::Instant::now() > deadline {
                let page = self.js("return document.body.innerText", json!([])).await;
                panic!("timed out waiting for {what}; the page shows: {page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the text of the elements matching `css` contains `text`.
    async fn wait_text(&self, css: &str, text: &str) {
        self.wait_js(
            &format!("{text:?} in {css}"),
            "return [...document.querySelectorAll(arguments[0])].some(e => e.textContent.includes(arguments[1]))",
            json!([css, text]),
        )
        .await;
    }

    async fn count(&self, css: &str) -> u64 {
        self.js(
            "return document.querySelectorAll(arguments[0]).length",
            json!([css]),
        )
        .await
        .as_u64()
        .unwrap_or(0)
    }

    /// The browser console's messages.
    async fn console(&self) -> Vec<String> {
        let url = format!("{}/session/{}/se/log", self.base, self.session);
        let v: Value = self
            .http
            .post(url)
            .json(&json!({"type": "browser"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap_or(Value::Null);
        v["value"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| format!("{} {}", e["level"], e["message"]))
            .collect()
    }

    async fn quit(mut self) {
        let _ = self.cmd(Method::DELETE, "", None).await;
        self.session.clear();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // after a panic (quit() never ran): ask the driver to close the
        // browser, with a plain blocking request, then end the driver
        if self.session.is_empty() {
            let _ = self.driver.kill();
            let _ = self.driver.wait();
            return;
        }
        let addr = self.base.trim_start_matches("http://").to_owned();
        if let Ok(mut conn) = std::net::TcpStream::connect(&addr) {
            use std::io::Read;
            use std::io::Write;
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session
            );
            let _ = conn.write_all(request.as_bytes());
            let _ = conn.read(&mut [0u8; 512]);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A pending approval of bot `r` in `session`, created as the gate does.
async fn ask(host: &TestHost, session: &str) -> ApprovalId {
    ask_for(host, session, 600_000).await
}

/// [`ask`] with an approval that expires after `ttl_ms`.
async fn ask_for(host: &TestHost, session: &str, ttl_ms: i64) -> ApprovalId {
    let rt = host.host.as_ref().unwrap().fleet.runtime();
    let id = ApprovalId::new_v7();
    let new = NewApproval {
        id,
        bot: "r".parse().unwrap(),
        session: session.parse().unwrap(),
        turn: None,
        call_id: "call_1".into(),
        tool: "Shell".into(),
        fingerprint: "fp-env".into(),
        summary: "run `env`".into(),
        reason: "dumps the environment, which holds secrets".into(),
        action: json!({"tool": "Shell", "args": {"command": "env"}}),
        ttl_ms,
        max_pending: 4,
    };
    rt.store
        .write(vec![Mutation::RequestApproval(Box::new(new))])
        .await
        .unwrap();
    id
}

/// `n` notices appended to `session`, as the host appends its own.
async fn append_notices(host: &TestHost, session: &str, n: usize) {
    let rt = host.host.as_ref().unwrap().fleet.runtime();
    let batch = (0..n)
        .map(|i| {
            Mutation::Append(Box::new(NewEntry {
                id: EntryId::new_v7(),
                session: session.parse().unwrap(),
                author: "system".into(),
                turn: None,
                kind: EntryKind::Notice {
                    code: "test".into(),
                    text: format!("notice {i}"),
                    retry_turn: None,
                },
            }))
        })
        .collect();
    rt.store.write(batch).await.unwrap();
}

/// The approved action runs: the approval is used, which appends no card
/// (a notice stands for the tool's result that would follow).
async fn run_approved(host: &TestHost, id: ApprovalId, session: &str) {
    let rt = host.host.as_ref().unwrap().fleet.runtime();
    rt.store
        .write(vec![Mutation::ConsumeApproval { id }])
        .await
        .unwrap();
    append_notices(host, session, 1).await;
}

/// Runs the page's own `tickExpiries` over `#main` an hour from now (the
/// page's ticker runs every 15 s); answers whether each button matching
/// `css` is disabled.
async fn tick_an_hour_later(browser: &Browser, css: &str) -> Value {
    browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               import("/ui/timeline.js").then((m) => {
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
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
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
    let bad: Vec<String> = browser
        .console()
        .await
        .into_iter()
        .filter(|m| m.contains("Uncaught") || m.contains("Refused") || m.contains("Error:"))
        .collect();
    assert!(bad.is_empty(), "the page logged errors: {bad:#?}");

    // log out forgets the token
    browser.click("#logout").await;
    browser.find("#token").await;
    assert_eq!(
        browser
            .js("return localStorage.getItem('botfleet.token')", json!([]))
            .await,
        Value::Null
    );
    browser.quit().await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_cards_show_the_approvals_state() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
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

    browser.sign_in(&host.url, TOKEN).await;
    browser.go(&format!("{}/#/bots/r", host.url)).await;
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
    browser.quit().await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tab_keeps_the_account_it_signed_in_with() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot_of("b", "s", &["SendMessage"], "bob")
        .start()
        .await;

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
    // changed): a message sent then is reported as not sent
    browser.go(&format!("{}/#/bots/b", host.url)).await;
    browser.find(".composer textarea").await;
    browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               import("/ui/api.js").then((m) => { m.auth.save("revoked-token"); done(true); }, (e) => done(String(e)));"#,
            json!([]),
        )
        .await;
    browser
        .type_in(".composer textarea", &format!("are you there?{ENTER}"))
        .await;
    browser
        .wait_text(".login [role=alert]", "was not sent")
        .await;
    browser
        .wait_text(".login [role=alert]", "are you there?")
        .await;

    let bad: Vec<String> = browser
        .console()
        .await
        .into_iter()
        .filter(|m| m.contains("Uncaught") || m.contains("Refused") || m.contains("Error:"))
        .collect();
    assert!(bad.is_empty(), "the page logged errors: {bad:#?}");
    browser.quit().await;
    host.shutdown().await;
}

/// A bot out of its daily token budget: the page shows the notice, and
/// stops saying the bot is working on the message that waits for tomorrow.
/// (The "working" line stayed forever: only a turn end cleared it.)
#[tokio::test]
async fn a_paused_bot_is_not_shown_as_working() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("cheap", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 1")
        .start()
        .await;
    browser.go(&format!("{}/", host.url)).await;
    browser.sign_in(&host.url, TOKEN).await;
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
    browser.quit().await;
    host.shutdown().await;
}

/// The approvals badge counts a pending approval and, as an expiry sends
/// no change signal, counts again when it expires.
#[tokio::test]
async fn the_approvals_badge_counts_again_when_an_approval_expires() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    host.send("r", "hello", None).await;
    host.wait_turn_end(&session, 1).await;
    // long enough for the refresh after the page's first change signals
    ask_for(&host, &session, 4_000).await;
    browser.go(&format!("{}/", host.url)).await;
    browser.sign_in(&host.url, TOKEN).await;
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
    browser.quit().await;
    host.shutdown().await;
}

/// In a shared room, the page names another user's bot in search hits,
/// and Retry on that bot's failed turn says that only its owner can.
#[tokio::test]
async fn a_shared_room_shows_other_users_bots_by_name_and_their_retry_as_theirs() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let script = r#"
[[rule]]
match = "break"
steps = [ { fail = "the model is down" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} saw the wombat" } } ]
"#;
    // b is alice's; t is bob's and may join other people's rooms
    let host = TestFleet::new()
        .script("s", script)
        .bot("b", "s", &["SendMessage"])
        .bot_of("t", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true")
        .start()
        .await;
    let (status, room) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "zoo", "members": ["b", "t"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    for (text, key) in [("who saw it?", "k1"), ("@t break", "k2")] {
        let (status, posted) = host
            .post_raw(
                "/v1/groups/zoo/messages",
                Some(TOKEN),
                Some(key),
                json!({ "text": text }).to_string(),
            )
            .await;
        assert_eq!(status, 202, "{posted}");
        host.wait_turn_end(
            posted["session"].as_str().unwrap(),
            posted["seq"].as_i64().unwrap(),
        )
        .await;
    }
    super::recall::flush(&host).await;

    browser.go(&format!("{}/", host.url)).await;
    browser.sign_in(&host.url, TOKEN).await;
    browser.go(&format!("{}/#/search?q=wombat", host.url)).await;
    browser.wait_text(".hits", "t saw the wombat").await;
    let who = browser
        .js(
            "return [...document.querySelectorAll('.hits .who')].map((w) => w.textContent)",
            json!([]),
        )
        .await;
    let who: Vec<&str> = who
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        who.contains(&"t-name") && who.contains(&"b-name"),
        "{who:?}"
    );
    assert!(!who.contains(&"t"), "{who:?}");
    // the room's inputs to each member read as the room's, not `room:zoo`
    assert!(
        who.contains(&"Room zoo") && !who.contains(&"room:zoo"),
        "{who:?}"
    );

    browser.go(&format!("{}/#/rooms/zoo", host.url)).await;
    browser.wait_text(".log .notice", "the model is down").await;
    browser.click(".log .notice button").await;
    browser
        .wait_text(
            ".toast.error",
            "Only the owner of that bot can retry its turn.",
        )
        .await;
    browser.quit().await;
    host.shutdown().await;
}
