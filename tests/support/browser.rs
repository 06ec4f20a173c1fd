//! A headless Chromium driven through chromedriver's WebDriver API, for
//! the web page's tests (`suite::ui_browser*`, set up by
//! `support::ui_page`).
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
        Browser::start_with_args(&[]).await
    }

    /// [`Browser::start`], chromium run with `extra` arguments too (say,
    /// `--host-resolver-rules` to reach the host under a name that is not
    /// localhost).
    pub async fn start_with_args(extra: &[String]) -> Option<Browser> {
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
        let mut child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // the driver says when it listens; its output is read to the end,
        // so it never blocks on a full pipe
        let (up_tx, up_rx) = tokio::sync::oneshot::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut up = Some(up_tx);
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("started successfully")
                    && let Some(tx) = up.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        let profile = tempfile::tempdir().unwrap();
        let mut browser = Browser {
            http: reqwest::Client::new(),
            session: String::new(),
            base: format!("http://127.0.0.1:{port}"),
            driver: child,
            _profile: profile,
        };
        if !matches!(tokio::time::timeout(WAIT, up_rx).await, Ok(Ok(()))) {
            panic!("chromedriver did not say it started within {WAIT:?}");
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
        .chain(extra.iter().cloned())
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
        browser.slow_network().await;
        Some(browser)
    }

    /// With `BOTFLEET_BROWSER_LATENCY_MS` set, each request of the page
    /// (its files, its API calls) answers that much later: the browser
    /// tests as on a slow machine or network, to look for waits that only
    /// hold on a fast one. Applies to the first tab.
    async fn slow_network(&self) {
        let Some(ms) = std::env::var("BOTFLEET_BROWSER_LATENCY_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            return;
        };
        for (cmd, params) in [
            ("Network.enable", json!({})),
            (
                "Network.emulateNetworkConditions",
                json!({"offline": false, "latency": ms, "downloadThroughput": -1, "uploadThroughput": -1}),
            ),
        ] {
            self.cmd(
                Method::POST,
                "/goog/cdp/execute",
                Some(json!({"cmd": cmd, "params": params})),
            )
            .await
            .unwrap_or_else(|e| panic!("{cmd}: {e}"));
        }
        eprintln!("the page's requests answer {ms} ms late (BOTFLEET_BROWSER_LATENCY_MS)");
    }

    /// Runs `script` in every page this tab loads from now on, before the
    /// page's own scripts (DevTools' `Page.addScriptToEvaluateOnNewDocument`):
    /// a `fetch` replaced there answers the page's first requests too.
    pub async fn before_page_scripts(&self, script: &str) {
        self.cmd(
            Method::POST,
            "/goog/cdp/execute",
            Some(json!({
                "cmd": "Page.addScriptToEvaluateOnNewDocument",
                "params": {"source": script},
            })),
        )
        .await
        .unwrap_or_else(|e| panic!("Page.addScriptToEvaluateOnNewDocument: {e}"));
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

    /// Sets the window's size in CSS pixels (a phone's width, say).
    pub async fn resize(&self, width: u32, height: u32) {
        self.cmd(
            Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await
        .unwrap_or_else(|e| panic!("resizing the window: {e}"));
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
        self.wait_js(
            &format!("an element {css}"),
            "return document.querySelector(arguments[0]) !== null",
            json!([css]),
        )
        .await;
        let found = self
            .cmd(
                Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"));
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_owned()
    }

    /// Clicks the element `css` selects. The page may draw that element
    /// again between finding and clicking it (the bot list is redrawn when
    /// the change stream connects); the click then goes to the new one, as
    /// a person's would.
    pub async fn click(&self, css: &str) {
        self.on_element(css, "click", async |id| {
            self.cmd(
                Method::POST,
                "/execute/sync",
                Some(json!({
                    "script": "arguments[0].scrollIntoView({block: 'center'})",
                    "args": [{ ELEMENT: id }],
                })),
            )
            .await?;
            self.cmd(
                Method::POST,
                &format!("/element/{id}/click"),
                Some(json!({})),
            )
            .await
        })
        .await;
    }

    /// Types `text` into the element `css` selects (drawn again meanwhile:
    /// as [`Browser::click`]).
    pub async fn type_in(&self, css: &str, text: &str) {
        self.on_element(css, "typing in", async |id| {
            self.cmd(
                Method::POST,
                &format!("/element/{id}/value"),
                Some(json!({ "text": text })),
            )
            .await
        })
        .await;
    }

    /// Runs `act` on the element `css` selects, finding it again while the
    /// page replaced the one found (WebDriver's "stale element
    /// reference"), at most 20 times.
    async fn on_element(
        &self,
        css: &str,
        what: &str,
        mut act: impl AsyncFnMut(&str) -> Result<Value, Value>,
    ) {
        for _ in 0..20 {
            let id = self.find(css).await;
            match act(&id).await {
                Ok(_) => return,
                Err(e) if e["value"]["error"] == "stale element reference" => continue,
                Err(e) => panic!("{what} {css}: {e}"),
            }
        }
        panic!("{what} {css}: the page kept replacing the element");
    }

    /// Waits until `script` (a function body over `arguments`) returns
    /// something truthy; returns it. The page waits, not the test: the
    /// script runs again at each change of the document (a
    /// MutationObserver), so the answer comes with the change that makes it
    /// true, and at the deadline the page's text is returned to report.
    pub async fn wait_js(&self, what: &str, script: &str, args: Value) -> Value {
        // the condition is compiled with the script, as WebDriver does
        // (the page's CSP refuses `new Function`)
        let waiter = format!(
            r#"const [args, ms] = [arguments[0], arguments[1]];
                   const done = arguments[arguments.length - 1];
                   const f = function () {{ {script} }};
                   let observer = null;
                   let timer = 0;
                   const finish = (v) => {{ if (observer) observer.disconnect(); clearTimeout(timer); done(v); }};
                   const check = () => {{
                     let v = null;
                     try {{ v = f.apply(null, args); }} catch (e) {{ v = null; }}
                     if (v) finish({{ ok: v }});
                     return Boolean(v);
                   }};
                   if (!check()) {{
                     observer = new MutationObserver(check);
                     observer.observe(document, {{ subtree: true, childList: true, attributes: true, characterData: true }});
                     timer = setTimeout(() => finish({{ page: document.body ? document.body.innerText : "" }}), ms);
                   }}"#
        );
        let waited = self
            .js_async(&waiter, json!([args, WAIT.as_millis() as u64]))
            .await;
        match waited.get("ok") {
            Some(v) => v.clone(),
            None => panic!(
                "timed out waiting for {what}; the page shows: {}",
                waited["page"]
            ),
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
