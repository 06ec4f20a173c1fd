//! `GET /v1/bots` lists a parent's running subagents and its 20 latest
//! finished ones, and counts the rest; `?subagents=all` lists them all.
//!
//! (Round 19's long-run tester: every Task makes a bot that stays after it
//! finished, so after 1,500 tasks one user's list was 1.7 MB and took
//! 130–177 ms, refetched by the web page at every change.)

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

/// How many finished tasks the test makes: two more than are listed.
const FINISHED: usize = 22;

// The last subagent waits (bounded) for a file the test writes, so it is
// running while the list is read: deterministic, no fixed delay.
const WAIT_FOR_GO: &str =
    "i=0; while [ ! -f go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo waited";

fn subagent_ids(list: &Value) -> Vec<String> {
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["origin"] == "subagent:p")
        .map(|b| b["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_bot_list_keeps_a_parents_latest_finished_subagents_and_counts_the_rest() {
    let script = format!(
        r#"
[[rule]]
bot = "p"
match = "^task"
steps = [
  {{ tool = "Task", args = {{ description = "{{{{input}}}}", prompt = "SUBTASK quick" }} }},
  {{ tool = "SendMessage", args = {{ text = "delegated" }} }},
]

[[rule]]
bot = "p"
match = "^long"
steps = [
  {{ tool = "Task", args = {{ description = "long one", prompt = "SUBTASK long" }} }},
  {{ tool = "SendMessage", args = {{ text = "delegated" }} }},
]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ {{ tool = "SendMessage", args = {{ text = "noted" }} }} ]

[[rule]]
match = "SUBTASK quick"
steps = [ {{ tool = "SendMessage", args = {{ text = "REPORT done" }} }} ]

[[rule]]
match = "SUBTASK long"
steps = [
  {{ tool = "Shell", args = {{ command = "{WAIT_FOR_GO}" }} }},
  {{ tool = "SendMessage", args = {{ text = "REPORT long done" }} }},
]
"#
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("p", "s", &["SendMessage", "Task", "Shell"])
        .start()
        .await;
    for i in 0..FINISHED {
        host.send_until_reports("p", &format!("task {i}"), i + 1)
            .await;
    }
    // every task so far is finished: all are listed with `all`, in the
    // order they were made (by id in the list: read the order from turns)
    let (status, all) = host.get("/v1/bots?subagents=all", TOKEN).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(subagent_ids(&all).len(), FINISHED, "{all}");
    assert_eq!(all["subagents_left_out"], 0, "{all}");

    // one more, still running when the list is read
    let (status, sent) = host.send("p", "long task", None).await;
    assert_eq!(status, 202, "{sent}");
    let running = host
        .wait_get("/v1/bots?subagents=all", |v| {
            v["bots"]
                .as_array()?
                .iter()
                .find(|b| {
                    b["origin"] == "subagent:p"
                        && b["name"].as_str().is_some_and(|n| n.contains("long one"))
                })
                .map(|b| b["id"].clone())
        })
        .await;
    let running = running.as_str().unwrap().to_owned();

    let (status, recent) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{recent}");
    let listed = subagent_ids(&recent);
    assert_eq!(recent["subagents_left_out"], FINISHED - 20, "{recent}");
    assert_eq!(
        listed.len(),
        21,
        "20 finished and the running one: {listed:?}"
    );
    assert!(listed.contains(&running), "{listed:?}");
    // the two left out are the first two tasks (the oldest finished)
    let all_ids = subagent_ids(&all);
    let left_out: Vec<&String> = all_ids.iter().filter(|id| !listed.contains(id)).collect();
    assert_eq!(left_out.len(), 2, "{left_out:?}");
    for id in &left_out {
        let (status, one) = host.get(&format!("/v1/bots/{id}"), TOKEN).await;
        assert_eq!(status, 200, "a subagent left out is still a bot: {one}");
        let name = one["name"].as_str().unwrap_or_default();
        assert!(
            name.ends_with("task 0") || name.ends_with("task 1"),
            "left out: {name}"
        );
    }
    // the parent's own entry is listed as always
    assert!(
        recent["bots"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["id"] == "p"),
        "{recent}"
    );
    // `recent` is the default, spelled out; anything else is refused
    let (status, spelled) = host.get("/v1/bots?subagents=recent", TOKEN).await;
    assert_eq!(status, 200);
    assert_eq!(subagent_ids(&spelled).len(), 21);
    let (status, bad) = host.get("/v1/bots?subagents=old", TOKEN).await;
    assert_eq!(status, 400, "{bad}");
    let message = bad["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`recent`") && message.contains("`all`"),
        "{message}"
    );
    let (status, bad) = host.get("/v1/bots?limit=5", TOKEN).await;
    assert_eq!(status, 400, "an unknown parameter is still refused: {bad}");

    std::fs::write(host.fleet.path().join("data/workspace/alice/go"), "go").unwrap();
    host.shutdown().await;
}
