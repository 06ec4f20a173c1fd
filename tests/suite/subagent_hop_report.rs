//! A subagent's report of a task accepted under a larger hop budget
//! reaches its parent after `runtime.max_hops` was lowered (with a
//! restart) while the subagent worked: Task reserved the report's hop when
//! it was accepted.
//!
//! The chain still ends there: the parent, past the lowered budget, can
//! delegate no more, and the person gets one `hop_budget` notice.
//!
//! (Before, the report was dropped with a log line only: the subagent
//! finished, but neither its parent nor the person who asked heard of it.)

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;

// The subagent waits (bounded) for a file the test writes: deterministic,
// and no fixed delay.
const WAIT_FOR_GO: &str =
    "i=0; while [ ! -f go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo waited";

fn script() -> String {
    format!(
        r#"
[[rule]]
bot = "ann"
match = "^delegate"
steps = [
  {{ tool = "Task", args = {{ description = "job", prompt = "SUBTASK" }} }},
  {{ tool = "SendMessage", args = {{ text = "delegated" }} }},
]

[[rule]]
bot = "ann"
match = "Message from bot"
steps = [
  {{ tool = "Task", args = {{ description = "more", prompt = "SUBTASK more" }} }},
  {{ tool = "SendMessage", args = {{ text = "got report: {{{{input}}}} / more: {{{{tool_result}}}}" }} }},
]

[[rule]]
match = "SUBTASK"
steps = [
  {{ tool = "Shell", args = {{ command = "{WAIT_FOR_GO}" }} }},
  {{ tool = "SendMessage", args = {{ text = "REPORT all done" }} }},
]

[[rule]]
steps = [ {{ tool = "SendMessage", args = {{ text = "{{{{bot}}}} here" }} }} ]
"#
    )
}

const RUNTIME: &str = "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n";

#[tokio::test]
async fn a_report_of_a_task_accepted_before_max_hops_was_lowered_reaches_the_parent() {
    let host = TestFleet::new()
        .script("s", &script())
        .bot("ann", "s", &["SendMessage", "Task", "Shell"])
        .runtime(RUNTIME)
        .start()
        .await;
    let (session, end) = host.end_turn("ann", "delegate please").await;
    assert_eq!(end["status"], "completed", "{end}");
    let sub = host.wait_subagent_of("ann").await;
    host.wait_running(&sub).await;

    // the operator lowers the hop budget below a task's two hops and
    // restarts while the subagent works
    let fleet = host
        .shutdown()
        .await
        .runtime(&format!("{RUNTIME}max_hops = 1\n"));
    fleet.write();
    let host = restart(fleet).await;
    std::fs::write(host.fleet.path().join("data/workspace/alice/go"), "go").unwrap();

    // the task ends, and ann hears of it in the person's conversation that
    // delegated it, and answers there
    let report = host
        .wait_for(&session, |es| {
            deliveries(es)
                .into_iter()
                .find(|d| d.starts_with("got report:"))
                .map(Value::from)
        })
        .await;
    let report = report.as_str().unwrap_or_default();
    assert!(report.contains("REPORT all done"), "{report}");
    assert!(
        report.contains(&sub),
        "the report names its subagent: {report}"
    );
    let es = host.entries(&session).await;
    let reports: Vec<&Value> = es
        .iter()
        .filter(|e| e["kind"] == "agent_message" && e["from"] == sub.as_str())
        .collect();
    assert_eq!(reports.len(), 1, "one report: {reports:?}");
    assert_eq!(reports[0]["hop"], 2, "{:?}", reports[0]);
    // the chain ends there: the parent, past the lowered budget, may
    // delegate no more, and the person is told once
    assert!(report.contains("more: "), "{report}");
    let notices: Vec<&Value> = es
        .iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == "hop_budget")
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    let (_, list) = host.get("/v1/bots", TOKEN).await;
    let subs = list["bots"].as_array().map(|bots| {
        bots.iter()
            .filter(|b| b["origin"] == "subagent:ann")
            .count()
    });
    assert_eq!(subs, Some(1), "no second task: {list}");
    host.shutdown().await;
}
