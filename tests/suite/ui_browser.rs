//! The web page in a real browser: headless Chromium driven through
//! chromedriver's WebDriver API. Signs in, talks to a bot (the reply and an
//! approval arrive live over the change signals), approves, saves a secret
//! from a card, retries a failed turn, shows the internal steps, checks
//! that markup in messages stays text, searches, and logs out.
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
use botfleet_memory::Mutation;
use botfleet_memory::NewApproval;
use reqwest::Method;
use serde_json::Value;
use serde_json::json;

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
        ttl_ms: 600_000,
        max_pending: 4,
    };
    rt.store
        .write(vec![Mutation::RequestApproval(Box::new(new))])
        .await
        .unwrap();
    id
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
