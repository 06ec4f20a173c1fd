//! A run of a routine alice made through the API, still going when
//! fleet.toml gives the bot to bob: the restart cuts it off, and the
//! change deletes the routine (its prompt is alice's) and gives its
//! session to bob read from the change on. The run is alice's errand: it
//! must not go on with bob's tools, workspace and secrets. A run of a
//! routine of the file goes on under bob, who reads its runs. After the
//! restart the script answers anything by reading `diary.txt` (bob's, in
//! his workspace) and sending it.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;
use crate::support::fleet::session_of;
use crate::support::process::poll;

/// What bob's diary holds.
const DIARY: &str = "HUNTER2 is bob's pin";

/// Before the restart: the routine's run hangs in its first model call.
const BEFORE: &str = r#"
[[rule]]
bot = "p"
match = "ERRAND"
steps = [ { delay_ms = 600000, tool = "SendMessage", args = { text = "too late" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// After the restart: anything is answered with bob's diary.
const AFTER: &str = r#"
[[rule]]
steps = [ { tool = "Read", args = { path = "diary.txt" } },
          { tool = "SendMessage", args = { text = "ANSWERED {{tool_result}}" } } ]
"#;

const TOOLS: &[&str] = &["SendMessage", "Read"];

const RUNTIME: &str = "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n";

/// A routine of the file, run every second.
const FILE_ROUTINE: &str = "[[bots.routines]]\nname = \"daily\"\ncron = \"* * * * * *\"\ntimezone = \"UTC\"\nprompt = \"ERRAND of the file\"\n";

/// Stops `host` and starts it again with `p` given to bob, holding
/// `tools`, with `lines` at the end of its table; `script`, when given,
/// is the script from then on.
async fn to_bob(host: TestHost, script: Option<&str>, tools: &[&str], lines: &str) -> TestHost {
    let fleet = host.shutdown().await;
    if let Some(script) = script {
        std::fs::write(fleet.path().join("scripts/s.toml"), script).unwrap();
    }
    let fleet = fleet
        .without_bot("p")
        .bot_of("p", "s", tools, "bob")
        .bot_lines(lines)
        .runtime(RUNTIME);
    fleet.write();
    restart(fleet).await
}

/// Stops the host, gives `p` to bob (whose workspace holds his diary)
/// with `lines` at the end of its table, puts the script of after the
/// restart in place, and starts again.
async fn give_p_to_bob(host: TestHost, lines: &str) -> TestHost {
    let bobs = host.fleet.path().join("data/workspace/bob");
    std::fs::create_dir_all(&bobs).unwrap();
    std::fs::write(bobs.join("diary.txt"), DIARY).unwrap();
    to_bob(host, Some(AFTER), TOOLS, lines).await
}

/// Puts `p`'s routine `errand`, run every second with `prompt`, as the
/// user of `token`; with no prompt, deletes it.
async fn errand(host: &TestHost, token: &str, prompt: Option<&str>) {
    let (method, body) = match prompt {
        Some(prompt) => (
            reqwest::Method::PUT,
            Some(json!({ "cron": "* * * * * *", "timezone": "UTC", "prompt": prompt })),
        ),
        None => (reqwest::Method::DELETE, None),
    };
    let (status, v) = host
        .call(method, "/v1/bots/p/routines/errand", token, body)
        .await;
    assert!(status < 300, "{status} {v}");
}

/// `session`'s entries as `client` reads them, once `done` holds of them.
async fn entries_when(
    client: &botfleet::client::Client,
    session: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    poll(30, async || {
        let es: Vec<Value> = client
            .entries_after(session, 0)
            .await
            .map_err(|e| e.to_string())?;
        if done(&es) {
            Ok(es)
        } else {
            Err(format!("{es:#?}"))
        }
    })
    .await
}

/// The first run of routine session `session` has started (and hangs in
/// its model call).
async fn run_started(host: &TestHost, session: &str) {
    entries_when(&host.client(), session, |es| {
        es.iter().any(|e| e["kind"] == "event")
    })
    .await;
    host.wait_running("p").await;
}

/// alice's routine `errand` runs every second; its first run hangs until
/// the restart that gives `p` to bob. Its turn ends `cancelled` with an
/// `owner_changed` notice and no model step, as a turn in alice's DM
/// does; nothing of bob's is read or sent for it.
#[tokio::test]
async fn a_run_of_the_former_owners_api_routine_ends_unanswered() {
    let host = TestFleet::new()
        .script("s", BEFORE)
        .bot("p", "s", TOOLS)
        .runtime(RUNTIME)
        .start()
        .await;
    errand(&host, TOKEN, Some("ERRAND of alice")).await;
    let session = session_of("p", botfleet::memory::SessionKind::Routine, "errand");
    // the run's turn has started (and hangs in its model call)
    run_started(&host, &session).await;

    let host = give_p_to_bob(host, "").await;
    let bob = botfleet::client::Client::new(&host.url, BOB_TOKEN).unwrap();
    // the cut-off run ends unanswered; runs queued behind it too
    let entries = entries_when(&bob, &session, |es| {
        es.iter()
            .any(|e| e["kind"] == "turn_end" && e["status"] == "cancelled")
    })
    .await;
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice")
        .unwrap_or_else(|| panic!("no notice: {entries:#?}"));
    assert_eq!(notice["code"], "owner_changed", "{notice}");
    // bob's own message runs (the bot is his), after whatever the
    // routine's session still had queued
    let (end, dm) = host.end_turn_as("p", BOB_TOKEN, "hello").await;
    assert_eq!(end["status"], "completed", "{dm:#?}");
    let entries = bob.entries_after(&session, 0).await.unwrap();
    assert!(
        !entries.iter().any(|e| e.to_string().contains("HUNTER2")),
        "alice's routine read bob's diary: {entries:#?}"
    );
    assert!(
        !deliveries(&entries)
            .iter()
            .any(|d| d.starts_with("ANSWERED")),
        "{entries:#?}"
    );
    assert!(
        !entries
            .iter()
            .any(|e| matches!(e["kind"].as_str(), Some("assistant" | "tool_result"))),
        "a run of alice's routine stepped under bob: {entries:#?}"
    );
    host.shutdown().await;
}

/// The file's routine `daily`, whose runs bob reads after the change,
/// is cut off by the same restart: its run goes on under bob, who owns
/// the bot and reads that routine's runs (review of an earlier rule: a
/// file routine's work was ended with the API routine's).
#[tokio::test]
async fn a_run_of_the_files_routine_goes_on_under_the_new_owner() {
    let host = TestFleet::new()
        .script("s", BEFORE)
        .bot("p", "s", TOOLS)
        .bot_lines(FILE_ROUTINE)
        .runtime(RUNTIME)
        .start()
        .await;
    let session = session_of("p", botfleet::memory::SessionKind::Routine, "daily");
    run_started(&host, &session).await;

    let host = give_p_to_bob(host, FILE_ROUTINE).await;
    let bob = botfleet::client::Client::new(&host.url, BOB_TOKEN).unwrap();
    // the cut-off run (input 1) completed, its Read answered with bob's
    // diary (what it sent went to bob)
    let entries = entries_when(&bob, &session, |es| {
        es.iter().any(|e| {
            e["kind"] == "turn_end"
                && e["status"] == "completed"
                && e["inputs"]
                    .as_array()
                    .is_some_and(|a| a.contains(&json!(1)))
        }) && es
            .iter()
            .any(|e| e["kind"] == "tool_result" && e["content"] == DIARY)
    })
    .await;
    assert!(
        !entries
            .iter()
            .any(|e| e["kind"] == "notice" && e["code"] == "owner_changed"),
        "{entries:#?}"
    );
    host.shutdown().await;
}

/// A run of `errand` as bob makes it again delegates; its task reports.
const DELEGATING: &str = r#"
[[rule]]
bot = "p"
match = "ERRAND of bob"
steps = [ { tool = "Task", args = { description = "bob's check", prompt = "SUBTASK of bob" } },
          { text = "" } ]

[[rule]]
match = "SUBTASK"
steps = [ { tool = "SendMessage", args = { text = "checked for bob" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// alice's routine `errand` ran; `p` goes to bob, who makes `errand`
/// again (its session, read by him from the change on, is the name's),
/// and its run delegates: the task is bob's and runs (review of 74ca8e7:
/// the rule for inputs of before the change was asked of the session a
/// task came from, with the task's own input seqs, and ended it).
#[tokio::test]
async fn a_task_of_the_new_owners_routine_of_the_same_name_runs() {
    let host = TestFleet::new()
        .script("s", DELEGATING)
        .bot("p", "s", &["SendMessage", "Task", "CheckSubagent"])
        .runtime(RUNTIME)
        .start()
        .await;
    errand(&host, TOKEN, Some("PLAIN of alice")).await;
    let session = session_of("p", botfleet::memory::SessionKind::Routine, "errand");
    // a run of alice's ended (none hangs here: `run_started` waited for a
    // running turn, which a run answered at once may end before a poll
    // sees; flaky, 2026-12-07)
    entries_when(&host.client(), &session, |es| {
        es.iter().any(|e| e["kind"] == "turn_end")
    })
    .await;
    let host = to_bob(host, None, &["SendMessage", "Task", "CheckSubagent"], "").await;
    errand(&host, BOB_TOKEN, Some("ERRAND of bob")).await;
    let bob = botfleet::client::Client::new(&host.url, BOB_TOKEN).unwrap();
    let sub = poll(30, async || {
        let bots = bob.get("/v1/bots").await.map_err(|e| e.to_string())?;
        bots["bots"]
            .as_array()
            .and_then(|a| a.iter().find(|b| b["origin"] == "subagent:p"))
            .and_then(|b| b["id"].as_str().map(str::to_owned))
            .ok_or_else(|| format!("{bots:#}"))
    })
    .await;
    let task = session_of(&sub, botfleet::memory::SessionKind::Subagent, "p");
    let entries = entries_when(&bob, &task, |es| es.iter().any(|e| e["kind"] == "turn_end")).await;
    assert!(
        deliveries(&entries).iter().any(|d| d == "checked for bob")
            && !entries.iter().any(|e| e["code"] == "owner_changed"),
        "bob's routine's task did not run: {entries:#?}"
    );
    host.shutdown().await;
}

/// Before the restart: the file's routine's run hangs, so alice's
/// routine's runs queue behind it.
const BUSY_BEFORE: &str = r#"
[[rule]]
bot = "p"
match = "DAILY"
steps = [ { delay_ms = 600000, text = "daily too late" } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// After the restart: the file's routine's run, cut off, takes 3 s more
/// (bob's run of `errand` queues meanwhile); bob's run is answered.
const BUSY_AFTER: &str = r#"
[[rule]]
bot = "p"
match = "DAILY"
steps = [ { delay_ms = 3000, text = "daily done" } ]

[[rule]]
bot = "p"
match = "ERRAND of bob"
steps = [ { text = "BOB-ERRAND-ANSWERED" } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// The file's routine `daily`: every second before the change, never
/// again after it.
fn daily(cron: &str) -> String {
    format!(
        "[[bots.routines]]\nname = \"daily\"\ncron = \"{cron}\"\ntimezone = \"UTC\"\nprompt = \"DAILY file routine\"\n"
    )
}

/// alice's routine `errand` has runs queued when the restart gives `p`
/// to bob, who makes `errand` again at once; his first run queues
/// behind hers while `p` finishes a run the restart cut off. Hers end
/// `owner_changed` in a turn of their own; his are answered (review: the
/// queue took them into one turn, which ended `owner_changed` whole).
#[tokio::test]
async fn the_new_owners_runs_queued_behind_the_former_owners_are_answered() {
    let host = TestFleet::new()
        .script("s", BUSY_BEFORE)
        .bot("p", "s", TOOLS)
        .bot_lines(&daily("* * * * * *"))
        .runtime(RUNTIME)
        .start()
        .await;
    errand(&host, TOKEN, Some("ERRAND of alice")).await;
    let session = session_of("p", botfleet::memory::SessionKind::Routine, "errand");
    run_started(&host, &session).await;
    errand(&host, TOKEN, None).await;

    let host = to_bob(host, Some(BUSY_AFTER), TOOLS, &daily("0 0 0 1 1 *")).await;
    errand(&host, BOB_TOKEN, Some("ERRAND of bob")).await;
    let bob = botfleet::client::Client::new(&host.url, BOB_TOKEN).unwrap();
    let bobs_run = poll(30, async || {
        let es: Vec<Value> = bob
            .entries_after(&session, 0)
            .await
            .map_err(|e| e.to_string())?;
        es.iter()
            .find(|e| {
                e["kind"] == "event" && e["text"].as_str().is_some_and(|t| t.contains("of bob"))
            })
            .and_then(|e| e["seq"].as_i64())
            .ok_or_else(|| format!("{es:#?}"))
    })
    .await;
    errand(&host, BOB_TOKEN, None).await;
    let entries = entries_when(&bob, &session, |es| {
        es.iter().any(|e| {
            e["kind"] == "turn_end"
                && e["inputs"]
                    .as_array()
                    .is_some_and(|a| a.contains(&json!(bobs_run)))
        })
    })
    .await;
    let ends: Vec<&Value> = entries.iter().filter(|e| e["kind"] == "turn_end").collect();
    let his = ends
        .iter()
        .find(|e| {
            e["inputs"]
                .as_array()
                .is_some_and(|a| a.contains(&json!(bobs_run)))
        })
        .unwrap();
    assert_eq!(his["status"], "completed", "{entries:#?}");
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "assistant" && e["text"] == "BOB-ERRAND-ANSWERED"),
        "{entries:#?}"
    );
    // alice's queued runs ended unanswered, in a turn without his
    let hers = ends
        .iter()
        .find(|e| e["status"] == "cancelled")
        .unwrap_or_else(|| panic!("alice's runs did not end: {entries:#?}"));
    assert!(
        hers["inputs"]
            .as_array()
            .is_some_and(|a| a.iter().all(|s| s.as_i64() < Some(bobs_run))),
        "{entries:#?}"
    );
    host.shutdown().await;
}
