//! The web page in a real browser: sending a message when the answer does
//! not come, and addresses that name nothing. A message whose answer was
//! lost is "not confirmed", never "not sent" beside its own delivered
//! entry, and is sent again by itself with the same key; a link past the
//! end of a conversation shows its newest page; an address with a `..`
//! shows "No such page" rather than asking another route; the header
//! reads "working" while the bot works on a first message.
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use crate::support::browser::Browser;
use crate::support::browser::ENTER;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::fleet_with_r;

/// Records, from now on, whether the outbox ever showed a bubble marked
/// not sent (`.unsent`) or a "Discard" button, in `window.seen`.
const WATCH_OUTBOX: &str = r#"
    window.seen = { unsent: false, discard: false };
    const look = () => {
      if (document.querySelector(".outbox li.unsent")) window.seen.unsent = true;
      if ([...document.querySelectorAll(".outbox button")].some((b) => b.textContent === "Discard")) window.seen.discard = true;
    };
    new MutationObserver(look).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
"#;

/// The user messages of `session` whose text is `text`.
async fn stored(host: &TestHost, session: &str, text: &str) -> usize {
    host.entries(session)
        .await
        .iter()
        .filter(|e| e["kind"] == "user_message" && e["text"] == text)
        .count()
}

/// The browser, and a host with the echo bot `r` whose DM is open in it,
/// live; the DM's session. `None` when the browser is not installed.
async fn live_dm() -> Option<(Browser, TestHost, String)> {
    let (browser, host) = ui_page::start(fleet_with_r(SCRIPT)).await?;
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    Some((browser, host, session))
}

/// Waits until the outbox holds no bubble.
async fn outbox_empty(browser: &Browser) {
    browser
        .wait_js(
            "no bubble left in the outbox",
            "return document.querySelectorAll('.outbox li').length === 0",
            json!([]),
        )
        .await;
}

/// The host stores the message but its answer is lost (the connection
/// fails after the request went out): the page shows the message once,
/// delivered, with the reply, and no bubble saying it was not sent nor
/// offering to discard it. (A red "Not sent … [Retry] [Discard]" bubble
/// stayed under the delivered message and its reply.)
#[tokio::test]
async fn a_message_whose_answer_was_lost_is_not_shown_as_not_sent() {
    let Some((browser, host, session)) = live_dm().await else {
        return;
    };
    let lose_answer = r#"
        window.drops = 1;
        const f = window.fetch;
        window.fetch = async function (url, opts) {
          const answer = await f.apply(this, arguments);
          if (opts && opts.method === "POST" && String(url).includes("/messages") && window.drops > 0) {
            window.drops--;
            throw new TypeError("Failed to fetch");
          }
          return answer;
        };"#;
    browser
        .js(&format!("{WATCH_OUTBOX}{lose_answer}"), json!([]))
        .await;
    browser
        .type_in(".composer textarea", &format!("lost answer{ENTER}"))
        .await;
    browser.wait_text(".log", "echo: lost answer").await;
    outbox_empty(&browser).await;
    let shown = browser
        .js(
            r#"return {
                 seen: window.seen,
                 drops: window.drops,
                 mine: [...document.querySelectorAll(".log li.mine .text")].map((t) => t.textContent),
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(
        shown,
        json!({"seen": {"unsent": false, "discard": false}, "drops": 0, "mine": ["lost answer"]})
    );
    assert_eq!(stored(&host, &session, "lost answer").await, 1);
    ui_page::finish(browser, host).await;
}

/// The host cannot be reached when the message is sent: the bubble says
/// it is not confirmed (the host may have it), offers no "Discard", and
/// once the host answers again the page sends it by itself, with the same
/// key: it arrives once and is answered. (It read "Not sent" and waited
/// for a click on Retry.)
#[tokio::test]
async fn a_message_sent_while_the_host_is_unreachable_goes_when_it_is_back() {
    let Some((browser, host, session)) = live_dm().await else {
        return;
    };
    // every request fails as if the host were gone (the change stream,
    // already open, stays)
    browser
        .js(&format!("{WATCH_OUTBOX}{MESSAGES_LOST}"), json!([true]))
        .await;
    browser
        .type_in(".composer textarea", &format!("while away{ENTER}"))
        .await;
    browser
        .wait_text(".outbox li.unconfirmed", "Not confirmed yet")
        .await;
    assert_eq!(stored(&host, &session, "while away").await, 0);

    browser.js("window.down = false", json!([])).await;
    browser.wait_text(".log", "echo: while away").await;
    outbox_empty(&browser).await;
    let shown = browser
        .js(
            "return { seen: window.seen, keys: new Set(window.keys).size, tries: window.keys.length > 1 }",
            json!([]),
        )
        .await;
    assert_eq!(
        shown,
        json!({"seen": {"unsent": false, "discard": false}, "keys": 1, "tries": true})
    );
    assert_eq!(stored(&host, &session, "while away").await, 1);
    ui_page::finish(browser, host).await;
}

/// A message "not confirmed" (its answer lost) that the host then refuses
/// outright: its bot was removed meanwhile, so the key was never stored
/// (a stored one would be answered `duplicate`). It is not sent, and the
/// bubble offers Edit and Discard. (It stayed "Not confirmed" with only
/// Retry, after a reload too: QA.)
#[tokio::test]
async fn a_message_not_confirmed_then_refused_offers_edit_and_discard() {
    let script = r#"
[[rule]]
bot = "r"
match = "^mkagent"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "made" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;
    let fleet = crate::support::fleet::TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "CreateAgent"]);
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let (_, end) = host.end_turn("r", "mkagent now").await;
    assert_eq!(end["status"], "completed", "{end}");
    ui_page::open_dm(&browser, &host, "helper").await;
    browser.find("#conn.live").await;
    browser
        .js(&format!("{WATCH_OUTBOX}{MESSAGES_LOST}"), json!([false]))
        .await;
    browser
        .type_in(".composer textarea", &format!("are you there{ENTER}"))
        .await;
    browser
        .wait_text(".outbox li.unconfirmed", "Not confirmed yet")
        .await;
    let (status, removed) = host
        .call(reqwest::Method::DELETE, "/v1/bots/helper", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{removed}");
    browser.js("window.down = false", json!([])).await;
    browser.wait_text(".outbox li.unsent", "Not sent").await;
    let buttons = browser
        .js(
            "return [...document.querySelectorAll('.outbox li button')].map((b) => b.textContent)",
            json!([]),
        )
        .await;
    let buttons: Vec<&str> = buttons
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        buttons.contains(&"Edit") && buttons.contains(&"Discard"),
        "{buttons:?}"
    );
    ui_page::finish(browser, host).await;
}

