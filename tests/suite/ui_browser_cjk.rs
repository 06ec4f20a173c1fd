//! The web page in a real browser for a Chinese-speaking team: a room's
//! header and a message's bubble show no stray "null"; the Enter that
//! confirms an input method's candidate (pinyin, kana) does not send, in
//! Chrome's way or Safari's; a bare URL ends at Chinese punctuation and
//! at Chinese text written right after it, while a host or a path written
//! in Chinese stays linked; a room named only in Chinese asks for an
//! ASCII id, saying why.
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::Value;
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::browser::ENTER;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::fleet_with_r;

/// A fleet of alice's bots `b` and `c`.
fn two_bots() -> TestFleet {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("b", "s", &["SendMessage"])
        .bot("c", "s", &["SendMessage"])
}

/// An open room of `b` and `c` that is not shared, named `name`, as `id`.
async fn create_room(host: &TestHost, id: &str, name: &str) {
    let (status, room) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"id": id, "name": name, "members": ["b", "c"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    assert_eq!(room["shared"], json!(false), "{room}");
}

/// An open room that is not shared has no badge: its header and its row in
/// the list read its name, and nothing after it. (Before, both read
/// "每周例会（产品组）🚀null": `replaceChildren(null)` writes "null".)
#[tokio::test]
async fn an_open_rooms_header_reads_its_name_only() {
    let Some((browser, host)) = ui_page::start(two_bots()).await else {
        return;
    };
    let name = "每周例会（产品组）🚀";
    create_room(&host, "weekly", name).await;
    ui_page::open(&browser, &host, "#/rooms/weekly").await;
    browser.wait_text(".conv-head h1", name).await;
    browser
        .wait_text(".list a[href='#/rooms/weekly'] .head", name)
        .await;
    let shown = browser
        .js(
            r#"return {
                 header: document.querySelector(".conv-head h1").textContent,
                 row: document.querySelector(".list a[href='#/rooms/weekly'] .head").textContent,
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(shown, json!({"header": name, "row": name}));
    ui_page::finish(browser, host).await;
}

/// A message refused after a try that may have reached the host (kept in
/// `localStorage` from an earlier load) reads "Not confirmed" with Retry
/// and no Discard, and nothing else. (Before, "null" stood where Discard
/// would be.)
#[tokio::test]
async fn a_not_confirmed_message_shows_no_null_beside_retry() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    browser.go(&format!("{}/", host.url)).await;
    browser.find("#token").await;
    // the record an earlier load of the page kept, tagged as outbox.js
    // tags it (FNV-1a of the token)
    browser
        .js(
            r#"let x = 0x811c9dc5;
               for (let i = 0; i < arguments[0].length; i++) {
                 x ^= arguments[0].charCodeAt(i);
                 x = Math.imul(x, 0x01000193) >>> 0;
               }
               localStorage.setItem("botfleet.outbox", JSON.stringify([{
                 key: "01938a2e-7c3b-7def-8abc-0123456789ab",
                 to: { kind: "bot", id: "r" },
                 text: "会议改到周三下午",
                 reached: true,
                 failed: "The host refused it.",
                 renew: false,
                 tag: x.toString(16),
               }]));"#,
            json!([TOKEN]),
        )
        .await;
    browser.type_in("#token", &format!("{TOKEN}{ENTER}")).await;
    browser.find("#top:not([hidden])").await;
    browser.js("location.hash = '#/bots/r'", json!([])).await;
    browser
        .wait_text(".outbox li.unsent", "Not confirmed")
        .await;
    let bubble = browser
        .js(
            r#"const li = document.querySelector(".outbox li.unsent");
               return {
                 text: li.querySelector(".text").textContent,
                 actions: li.querySelector(".outbox-actions").textContent,
                 buttons: [...li.querySelectorAll("button")].map((b) => b.textContent),
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(
        bubble,
        json!({
            "text": "会议改到周三下午",
            "actions": "The host refused it.Retry",
            "buttons": ["Retry"],
        })
    );
    ui_page::finish(browser, host).await;
}

/// Dispatches, on the DM's message box holding `value`, the events `steps`
/// names, in one task: "chrome" (an Enter keydown with `isComposing`),
/// "safari" (an Enter keydown after `compositionend`: `isComposing` false,
/// `keyCode` 229), "start"/"end" (`compositionstart`/`compositionend`) and
/// "enter" (a plain Enter keydown, `keyCode` 13). Answers the box's value
/// after each keydown.
async fn ime_keys(browser: &Browser, value: &str, steps: &[&str]) -> Value {
    browser
        .js(
            r#"const a = document.querySelector(".composer textarea");
               a.value = arguments[0];
               const enter = (composing, keyCode) => {
                 const e = new KeyboardEvent("keydown", { key: "Enter", isComposing: composing, bubbles: true, cancelable: true });
                 Object.defineProperty(e, "keyCode", { get: () => keyCode });
                 Object.defineProperty(e, "which", { get: () => keyCode });
                 a.dispatchEvent(e);
                 return a.value;
               };
               const out = [];
               for (const step of arguments[1]) {
                 if (step === "chrome") out.push(enter(true, 229));
                 else if (step === "safari") out.push(enter(false, 229));
                 else if (step === "enter") out.push(enter(false, 13));
                 else a.dispatchEvent(new CompositionEvent(step === "start" ? "compositionstart" : "compositionend", { data: "你好", bubbles: true }));
               }
               return out;"#,
            json!([value, steps]),
        )
        .await
}

/// The Enter that confirms an input method's candidate keeps the text in
/// the box: Chrome marks that keydown `isComposing`; Safari sends it after
/// `compositionend`, with `isComposing` false and `keyCode` 229; an Enter
/// in the same task as `compositionend` is that one too, whatever its
/// `keyCode`. The next
/// Enter sends the whole message, once. (Before, Safari's Enter sent the
/// half-typed message.)
#[tokio::test]
async fn the_enter_that_confirms_an_ime_candidate_does_not_send() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    ui_page::open_dm(&browser, &host, "r").await;

    let kept = ime_keys(&browser, "你好", &["chrome"]).await;
    assert_eq!(kept, json!(["你好"]), "Chrome's composing Enter");
    let kept = ime_keys(&browser, "你好", &["safari"]).await;
    assert_eq!(kept, json!(["你好"]), "Safari's Enter after compositionend");
    let kept = ime_keys(&browser, "你好", &["start", "end", "enter"]).await;
    assert_eq!(kept, json!(["你好"]), "an Enter in compositionend's task");

    // a later Enter (after compositionend's task) sends
    let sent = browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               const a = document.querySelector(".composer textarea");
               a.value = "你好世界";
               setTimeout(() => {
                 a.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
                 done(a.value);
               }, 0);"#,
            json!([]),
        )
        .await;
    assert_eq!(sent, json!(""), "the next Enter sends");
    browser
        .wait_text(".log .entry:not(.mine) .bubble .text", "echo: 你好世界")
        .await;
    let mine: Vec<Value> = host
        .entries(&session)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(mine, vec![json!("你好世界")], "one message, whole");
    ui_page::finish(browser, host).await;
}

/// What the page's own richText() makes of `text`: each link's text and
/// href, and the text of it all.
async fn links_in(browser: &Browser, text: &str) -> Value {
    browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               import("/ui/dom.js").then((m) => {
                 const box = document.createElement("div");
                 box.append(m.richText(arguments[0]));
                 done({
                   text: box.textContent,
                   links: [...box.querySelectorAll("a")].map((a) => [a.textContent, a.getAttribute("href")]),
                 });
               }, (e) => done(String(e)));"#,
            json!([text]),
        )
        .await
}

