//! A subagent's messages while it works are progress; the parent is woken
//! once, by its report when its work ends. A stopped subagent takes no
//! more work, and says so.
//!
//! (Before, every SendMessage of a subagent woke the parent and marked the
//! subagent done at once; a message to a stopped subagent was cancelled
//! silently, with a retry that was cancelled again.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

/// The id of `parent`'s subagent, once it exists.
async fn subagent_of(host: &TestHost, parent: &str) -> String {
    let origin = format!("subagent:{parent}");
    host.wait_get("/v1/bots", |v| {
        v["bots"]
            .as_array()?
            .iter()
            .find(|b| b["origin"] == origin.as_str())
            .map(|b| b["id"].clone())
    })
    .await
    .as_str()
    .unwrap()
    .to_owned()
}

/// The session of the subagent's first turn (its task), once stored.
async fn task_session(host: &TestHost, sub: &str) -> String {
    host.wait_get(&format!("/v1/bots/{sub}/turns"), |v| {
        v["turns"]
            .as_array()?
            .iter()
            .find_map(|t| t["session"].as_str().map(|s| json!(s)))
    })
    .await
    .as_str()
    .unwrap()
    .to_owned()
}

fn agent_messages(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["kind"] == "agent_message")
        .map(|e| e["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Waits for `p`'s reply to a message (the last delivery of the turn that
/// answered it).
async fn reply_to(host: &TestHost, text: &str) -> (String, String) {
    let (status, sent) = host.send("p", text, None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    let es = host.entries(&session).await;
    let reply = es
        .iter()
        .filter(|e| e["kind"] == "delivery" && e["turn"] == end["turn"])
        .filter_map(|e| e["text"].as_str())
        .next_back()
        .unwrap_or_default()
        .to_owned();
    (session, reply)
}

// The subagent waits (bounded) for a file the test writes: deterministic,
// and no fixed delay.
const WAIT_FOR_GO: &str =
    "i=0; while [ ! -f go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo waited";

#[tokio::test]
async fn a_subagent_reports_progress_quietly_and_wakes_its_parent_once_at_the_end() {
    let script = format!(
        r#"
[[rule]]
bot = "p"
match = "^research"
steps = [
  {{ tool = "Task", args = {{ description = "twice", prompt = "SUBTASK twice" }} }},
  {{ tool = "SendMessage", args = {{ text = "delegated" }} }},
]

[[rule]]
bot = "p"
match = "^p\\.sub-"
steps = [
  {{ tool = "CheckSubagent", args = {{ id = "{{{{input}}}}" }} }},
  {{ tool = "SendMessage", args = {{ text = "check: {{{{tool_result}}}}" }} }},
]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ {{ tool = "SendMessage", args = {{ text = "got report: {{{{input}}}}" }} }} ]

[[rule]]
match = "SUBTASK twice"
steps = [
  {{ tool = "SendMessage", args = {{ text = "REPORT progress: half done" }} }},
  {{ tool = "Shell", args = {{ command = "{WAIT_FOR_GO}" }} }},
  {{ tool = "SendMessage", args = {{ text = "REPORT final: all done" }} }},
]
"#
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("p", "s", &["SendMessage", "Task", "CheckSubagent", "Shell"])
        .start()
        .await;
    let (session, reply) = reply_to(&host, "research please").await;
    assert_eq!(reply, "delegated");
    let sub = subagent_of(&host, "p").await;
    let sub_session = task_session(&host, &sub).await;
    // the progress is recorded in the subagent's session...
    host.wait_for(&sub_session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d == "REPORT progress: half done")
            .then_some(json!(true))
    })
    .await;
    // ...and, while the subagent still works, the parent sees it as
    // progress of a running task, without having been woken by it
    let (_, check) = reply_to(&host, &sub).await;
    assert!(check.contains(&format!("{sub} [running]")), "{check}");
    assert!(check.contains("REPORT progress: half done"), "{check}");
    let es = host.entries(&session).await;
    assert_eq!(
        agent_messages(&es),
        Vec::<String>::new(),
        "progress does not wake the parent"
    );
    // let the subagent finish: its final message is its report
    std::fs::write(host.fleet.path().join("data/workspace/alice/go"), "go").unwrap();
    host.wait_for(&session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d.starts_with("got report"))
            .then_some(json!(true))
    })
    .await;
    // the subagent's task turn is over: nothing more is on its way
    let sub_end = host
        .wait_for(&sub_session, |es| {
            es.iter().find(|e| e["kind"] == "turn_end").cloned()
        })
        .await;
    assert_eq!(sub_end["status"], "completed", "{sub_end}");
    let es = host.entries(&session).await;
    let reports = agent_messages(&es);
    assert_eq!(reports.len(), 1, "one report wakes the parent: {reports:?}");
    assert!(reports[0].contains("REPORT final: all done"), "{reports:?}");
    assert!(!reports[0].contains("half done"), "{reports:?}");
    // and now the task is done, with its report as the result
    let (_, check) = reply_to(&host, &sub).await;
    assert!(check.contains(&format!("{sub} [done]")), "{check}");
    assert!(check.contains("result: REPORT final: all done"), "{check}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_message_to_a_stopped_subagent_ends_with_a_notice_and_cannot_be_retried() {
    let script = format!(
        r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  {{ tool = "Task", args = {{ description = "wait", prompt = "SUBTASK wait" }} }},
  {{ tool = "SendMessage", args = {{ text = "delegated" }} }},
]

[[rule]]
bot = "p"
match = "^p\\.sub-"
steps = [
  {{ tool = "StopSubagent", args = {{ id = "{{{{input}}}}" }} }},
  {{ tool = "SendMessage", args = {{ text = "stop: {{{{tool_result}}}}" }} }},
]

[[rule]]
match = "SUBTASK wait"
steps = [
  {{ tool = "Shell", args = {{ command = "{WAIT_FOR_GO}" }} }},
  {{ tool = "SendMessage", args = {{ text = "never" }} }},
]

[[rule]]
steps = [ {{ tool = "SendMessage", args = {{ text = "answered anyway" }} }} ]
"#
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("p", "s", &["SendMessage", "Task", "StopSubagent", "Shell"])
        .start()
        .await;
    let (_, reply) = reply_to(&host, "delegate it").await;
    assert_eq!(reply, "delegated");
    let sub = subagent_of(&host, "p").await;
    task_session(&host, &sub).await;
    // a person's message to the subagent, queued while it works; then the
    // parent stops it
    let (status, sent) = host.send(&sub, "hello", None).await;
    assert_eq!(status, 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    let (_, stop) = reply_to(&host, &sub).await;
    assert!(stop.contains(&format!("stopped subagent {sub}")), "{stop}");
    let end = host.wait_turn_end(&dm, sent["seq"].as_i64().unwrap()).await;
    assert_eq!(end["status"], "cancelled", "{end}");
    let es = host.entries(&dm).await;
    let notices: Vec<&Value> = es
        .iter()
        .filter(|e| e["kind"] == "notice" && e["turn"] == end["turn"])
        .collect();
    assert_eq!(notices.len(), 1, "{es:#?}");
    assert_eq!(notices[0]["code"], "subagent_stopped", "{:#}", notices[0]);
    let text = notices[0]["text"].as_str().unwrap();
    assert!(
        text.contains("stopped") && text.contains("no more work"),
        "{text}"
    );
    assert!(!text.contains("retry with"), "{text}");
    assert!(notices[0]["retry_turn"].is_null(), "{:#}", notices[0]);
    assert!(deliveries(&es).is_empty(), "{es:#?}");
    // a retry would be cancelled again: it is refused
    let turn = end["turn"].as_str().unwrap();
    let (status, body) = host
        .post_raw(&format!("/v1/turns/{turn}/retry"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("stopped"),
        "the refusal says why: {body}"
    );

    // once stopped, new work is refused where it is given, not accepted
    // and cancelled: a message, a routine, a room
    let (status, body) = host.send(&sub, "are you there?", None).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("stopped"), "{body}");
    let resp = host
        .http
        .put(format!("{}/v1/bots/{sub}/routines/daily", host.url))
        .bearer_auth(TOKEN)
        .body(r#"{"cron": "0 8 * * *", "timezone": "UTC", "prompt": "report"}"#)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("subagent of p"), "{body}");
    let room = format!(r#"{{"name": "with-sub", "members": ["p", "{sub}"]}}"#);
    let (status, body) = host.post_raw("/v1/groups", Some(TOKEN), None, room).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("stopped"), "{body}");
    host.shutdown().await;
}

/// The report of a task a person cancelled after it sent progress says
/// that progress, as a failed or removed task's does (QA: it left it out,
/// so the parent could not tell that work with effects had been done).
#[tokio::test]
async fn a_cancelled_tasks_report_says_its_last_progress() {
    let (host, dm, sub, task) = delegated_waiting(
        r#"  { tool = "SendMessage", args = { text = "phase one is done" } },
  { delay_ms = 120000, tool = "Shell", args = { command = "WAIT" } },
"#,
    )
    .await;
    // its progress is in, and its Shell waits
    host.wait_for(&task, |es| {
        deliveries(es)
            .into_iter()
            .find(|d| d == "phase one is done")
            .map(Value::from)
    })
    .await;
    host.wait_running(&sub).await;
    let (status, body) = host
        .post_raw(&format!("/v1/bots/{sub}/cancel"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 200, "{body}");
    let heard = host
        .wait_for(&dm, |es| {
            deliveries(es)
                .into_iter()
                .find(|d| d.starts_with("heard:"))
                .map(Value::from)
        })
        .await;
    let heard = heard.as_str().unwrap();
    assert!(
        heard.contains("a person cancelled my turn")
            && heard.contains("My last progress: phase one is done"),
        "{heard}"
    );
    host.shutdown().await;
}

/// A person who cancels a subagent's task turn fails the task, not the
/// subagent: its parent is told the task is unfinished and why, and the
/// person may retry it. (The subagent was stopped for good and its parent
/// never heard of it, waiting for a report that could not come.)
#[tokio::test]
async fn a_person_cancelling_a_subagents_task_tells_its_parent_and_may_retry() {
    let (host, dm, sub, task) = delegated_waiting(
        r#"  { tool = "Shell", args = { command = "WAIT" } },
"#,
    )
    .await;
    let (status, body) = host
        .post_raw(&format!("/v1/bots/{sub}/cancel"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 200, "{body}");
    let end = host
        .wait_for(&task, |es| {
            es.iter().find(|e| e["kind"] == "turn_end").cloned()
        })
        .await;
    assert_eq!(end["status"], "cancelled", "{end}");
    // the task's conversation says so, with the retry, as any bot's does
    // (it showed only the turn's end: QA, 2026-12-05)
    let es = host.entries(&task).await;
    let notice = es
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_cancelled")
        .unwrap_or_else(|| panic!("{es:#?}"));
    assert_eq!(notice["retry_turn"], end["turn"], "{notice}");
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .starts_with("The task was stopped before it finished"),
        "{notice}"
    );
    // the parent hears that the task is unfinished, and why
    let heard = host
        .wait_for(&dm, |es| {
            deliveries(es)
                .into_iter()
                .find(|d| d.starts_with("heard:"))
                .map(Value::from)
        })
        .await;
    let heard = heard.as_str().unwrap();
    assert!(
        heard.contains("could not finish the task") && heard.contains("a person cancelled my turn"),
        "{heard}"
    );
    // and the person may retry it; it then finishes and reports
    std::fs::write(host.fleet.path().join("data/workspace/alice/go"), "go").unwrap();
    let turn = end["turn"].as_str().unwrap();
    let (status, body) = host
        .post_raw(&format!("/v1/turns/{turn}/retry"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 200, "{body}");
    host.wait_for(&dm, |es| {
        deliveries(es)
            .into_iter()
            .find(|d| d.contains("finished after all"))
            .map(Value::from)
    })
    .await;
    host.shutdown().await;
}

/// A parent that stops its subagent while the subagent waits for the
/// model stops it for good: its task turn ends cancelled, it stays
/// `stopped`, reports nothing, and neither a retry of that turn nor a
/// message brings it back. (Before, the stop cancelled the turn first and
/// wrote `stopped` after: the cancelled turn read its subagent still
/// running and ended as a person's cancel, `failed`, with a report waking
/// the parent ("a person cancelled my turn on it; they can retry it") and
/// a retry that ran the task again.)
#[tokio::test]
async fn a_subagent_stopped_by_its_parent_mid_turn_stays_stopped_and_reports_nothing() {
    let script = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "slow", prompt = "SUBTASK slow" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "^p\\.sub-"
steps = [
  { calls = [
    { tool = "StopSubagent", args = { id = "{{input}}" } },
    { tool = "CheckSubagent", args = { id = "{{input}}" } },
  ] },
  { tool = "SendMessage", args = { text = "check: {{tool_result}}" } },
]

[[rule]]
bot = "p"
steps = [ { tool = "SendMessage", args = { text = "heard: {{input}}" } } ]

[[rule]]
match = "SUBTASK slow"
steps = [
  { tool = "SendMessage", args = { text = "PROGRESS started" } },
  { delay_ms = 600000, tool = "SendMessage", args = { text = "never reported" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "answered anyway" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot(
            "p",
            "s",
            &["SendMessage", "Task", "StopSubagent", "CheckSubagent"],
        )
        .start()
        .await;
    let (dm, reply) = reply_to(&host, "delegate it").await;
    assert_eq!(reply, "delegated");
    let sub = subagent_of(&host, "p").await;
    let task = task_session(&host, &sub).await;
    // its first step is recorded: it now waits for its second model call,
    // which only the cancel ends
    host.wait_for(&task, |es| {
        deliveries(es)
            .iter()
            .any(|d| d == "PROGRESS started")
            .then_some(json!(true))
    })
    .await;
    // stopped as soon as the call returns: the parent's next call sees it
    let (_, check) = reply_to(&host, &sub).await;
    assert!(check.contains(&format!("{sub} [stopped]")), "{check}");
    // no result will come ("(none yet)" said one might: QA, 2026-12-05)
    assert!(
        check.contains("result: (none: it was stopped, and reports nothing)"),
        "{check}"
    );
    let end = host
        .wait_for(&task, |es| {
            es.iter().find(|e| e["kind"] == "turn_end").cloned()
        })
        .await;
    assert_eq!(end["status"], "cancelled", "{end}");
    // its report would be written with the end of its turn: there is none
    let es = host.entries(&dm).await;
    assert_eq!(agent_messages(&es), Vec::<String>::new(), "{es:#?}");
    assert!(
        !deliveries(&es).iter().any(|d| d.starts_with("heard:")),
        "the parent was not woken: {es:#?}"
    );
    // the cancelled task turn cannot be retried: the subagent is stopped,
    // and its conversation offers no retry
    let task_entries = host.entries(&task).await;
    assert!(
        !task_entries.iter().any(|e| e["code"] == "turn_cancelled"),
        "{task_entries:#?}"
    );
    // it says the parent stopped the task, not what a person's message to
    // a stopped subagent is told (QA: "Ask p instead", to nobody)
    let stopped = task_entries
        .iter()
        .find(|e| e["code"] == "subagent_stopped")
        .unwrap_or_else(|| panic!("{task_entries:#?}"));
    let said = stopped["text"].as_str().unwrap();
    assert!(
        said.starts_with("The task was stopped by p before it finished (StopSubagent)")
            && !said.contains("instead"),
        "{said}"
    );
    let turn = end["turn"].as_str().unwrap();
    let (status, body) = host
        .post_raw(&format!("/v1/turns/{turn}/retry"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("was stopped"), "{body}");
    // and it takes no message
    let (status, body) = host.send(&sub, "are you there?", None).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("was stopped"), "{body}");
    host.shutdown().await;
}

/// A host where bot `p` delegated a task ("delegate it" answered
/// "delegated") whose subagent runs `steps` (their `WAIT` a Shell command
/// that waits for the file `go`), then sends "finished after all"; `p`
/// answers a report with "heard: …". The host, `p`'s DM, the subagent and
/// its task session.
async fn delegated_waiting(steps: &str) -> (TestHost, String, String, String) {
    let steps = steps.replace("WAIT", WAIT_FOR_GO);
    let script = format!(
        r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  {{ tool = "Task", args = {{ description = "wait", prompt = "SUBTASK wait" }} }},
  {{ tool = "SendMessage", args = {{ text = "delegated" }} }},
]

[[rule]]
match = "SUBTASK wait"
steps = [
{steps}  {{ tool = "SendMessage", args = {{ text = "finished after all" }} }},
]

[[rule]]
bot = "p"
steps = [ {{ tool = "SendMessage", args = {{ text = "heard: {{{{input}}}}" }} }} ]
"#
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("p", "s", &["SendMessage", "Task", "Shell"])
        .start()
        .await;
    let (dm, reply) = reply_to(&host, "delegate it").await;
    assert_eq!(reply, "delegated");
    let sub = subagent_of(&host, "p").await;
    let task = task_session(&host, &sub).await;
    (host, dm, sub, task)
}