/// A link to an entry past the end of the conversation (`?seq=99999`)
/// shows the newest page and says there is no such message. (It showed
/// "Show earlier messages" above "No messages yet", and no way to the
/// newest.)
#[tokio::test]
async fn a_link_past_the_end_shows_the_newest_messages() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    host.dm_after_hello("r").await;
    ui_page::open(&browser, &host, "#/bots/r?seq=99999").await;
    browser.wait_text(".log", "echo: hello").await;
    browser.wait_text(".toast", "no message #99999").await;
    let shown = browser
        .js(
            r#"const t = document.querySelector(".timeline");
               return {
                 earlier: !t.querySelector(".earlier").hidden,
                 empty: !t.querySelector(".empty").hidden,
                 newer: !t.querySelector(".later").hidden,
                 first: Number(t.querySelector(".log li").dataset.seq),
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(
        shown,
        json!({"earlier": false, "empty": false, "newer": false, "first": 1})
    );
    ui_page::finish(browser, host).await;
}

/// An address whose id is `..` (or `.`) says "No such page" and asks the
/// host nothing in its name: fetch would resolve the segment away
/// (`/v1/bots/../session` is `/v1/session`). (The page asked
/// `/v1/session` and showed the host's "no such route".)
#[tokio::test]
async fn an_address_with_dot_segments_is_no_such_page() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    browser
        .js(
            r#"window.asked = [];
               const f = window.fetch;
               window.fetch = function (url) {
                 window.asked.push(new URL(String(url), location.href).pathname);
                 return f.apply(this, arguments);
               };"#,
            json!([]),
        )
        .await;
    for hash in [
        "#/bots/..",
        "#/bots/../secrets",
        "#/rooms/.",
        "#/sessions/..",
    ] {
        // the page before is dropped, so its answer cannot pass for this one's
        browser
            .js(
                "document.getElementById('main').replaceChildren(); location.hash = arguments[0]",
                json!([hash]),
            )
            .await;
        browser.wait_text("main [role=alert]", "No such page").await;
    }
    let asked = browser.js("return window.asked", json!([])).await;
    let stray: Vec<&Value> = asked
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            let p = p.as_str().unwrap_or_default();
            !["/v1/bots", "/v1/groups", "/v1/approvals", "/v1/events"].contains(&p)
        })
        .collect();
    assert!(stray.is_empty(), "asked {asked}");
    ui_page::finish(browser, host).await;
}

