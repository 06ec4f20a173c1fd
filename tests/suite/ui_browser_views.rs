//! The web page in a real browser, continued (`suite::ui_browser` has the
//! page's main walk-through): a shared room's other users' bots by name,
//! a retried turn shown working, a bot's Markdown kept whole, and a view
//! that failed while the host was down opening once it is back.
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use std::collections::HashMap;

use botfleet::host::HostOptions;
use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use super::ui_browser_focus::ESCAPE;
use super::ui_browser_focus::focused;
use crate::support::browser::Browser;
use crate::support::browser::ENTER;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::openai_server::Reply;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::fleet_with_r;

/// In a shared room, the page names another user's bot in search hits,
/// and Retry on that bot's failed turn says that only its owner can.
#[tokio::test]
async fn a_shared_room_shows_other_users_bots_by_name_and_their_retry_as_theirs() {
    let script = r#"
[[rule]]
match = "break"
steps = [ { fail = "the model is down" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} saw the wombat" } } ]
"#;
    // b is alice's; t is bob's and may join other people's rooms
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("b", "s", &["SendMessage"])
        .bot_of("t", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true");
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
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

    ui_page::open(&browser, &host, "#/search?q=wombat").await;
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
    // the room's inputs to each member are copies of the timeline's
    // messages: searched beside it, they are left out (search_rooms), and
    // nothing reads as `room:zoo`
    assert!(
        !who.contains(&"Room zoo") && !who.contains(&"room:zoo"),
        "{who:?}"
    );

    browser.go(&format!("{}/#/rooms/zoo", host.url)).await;
    // t is bob's: alice reads that its turn failed, not bob's error
    browser
        .wait_text(".log .notice", "shown only to its owner (bob)")
        .await;
    let notices = browser
        .js(
            "return [...document.querySelectorAll('.log .notice')].map((n) => n.textContent).join('\\n')",
            json!([]),
        )
        .await;
    assert!(
        !notices.as_str().unwrap().contains("the model is down"),
        "{notices}"
    );
    browser.click(".log .notice button").await;
    browser
        .wait_text(
            ".toast.error",
            "Only the owner of that bot can retry its turn.",
        )
        .await;
    ui_page::finish(browser, host).await;
}

/// Retry on a stopped turn's notice: the page shows the bot working again
/// until the retried turn ends. (A retry writes no entry, and the stopped
/// turn's end had taken its input off the unanswered ones: the page said
/// the bot was idle for the whole retried turn.) The model answers once
/// the page said the retried turn runs: on a slow machine no turn ends
/// before the page saw it (each took 4 s, which a slow page could miss).
#[tokio::test]
async fn a_retried_turn_shows_the_bot_working() {
    let (open, gate) = watch::channel(false);
    let model = move |_: &Value| Reply::text("thinking slowly").hold_until(gate.clone());
    let Some((browser, host, server)) = ui_page::start_with_model(model).await else {
        return;
    };
    ui_page::open(&browser, &host, "#/bots/r").await;
    browser
        .type_in(".composer textarea", &format!("slow please{ENTER}"))
        .await;
    let working = "const w = document.querySelector('.timeline .working'); \
                   const s = [...document.querySelectorAll('.conv-head button')].find((b) => b.textContent === 'Stop turn'); \
                   return w && s && !w.hidden && !s.hidden";
    let idle = "const w = document.querySelector('.timeline .working'); \
                const s = [...document.querySelectorAll('.conv-head button')].find((b) => b.textContent === 'Stop turn'); \
                return w && s && w.hidden && s.hidden";
    browser
        .wait_js("the working line and Stop turn", working, json!([]))
        .await;
    browser.click(".conv-head button.danger").await;
    // Stop turn asks first, saying what stops; Escape is "Keep working",
    // and gives the focus back to Stop turn (QA, 2026-12-05: Escape did
    // nothing, and the stop and the retry below left the focus on the
    // page's body)
    browser
        .wait_text(".stop-confirm:not([hidden])", "Stop r-name's turn now?")
        .await;
    assert_eq!(
        focused(&browser).await,
        json!("button.small.danger Stop it")
    );
    browser.type_in(".stop-confirm button.danger", ESCAPE).await;
    browser
        .wait_js(
            "the question closed",
            "return document.querySelector('.stop-confirm').hidden",
            json!([]),
        )
        .await;
    assert_eq!(
        focused(&browser).await,
        json!("button.small.danger Stop turn")
    );
    browser.click(".conv-head button.danger").await;
    browser.click(".stop-confirm button.danger").await;
    browser.wait_js("the turn stopped", idle, json!([])).await;
    let at = focused(&browser).await;
    assert!(at.as_str().unwrap().starts_with("h1. r-name"), "{at}");
    browser.click(".log .notice button").await;
    browser
        .wait_text(".log .notice button", "Queued again")
        .await;
    assert_eq!(focused(&browser).await, json!("button.small Queued again"));
    // the retried turn runs: the page says so
    browser
        .wait_js(
            "the working line and Stop turn after Retry",
            working,
            json!([]),
        )
        .await;
    browser.wait_text(".conv-head h1 .state", "working").await;
    // and stops saying so when it ends
    open.send_replace(true);
    browser
        .wait_js("the retried turn's end", idle, json!([]))
        .await;
    // the retried turn took the messages: the button says so, as after a
    // reload (QA: it read "Queued again (1)" until the page was reloaded)
    browser.wait_text(".log .notice button", "Retried").await;
    // and the notice no longer says to use it (QA: "use the Retry button"
    // stayed beside "Answered by a later turn")
    let line = browser
        .js(
            "return document.querySelector('.log .notice .line span').textContent",
            json!([]),
        )
        .await;
    let line = line.as_str().unwrap();
    assert!(
        line.ends_with("Your message is saved; it was retried.") && !line.contains("Retry button"),
        "{line}"
    );
    ui_page::finish(browser, host).await;
    server.shutdown().await;
}

/// What the page's own richText() makes of `text`: the element names of
/// the fragment's top nodes, their text, and the text of it all.
async fn rich_text(browser: &Browser, text: &str) -> Value {
    browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               import("/ui/dom.js").then((m) => {
                 const box = document.createElement("div");
                 box.append(m.richText(arguments[0]));
                 done({
                   text: box.textContent,
                   nodes: [...box.childNodes].map((n) => [n.nodeName, n.textContent]),
                   links: [...box.querySelectorAll("a")].map((a) => a.getAttribute("href")),
                   lang: [...box.querySelectorAll("pre")].map((p) => p.dataset.lang || ""),
                 });
               }, (e) => done(String(e)));"#,
            json!([text]),
        )
        .await
}

/// A bot's Markdown keeps every character: only a line of ``` opens or
/// closes a block, ``` inside a sentence is inline code or text, and a bare
/// URL keeps its balanced parentheses but not the sentence's.
#[tokio::test]
async fn bot_markdown_keeps_its_text() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open(&browser, &host, "#/bots").await;

    // inline triple backticks are inline code; the rest of the line stays
    let v = rich_text(&browser, "Run ```ls -la``` now please").await;
    assert_eq!(
        v["nodes"],
        json!([
            ["#text", "Run "],
            ["CODE", "ls -la"],
            ["#text", " now please"]
        ]),
        "{v}"
    );
    // a lone ``` in a sentence is text
    let v = rich_text(&browser, "Type ``` then the rest of this line").await;
    assert_eq!(
        v["nodes"],
        json!([["#text", "Type ``` then the rest of this line"]]),
        "{v}"
    );
    let v = rich_text(&browser, "use `x` or ``a`b``").await;
    assert_eq!(
        v["nodes"],
        json!([
            ["#text", "use "],
            ["CODE", "x"],
            ["#text", " or "],
            ["CODE", "a`b"]
        ]),
        "{v}"
    );
    // a fence: a line of ``` and a language word, closed by ``` alone
    let v = rich_text(
        &browser,
        "Here:\n```sh\nls -la\necho ```x``` done\n  ```\nafter",
    )
    .await;
    assert_eq!(
        v["nodes"],
        json!([
            ["#text", "Here:\n"],
            ["PRE", "ls -la\necho ```x``` done"],
            ["#text", "after"]
        ]),
        "{v}"
    );
    assert_eq!(v["lang"], json!(["sh"]), "{v}");
    // a line with more than a word after ``` opens nothing
    let v = rich_text(&browser, "```not a fence\nstill text").await;
    assert_eq!(v["text"], "```not a fence\nstill text", "{v}");
    // an unclosed fence runs to the end
    let v = rich_text(&browser, "a\n```\nb\nc").await;
    assert_eq!(
        v["nodes"],
        json!([["#text", "a\n"], ["PRE", "b\nc"]]),
        "{v}"
    );
    // markup stays text
    let v = rich_text(&browser, "```\n<b>x</b>\n```").await;
    assert_eq!(v["nodes"], json!([["PRE", "<b>x</b>"]]), "{v}");

    // bare URLs: balanced parentheses are part of them, a sentence's
    // closing one and its punctuation are not
    let wiki = "https://en.wikipedia.org/wiki/Rust_(programming_language)";
    let v = rich_text(&browser, &format!("See {wiki}. (see https://x.org/a) ok")).await;
    assert_eq!(v["links"], json!([wiki, "https://x.org/a"]), "{v}");
    assert_eq!(
        v["text"],
        format!("See {wiki}. (see https://x.org/a) ok"),
        "{v}"
    );
    let v = rich_text(
        &browser,
        "[docs](https://x.org/a_(b)), https://x.org/q?a=1;",
    )
    .await;
    assert_eq!(
        v["links"],
        json!(["https://x.org/a_(b)", "https://x.org/q?a=1"]),
        "{v}"
    );
    assert_eq!(v["text"], "docs, https://x.org/q?a=1;", "{v}");

    // and in a reply of the bot, every character of the message arrives
    browser.go(&format!("{}/#/bots/r", host.url)).await;
    browser
        .type_in(
            ".composer textarea",
            &format!("Run ```ls -la``` now please{ENTER}"),
        )
        .await;
    browser
        .wait_text(".log .entry:not(.mine) .bubble .text", "now please")
        .await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('.log .entry:not(.mine) .bubble .text code')].map((c) => c.textContent)",
                json!([])
            )
            .await,
        json!(["ls -la"])
    );
    ui_page::finish(browser, host).await;
}

