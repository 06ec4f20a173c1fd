//! The web page's search hits in a real browser: a hit in the person's
//! old DM with a bot they gave to someone else opens that DM read-only as
//! a session. (Before, it linked to the bot's conversation, whose session
//! the host answers 404 for a bot that is not theirs: the page showed an
//! error.)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::json;

use crate::support::browser::Browser;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;

/// Alice talks to `a2` and `b`; then fleet.toml gives `a2` to bob.
async fn alice_gave_a2_away() -> TestHost {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("a2", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    for bot in ["a2", "b"] {
        let (status, sent) = host.send(bot, &format!("wombat for {bot}"), None).await;
        assert_eq!(status, 202, "{sent}");
        host.wait_turn_end(
            sent["session"].as_str().unwrap(),
            sent["seq"].as_i64().unwrap(),
        )
        .await;
    }
    let fleet = host
        .shutdown()
        .await
        .without_bot("a2")
        .bot_of("a2", "s", &["SendMessage"], "bob");
    fleet.write();
    let host = restart(fleet).await;
    super::recall::flush(&host).await;
    host
}

#[tokio::test]
async fn a_hit_in_a_dm_with_a_bot_given_away_opens_the_dm_read_only() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = alice_gave_a2_away().await;
    ui_page::open(&browser, &host, "#/search?q=wombat").await;
    browser.wait_text(".hits", "echo: wombat for a2").await;
    browser.wait_text(".hits", "echo: wombat for b").await;
    let links = browser
        .js(
            "return [...document.querySelectorAll('.hits a')].map((a) => [a.textContent, a.getAttribute('href')])",
            json!([]),
        )
        .await;
    let href_of = |text: &str| -> String {
        links
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l[0].as_str().unwrap().contains(text))
            .and_then(|l| l[1].as_str())
            .unwrap_or_else(|| panic!("no hit {text:?} in {links}"))
            .to_owned()
    };
    // her own bot's DM still opens in its conversation
    assert!(
        href_of("echo: wombat for b").starts_with("#/bots/b?seq="),
        "{links}"
    );
    let given = href_of("echo: wombat for a2");
    assert!(given.starts_with("#/sessions/"), "{links}");

    browser.go(&format!("{}/{given}", host.url)).await;
    browser.wait_text(".log", "echo: wombat for a2").await;
    let state = browser
        .js(
            "return [location.hash, document.querySelectorAll('.error-text').length]",
            json!([]),
        )
        .await;
    assert_eq!(state, json!([given, 0]), "stays on the session, no error");
    ui_page::finish(browser, host).await;
}

/// QA (2026-12-04): a hit in a bot's internal step (a note, a tool result,
/// an event, an approval) showed its control and format characters raw on
/// the search page, where the conversation shows them escaped: a U+202E
/// made a command read as another. People's and bots' messages are shown
/// as written, as in the conversation.
#[tokio::test]
async fn a_hit_in_an_internal_step_shows_bidi_characters_escaped() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let script = r#"
[[rule]]
match = "^zebra"
steps = [ { text = "zebra note \u202E evil", tool = "SendMessage", args = { text = "zebra reply \u202E as written" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    super::recall::said_and_indexed(&host, "r", "zebra please").await;
    ui_page::open(&browser, &host, "#/search?q=zebra").await;
    browser.wait_text(".hits", "zebra note").await;
    let snippets = browser
        .js(
            "return [...document.querySelectorAll('.hits .snippet')].map((p) => p.textContent)",
            json!([]),
        )
        .await;
    let of = |needle: &str| -> String {
        snippets
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s.as_str())
            .find(|s| s.contains(needle))
            .unwrap_or_else(|| panic!("no hit {needle:?} in {snippets}"))
            .to_owned()
    };
    let note = of("zebra note");
    assert!(
        note.contains("\\u{202e}") && !note.contains('\u{202e}'),
        "{note:?}"
    );
    let reply = of("zebra reply");
    assert!(reply.contains('\u{202e}'), "{reply:?}");
    ui_page::finish(browser, host).await;
}

/// A decided approval is found twice (its card is appended at each status
/// change, with the same text): each hit's tag says which status it is.
#[tokio::test]
async fn an_approvals_hits_say_their_status() {
    let fleet =
        TestFleet::new()
            .script("s", super::recall::CHAT)
            .bot("r", "s", &["SendMessage", "Shell"]);
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let session = super::cli_text_out::talk(&host, "hello").await;
    let id = super::cli_text_out::ask_to_run(&host, &session, "wombatcleanup").await;
    let (status, v) = host
        .post_raw(
            &format!("/v1/approvals/{id}"),
            Some(crate::support::fleet::TOKEN),
            None,
            json!({"decision": "deny"}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    super::recall::flush(&host).await;
    ui_page::open(&browser, &host, "#/search?q=wombatcleanup").await;
    browser.wait_text(".hits", "approval · denied").await;
    let tags = browser
        .js(
            "return [...document.querySelectorAll('.hits .meta .tag')].map((t) => t.textContent).sort()",
            json!([]),
        )
        .await;
    assert!(
        tags.as_array()
            .unwrap()
            .iter()
            .any(|t| t == "approval · pending"),
        "{tags}"
    );
    ui_page::finish(browser, host).await;
}