/// A bare URL ends at Chinese punctuation (，。（）「」《》…, U+3000) and at
/// Chinese, Japanese or Korean text written right after its Latin letters
/// or digits: two URLs in one sentence are two links, and no clause is
/// underlined. A host or a path segment written in Chinese (an IDN host,
/// `zh.wikipedia.org/wiki/中国`) is part of the URL, up to the space or
/// the punctuation after it, and the IDN host opens in punycode. (Before,
/// `…/docs，然后回复。文档在` was one link and `…/a/b。谢谢（详见https://…/c）`
/// another.)
#[tokio::test]
async fn a_bare_url_ends_at_chinese_punctuation_and_text() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open(&browser, &host, "#/bots").await;
    browser.find("#top:not([hidden])").await;

    let text = "请看https://example.com/docs，然后回复。文档在 https://example.com/a/b。谢谢（详见https://example.com/c）";
    let v = links_in(&browser, text).await;
    assert_eq!(
        v["links"],
        json!([
            ["https://example.com/docs", "https://example.com/docs"],
            ["https://example.com/a/b", "https://example.com/a/b"],
            ["https://example.com/c", "https://example.com/c"],
        ]),
        "{v}"
    );
    assert_eq!(v["text"], text, "every character kept");

    // more punctuation, an ideographic space, quotes, and text right after
    let v = links_in(
        &browser,
        "「https://a.example/x」《https://b.example/y》、https://c.example/z\u{3000}好 “https://d.example/q?a=1”；https://e.example/docs然后回复 https://f.example/2024年 https://g.example/docsを見て https://h.example/docs를",
    )
    .await;
    let hrefs: Vec<&str> = v["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l[1].as_str())
        .collect();
    assert_eq!(
        hrefs,
        [
            "https://a.example/x",
            "https://b.example/y",
            "https://c.example/z",
            "https://d.example/q?a=1",
            "https://e.example/docs",
            "https://f.example/2024",
            "https://g.example/docs",
            "https://h.example/docs",
        ],
        "{v}"
    );

    // Chinese in the host or in a path segment is the URL's own
    let v = links_in(
        &browser,
        "打开 https://例子.中国/路径/文件?名=值 ，或者https://zh.wikipedia.org/wiki/中国。也看https://zh.wikipedia.org/wiki/Rust_(编程语言)，https://例子.中国。",
    )
    .await;
    assert_eq!(
        v["links"],
        json!([
            [
                "https://例子.中国/路径/文件?名=值",
                "https://xn--fsqu00a.xn--fiqs8s/%E8%B7%AF%E5%BE%84/%E6%96%87%E4%BB%B6?%E5%90%8D=%E5%80%BC"
            ],
            [
                "https://zh.wikipedia.org/wiki/中国",
                "https://zh.wikipedia.org/wiki/%E4%B8%AD%E5%9B%BD"
            ],
            [
                "https://zh.wikipedia.org/wiki/Rust_(编程语言)",
                "https://zh.wikipedia.org/wiki/Rust_(%E7%BC%96%E7%A8%8B%E8%AF%AD%E8%A8%80)"
            ],
            ["https://例子.中国", "https://xn--fsqu00a.xn--fiqs8s/"],
        ]),
        "{v}"
    );
    // the Markdown form takes its address whole, up to its ")"
    let v = links_in(&browser, "[文档](https://example.com/docs文档)。").await;
    assert_eq!(
        v["links"],
        json!([["文档", "https://example.com/docs%E6%96%87%E6%A1%A3"]]),
        "{v}"
    );
    ui_page::finish(browser, host).await;
}

