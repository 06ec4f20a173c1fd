//! The set-up the web page's browser tests share (`suite::ui_browser*`).
//!
//! A test starts the browser and its host with [`start`] ([`start_with_model`]
//! for a bot on a model whose answers the test holds; or
//! [`Browser::start`] and a host of its own making: a restarted one, one on
//! a fixed address). Each answers `None`, after printing why, when chromium
//! or chromedriver is not installed: the test then returns. The test opens
//! the page with [`open`] or [`open_dm`], writes what the page is to show
//! with [`ask`] and [`append`], and ends with [`finish`].

use botfleet_memory::ApprovalId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewApproval;
use botfleet_memory::NewEntry;
use serde_json::Value;
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// The scripted model of most browser tests: "token card" asks for a
/// secret with a card, "please fail" fails the turn, anything else is
/// echoed (`echo: …`) after an internal step "thinking about it".
pub const SCRIPT: &str = r#"
[[rule]]
match = "(?i)token card"
steps = [ { tool = "SendMessage", args = { text = "I need a token.", card = { type = "secret_request", name = "GITHUB_TOKEN", description = "repo scope" } } } ]

[[rule]]
match = "(?i)please fail"
steps = [ { fail = "the endpoint answered 500" } ]

[[rule]]
steps = [ { text = "thinking about it", tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// A fleet whose bot `r` (alice's, with SendMessage, and Shell: the tool
/// of [`ask`]'s approvals, whose cards would otherwise say the action
/// cannot run) follows the scripted model's `script`.
pub fn fleet_with_r(script: &str) -> TestFleet {
    TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Shell"])
}

/// Starts the browser, then the host of `fleet`; `None` (the reason
/// printed) when the browser is not installed.
pub async fn start(fleet: TestFleet) -> Option<(Browser, TestHost)> {
    let browser = Browser::start().await?;
    Some((browser, fleet.start().await))
}

/// Starts the loopback OpenAI-compatible server answering with
/// `responder` (which may hold an answer until the test opens a gate:
/// [`Reply::hold_until`]), then the browser and a host whose bot `r`
/// (alice's, with SendMessage) asks that server; `None` (the reason
/// printed) when the browser is not installed. Shut the server down after
/// [`finish`].
pub async fn start_with_model(
    responder: impl Fn(&Value) -> Reply + Send + Sync + 'static,
) -> Option<(Browser, TestHost, OpenAiServer)> {
    let server = OpenAiServer::builder().responder(responder).start().await;
    let fleet = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"]);
    let (browser, host) = start(fleet).await?;
    Some((browser, host, server))
}

/// Signs `browser` in as alice and goes to the page's address `hash`
/// (`#/bots/r`, `#/search?q=…`); the caller waits for what it looks at.
pub async fn open(browser: &Browser, host: &TestHost, hash: &str) {
    browser.sign_in(&host.url, TOKEN).await;
    browser.go(&format!("{}/{hash}", host.url)).await;
}

/// Signs `browser` in as alice and opens her DM with `bot`; returns once
/// its message box is shown.
pub async fn open_dm(browser: &Browser, host: &TestHost, bot: &str) {
    open(browser, host, &format!("#/bots/{bot}")).await;
    browser.find(".composer textarea").await;
}

/// Asserts the page logged no script errors and no CSP refusals.
pub async fn no_page_errors(browser: &Browser) {
    let bad: Vec<String> = browser
        .console()
        .await
        .into_iter()
        .filter(|m| m.contains("Uncaught") || m.contains("Refused") || m.contains("Error:"))
        .collect();
    assert!(bad.is_empty(), "the page logged errors: {bad:#?}");
}

/// Ends a test: closes the browser, then stops the host.
pub async fn finish(browser: Browser, host: TestHost) {
    browser.quit().await;
    host.shutdown().await;
}

/// A pending approval of bot `r` in `session`, created as the gate
/// creates one: `summary` (also its fingerprint: each summary is another
/// action) asked for `reason`, its action the Shell `command`; it expires
/// after `ttl_ms`.
pub async fn ask(
    host: &TestHost,
    session: &str,
    summary: &str,
    reason: &str,
    command: &str,
    ttl_ms: i64,
) -> ApprovalId {
    let id = ApprovalId::new_v7();
    let new = NewApproval {
        id,
        bot: "r".parse().unwrap(),
        session: session.parse().unwrap(),
        turn: None,
        call_id: format!("call_{id}"),
        tool: "Shell".into(),
        fingerprint: summary.to_owned(),
        summary: summary.to_owned(),
        reason: reason.to_owned(),
        action: json!({"tool": "Shell", "args": {"command": command}}),
        ttl_ms,
        max_pending: 4,
    };
    write(host, vec![Mutation::RequestApproval(Box::new(new))]).await;
    id
}

/// Appends an entry of each kind of `kinds` by `author` to `session`, in
/// one write, as the host appends its own.
pub async fn append(
    host: &TestHost,
    session: &str,
    author: &str,
    kinds: impl IntoIterator<Item = EntryKind>,
) {
    let batch = kinds
        .into_iter()
        .map(|kind| {
            Mutation::Append(Box::new(NewEntry {
                id: EntryId::new_v7(),
                session: session.parse().unwrap(),
                author: author.into(),
                turn: None,
                kind,
            }))
        })
        .collect();
    write(host, batch).await;
}

/// `n` notices ("notice 0", "notice 1", …) appended to `session`.
pub async fn append_notices(host: &TestHost, session: &str, n: usize) {
    let notices = (0..n).map(|i| EntryKind::Notice {
        code: "test".into(),
        text: format!("notice {i}"),
        retry_turn: None,
    });
    append(host, session, "system", notices).await;
}

/// The texts of the person's messages `session` holds, in order.
pub async fn user_texts(host: &TestHost, session: &str) -> Vec<String> {
    host.entries(session)
        .await
        .iter()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Writes `batch` to the host's store.
pub async fn write(host: &TestHost, batch: Vec<Mutation>) {
    let rt = host.host.as_ref().unwrap().fleet.runtime();
    rt.store.write(batch).await.unwrap();
}
