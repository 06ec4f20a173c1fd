//! A headless Chromium driven through chromedriver's WebDriver API, for
//! the web page's tests (`suite::ui_browser`, `suite::ui_browser_views`).
//!
//! [`Browser::start`] answers `None`, after printing why, when chromium or
//! chromedriver is not installed (Debian: `apt-get install chromium
//! chromium-driver`; scripts/test.sh installs them where it can).

use std::path::PathBuf;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
use serde_json::json;

/// How long a condition may take to become true in the page.
pub const WAIT: Duration = Duration::from_secs(20);
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
pub const ENTER: &str = "\u{E007}";

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
pub struct Browser {
    http: reqwest::Client,
    session: String,
    base: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// None (after printing why) when the browser is not installed.
    pub async fn start() -> Option<Browser> {
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

    pub async fn go(&self, url: &str) {
        self.cmd(Method::POST, "/url", Some(json!({ "url": url })))
            .await
            .unwrap();
    }

    pub async fn js(&self, script: &str, args: Value) -> Value {
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
    pub async fn js_async(&self, script: &str, args: Value) -> Value {
        self.cmd(
            Method::POST,
            "/execute/async",
            Some(json!({"script": script, "args": args})),
        )
        .await
        .unwrap_or_else(|e| panic!("script failed: {e}"))
    }

    /// The handle of the current tab.
    pub async fn tab(&self) -> String {
        let v = self.cmd(Method::GET, "/window", None).await.unwrap();
        v.as_str().unwrap().to_owned()
    }

    /// Opens a tab (of the same profile: same localStorage) and switches
    /// to it; returns its handle.
    pub async fn new_tab(&self) -> String {
        let v = self
            .cmd(Method::POST, "/window/new", Some(json!({"type": "tab"})))
            .await
            .unwrap();
        let handle = v["handle"].as_str().unwrap().to_owned();
        self.switch_to(&handle).await;
        handle
    }

    pub async fn switch_to(&self, handle: &str) {
        self.cmd(Method::POST, "/window", Some(json!({ "handle": handle })))
            .await
            .unwrap();
    }

    /// Closes the current tab (switch to another one after).
    pub async fn close_tab(&self) {
        self.cmd(Method::DELETE, "/window", None).await.unwrap();
    }

    /// Signs in on the page at `url` with `token`.
    pub async fn sign_in(&self, url: &str, token: &str) {
        self.go(&format!("{url}/")).await;
        self.type_in("#token", &format!("{token}{ENTER}")).await;
        self.find("#top:not([hidden])").await;
    }

    /// Waits for the first element matching `css`.
    pub async fn find(&self, css: &str) -> String {
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

    pub async fn click(&self, css: &str) {
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

    pub async fn type_in(&self, css: &str, text: &str) {
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
    pub async fn wait_js(&self, what: &str, script: &str, args: Value) -> Value {
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
    pub async fn wait_text(&self, css: &str, text: &str) {
        self.wait_js(
            &format!("{text:?} in {css}"),
            "return [...document.querySelectorAll(arguments[0])].some(e => e.textContent.includes(arguments[1]))",
            json!([css, text]),
        )
        .await;
    }

    pub async fn count(&self, css: &str) -> u64 {
        self.js(
            "return document.querySelectorAll(arguments[0]).length",
            json!([css]),
        )
        .await
        .as_u64()
        .unwrap_or(0)
    }

    /// The browser console's messages.
    pub async fn console(&self) -> Vec<String> {
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

    pub async fn quit(mut self) {
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
