//! The web page in a real browser: a reaction to a message on an earlier
//! page (not loaded yet) reads as its own line until "Show earlier
//! messages" brings the message, then sits on the message.
//!
//! (QA, 2026-12-07: it stayed a line "r reacted 👍 to #1", a seq the page
//! shows nowhere, and message #1 came without it.)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::json;

use crate::support::fleet::TestFleet;
use crate::support::ui_page;

const SCRIPT: &str = r#"
[[rule]]
match = "react to the first"
steps = [
  { tool = "ReactToMessage", args = { seq = 1, emoji = "👍" } },
  { tool = "SendMessage", args = { text = "reacted" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

#[tokio::test]
async fn a_reaction_to_a_message_on_an_earlier_page_goes_onto_it_once_shown() {
    let fleet =
        TestFleet::new()
            .script("s", SCRIPT)
            .bot("r", "s", &["SendMessage", "ReactToMessage"]);
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let (status, first) = host.send("r", "the first message", None).await;
    assert_eq!(status, 202, "{first}");
    let session = first["session"].as_str().unwrap().to_owned();
    assert_eq!(first["seq"], 1, "{first}");
    host.wait_turn_end(&session, 1).await;
    // more than a page (200 entries) after it
    ui_page::append_notices(&host, &session, 210).await;
    let (_, asked) = host.send("r", "react to the first", None).await;
    host.wait_turn_end(&session, asked["seq"].as_i64().unwrap())
        .await;

    ui_page::open_dm(&browser, &host, "r").await;
    browser.wait_text(".log", "reacted 👍 to #1").await;
    browser.click("button.earlier").await;
    let shown = browser
        .wait_js(
            "message #1 shown with its reaction",
            r#"const li = document.querySelector(".log li[data-seq='1']");
               const box = li && li.querySelector(".reactions");
               if (!box || box.hidden) return null;
               const lines = [...document.querySelectorAll(".log li")].filter((l) => l.textContent.includes("to #1")).length;
               return { chips: box.textContent, lines };"#,
            json!([]),
        )
        .await;
    assert_eq!(shown, json!({ "chips": "👍", "lines": 0 }));
    ui_page::finish(browser, host).await;
}