/// Starts the host of `fleet` on `listen`, so that it can come back on the
/// same address (the page's origin) after a shutdown.
async fn start_on(fleet: TestFleet, listen: &str) -> TestHost {
    let path = fleet.write();
    let host = botfleet::host::start(HostOptions {
        fleet: Some(path),
        data_dir: None,
        listen: Some(listen.to_owned()),
        env: Some(HashMap::new()),
        ..Default::default()
    })
    .await
    .unwrap();
    TestHost {
        url: host.url(),
        host: Some(host),
        fleet,
        http: reqwest::Client::new(),
    }
}

/// A conversation that failed to open while the host was down opens once
/// the page is in touch with the host again. (It kept the error, with no
/// message box, until one navigated away.)
#[tokio::test]
async fn a_view_that_failed_while_the_host_was_down_opens_when_it_is_back() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let host = start_on(fleet_with_r(SCRIPT), &listen).await;
    ui_page::open(&browser, &host, "#/rooms").await;
    browser.find("#conn.live").await;
    browser.wait_text(".list", "No rooms yet.").await;

    let fleet = host.shutdown().await;
    browser.find("#conn:not(.live)").await;
    browser.click("[data-nav=bots]").await;
    browser.click(".list a[href='#/bots/r']").await;
    browser
        .wait_text(".detail [role=alert]", "The host did not answer")
        .await;

    let host = start_on(fleet, &listen).await;
    browser.find("#conn.live").await;
    browser.find(".detail .composer textarea").await;
    assert_eq!(browser.count(".detail [role=alert]").await, 0);
    ui_page::finish(browser, host).await;
}

