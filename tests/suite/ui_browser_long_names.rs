//! The web page in a real browser: a bot with a long name keeps the
//! forms and the bot list in shape. The new-room form keeps each bot's id
//! on one line and its checkbox whole; the search form keeps its query
//! box the widest part, on one line with its button; the bot list cuts
//! the name, says it whole in a tooltip, and keeps the badge beside it.
//! (QA, a bot named "写作助手 Writer with a very long display name…".)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::json;

use crate::support::browser::Browser;
use crate::support::fleet::TestHost;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::fleet_with_r;

/// The long display name of bot `writer`.
const LONG: &str = "写作助手 Writer with a very long display name that should wrap somewhere";

/// The browser, and a host with alice's bots `r` and `writer` (named
/// [`LONG`]), signed in at `hash`.
async fn start_at(hash: &str) -> Option<(Browser, TestHost)> {
    let fleet = fleet_with_r(SCRIPT).tables(&format!(
        "[[bots]]\nid = \"writer\"\nname = \"{LONG}\"\nowner = \"alice\"\n\
         provider = \"s\"\ntools = [\"SendMessage\"]\n"
    ));
    let (browser, host) = ui_page::start(fleet).await?;
    ui_page::open(&browser, &host, hash).await;
    Some((browser, host))
}

/// The new-room form: the long name wraps beside its checkbox, the id
/// stays on one line, and the checkbox is as large as the others. (The id
/// was squeezed into a column a letter or two wide, "w / ri / te / r", and
/// the checkbox shrank.)
#[tokio::test]
async fn the_new_room_form_keeps_a_long_named_bots_id_whole() {
    let Some((browser, host)) = start_at("#/rooms/new").await else {
        return;
    };
    browser.wait_text(".checks label", "writer").await;
    let rows = browser
        .js(
            r#"// the line boxes of an element's text
               const lines = (el) => {
                 const range = document.createRange();
                 range.selectNodeContents(el);
                 const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
                 return tops.size;
               };
               // the height of an element's text (a label is as tall as its
               // row of the grid)
               const text_height = (el) => {
                 const range = document.createRange();
                 range.selectNodeContents(el);
                 return range.getBoundingClientRect().height;
               };
               const row = (id) => {
                 const label = [...document.querySelectorAll(".checks label")].find((l) => l.querySelector("input").value === id);
                 const box = label.querySelector("input").getBoundingClientRect();
                 const shown = [...label.querySelectorAll("span")].find((s) => s.textContent === id);
                 return {
                   box: [Math.round(box.width), Math.round(box.height)],
                   id_lines: shown ? lines(shown) : 0,
                   height: text_height(label),
                   fits: label.scrollWidth <= label.clientWidth + 1,
                 };
               };
               return { r: row("r"), writer: row("writer") }"#,
            json!([]),
        )
        .await;
    let r = &rows["r"];
    let writer = &rows["writer"];
    assert_eq!(r["id_lines"], json!(1), "{rows}");
    assert_eq!(writer["id_lines"], json!(1), "the id on one line: {rows}");
    assert_eq!(writer["box"], r["box"], "checkboxes of one size: {rows}");
    assert!(
        writer["height"].as_f64() > r["height"].as_f64(),
        "the name wraps: {rows}"
    );
    assert_eq!(writer["fits"], json!(true), "{rows}");
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}

/// The search form: the bot select is bounded, the query box is the
/// widest part and the Search button stays on its line. (The select
/// took ~600 px for the long name; the button went to a second line.)
#[tokio::test]
async fn the_search_form_keeps_its_query_box_widest() {
    let Some((browser, host)) = start_at("#/search").await else {
        return;
    };
    browser
        .wait_js(
            "the bots in the select",
            "return document.querySelectorAll('#search-bot option').length === 3",
            json!([]),
        )
        .await;
    let form = browser
        .js(
            r##"const rect = (css) => document.querySelector(css).getBoundingClientRect();
               const [q, s, b] = ["#search-q", "#search-bot", ".searchbar button"].map(rect);
               return {
                 query_widest: q.width > s.width && q.width > b.width,
                 one_line: Math.abs(s.top - q.top) < 2 && Math.abs(b.top - q.top) < 2,
               }"##,
            json!([]),
        )
        .await;
    assert_eq!(form, json!({"query_widest": true, "one_line": true}));
    ui_page::finish(browser, host).await;
}

/// The bot list: the long name is cut with its whole in a tooltip, and
/// its badge stays on its line, on the right, as on the other rows. (No
/// tooltip; the badge went under the name.)
#[tokio::test]
async fn the_bot_list_cuts_a_long_name_beside_its_badge() {
    let Some((browser, host)) = start_at("#/bots").await else {
        return;
    };
    browser.find(".list a[href='#/bots/writer'] .state").await;
    let row = browser
        .js(
            r#"const a = document.querySelector(".list a[href='#/bots/writer']");
               const [name, state, head] = [".name", ".state", ".head"].map((css) => a.querySelector(css));
               const [n, s, h] = [name, state, head].map((el) => el.getBoundingClientRect());
               return {
                 title: name.title,
                 cut: name.scrollWidth > name.clientWidth,
                 same_line: s.top < n.bottom && s.bottom > n.top,
                 right: Math.abs(s.right - h.right) < 2,
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(
        row,
        json!({"title": LONG, "cut": true, "same_line": true, "right": true})
    );
    ui_page::finish(browser, host).await;
}
