//! A task and a message to a subagent are hops like a message to another
//! bot, and its report one more: a parent that delegates again when a
//! report wakes it continues the count of the person's request, and Task
//! is refused with the hop-budget error once the task and its report no
//! longer fit in `runtime.max_hops`.
//!
//! (Before, the task carried no hop and every report arrived at hop 1, so
//! a parent that answered each report with a new task looped without
//! limit: thousands of subagents in seconds.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const TOOLS: &[&str] = &[
    "SendMessage",
    "Task",
    "CheckSubagent",
    "MessageSubagent",
    "StopSubagent",
];

/// The exploratory tester's script: every report starts a new task.
const LOOP: &str = r#"
[[rule]]
bot = "a"
match = "^taskloop|loopreport"
steps = [ { tool = "Task", args = { description = "loop job", prompt = "loopwork go" } } ]

[[rule]]
match = "loopwork"
steps = [ { tool = "SendMessage", args = { text = "loopreport done" } } ]
"#;

/// More reports than any budget in these tests allows: the loop runs away.
const RUNAWAY: usize = 12;

fn hops_of(entries: &[Value], kind: &str) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["hop"].clone())
        .collect()
}

/// The subagents of `parent`.
async fn subagents_of(host: &TestHost, parent: &str) -> Vec<String> {
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let origin = format!("subagent:{parent}");
    bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["origin"] == origin.as_str())
        .map(|b| b["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The entries of the session a subagent's task runs in, once its first
/// turn ended.
async fn task_entries(host: &TestHost, sub: &str) -> Vec<Value> {
    let session = host
        .wait_get(&format!("/v1/bots/{sub}/turns"), |v| {
            v["turns"]
                .as_array()?
                .iter()
                .find_map(|t| t["session"].as_str().map(|s| json!(s)))
        })
        .await;
    let session = session.as_str().unwrap();
    host.wait_for(session, |es| {
        es.iter()
            .any(|e| e["kind"] == "turn_end")
            .then(|| json!(es))
    })
    .await
    .as_array()
    .unwrap()
    .clone()
}

/// What the task loop did under `max_hops`.
struct LoopOutcome {
    /// Hops of the reports that woke the parent.
    reports: Vec<Value>,
    /// Hops of the subagents' tasks, lowest first.
    tasks: Vec<Value>,
    /// The refused Task's result.
    refusal: String,
    /// The `hop_budget` notices the person got.
    notices: usize,
}

async fn run_task_loop(max_hops: u32) -> LoopOutcome {
    let host = TestFleet::new()
        .script("s", LOOP)
        .bot("a", "s", TOOLS)
        .runtime(&format!(
            "debounce_ms = 0\nextract_memory = false\nmax_hops = {max_hops}"
        ))
        .tables("[review]\nsubagent = \"off\"")
        .start()
        .await;
    let (status, sent) = host.send("a", "taskloop start", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    // the chain ends with the hop-budget refusal of a Task, or runs away
    let stop = host
        .wait_for(&session, |es| {
            let refused = es.iter().find(|e| {
                e["kind"] == "tool_result"
                    && e["name"] == "Task"
                    && e["content"].as_str().unwrap_or("").contains("hop budget")
            });
            let reports = es.iter().filter(|e| e["kind"] == "agent_message").count();
            refused
                .cloned()
                .or_else(|| (reports > RUNAWAY).then(|| json!({ "runaway": reports })))
        })
        .await;
    assert!(
        stop.get("runaway").is_none(),
        "the task loop was not stopped by the hop budget: {stop:#}"
    );
    // the refusing turn ends, and nothing more is on its way
    let end = host
        .wait_for(&session, |es| {
            es.iter()
                .find(|e| e["kind"] == "turn_end" && e["turn"] == stop["turn"])
                .cloned()
        })
        .await;
    assert_eq!(end["status"], "completed", "{end:#}");
    let entries = host.entries(&session).await;
    assert_eq!(
        entries.last().map(|e| &e["seq"]),
        Some(&end["seq"]),
        "the refusal is the end of the chain: {entries:#?}"
    );
    let subs = subagents_of(&host, "a").await;
    let mut tasks = Vec::new();
    for sub in &subs {
        let es = task_entries(&host, sub).await;
        tasks.extend(hops_of(&es, "event"));
    }
    tasks.sort_by_key(Value::as_u64);
    let outcome = LoopOutcome {
        reports: hops_of(&entries, "agent_message"),
        tasks,
        refusal: stop["content"].as_str().unwrap().to_owned(),
        notices: entries
            .iter()
            .filter(|e| e["kind"] == "notice" && e["code"] == "hop_budget")
            .count(),
    };
    host.shutdown().await;
    outcome
}

#[tokio::test]
async fn a_parent_delegating_again_at_each_report_stops_at_the_hop_budget() {
    let out = run_task_loop(4).await;
    // person → a (0) → task (1) → report (2) → task (3) → report (4):
    // a task from hop 4 would pass the budget of 4
    assert_eq!(out.tasks, vec![json!(1), json!(3)]);
    assert_eq!(out.reports, vec![json!(2), json!(4)]);
    assert!(
        out.refusal.contains("hop budget of 4") && out.refusal.contains("SendMessage"),
        "the parent is told to answer its person: {}",
        out.refusal
    );
    // the person sees the chain of tasks was cut off
    assert_eq!(out.notices, 1);
}

/// With `max_hops = 1` a task (one hop, its report a second) never fits:
/// Task is refused saying so, not that a budget nobody used "is spent".
#[tokio::test]
async fn a_task_refused_before_any_hop_says_it_needs_two() {
    let script = r#"
[[rule]]
bot = "a"
match = "^tiny"
steps = [
  { tool = "Task", args = { description = "job", prompt = "some work" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("a", "s", TOOLS)
        .runtime("debounce_ms = 0\nextract_memory = false\nmax_hops = 1")
        .tables("[review]\nsubagent = \"off\"")
        .start()
        .await;
    let (status, sent) = host.send("a", "tiny budget", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end:#}");
    let entries = host.entries(&session).await;
    let refusal = crate::support::fleet::deliveries(&entries).join("\n");
    assert!(
        refusal.contains("a task and its report are two bot-to-bot messages")
            && refusal.contains("has 1 left of its hop budget of 1"),
        "{refusal}"
    );
    assert!(!refusal.contains("is spent"), "{refusal}");
    assert!(refusal.contains("SendMessage"), "{refusal}");
    // no chain of bots was cut off: the bot answers the person itself
    assert!(
        !entries.iter().any(|e| e["code"] == "hop_budget"),
        "{entries:#?}"
    );
    assert!(subagents_of(&host, "a").await.is_empty());
    host.shutdown().await;
}

/// What bot `b` answered `p`, who asked it (hop 1) to delegate: `b`
/// calls Task and sends back what it was told, with `max_hops`.
async fn delegation_answer(max_hops: u32) -> (TestHost, Value) {
    let script = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "SendToAgent", args = { agent = "b", text = "DELEGATE this" } },
  { text = "asked" },
]

[[rule]]
bot = "b"
match = "DELEGATE"
steps = [
  { tool = "Task", args = { description = "deleg job", prompt = "some work" } },
  { tool = "SendMessage", args = { text = "could not delegate: {{tool_result}}" } },
]

[[rule]]
bot = "p"
steps = [ { text = "heard back" } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("p", "s", &["SendMessage", "SendToAgent"])
        .bot("b", "s", TOOLS)
        .runtime(&format!(
            "debounce_ms = 0\nextract_memory = false\nmax_hops = {max_hops}"
        ))
        .tables("[review]\nsubagent = \"off\"")
        .start()
        .await;
    let session = host.complete_turn("p", "delegate please").await;
    // b's reply comes back into p's conversation with the person, with
    // the refusal b was given
    let heard = host
        .wait_for(&session, |es| {
            es.iter()
                .find(|e| e["kind"] == "agent_message" && e["from"] == "b")
                .cloned()
        })
        .await;
    (host, heard)
}

/// A bot messaged by another at hop 1 of a budget of 2 cannot give a
/// subagent work (the task and its report are two hops), but its reply
/// (hop 2) still fits: the refusal says so, and the reply goes. (QA: the
/// refusal said the exchange ended there and that SendMessage would be
/// refused the same way, and the reply went through anyway.)
#[tokio::test]
async fn a_task_refused_for_its_report_leaves_the_reply_to_the_asking_bot() {
    let (host, heard) = delegation_answer(2).await;
    let text = heard["text"].as_str().unwrap();
    assert!(
        text.contains("has 1 left of its hop budget of 2")
            && text.contains("One bot-to-bot message is still left")
            && !text.contains("refused the same way"),
        "{heard:#}"
    );
    assert!(subagents_of(&host, "b").await.is_empty());
    host.shutdown().await;
}

#[tokio::test]
async fn a_task_whose_report_would_pass_the_budget_is_not_started() {
    // with a budget of 3, a task from hop 2 fits (hop 3) but its report
    // (hop 4) would not come back: the parent is told now, not left
    // waiting for a report that never arrives
    let out = run_task_loop(3).await;
    assert_eq!(out.tasks, vec![json!(1)]);
    assert_eq!(out.reports, vec![json!(2)]);
    assert!(out.refusal.contains("hop budget of 3"), "{}", out.refusal);
}

#[tokio::test]
async fn a_message_to_a_subagent_is_a_hop_and_its_report_continues_the_count() {
    let script = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "first", prompt = "SUBTASK first" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "^p\\.sub-"
steps = [
  { tool = "MessageSubagent", args = { id = "{{input}}", text = "STEER once more" } },
  { tool = "SendMessage", args = { text = "steer: {{tool_result}}" } },
]

[[rule]]
match = "SUBTASK first"
steps = [ { tool = "SendMessage", args = { text = "first report" } } ]

[[rule]]
match = "STEER once more"
steps = [ { tool = "SendMessage", args = { text = "steered report" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("p", "s", TOOLS)
        .tables("[review]\nsubagent = \"off\"")
        .start()
        .await;
    let (_, sent) = host.send("p", "delegate it", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_for(&session, |es| {
        es.iter().find(|e| e["kind"] == "agent_message").cloned()
    })
    .await;
    let subs = subagents_of(&host, "p").await;
    assert_eq!(subs.len(), 1, "{subs:?}");
    let (_, steer) = host.send("p", &subs[0], None).await;
    let end = host
        .wait_turn_end(&session, steer["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end:#}");
    let reports = host
        .wait_for(&session, |es| {
            let reports: Vec<&Value> = es.iter().filter(|e| e["kind"] == "agent_message").collect();
            (reports.len() == 2).then(|| json!(reports))
        })
        .await;
    assert_eq!(reports[1]["text"], "steered report", "{reports:#}");
    // the person's message starts over at hop 0: the steering message is
    // hop 1 and the report it brings back hop 2, like task and report
    let es = task_entries(&host, &subs[0]).await;
    let inputs: Vec<(Value, Value)> = es
        .iter()
        .filter(|e| e["kind"] == "event")
        .map(|e| (e["origin"].clone(), e["hop"].clone()))
        .collect();
    assert_eq!(
        inputs,
        vec![
            (json!("task from p"), json!(1)),
            (json!("message from p"), json!(1)),
        ]
    );
    assert_eq!(reports[0]["hop"], 2, "{reports:#}");
    assert_eq!(reports[1]["hop"], 2, "{reports:#}");
    host.shutdown().await;
}

/// Tasks started together in one step count against `max_subagents`
/// each. (Before, the calls of a step commit together and each counted
/// only the subagents already stored: one step of three Tasks ran three
/// under a limit of two.)
#[tokio::test]
async fn tasks_started_in_one_step_count_against_the_subagent_limit() {
    let script = r#"
[[rule]]
bot = "a"
match = "^fan out"
steps = [
  { calls = [
    { tool = "Task", args = { description = "one", prompt = "quiet work" } },
    { tool = "Task", args = { description = "two", prompt = "quiet work" } },
    { tool = "Task", args = { description = "three", prompt = "quiet work" } },
  ] },
  { tool = "SendMessage", args = { text = "fanned out" } },
]

[[rule]]
match = "quiet work"
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "done" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("a", "s", TOOLS)
        .runtime("debounce_ms = 0\nextract_memory = false\nmax_subagents = 2")
        .tables("[review]\nsubagent = \"off\"")
        .start()
        .await;
    let (status, sent) = host.send("a", "fan out", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let results = host
        .wait_for(&session, |es| {
            let tasks: Vec<Value> = es
                .iter()
                .filter(|e| e["kind"] == "tool_result" && e["name"] == "Task")
                .cloned()
                .collect();
            (tasks.len() == 3).then(|| Value::from(tasks))
        })
        .await;
    let refused: Vec<&Value> = results
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["is_error"] == json!(true))
        .collect();
    assert_eq!(refused.len(), 1, "{results:#}");
    assert!(
        refused[0]["content"]
            .as_str()
            .unwrap()
            .contains("the limit is 2"),
        "{results:#}"
    );
    assert_eq!(subagents_of(&host, "a").await.len(), 2);
    host.shutdown().await;
}

/// A finished subagent given more work with MessageSubagent runs again, so
/// it counts against `max_subagents` like a new one. (Before, MessageSubagent
/// set it running without the check: under a limit of one, two ran.)
#[tokio::test]
async fn a_finished_subagent_given_more_work_counts_against_the_limit() {
    let script = r#"
[[rule]]
bot = "a"
match = "^start (\\w+)"
steps = [
  { tool = "Task", args = { description = "job", prompt = "{{input}} work" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]

[[rule]]
bot = "a"
match = "^a\\.sub-"
steps = [
  { tool = "MessageSubagent", args = { id = "{{input}}", text = "slow work again" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]

[[rule]]
match = "start quick work"
steps = [ { tool = "SendMessage", args = { text = "quick done" } } ]

[[rule]]
match = "slow work"
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "slow done" } } ]

[[rule]]
bot = "a"
steps = [ { text = "noted" } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("a", "s", TOOLS)
        .runtime("debounce_ms = 0\nextract_memory = false\nmax_subagents = 1")
        .tables("[review]\nsubagent = \"off\"")
        .start()
        .await;
    let turn = async |text: &str| {
        let (status, sent) = host.send("a", text, None).await;
        assert_eq!(status, 202, "{sent}");
        let session = sent["session"].as_str().unwrap().to_owned();
        host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
        let entries = host.entries(&session).await;
        entries
            .iter()
            .rev()
            .find(|e| e["kind"] == "tool_result" && e["name"] != "SendMessage")
            .cloned()
            .unwrap()
    };
    // one subagent finishes its task...
    turn("start quick").await;
    let quick = subagents_of(&host, "a").await.pop().unwrap();
    host.wait_get(&format!("/v1/bots/{quick}/turns"), |v| {
        (v["turns"][0]["status"] == "completed").then_some(Value::Null)
    })
    .await;
    // ...another runs, the one the limit allows...
    turn("start slow").await;
    assert_eq!(subagents_of(&host, "a").await.len(), 2);
    // ...so the finished one may not run again beside it
    let refused = turn(&quick).await;
    assert_eq!(refused["name"], "MessageSubagent", "{refused:#}");
    assert_eq!(refused["is_error"], json!(true), "{refused:#}");
    assert!(
        refused["content"]
            .as_str()
            .unwrap()
            .contains("the limit is 1"),
        "{refused:#}"
    );
    host.shutdown().await;
}

/// Regression (QA): with `max_subagents = 0` a Task was told "you already
/// have 0 running subagents (the limit is 0)" and to wait for their
/// reports, or stop one: there is none. It is told the host runs none.
#[tokio::test]
async fn a_task_on_a_host_that_runs_no_subagents_is_told_so() {
    let script = r#"
[[rule]]
bot = "a"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "one", prompt = "quiet work" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("a", "s", TOOLS)
        .runtime("debounce_ms = 0\nextract_memory = false\nmax_subagents = 0")
        .start()
        .await;
    let (end, entries) = host
        .end_turn_as("a", crate::support::fleet::TOKEN, "delegate")
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    let said = crate::support::fleet::deliveries(&entries);
    assert!(
        said.iter().any(
            |t| t.contains("this host runs no subagents (runtime.max_subagents is 0)")
                && !t.contains("wait for their reports")
        ),
        "{said:?}"
    );
    host.shutdown().await;
}

/// A bot messaged by another at hop 1 of a budget of 3: a task (hop 2)
/// and its report (hop 3) fit, but its answer to the asking bot (hop 4)
/// would not, so the subagent's work could never reach that bot: Task is
/// refused saying so, and the bot answers the asker itself (audit,
/// 2026-12-07: the task ran, and the answer was refused after it).
#[tokio::test]
async fn a_task_whose_answer_to_the_asking_bot_would_not_fit_is_not_started() {
    let (host, heard) = delegation_answer(3).await;
    let text = heard["text"].as_str().unwrap();
    assert!(
        text.contains("your answer to p")
            && text.contains("has 2 left of its hop budget of 3")
            && text.contains("One bot-to-bot message is still left"),
        "{heard:#}"
    );
    assert!(subagents_of(&host, "b").await.is_empty());
    host.shutdown().await;
}
