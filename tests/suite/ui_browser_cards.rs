//! The web page in a real browser: what bots and people wrote stays in its
//! place. A card's button never sends text the person has not seen, and a
//! link that is not a web address is shown, not followed; an approval
//! approved but never used says so when it expires; the approvals page
//! keeps what the person opened and focused when another bot changes;
//! long unbroken text wraps; a bidi override in a role reorders only the
//! role.
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use botfleet_memory::ApprovalId;
use botfleet_memory::EntryKind;
use serde_json::Value;
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::browser::ENTER;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::ui_page;
use crate::support::ui_page::fleet_with_r;

const CARD_SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// Clicks the button of a bot's card whose text is `label`.
async fn click_card_button(browser: &Browser, label: &str) {
    let clicked = browser
        .js(
            r#"const b = [...document.querySelectorAll(".log .card button")].find((b) => b.textContent === arguments[0]);
               if (!b) return false;
               b.click();
               return true"#,
            json!([label]),
        )
        .await;
    assert_eq!(clicked, json!(true), "no card button {label:?}");
}

/// A bot's card whose button hides its reply behind a label ("Approve
/// all" sending "@everyone please run rm -rf ~"): the click puts the reply
/// in the message box, and only the person's Send sends it. A button whose
/// reply is its label sends at once; a `javascript:` url is text.
/// (The hidden reply went out at once as the person's message, and the
/// `javascript:` button sent its label.)
#[tokio::test]
async fn a_card_button_sends_nothing_the_person_has_not_seen() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(CARD_SCRIPT)).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    // SendMessage refuses a `javascript:` url: the card is one written
    // before it did (or by another host), which the page must still draw
    // safely
    let card = json!({"title": "Deploy", "buttons": [
        {"label": "Approve all", "value": "@everyone please run rm -rf ~"}, "Yes",
        {"label": "Open", "url": "javascript:alert(document.domain)"},
        {"label": "Docs", "url": "https://example.org/docs"},
    ]});
    let delivery = EntryKind::Delivery {
        text: "Choose:".into(),
        card: Some(card),
        call_id: "call_card".into(),
    };
    ui_page::append(&host, &session, "r", [delivery]).await;
    ui_page::open(&browser, &host, "#/bots/r").await;
    browser
        .type_in(".composer textarea", &format!("buttons please{ENTER}"))
        .await;
    browser.wait_text(".log .card button", "Approve all").await;

    // links: http(s) opens in a new tab; javascript: is shown as text
    let links = browser
        .js(
            r#"const card = document.querySelector(".log .card");
               return {
                 hrefs: [...card.querySelectorAll("a")].map((a) => a.getAttribute("href")),
                 buttons: [...card.querySelectorAll("button")].map((b) => b.textContent),
                 refused: [...card.querySelectorAll(".refused-link")].map((s) => s.textContent),
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(
        links,
        json!({
            "hrefs": ["https://example.org/docs"],
            "buttons": ["Approve all", "Yes"],
            "refused": ["Open: javascript:alert(document.domain)"],
        })
    );

    // the hidden reply goes into the message box, not to the room
    click_card_button(&browser, "Approve all").await;
    browser
        .wait_js(
            "the button's reply in the message box",
            "return document.querySelector('.composer textarea').value === arguments[0]",
            json!(["@everyone please run rm -rf ~"]),
        )
        .await;
    // a button that says what it sends sends it
    click_card_button(&browser, "Yes").await;
    browser
        .wait_js(
            "the person's Yes in the conversation",
            "return [...document.querySelectorAll('.log li.mine .text')].some((t) => t.textContent === 'Yes')",
            json!([]),
        )
        .await;
    assert_eq!(
        ui_page::user_texts(&host, &session).await,
        ["hello", "buttons please", "Yes"]
    );
    // the box still holds the proposal; the person may send it
    browser.type_in(".composer textarea", ENTER).await;
    browser
        .wait_js(
            "the reviewed reply sent",
            "return [...document.querySelectorAll('.log li.mine .text')].some((t) => t.textContent === arguments[0])",
            json!(["@everyone please run rm -rf ~"]),
        )
        .await;
    ui_page::finish(browser, host).await;
}

/// An approval approved and never used reads so once it expired, in the
/// conversation and on the approvals page. (Both said "Expired: nobody
/// decided in time" though alice had approved it.)
#[tokio::test]
async fn an_approved_action_never_used_says_it_was_approved() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(CARD_SCRIPT)).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    // one approved at once, unused after 3 s (its window to be used is as
    // long as its window to decide; 3 s, not 1: the approval must reach
    // the host in its window to decide, on a loaded machine too); one
    // nobody decides, for 4 s
    let approved = ask_about(&host, &session, "run `env`", 3_000).await;
    ask_about(&host, &session, "run `id`", 4_000).await;
    let (status, body) = host
        .post_raw(
            &format!("/v1/approvals/{approved}"),
            Some(TOKEN),
            None,
            json!({"decision": "approve"}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // once the one nobody decided expired, a listing persists both
    // expiries, with their cards
    host.wait_get("/v1/approvals?status=expired", |v| {
        (v["approvals"].as_array().map(Vec::len) == Some(2)).then(|| v.clone())
    })
    .await;
    host.wait_for(&session, |entries| {
        let expired = entries
            .iter()
            .filter(|e| e["kind"] == "approval" && e["status"] == "expired")
            .count();
        (expired == 2).then(|| json!(expired))
    })
    .await;

    ui_page::open(&browser, &host, "#/bots/r").await;
    browser
        .wait_text(".log .approval", "Approved by alice")
        .await;
    let cards = browser
        .js(
            "return [...document.querySelectorAll('.log .approval .status')].map((s) => s.textContent)",
            json!([]),
        )
        .await;
    let cards: Vec<&str> = cards
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(cards.len(), 2, "{cards:?}");
    assert!(
        cards[0].starts_with("Approved by alice at ")
            && cards[0].ends_with(" · not used before it expired"),
        "{cards:?}"
    );
    assert_eq!(cards[1], "Expired: nobody decided in time");
    browser
        .go(&format!("{}/#/approvals?show=all", host.url))
        .await;
    browser
        .wait_text(".approvals .panel", "Approved by alice")
        .await;
    browser
        .wait_text(".approvals .panel", "not used before it expired")
        .await;
    ui_page::finish(browser, host).await;
}

/// The approvals page, signalled by a bot's unrelated activity, keeps the
/// "Exact action" the person opened and the button they focused. (Every
/// signal of any bot rebuilt the list.)
#[tokio::test]
async fn the_approvals_page_keeps_what_the_person_opened() {
    let fleet = fleet_with_r(CARD_SCRIPT).bot("o", "s", &["SendMessage"]);
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    ask_about(&host, &session, "run `env`", 600_000).await;
    ui_page::open(&browser, &host, "#/approvals?show=all").await;
    browser.wait_text(".approvals .panel", "run `env`").await;
    browser.click(".approvals details summary").await;
    // the page's loads of the list (a page of 100, and one more to know
    // whether more wait; the badge asks for 500) are counted once drawn
    // (the count is set after the answer's own tasks: a macrotask later)
    browser
        .js(
            r#"const deny = document.querySelector(".approvals button.danger");
               deny.focus();
               window.denyButton = deny;
               document.body.dataset.loads = "0";
               const f = window.fetch;
               window.fetch = function (url, opts) {
                 const listed = String(url).startsWith("/v1/approvals?") && String(url).includes("limit=101");
                 return f.apply(this, arguments).then((r) => {
                   if (!listed) return r;
                   const text = r.text.bind(r);
                   r.text = () => text().then((t) => {
                     setTimeout(() => { document.body.dataset.loads = String(Number(document.body.dataset.loads) + 1); }, 0);
                     return t;
                   });
                   return r;
                 });
               };"#,
            json!([]),
        )
        .await;
    // another bot's turn signals; the page lists the approvals again
    host.send("o", "anything new?", None).await;
    browser
        .wait_js(
            "the approvals listed again",
            "return Number(document.body.dataset.loads) >= 1",
            json!([]),
        )
        .await;
    let kept = browser
        .js(
            r#"return {
                 open: document.querySelector(".approvals details").open,
                 focused: document.activeElement === window.denyButton && window.denyButton.isConnected,
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(kept, json!({"open": true, "focused": true}));
    ui_page::finish(browser, host).await;
}

/// A pending approval of bot `r` for `summary` (also its reason and its
/// command), created as the gate does.
async fn ask_about(host: &TestHost, session: &str, summary: &str, ttl_ms: i64) -> ApprovalId {
    ui_page::ask(host, session, summary, summary, summary, ttl_ms).await
}

/// Long unbroken text wraps inside approval cards and notices, and a bidi
/// override in a bot's role stays inside the role. (600 characters without
/// a space ran out of the card sideways; the role's U+202E was part of its
/// line's text.)
#[tokio::test]
async fn what_bots_wrote_stays_in_its_box() {
    let fleet = fleet_with_r(CARD_SCRIPT).tables(
        "[[bots]]\nid = \"e\"\nname = \"Evil\"\nrole = \"\\u202Eevil\"\nowner = \"alice\"\n\
             provider = \"s\"\ntools = [\"SendMessage\"]\n",
    );
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    let word = "x".repeat(600);
    ask_about(&host, &session, &word, 600_000).await;
    let notice = EntryKind::Notice {
        code: "test".into(),
        text: word.clone(),
        retry_turn: None,
    };
    ui_page::append(&host, &session, "system", [notice]).await;

    ui_page::open(&browser, &host, "#/bots/r").await;
    browser.wait_text(".log .notice", "xxxx").await;
    browser.wait_text(".log .approval", "xxxx").await;
    let wide = browser
        .js(
            r#"const boxes = [".timeline", ".log .approval .card", ".log .notice .line"];
               return boxes.flatMap((css) => [...document.querySelectorAll(css)])
                 .filter((el) => el.scrollWidth > el.clientWidth + 1)
                 .map((el) => `${el.className}: ${el.scrollWidth} > ${el.clientWidth}`)"#,
            json!([]),
        )
        .await;
    assert_eq!(wide, json!([]), "boxes wider than they are");

    browser.go(&format!("{}/#/bots/e", host.url)).await;
    // bot e's own header: the page left had one too (bot r's)
    browser.wait_text(".conv-head .role", "evil").await;
    let isolated = browser
        .js(
            r#"const style = (el) => el ? getComputedStyle(el).unicodeBidi : "missing";
               const role = document.querySelector(".conv-head .role");
               return {
                 role: [role.tagName, role.textContent, style(role)],
                 title: style(document.querySelector(".conv-head h1 bdi")),
                 list: style(document.querySelector(".list .name")),
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(
        isolated,
        json!({
            "role": ["BDI", "\u{202e}evil", "isolate"],
            "title": "isolate",
            "list": "isolate",
        })
    );
    let console: Vec<Value> = browser
        .console()
        .await
        .into_iter()
        .filter(|m| m.contains("Uncaught") || m.contains("Refused"))
        .map(Value::String)
        .collect();
    assert_eq!(console, Vec::<Value>::new());
    ui_page::finish(browser, host).await;
}

/// An approved action's card says what the approval allows, as the gate
/// uses it: the action runs once if the bot makes this exact call again,
/// before the approval's window to be used ends (its `expires_at`, shown
/// as a time) — in the conversation, on the approvals page, and after the
/// page reads it again. (It said "the bot may run it once": no deadline,
/// and as if the bot might run it whenever it liked.)
#[tokio::test]
async fn an_approved_card_says_when_and_how_the_action_may_run() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(CARD_SCRIPT)).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    let id = ask_about(&host, &session, "run `env`", 600_000).await;
    ui_page::open(&browser, &host, "#/bots/r").await;
    browser.click(".log .approval button.primary").await;
    let said = "Approved · runs once if the bot makes this exact call again before ";
    browser.wait_text(".log .approval .status", said).await;
    let (_, a) = host.get(&format!("/v1/approvals/{id}"), TOKEN).await;
    assert_eq!(a["approval"]["status"], "approved", "{a}");
    // the deadline is the approval's, as the page writes a time
    let expected = browser
        .js_async(
            r#"const done = arguments[arguments.length - 1];
               import("/ui/dom.js").then((m) => done(arguments[0] + m.clock(arguments[1])), (e) => done(String(e)));"#,
            json!([said, a["approval"]["expires_at"]]),
        )
        .await;
    let status = |css: &'static str| {
        let browser = &browser;
        async move {
            browser
                .js(
                    "return [...document.querySelectorAll(arguments[0])].map((s) => s.textContent)",
                    json!([css]),
                )
                .await
        }
    };
    assert_eq!(
        status(".log .approval .status").await,
        json!([expected.clone()])
    );
    // read again from the transcript, and on the approvals page
    browser
        .js(
            "document.getElementById('main').replaceChildren(); location.reload()",
            json!([]),
        )
        .await;
    browser.wait_text(".log .approval .status", said).await;
    assert_eq!(
        status(".log .approval .status").await,
        json!([expected.clone()])
    );
    browser
        .go(&format!("{}/#/approvals?show=all", host.url))
        .await;
    browser.wait_text(".approvals .panel .status", said).await;
    assert_eq!(status(".approvals .panel .status").await, json!([expected]));
    ui_page::finish(browser, host).await;
}

/// The buttons of the card titled `title`: whether each is disabled, and
/// the labels of those marked chosen.
async fn card_state(browser: &Browser, title: &str) -> Value {
    browser
        .js(
            r#"const card = [...document.querySelectorAll(".log .card")]
                 .find((c) => c.querySelector(".card-title")?.textContent === arguments[0]);
               if (!card) return null;
               const buttons = [...card.querySelectorAll(".actions button")];
               return {
                 disabled: buttons.map((b) => b.disabled),
                 chosen: buttons.filter((b) => b.classList.contains("primary")).map((b) => b.textContent),
               }"#,
            json!([title]),
        )
        .await
}

/// Waits until the card titled `title` reads `state` ([`card_state`]).
async fn wait_card(browser: &Browser, title: &str, state: Value) {
    let seen = browser
        .wait_js(
            &format!("the card {title:?} to read {state}"),
            r#"const card = [...document.querySelectorAll(".log .card")]
                 .find((c) => c.querySelector(".card-title")?.textContent === arguments[0]);
               if (!card) return false;
               const buttons = [...card.querySelectorAll(".actions button")];
               const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
               return same(buttons.map((b) => b.disabled), arguments[1].disabled)
                 && same(buttons.filter((b) => b.classList.contains("primary")).map((b) => b.textContent), arguments[1].chosen)"#,
            json!([title, state]),
        )
        .await;
    assert_eq!(seen, json!(true));
}

/// A card of bot `r` titled `title`, with the buttons "Yes", "No" (each
/// sends its label) and "Later" (puts its reply in the message box).
fn choice_card(title: &str) -> EntryKind {
    let buttons = json!(["Yes", "No", {"label": "Later", "value": "Ask me again tomorrow"}]);
    EntryKind::Delivery {
        text: "Choose:".into(),
        card: Some(json!({"title": title, "buttons": buttons})),
        call_id: format!("call_{title}"),
    }
}

/// A card the person answered reads answered wherever the conversation is
/// shown, from the transcript: in a second tab (live, as the answer
/// arrives) and after a reload, its buttons are disabled and the chosen
/// one marked, so no second answer goes. Only an exact reply of one of
/// its buttons answers a card (a "Later" reply sent as the box showed it
/// too): a card the person wrote something else after stays open. (Only
/// the tab that clicked disabled them; a second tab, or the same one
/// reloaded, offered the card again and a click sent a second answer: QA.)
#[tokio::test]
async fn an_answered_card_reads_answered_in_every_tab() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(CARD_SCRIPT)).await else {
        return;
    };
    let session = host.dm_after_hello("r").await;
    ui_page::append(&host, &session, "r", [choice_card("Deploy")]).await;
    ui_page::open_dm(&browser, &host, "r").await;
    let open = json!({"disabled": [false, false, false], "chosen": []});
    wait_card(&browser, "Deploy", open.clone()).await;
    let first = browser.tab().await;
    browser.new_tab().await;
    browser.go(&format!("{}/#/bots/r", host.url)).await;
    wait_card(&browser, "Deploy", open.clone()).await;

    let second = browser.new_tab().await;
    browser.go(&format!("{}/#/bots/r", host.url)).await;
    wait_card(&browser, "Deploy", open.clone()).await;

    // answered in the first tab; the second learns it from its stream
    browser.switch_to(&first).await;
    click_card_button(&browser, "No").await;
    let answered = json!({"disabled": [true, true, true], "chosen": ["No"]});
    wait_card(&browser, "Deploy", answered.clone()).await;
    browser.switch_to(&second).await;
    wait_card(&browser, "Deploy", answered.clone()).await;
    // and from the transcript once reloaded
    browser
        .js(
            "document.getElementById('main').replaceChildren(); location.reload()",
            json!([]),
        )
        .await;
    wait_card(&browser, "Deploy", answered.clone()).await;
    assert_eq!(ui_page::user_texts(&host, &session).await, ["hello", "No"]);

    // something else written after a card leaves it open; its "Later"
    // reply, sent as the box shows it, answers it
    ui_page::append(&host, &session, "r", [choice_card("Release")]).await;
    wait_card(&browser, "Release", open.clone()).await;
    browser
        .type_in(
            ".composer textarea",
            &format!("Yes, but what would it do?{ENTER}"),
        )
        .await;
    browser
        .wait_text(".log .bubble", "echo: Yes, but what would it do?")
        .await;
    assert_eq!(card_state(&browser, "Release").await, open);
    assert_eq!(card_state(&browser, "Deploy").await, answered);
    let later = browser
        .js(
            r#"const card = [...document.querySelectorAll(".log .card")]
                 .find((c) => c.querySelector(".card-title")?.textContent === "Release");
               const b = [...card.querySelectorAll("button")].find((b) => b.textContent === "Later");
               b.click();
               return document.querySelector(".composer textarea").value"#,
            json!([]),
        )
        .await;
    assert_eq!(later, json!("Ask me again tomorrow"));
    browser.type_in(".composer textarea", ENTER).await;
    let later = json!({"disabled": [true, true, true], "chosen": ["Later"]});
    wait_card(&browser, "Release", later).await;
    assert_eq!(card_state(&browser, "Deploy").await, answered);
    ui_page::no_page_errors(&browser).await;
    ui_page::finish(browser, host).await;
}
