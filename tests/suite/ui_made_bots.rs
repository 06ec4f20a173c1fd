//! The web page in a real browser: the bot list says where a bot came
//! from (a bot made by CreateAgent: "made by …"; a Task's subagent:
//! "subagent of …", with its status when the host gives it), says how many
//! finished subagents it leaves out and lists them on request, and offers
//! Remove (asked first) on a bot made by CreateAgent only: the bot is
//! removed (`DELETE /v1/bots/{bot}`) and the list shows it removed; a
//! refusal is shown in the host's words and changes nothing.
//!
//! (Before, the page ignored `origin` and `subagents_left_out`: a fleet.toml
//! bot, a made bot and a subagent looked alike, and a made bot could be
//! removed only with the CLI or the API.)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use botfleet_memory::Mutation;
use serde_json::Value;
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::ui_page;

const SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^mkagent"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Helps.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
bot = "maker"
match = "^job"
steps = [
  { tool = "Task", args = { description = "{{input}}", prompt = "SUBTASK quick" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "maker"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]

[[rule]]
match = "SUBTASK quick"
steps = [ { tool = "SendMessage", args = { text = "REPORT done" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// Finished tasks: one more than the list keeps of a parent.
const TASKS: usize = 21;

/// The entry of `id` in the API's `GET /v1/bots`.
async fn listed(host: &TestHost, id: &str) -> Value {
    let (status, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no bot {id} in {list:#}"))
}

/// What the page's list shows of each bot: its origin label (null when
/// none), its state badge, and whether it has a Remove button.
async fn rows(browser: &Browser) -> Value {
    browser
        .js(
            r#"const out = {};
               for (const li of document.querySelectorAll(".list li[data-bot]")) {
                 out[li.dataset.bot] = {
                   from: li.querySelector(".from")?.textContent ?? null,
                   state: li.querySelector(".state")?.textContent ?? null,
                   remove: li.querySelector("button.remove")?.getAttribute("aria-label") ?? null,
                 };
               }
               return out;"#,
            json!([]),
        )
        .await
}

#[tokio::test]
async fn the_bot_list_shows_origins_and_removes_a_made_bot() {
    let fleet = TestFleet::new().script("s", SCRIPT).bot(
        "maker",
        "s",
        &["SendMessage", "CreateAgent", "Task"],
    );
    let Some((browser, host)) = ui_page::start(fleet).await else {
        return;
    };
    let (_, end) = host.end_turn("maker", "mkagent now").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(listed(&host, "helper").await["origin"], "agent:maker");
    for i in 0..TASKS {
        host.send_until_reports("maker", &format!("job {i}"), i + 1)
            .await;
    }
    let (status, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["subagents_left_out"], 1, "{list:#}");
    // the latest subagent, finished
    let sub = list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["origin"] == "subagent:maker")
        .find(|b| b["name"].as_str().is_some_and(|n| n.ends_with("job 20")))
        .cloned()
        .unwrap_or_else(|| panic!("no subagent for job 20 in {list:#}"));
    let sub_id = sub["id"].as_str().unwrap().to_owned();
    // its status as the host gives it (`subagent_status`: its report is
    // written with the end of its task), shown in the label
    assert_eq!(sub["subagent_status"], "done", "{sub:#}");
    let sub_from = "subagent of maker-name · done";

    ui_page::open(&browser, &host, "#/bots").await;
    browser
        .wait_text(r#".list li[data-bot="helper"] .from"#, "made by maker-name")
        .await;
    let shown = rows(&browser).await;
    assert_eq!(shown["helper"]["from"], "made by maker-name", "{shown:#}");
    assert_eq!(shown["helper"]["remove"], "Remove Helper", "{shown:#}");
    // a bot of fleet.toml has no label and no Remove, nor has a subagent
    assert_eq!(
        shown["maker"]["from"],
        Value::Null,
        "fleet.toml's bot: {shown:#}"
    );
    assert_eq!(shown["maker"]["remove"], Value::Null, "{shown:#}");
    assert_eq!(shown[&sub_id]["from"], json!(sub_from), "{shown:#}");
    assert_eq!(shown[&sub_id]["remove"], Value::Null, "{shown:#}");
    // the fleet's overview says where each came from
    browser.wait_text(".detail table", "fleet.toml").await;
    browser
        .wait_text(".detail table", "made by maker-name")
        .await;

    // the finished subagent left out is counted, and listed on request
    browser
        .wait_text(".list-notes", "1 older finished subagent is not listed.")
        .await;
    assert_eq!(
        browser.count(".list li[data-bot]").await,
        2 + 20,
        "maker, helper and 20 subagents"
    );
    browser.click(".list-notes button").await;
    browser
        .wait_text(".list-notes", "Every finished subagent is listed.")
        .await;
    browser
        .wait_js(
            "every subagent listed",
            "return document.querySelectorAll('.list li[data-bot]').length === arguments[0]",
            json!([2 + TASKS]),
        )
        .await;

    // Remove asks first (the person accepts each time)
    browser
        .js(
            "window.asked = []; window.confirm = (q) => { window.asked.push(q); return true; };",
            json!([]),
        )
        .await;
    // a refusal is shown in the host's words and changes nothing: here the
    // host holds helper for a bot of fleet.toml (its record changed under
    // the page, which still offers Remove). The Remove shown before the
    // change is the one clicked: a list loaded in between (a change signal
    // of the maker's) would take it away before a click could find it
    let held = browser
        .js(
            r#"window.helperRemove = document.querySelector('.list li[data-bot="helper"] button.remove');
               return !!window.helperRemove && !window.helperRemove.disabled;"#,
            json!([]),
        )
        .await;
    assert_eq!(held, json!(true), "helper's Remove offered");
    let store = &host.host.as_ref().unwrap().fleet.runtime().store;
    let made = store
        .get_bot(&"helper".parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let mut as_config = made.clone();
    as_config.origin = "config".into();
    ui_page::write(&host, vec![Mutation::UpsertBot(as_config)]).await;
    browser
        .js("window.helperRemove.click(); return true", json!([]))
        .await;
    browser
        .wait_text("#toasts .toast.error", "[[bots]] table")
        .await;
    // the refused Remove is not left disabled: it is offered again, or,
    // when a change elsewhere (the maker's turns) loaded the list since,
    // helper shows as fleet.toml's, which has none
    browser
        .wait_js(
            "helper's Remove offered again, or helper shown as fleet.toml's",
            r#"const li = document.querySelector('.list li[data-bot="helper"]');
               const b = li && li.querySelector('button.remove');
               return li && (b ? !b.disabled : !li.classList.contains('removable'));"#,
            json!([]),
        )
        .await;
    assert_eq!(listed(&host, "helper").await["removed_at"], Value::Null);

    // made by CreateAgent again: Remove removes it. A write to the store
    // sends the page no signal, and a list loaded after the refusal shows
    // helper as fleet.toml's (no Remove): the page loads the list again
    // when the person asks for the recent subagents only
    ui_page::write(&host, vec![Mutation::UpsertBot(made)]).await;
    browser.click(".list-notes button").await;
    browser
        .wait_js(
            "helper's Remove offered after the list loaded again",
            r#"const b = document.querySelector('.list li[data-bot="helper"] button.remove');
               return b && !b.disabled && document.querySelectorAll('.list li[data-bot]').length === arguments[0];"#,
            json!([2 + 20]),
        )
        .await;
    // with helper's conversation open (its message box offered)
    browser
        .js("location.hash = '#/bots/helper'; return true", json!([]))
        .await;
    browser
        .wait_js(
            "helper's conversation with its box",
            "return document.querySelector('.detail .composer textarea') && document.querySelector('.list li[data-bot=\"helper\"] button.remove')",
            json!([]),
        )
        .await;
    browser
        .click(r#".list li[data-bot="helper"] button.remove"#)
        .await;
    // the box goes: a line says the bot takes no more messages (QA,
    // 2026-12-05: the box stayed, and each message sent there was refused
    // with a Retry that could never work, also after a reload)
    browser
        .wait_text(
            ".detail .room-closed",
            "Helper was removed by its owner and takes no more messages.",
        )
        .await;
    assert_eq!(browser.count(".detail .composer").await, 0);
    host.wait_get("/v1/bots", |v| {
        let helper = v["bots"].as_array()?.iter().find(|b| b["id"] == "helper")?;
        helper["removed_at"].is_i64().then(|| helper.clone())
    })
    .await;
    let asked = browser.js("return window.asked", json!([])).await;
    let asked = asked.as_array().unwrap();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked.iter().all(|q| q
            .as_str()
            .is_some_and(|q| q.starts_with("Remove Helper (helper), made by maker-name?"))),
        "{asked:?}"
    );
    // the list shows it removed, without Remove
    browser
        .wait_js(
            "helper shown removed",
            r#"const li = document.querySelector('.list li[data-bot="helper"]');
               return li && li.querySelector(".state").textContent === "removed" && !li.querySelector("button.remove");"#,
            json!([]),
        )
        .await;
    assert_eq!(listed(&host, "maker").await["removed_at"], Value::Null);
    // opened again (a reload; going to the address shown would only move
    // to its fragment): the line, no box
    browser
        .js(
            "document.getElementById('main').replaceChildren(); location.reload()",
            json!([]),
        )
        .await;
    browser
        .wait_text(".detail .room-closed", "takes no more messages")
        .await;
    assert_eq!(browser.count(".detail .composer").await, 0);
    ui_page::finish(browser, host).await;
}