/// A model that answers a message only once `gate` opens ("thinking",
/// and SendMessage "slow: take your time"), and a tool's result with a
/// plain stop.
fn held_model(request: &Value, gate: &watch::Receiver<bool>) -> Reply {
    if last_message(request).is_some_and(|m| m["role"] == "tool") {
        return Reply::text("");
    }
    let args = json!({"text": "slow: take your time"}).to_string();
    Reply::tool_call("call_1", "SendMessage", args)
        .with_text("thinking")
        .hold_until(gate.clone())
}

/// While a bot works on the first message sent to it, its header and its
/// row in the list read "working", as the conversation does. (A tester
/// saw "asleep" until the reply on a busy host, whose bot list left out
/// bots that were slow to answer; this host is not busy, so this guards
/// the page's side: the bots are read again after a message is accepted.)
/// The model answers once the page said so: on a slow machine the turn
/// cannot end first (it took 3 s, and a slow page missed it).
#[tokio::test]
async fn a_bot_working_on_a_first_message_reads_working() {
    let (open, gate) = watch::channel(false);
    let model = move |body: &Value| held_model(body, &gate);
    let Some((browser, host, server)) = ui_page::start_with_model(model).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    browser.find("#conn.live").await;
    browser.wait_text(".conv-head h1 .state", "asleep").await;
    browser
        .type_in(".composer textarea", &format!("take your time{ENTER}"))
        .await;
    browser
        .wait_text(".timeline .working", "working on it")
        .await;
    browser
        .wait_js(
            "the header and the list reading working",
            r#"const head = document.querySelector(".conv-head h1 .state");
               const row = document.querySelector(".list a[href='#/bots/r'] .state");
               const working = document.querySelector(".timeline .working");
               return !working.hidden && head.textContent === "working" && row.textContent === "working""#,
            json!([]),
        )
        .await;
    open.send_replace(true);
    browser.wait_text(".log", "slow: take your time").await;
    ui_page::finish(browser, host).await;
    server.shutdown().await;
}

/// While `window.down` is true, each message sent fails as if the
/// connection dropped, and so does every other request when the script's
/// argument is true (the host is gone); when it is false they go through
/// (the views still open). The key of each message is recorded in
/// `window.keys`.
const MESSAGES_LOST: &str = r#"
    const everything = arguments[0];
    window.down = true;
    window.keys = [];
    const f = window.fetch;
    window.fetch = function (url, opts) {
      const message = opts && opts.method === "POST" && String(url).includes("/messages");
      if (message) window.keys.push(opts.headers["Idempotency-Key"]);
      if (window.down && (message || everything)) return Promise.reject(new TypeError("Failed to fetch"));
      return f.apply(this, arguments);
    };"#;

/// Goes to `hash` in the page (the same document: what a click on a link
/// does) and waits until no conversation is shown, or one is.
async fn go_to(browser: &Browser, hash: &str, conversation: bool) {
    browser
        .js("location.hash = arguments[0]", json!([hash]))
        .await;
    browser
        .wait_js(
            "the view of the address",
            "return (document.querySelector('.timeline') !== null) === arguments[0] && document.querySelector('.list a') !== null",
            json!([conversation]),
        )
        .await;
}

/// Waits until the host stored the echo bot's answer to `text`.
async fn answered(host: &TestHost, session: &str, text: &str) {
    let reply = format!("echo: {text}");
    host.wait_for(session, |entries| {
        entries
            .iter()
            .find(|e| e["kind"] == "delivery" && e["text"] == reply.as_str())
            .cloned()
    })
    .await;
}

