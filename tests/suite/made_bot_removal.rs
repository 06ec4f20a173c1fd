//! An owner removes a bot made by CreateAgent (`DELETE /v1/bots/{bot}`,
//! `botfleet bots remove`): it is marked removed at once, as a start marks
//! a bot taken out of fleet.toml, and stays removed after a restart. A bot
//! of fleet.toml is refused, saying to delete its `[[bots]]` table.
//!
//! (Before, a made bot could not be removed at all: no route, no command,
//! and the operations guide covered only fleet.toml's bots.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;
use crate::support::process::check_config;
use crate::support::process::cli;

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
match = "^ask helper"
steps = [
  { tool = "SendToAgent", args = { agent = "helper", text = "are you there?" } },
  { tool = "SendMessage", args = { text = "asked helper" } },
]

[[rule]]
bot = "maker"
match = "^mkworker"
steps = [
  { tool = "CreateAgent", args = { id = "worker", name = "Worker", role = "Delegates.", tools = ["SendMessage", "Task", "StopSubagent"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
bot = "maker"
match = "^mkfinder"
steps = [
  { tool = "CreateAgent", args = { id = "ff", name = "Field Finder", role = "Finds.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
bot = "worker"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "slow job", prompt = "SUBTASK slowjob" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "worker"
match = "^worker\\.sub-"
steps = [
  { tool = "StopSubagent", args = { id = "{{input}}" } },
  { tool = "SendMessage", args = { text = "stopped: {{tool_result}}" } },
]

[[rule]]
match = "SUBTASK slowjob"
steps = [ { delay_ms = 120000, tool = "SendMessage", args = { text = "job done" } } ]

[[rule]]
bot = "helper"
match = "^slow"
steps = [
  { tool = "SendMessage", args = { text = "starting" } },
  { delay_ms = 120000, tool = "SendMessage", args = { text = "much later" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

const MAKER_TOOLS: &[&str] = &[
    "SendMessage",
    "SendToAgent",
    "CreateAgent",
    "Task",
    "StopSubagent",
];

/// A host where alice's `maker` (fleet.toml) made `helper` with
/// CreateAgent; returns it and alice's DM with `helper`, begun with a
/// "hello" it answered.
async fn with_helper() -> (TestHost, String) {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", MAKER_TOOLS)
        .start()
        .await;
    let (_, end) = host.end_turn("maker", "mkagent now").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (status, helper) = host.get("/v1/bots/helper", TOKEN).await;
    assert_eq!(status, 200, "{helper}");
    assert_eq!(helper["origin"], "agent:maker", "{helper:#}");
    let dm = host.dm_after_hello("helper").await;
    assert_eq!(deliveries(&host.entries(&dm).await), vec!["helper here"]);
    (host, dm)
}

/// `DELETE path` as the user of `token`.
async fn delete(host: &TestHost, path: &str, token: &str) -> (u16, Value) {
    host.call(reqwest::Method::DELETE, path, token, None).await
}

/// The record of `id` in `GET /v1/bots`.
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

/// A person's message to `helper` is refused with 409.
async fn message_refused(host: &TestHost) {
    let (status, v) = host.send("helper", "still there?", None).await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["error"]["code"], "conflict", "{v}");
    // so is a key the ledger cannot judge (an old UUIDv7): not `unknown`,
    // whose "send with a new key" is refused the same way (QA, 2026-12-06)
    let old_key = Some("01800000-0000-7000-8000-000000000000");
    let (status, v) = host.send("helper", "still there?", old_key).await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (409, &json!("conflict")),
        "{v}"
    );
    assert!(v["status"].is_null(), "{v}");
    // not "list it in fleet.toml again": no config ever listed it
    let said = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("was removed by its owner") && !said.contains("fleet.toml"),
        "{v}"
    );
    // by its id in another case: named, with its removal (it was a bare
    // "no bot", as for a bot never made)
    let (status, v) = host.send("HELPER", "still there?", None).await;
    assert_eq!(status, 404, "{v}");
    let said = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains(r#"did you mean helper ("Helper"), which its owner removed"#),
        "{v}"
    );
}

#[tokio::test]
async fn an_owner_removes_a_bot_made_by_create_agent_and_it_stays_removed() {
    let (host, dm) = with_helper().await;
    // helper is in the middle of a long turn
    let (status, slow) = host.send("helper", "slow please", Some("slow-key")).await;
    assert_eq!(status, 202, "{slow}");
    host.wait_running("helper").await;

    // another user cannot remove it: the same 404 as for a bot that is not
    let (status, bobs) = delete(&host, "/v1/bots/helper", BOB_TOKEN).await;
    assert_eq!(status, 404, "{bobs}");
    let (_, unknown) = delete(&host, "/v1/bots/helper", BOB_TOKEN).await;
    let (_, looked) = host.get("/v1/bots/helper", BOB_TOKEN).await;
    assert_eq!(bobs, looked);
    assert_eq!(bobs, unknown);
    let (status, none) = delete(&host, "/v1/bots/nobody", TOKEN).await;
    assert_eq!(status, 404, "{none}");
    assert!(listed(&host, "helper").await["removed_at"].is_null());

    // its owner can: the answer is its record, removed
    let (status, removed) = delete(&host, "/v1/bots/helper", TOKEN).await;
    assert_eq!(status, 200, "{removed}");
    assert_eq!(removed["id"], "helper", "{removed:#}");
    assert!(removed["settings"]["removed_at"].is_i64(), "{removed:#}");
    let (_, record) = host.get("/v1/bots/helper", TOKEN).await;
    assert_eq!(record, removed);
    // its running turn was cancelled
    let end = host.wait_turn_end(&dm, slow["seq"].as_i64().unwrap()).await;
    assert_eq!(end["status"], "cancelled", "{end}");

    // it takes no more messages, from a person or from a bot
    message_refused(&host).await;
    // but a retry of one it took is answered as before the removal (it
    // was a 409 "takes no more messages", which a client reads as lost)
    let (status, again) = host.send("helper", "slow please", Some("slow-key")).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["status"], "duplicate", "{again}");
    assert_eq!(again["seq"], slow["seq"], "{again}");
    let (status, other) = host.send("helper", "other text", Some("slow-key")).await;
    assert_eq!(status, 409, "{other}");
    assert_eq!(other["status"], "conflict", "{other}");
    assert_eq!(other["original"]["seq"], slow["seq"], "{other}");
    let (maker_dm, end) = host.end_turn("maker", "ask helper").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&maker_dm).await;
    let refused = entries
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "SendToAgent")
        .unwrap_or_else(|| panic!("no SendToAgent result in {entries:#?}"));
    assert_eq!(refused["is_error"], true, "{refused:#}");
    assert!(
        refused["content"]
            .as_str()
            .unwrap_or_default()
            // said as the API says it (QA: "no longer in the fleet", as
            // of a bot dropped from fleet.toml)
            .contains("agent helper was removed by its owner and takes no more messages"),
        "{refused:#}"
    );
    // the list says so; what it said stays readable
    let listed_helper = listed(&host, "helper").await;
    assert!(listed_helper["removed_at"].is_i64(), "{listed_helper:#}");
    assert_eq!(listed_helper["active"], false, "{listed_helper:#}");
    assert_eq!(
        deliveries(&host.entries(&dm).await),
        vec!["helper here", "starting"]
    );

    // removing it again changes nothing
    let (status, again) = delete(&host, "/v1/bots/helper", TOKEN).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again, removed);

    // a bot of fleet.toml is removed there
    let (status, refused) = delete(&host, "/v1/bots/maker", TOKEN).await;
    assert_eq!(status, 409, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("[[bots]] table") && message.contains("fleet.toml"),
        "{message}"
    );
    assert!(listed(&host, "maker").await["removed_at"].is_null());

    // a restart keeps it removed, its history with it
    let fleet = host.shutdown().await;
    let host = restart(fleet).await;
    let (_, record) = host.get("/v1/bots/helper", TOKEN).await;
    assert_eq!(
        record["settings"]["removed_at"],
        removed["settings"]["removed_at"]
    );
    message_refused(&host).await;
    assert_eq!(
        deliveries(&host.entries(&dm).await),
        vec!["helper here", "starting"]
    );
    host.shutdown().await;
}

#[tokio::test]
async fn botfleet_bots_remove_removes_a_made_bot_and_says_so() {
    let (host, _) = with_helper().await;
    let (code, out, err) = cli(&["bots", "remove", "helper"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("removed helper:"), "{out}");
    assert!(listed(&host, "helper").await["removed_at"].is_i64());
    message_refused(&host).await;
    // again: nothing more to do, and it says so
    let (code, out, err) = cli(&["bots", "remove", "helper"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("already removed"), "{out}");
    // a bot of fleet.toml: the error says what to do
    let (code, out, err) = cli(&["bots", "remove", "maker"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("[[bots]] table"), "{err}");
    // another user's bot is not theirs to remove
    let (code, _, err) = cli(&["bots", "remove", "helper"], &host.url, BOB_TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no bot \"helper\" for you"), "{err}");
    // the list is as it was
    let (code, out, err) = cli(&["bots", "--json"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let mut ids: Vec<&str> = v["bots"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["id"].as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, vec!["helper", "maker"]);
    host.shutdown().await;
}

/// The entry of `id` in `GET /v1/bots?subagents=all`, once `pick` finds
/// what it waits for in it.
async fn wait_listed(host: &TestHost, id: &str, pick: impl Fn(&Value) -> bool) -> Value {
    host.wait_get("/v1/bots?subagents=all", |v| {
        v["bots"]
            .as_array()?
            .iter()
            .find(|b| b["id"] == id && pick(b))
            .cloned()
    })
    .await
}

/// A host where alice's `maker` made `worker` (CreateAgent), which
/// delegated a slow job: it and its subagent's id, the task started.
async fn with_worker_subagent() -> (TestHost, String) {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", MAKER_TOOLS)
        .start()
        .await;
    let (_, end) = host.end_turn("maker", "mkworker now").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (_, end) = host.end_turn("worker", "delegate a job").await;
    assert_eq!(end["status"], "completed", "{end}");
    let sub = host.wait_subagent_of("worker").await;
    (host, sub)
}

#[tokio::test]
async fn a_made_bots_subagents_go_with_it_and_are_not_removed_alone() {
    let (host, sub) = with_worker_subagent().await;
    host.wait_running(&sub).await;

    // a subagent goes with its parent, not alone
    let (status, refused) = delete(&host, &format!("/v1/bots/{sub}"), TOKEN).await;
    assert_eq!(status, 409, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("StopSubagent") && message.contains("worker"),
        "{message}"
    );
    // stopped, it has nothing to stop or cancel, and is not told to (QA)
    let (session, end) = host.end_turn("worker", &sub).await;
    assert_eq!(end["status"], "completed", "{end}");
    let said = deliveries(&host.entries(&session).await);
    assert!(
        said.last()
            .is_some_and(|d| d.starts_with("stopped: ") && !d.contains("error")),
        "the stop ran: {said:?}"
    );
    let (status, refused) = delete(&host, &format!("/v1/bots/{sub}"), TOKEN).await;
    assert_eq!(status, 409, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("that worker stopped: it takes no more work")
            && message.contains("it goes with its parent")
            && !message.contains("StopSubagent")
            && !message.contains("cancel"),
        "{message}"
    );

    // its parent, made by CreateAgent, is removed, and the subagent with it:
    // its running task is cancelled and it takes no more messages
    let (status, removed) = delete(&host, "/v1/bots/worker", TOKEN).await;
    assert_eq!(status, 200, "{removed}");
    // (the cancelled turn is counted from the store at its commit; the live
    // `running_turn` clears when the actor hears its turn ended, a moment
    // later, so the listing is waited on for both)
    let listed_sub = wait_listed(&host, &sub, |b| {
        b["turns"]["cancelled"] == 1 && b["running_turn"].is_null()
    })
    .await;
    assert!(listed_sub["removed_at"].is_i64(), "{listed_sub:#}");
    let (status, v) = host.send(&sub, "still there?", None).await;
    assert_eq!(status, 409, "{v}");
    // which way its parent went (QA: both ways were named)
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("its parent worker was removed by its owner")
            && !message.contains("fleet.toml"),
        "{message}"
    );
    // the maker stays as it was
    assert!(listed(&host, "maker").await["removed_at"].is_null());
    host.shutdown().await;
}

/// A subagent in a room, removed with its parent: the room and a new
/// room's refusal name its parent, not the fleet's config (QA: both said
/// it was "no longer in the fleet's config" and to list it in fleet.toml,
/// where a subagent cannot be).
#[tokio::test]
async fn a_subagent_removed_with_its_parent_is_named_so_in_rooms() {
    let (host, sub) = with_worker_subagent().await;
    let (status, room) = host.create_room(TOKEN, "crew", &["maker", &sub]).await;
    assert_eq!(status, 201, "{room}");
    let (status, removed) = delete(&host, "/v1/bots/worker", TOKEN).await;
    assert_eq!(status, 200, "{removed}");

    let (_, run) = host
        .discuss(TOKEN, "crew", &format!("@{sub} @maker hello"))
        .await;
    let notice = run
        .iter()
        .find(|e| e["code"] == "removed_member")
        .unwrap_or_else(|| panic!("no removed_member notice: {run:#?}"));
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains("whose parent worker is no longer in the fleet") && !text.contains("config"),
        "{text}"
    );
    let (status, v) = host.create_room(TOKEN, "crew2", &["maker", &sub]).await;
    assert_eq!(status, 409, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("whose parent worker is no longer in the fleet")
            && !message.contains("fleet.toml"),
        "{message}"
    );
    host.shutdown().await;
}

/// The fleet file may not take another person's made bot by its id:
/// bob's `[[bots]] id = "helper"` stops the start, naming the bot, its
/// owner and the fix, and alice's helper stays hers (QA, 2026-12-04: the
/// start gave it to bob, with alice's conversation, and alice got 404).
/// Of alice's own, it becomes the fleet file's bot.
#[tokio::test]
async fn the_fleet_file_does_not_take_another_persons_made_bot() {
    let (host, dm) = with_helper().await;
    let fleet = host
        .shutdown()
        .await
        .bot_of("helper", "s", &["SendMessage"], "bob");
    fleet.write();
    // check-config says so first (QA, 2026-12-04: it said ok to this file,
    // and the start then refused it)
    let (code, err) = check_config(&fleet.path().join("fleet.toml")).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("`helper` (owner bob)") && err.contains("alice's bot made by maker"),
        "{err}"
    );
    let refused = botfleet::host::start(botfleet::host::HostOptions {
        fleet: Some(fleet.path().join("fleet.toml")),
        data_dir: None,
        listen: None,
        env: Some(std::collections::HashMap::new()),
        shell_launcher: None,
        clock: None,
    })
    .await;
    let Err(e) = refused else {
        panic!("the start gave alice's made bot to bob");
    };
    let said = format!("{e:#}");
    assert!(
        said.contains("`helper` (owner bob)")
            && said.contains("alice's bot made by maker with CreateAgent")
            && said.contains("another id"),
        "{said}"
    );

    // nor may alice's fleet-file bot answer to the name of her made bot
    // (QA, 2026-12-04: it started, and a room with both was refused later)
    let fleet = fleet
        .without_bot("helper")
        .bot_of("other", "s", &["SendMessage"], "alice");
    let file = fleet.write();
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("name = \"other-name\"", "name = \"HELPER\""),
    )
    .unwrap();
    let (code, err) = check_config(&file).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("`other`")
            && err.contains("alice's bot `helper`")
            && err.contains("another `name`"),
        "{err}"
    );

    // alice's own: the start goes on, and her conversation is still hers
    let fleet = fleet
        .without_bot("other")
        .bot_of("helper", "s", &["SendMessage"], "alice");
    fleet.write();
    let (code, err) = check_config(&fleet.path().join("fleet.toml")).await;
    assert_eq!(code, Some(0), "{err}");
    let host = restart(fleet).await;
    let (status, helper) = host.get("/v1/bots/helper", TOKEN).await;
    assert_eq!(status, 200, "{helper}");
    assert_eq!(helper["origin"], "config", "{helper:#}");
    assert_eq!(deliveries(&host.entries(&dm).await), vec!["helper here"]);
    host.shutdown().await;
}

/// A made bot removed while its subagent works: the subagent's report
/// says its parent was removed and offers no retry, which would be
/// refused. (It said "a person cancelled my turn on it; they can retry
/// it", and that retry answered 409: QA, 2026-12-05.)
#[tokio::test]
async fn a_subagent_removed_with_its_parent_says_so_in_its_report() {
    let (host, sub) = with_worker_subagent().await;
    host.wait_running(&sub).await;
    let (status, removed) = delete(&host, "/v1/bots/worker", TOKEN).await;
    assert_eq!(status, 200, "{removed}");
    let listed_sub = wait_listed(&host, &sub, |b| {
        b["turns"]["cancelled"] == 1 && b["running_turn"].is_null()
    })
    .await;
    assert_eq!(listed_sub["subagent_status"], "failed", "{listed_sub:#}");
    let (code, out, err) =
        crate::support::process::cli(&["transcript", "worker"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("I stopped: worker was removed by its owner, and I went with it; the task cannot be retried")
            && !out.contains("a person cancelled"),
        "{out}"
    );
    // and its own task session says so, without a retry (it showed only
    // the turn's end: QA)
    let (code, out, err) =
        crate::support::process::cli(&["transcript", &sub], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "{sub} stopped: its parent worker was removed by its owner, and it went with it; \
             the task cannot be retried"
        )) && !out.contains("botfleet retry"),
        "{out}"
    );
    host.shutdown().await;
}

/// A made bot its owner removed gave up its display name: in a room where
/// a present member answers to that name now, a mention of it is that
/// member's, and reports no removed member (QA: `@Fourth` for the member
/// named so also said the removed bot once named so takes no turns). Its
/// id is still its own.
#[tokio::test]
async fn a_removed_made_bots_old_name_in_a_room_is_the_present_members() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", MAKER_TOOLS)
        .bot("buddy", "s", &["SendMessage"])
        .start()
        .await;
    let (_, end) = host.end_turn("maker", "mkfinder now").await;
    assert_eq!(end["status"], "completed", "{end}");
    host.create_room(TOKEN, "trio", &["maker", "ff", "buddy"])
        .await;
    let (status, removed) = delete(&host, "/v1/bots/ff", TOKEN).await;
    assert_eq!(status, 200, "{removed}");
    // buddy takes the name it gave up
    let fleet = host.shutdown().await.without_bot("buddy").tables(
        "[[bots]]\nid = \"buddy\"\nname = \"Field Finder\"\nrole = \"Test bot buddy.\"\n\
         owner = \"alice\"\nprovider = \"s\"\ntools = [\"SendMessage\"]\n",
    );
    fleet.write();
    let host = restart(fleet).await;
    let post = async |text: &str, key: &str| {
        let (status, v) = host
            .post_raw(
                "/v1/groups/trio/messages",
                Some(TOKEN),
                Some(key),
                serde_json::json!({ "text": text }).to_string(),
            )
            .await;
        assert_eq!(status, 202, "{v}");
        host.wait_turn_end(v["session"].as_str().unwrap(), v["seq"].as_i64().unwrap())
            .await;
        v
    };
    let v = post("@FieldFinder are you there?", "k1").await;
    assert_eq!(v["addressed"], serde_json::json!(["buddy"]), "{v}");
    assert_eq!(v["removed_mentions"], serde_json::json!([]), "{v}");
    let v = post("@ff are you there?", "k2").await;
    assert_eq!(v["removed_mentions"], serde_json::json!(["ff"]), "{v}");
    host.shutdown().await;
}