/// "New room" with a name in Chinese and no id says that ids are ASCII
/// and the name has none of those characters, and asks for one; the typed
/// id makes the room. (Before: the name "has no letters or digits".)
#[tokio::test]
async fn a_room_named_in_chinese_asks_for_an_ascii_id() {
    let Some((browser, host)) = ui_page::start(two_bots()).await else {
        return;
    };
    ui_page::open(&browser, &host, "#/rooms/new").await;
    browser.find("#room-name").await;
    browser
        .js(
            "const i = document.getElementById('room-name'); i.value = arguments[0]; i.dispatchEvent(new Event('input', { bubbles: true }));",
            json!(["产品组周会"]),
        )
        .await;
    browser.click("input[type=checkbox][value=b]").await;
    browser.click("input[type=checkbox][value=c]").await;
    browser.click("form button[type=submit]").await;
    browser
        .wait_text(".error-text", "Give the room an Id")
        .await;
    let said = browser
        .js(
            r#"return {
                 error: document.querySelector(".error-text").textContent,
                 placeholder: document.getElementById("room-id").placeholder,
                 hint: document.getElementById("room-id-hint").textContent,
                 focused: document.activeElement.id,
               }"#,
            json!([]),
        )
        .await;
    for key in ["error", "placeholder", "hint"] {
        let text = said[key].as_str().unwrap();
        assert!(text.contains("ASCII"), "{key}: {said}");
        assert!(!text.contains("no letters"), "{key}: {said}");
    }
    assert_eq!(said["focused"], "room-id", "{said}");

    browser.type_in("#room-id", "weekly").await;
    browser.click("form button[type=submit]").await;
    browser.wait_text(".conv-head h1", "产品组周会").await;
    let (status, room) = host.get("/v1/groups/weekly", TOKEN).await;
    assert_eq!(status, 200, "{room}");
    assert_eq!(room["name"], "产品组周会", "{room}");
    ui_page::finish(browser, host).await;
}