/// A message not confirmed when the person leaves its conversation is
/// still sent again, with its key, until the host takes it; coming back
/// shows where it stands: "Not confirmed yet" while the host is away, then
/// the message once, answered. (The resends stopped with the view: the
/// message never reached the host, and the conversation no longer showed
/// it at all.)
#[tokio::test]
async fn a_message_left_unconfirmed_is_sent_after_leaving_its_conversation() {
    let Some((browser, host, session)) = live_dm().await else {
        return;
    };
    browser
        .js(&format!("{WATCH_OUTBOX}{MESSAGES_LOST}"), json!([false]))
        .await;
    browser
        .type_in(".composer textarea", &format!("while elsewhere{ENTER}"))
        .await;
    browser
        .wait_text(".outbox li.unconfirmed", "Not confirmed yet")
        .await;
    go_to(&browser, "#/bots", false).await;
    go_to(&browser, "#/bots/r", true).await;
    browser
        .wait_text(".outbox li.unconfirmed", "while elsewhere")
        .await;

    // away from the conversation when the host answers again
    go_to(&browser, "#/bots", false).await;
    browser.js("window.down = false", json!([])).await;
    answered(&host, &session, "while elsewhere").await;
    go_to(&browser, "#/bots/r", true).await;
    browser.wait_text(".log", "echo: while elsewhere").await;
    outbox_empty(&browser).await;
    let shown = browser
        .js(
            r#"return {
                 seen: window.seen,
                 keys: new Set(window.keys).size,
                 tries: window.keys.length > 1,
                 mine: [...document.querySelectorAll(".log li.mine .text")].map((t) => t.textContent),
               }"#,
            json!([]),
        )
        .await;
    assert_eq!(
        shown,
        json!({"seen": {"unsent": false, "discard": false}, "keys": 1, "tries": true, "mine": ["while elsewhere"]})
    );
    assert_eq!(stored(&host, &session, "while elsewhere").await, 1);
    ui_page::finish(browser, host).await;
}

/// A message not confirmed when the page is reloaded is sent again by the
/// reloaded page, with the same key (the host answers a send of that key
/// `duplicate`), and arrives once; the page then keeps nothing of it.
/// (The reload lost it: the page had shown it as being sent, and it never
/// reached the host.)
#[tokio::test]
async fn a_message_left_unconfirmed_is_sent_after_a_reload() {
    let Some((browser, host, session)) = live_dm().await else {
        return;
    };
    browser.js(MESSAGES_LOST, json!([false])).await;
    browser
        .type_in(".composer textarea", &format!("across a reload{ENTER}"))
        .await;
    browser
        .wait_text(".outbox li.unconfirmed", "Not confirmed yet")
        .await;
    let key = browser.js("return window.keys[0]", json!([])).await;
    let key = key.as_str().unwrap().to_owned();
    assert_eq!(stored(&host, &session, "across a reload").await, 0);

    // the reloaded page has the network back
    browser.js("location.reload()", json!([])).await;
    answered(&host, &session, "across a reload").await;
    browser.wait_text(".log", "echo: across a reload").await;
    outbox_empty(&browser).await;
    browser
        .wait_js(
            "nothing kept in localStorage",
            "return localStorage.getItem('botfleet.outbox') === null",
            json!([]),
        )
        .await;
    let (status, again) = host.send("r", "across a reload", Some(&key)).await;
    assert_eq!(
        (status, &again["status"]),
        (200, &json!("duplicate")),
        "{again}"
    );
    assert_eq!(stored(&host, &session, "across a reload").await, 1);
    ui_page::finish(browser, host).await;
}

/// What was typed and not sent stays in its conversation's box while the
/// page goes to another view and back (QA: it was lost on going to
/// Approvals and back).
#[tokio::test]
async fn an_unsent_draft_stays_with_its_conversation() {
    let Some((browser, host, _)) = live_dm().await else {
        return;
    };
    browser
        .type_in(".composer textarea", "half-written reply")
        .await;
    browser
        .js("location.hash = '#/approvals';", json!([]))
        .await;
    browser
        .wait_js(
            "the approvals view",
            "return !document.querySelector('.composer textarea')",
            json!([]),
        )
        .await;
    browser.js("location.hash = '#/bots/r';", json!([])).await;
    browser
        .wait_js(
            "the draft back in the box",
            "const a = document.querySelector('.composer textarea'); return !!a && a.value === 'half-written reply'",
            json!([]),
        )
        .await;
    ui_page::finish(browser, host).await;
}