/// A failed turn's notice points to its Retry button, not to a command or
/// an API route: `botfleet retry …` is only a quieter line under it, for a
/// terminal; and the button retries. (The notice told the person on the
/// page to run `botfleet retry …` or `POST /v1/turns/…/retry`.)
#[tokio::test]
async fn a_failed_turn_notice_points_to_its_retry_button() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    browser
        .type_in(".composer textarea", &format!("please fail{ENTER}"))
        .await;
    browser
        .wait_text(".log .notice.bad .line", "use the Retry button")
        .await;
    let notice = browser
        .js(
            r#"const n = document.querySelector(".log .notice.bad");
               return {
                 line: n.querySelector(".line span").textContent,
                 buttons: [...n.querySelectorAll("button")].map((b) => b.textContent),
                 cli: n.querySelector(".hint.cli code").textContent,
               }"#,
            json!([]),
        )
        .await;
    let line = notice["line"].as_str().unwrap();
    assert!(
        line.contains("the endpoint answered 500")
            && !line.contains("botfleet")
            && !line.contains("/v1/")
            && !line.contains("POST"),
        "{notice}"
    );
    assert_eq!(notice["buttons"], json!(["Retry"]), "{notice}");
    assert!(
        notice["cli"]
            .as_str()
            .unwrap()
            .starts_with("botfleet retry "),
        "{notice}"
    );
    browser.click(".log .notice.bad button").await;
    browser
        .wait_js(
            "a second failure notice",
            "return document.querySelectorAll('.log .notice.bad').length === 2",
            json!([]),
        )
        .await;
    ui_page::finish(browser, host).await;
}

/// The Fleet table keeps its words whole where they are short ("fleet.toml",
/// a header, a count) and fits its panel with a long one-word bot name,
/// which breaks instead. (QA, 2026-12-05: squeezed, it read "fleet.tom /
/// l" and "Queue / d"; kept whole everywhere, the long name pushed the
/// table past its panel.)
#[tokio::test]
async fn the_fleet_table_fits_its_panel_and_keeps_short_words_whole() {
    let long = "quarterlyinfrastructurecostreconciliationandforecasting";
    let fleet = TestFleet::new()
        .script("s", ui_page::SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot(long, "s", &["SendMessage"]);
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    browser.resize(1300, 900).await;
    ui_page::open(&browser, &host, "#/bots").await;
    browser.find(".detail table tbody tr").await;
    let shape = browser
        .js(
            r#"const table = document.querySelector(".detail table");
               const panel = table.closest(".scroll");
               // the line boxes of a cell's text
               const lines = (td) => {
                 const range = document.createRange();
                 range.selectNodeContents(td.querySelector(".nowrap") || td);
                 return [...range.getClientRects()].filter((r) => r.width > 0).length;
               };
               const cells = [...table.querySelectorAll("td")].filter((td) => td.textContent === "fleet.toml");
               return {
                 fits: table.scrollWidth <= panel.clientWidth + 1,
                 config: cells.map(lines),
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(shape["fits"], json!(true), "{shape}");
    assert_eq!(shape["config"], json!([1, 1]), "{shape}");
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}
