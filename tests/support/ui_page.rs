//! The set-up the web page's browser tests share (`suite::ui_browser*`):
//! a host with alice's bot `r`, and the page signed in on a DM with its
//! message box shown.

use crate::support::browser::Browser;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

/// A host whose bot `r` (alice's, with SendMessage) follows the scripted
/// model's `script`.
pub async fn host_with_r(script: &str) -> TestHost {
    TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await
}

/// Signs `browser` in as alice and opens her DM with `bot`; returns once
/// its message box is shown.
pub async fn open_dm(browser: &Browser, host: &TestHost, bot: &str) {
    browser.sign_in(&host.url, TOKEN).await;
    browser.go(&format!("{}/#/bots/{bot}", host.url)).await;
    browser.find(".composer textarea").await;
}