/// The draft survives a reload of the tab (QA: it was kept in the page's
/// memory only), is not shown to a tab that holds another account's
/// token, and is gone after sign-out.
#[tokio::test]
async fn an_unsent_draft_survives_a_reload_but_not_another_sign_in() {
    let Some((browser, host, _)) = live_dm().await else {
        return;
    };
    let in_box = "const a = document.querySelector('.composer textarea'); return !!a && a.value === arguments[0]";
    browser
        .type_in(".composer textarea", "half-written reply")
        .await;
    // the page before is dropped: its box holds the text too
    browser
        .js(
            "document.getElementById('main').replaceChildren(); location.reload()",
            json!([]),
        )
        .await;
    browser
        .wait_js(
            "the draft back after the reload",
            in_box,
            json!(["half-written reply"]),
        )
        .await;

    // drafts kept under another account's token are not shown to this one
    let kept = browser
        .js(
            "return sessionStorage.getItem('botfleet.drafts')",
            json!([]),
        )
        .await;
    let kept = kept.as_str().unwrap().to_owned();
    assert!(
        !kept.contains(TOKEN),
        "the token itself is not copied: {kept}"
    );
    browser
        .js(
            "const s = JSON.parse(arguments[0]); s.who = 'f00d'; s.drafts['dm:r'] = 'not yours'; \
             sessionStorage.setItem('botfleet.drafts', JSON.stringify(s)); \
             document.getElementById('main').replaceChildren(); location.reload();",
            json!([kept]),
        )
        .await;
    browser.js("location.hash = '#/bots/r';", json!([])).await;
    browser.find(".composer textarea").await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.composer textarea').value",
                json!([])
            )
            .await,
        json!("")
    );

    // sign-out forgets it
    browser.click("#logout").await;
    browser.find("#token").await;
    assert_eq!(
        browser
            .js(
                "return sessionStorage.getItem('botfleet.drafts')",
                json!([])
            )
            .await,
        Value::Null
    );
    ui_page::finish(browser, host).await;
}

/// A pasted code block keeps its first line's indentation: the page sends
/// it without the blank lines around it but indented as written, and its
/// bubble goes once the host stored it. (The page trimmed it, and so did
/// the host: `    def f():` arrived as `def f():`.)
#[tokio::test]
async fn a_pasted_code_block_keeps_its_indentation() {
    let Some((browser, host, session)) = live_dm().await else {
        return;
    };
    let code = "    def f():\n        return 1";
    browser
        .js(
            "const a = document.querySelector('.composer textarea'); a.value = arguments[0]; a.form.requestSubmit();",
            json!([format!("\n\n{code}\n")]),
        )
        .await;
    answered(&host, &session, code).await;
    assert_eq!(stored(&host, &session, code).await, 1);
    outbox_empty(&browser).await;
    ui_page::finish(browser, host).await;
}

/// A host that takes a message's request and never answers (its process
/// stopped) leaves the message "Not confirmed yet" once the page's wait
/// for the answer is over, and it is sent again, with its key, once the
/// host answers. (It read "Sending…" for good, nothing to do.) The page's
/// 15 s wait is shortened here: `setTimeout` of 15,000 ms runs at 50 ms.
#[tokio::test]
async fn a_message_to_a_host_that_never_answers_is_not_confirmed() {
    let Some((browser, host, session)) = live_dm().await else {
        return;
    };
    let frozen = r#"
        window.frozen = true;
        window.keys = [];
        const wait = window.setTimeout;
        window.setTimeout = (f, ms, ...rest) => wait(f, ms === 15000 ? 50 : ms, ...rest);
        const f = window.fetch;
        window.fetch = function (url, opts) {
          const message = opts && opts.method === "POST" && String(url).includes("/messages");
          if (message) window.keys.push(opts.headers["Idempotency-Key"]);
          if (message && window.frozen) {
            return new Promise((_, reject) => {
              if (opts.signal) opts.signal.addEventListener("abort", () => reject(new DOMException("stopped", "AbortError")));
            });
          }
          return f.apply(this, arguments);
        };"#;
    browser.js(frozen, json!([])).await;
    browser
        .type_in(".composer textarea", &format!("to a frozen host{ENTER}"))
        .await;
    browser
        .wait_text(".outbox li.unconfirmed", "Not confirmed yet")
        .await;
    browser.js("window.frozen = false", json!([])).await;
    browser.wait_text(".log", "echo: to a frozen host").await;
    outbox_empty(&browser).await;
    let keys = browser
        .js("return new Set(window.keys).size", json!([]))
        .await;
    assert_eq!(keys, json!(1));
    assert_eq!(stored(&host, &session, "to a frozen host").await, 1);
    ui_page::finish(browser, host).await;
}
