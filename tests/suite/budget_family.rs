//! A bot's daily token budget covers the work it hands on: its subagents'
//! model requests count against it, and a bot it makes with CreateAgent
//! takes it as its own.
//!
//! (Before, a bot budgeted at 500 tokens paused at 550 while the three
//! subagents it started ran on with no budget, some 1,300 tokens each; and
//! a budgeted bot could make a bot without one and hand it work.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::results_since_input;
use crate::support::openai_server::user_texts;

/// The parent's budget.
const BUDGET: u64 = 500;
/// What every model request reports (prompt, completion): 110 tokens.
const USAGE: (u64, u64) = (100, 10);
/// Shell steps a subagent's task takes before its report: 12 requests of
/// 110 tokens, each task alone far past the budget.
const SUBTASK_STEPS: usize = 10;
/// Subagents the parent starts at once.
const TASKS: usize = 3;

/// The model: the parent starts [`TASKS`] subagents and says so; each
/// subagent runs [`SUBTASK_STEPS`] Shell steps, then reports. Every
/// request reports [`USAGE`].
fn reply(request: &Value) -> Reply {
    let (prompt, completion) = USAGE;
    let subagent = user_texts(request).iter().any(|t| t.contains("SUBTASK"));
    let after_tool = last_message(request).is_some_and(|m| m["role"] == "tool");
    let reply = if subagent {
        let n = results_since_input(request);
        if n < SUBTASK_STEPS {
            Reply::tool_call(
                &format!("call_{n}"),
                "Shell",
                json!({ "command": format!("echo step {n}") }).to_string(),
            )
        } else if n == SUBTASK_STEPS {
            Reply::tool_call(
                &format!("call_{n}"),
                "SendMessage",
                json!({ "text": "REPORT all steps done" }).to_string(),
            )
        } else {
            Reply::text("")
        }
    } else if after_tool {
        Reply::text("")
    } else if user_texts(request)
        .last()
        .is_some_and(|t| t.contains("delegate"))
    {
        let mut r = Reply::tool_call(
            "task_0",
            "Task",
            json!({ "description": "job 0", "prompt": "SUBTASK 0" }).to_string(),
        );
        for i in 1..TASKS {
            r = r.and_tool_call(
                &format!("task_{i}"),
                "Task",
                json!({ "description": format!("job {i}"), "prompt": format!("SUBTASK {i}") })
                    .to_string(),
            );
        }
        r.and_tool_call(
            "say",
            "SendMessage",
            json!({ "text": "delegated" }).to_string(),
        )
    } else {
        Reply::tool_call(
            "noted",
            "SendMessage",
            json!({ "text": "noted the reports" }).to_string(),
        )
    };
    reply.usage(prompt, completion)
}

/// Every bot of `GET /v1/bots?subagents=all` whose id is `parent` or whose
/// origin is `subagent:<parent>`.
async fn family(host: &TestHost, parent: &str) -> Vec<Value> {
    let (status, bots) = host.get("/v1/bots?subagents=all", TOKEN).await;
    assert_eq!(status, 200, "{bots}");
    let origin = format!("subagent:{parent}");
    bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["id"] == parent || b["origin"] == origin.as_str())
        .cloned()
        .collect()
}

fn used_today(bot: &Value) -> u64 {
    let today = &bot["usage"]["today"];
    today["prompt_tokens"].as_u64().unwrap() + today["completion_tokens"].as_u64().unwrap()
}

/// A parent budgeted at 500 tokens starts three subagents whose tasks
/// would each spend 1,320. The family's model requests share the budget:
/// together they spend at most the budget plus one request per bot of the
/// family running at once (4 × 110 tokens here; before, 4,180 in all).
/// Each subagent's task ends `failed` with a report telling the parent
/// the budget is spent until midnight UTC, and the parent, woken by those
/// reports, finds it spent and pauses, its reports kept for after the
/// pause.
#[tokio::test]
async fn subagents_spend_their_parents_budget_and_stop_with_it() {
    let server = OpenAiServer::builder().responder(reply).start().await;
    let host = TestFleet::new()
        .midday()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot(
            "p",
            "main",
            &["SendMessage", "Task", "CheckSubagent", "Shell"],
        )
        .bot_lines(&format!("daily_token_budget = {BUDGET}"))
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let (status, sent) = host.send("p", "delegate the jobs", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();

    // the three reports reach the parent's conversation
    let reports = host
        .wait_for(&session, |es| {
            let r: Vec<Value> = es
                .iter()
                .filter(|e| e["kind"] == "agent_message")
                .cloned()
                .collect();
            (r.len() >= TASKS).then(|| json!(r))
        })
        .await;

    // the family spent the budget, and at most one request per bot past it
    let bots = family(&host, "p").await;
    assert_eq!(bots.len(), TASKS + 1, "{bots:#?}");
    let used: u64 = bots.iter().map(used_today).sum();
    let one_request = USAGE.0 + USAGE.1;
    let bound = BUDGET + (TASKS as u64 + 1) * one_request;
    assert!(
        used >= BUDGET && used <= bound,
        "the family of p used {used} tokens today, budget {BUDGET}, bound {bound}: {bots:#?}"
    );

    // each task ended failed, saying why, in its report to the parent
    for r in reports.as_array().unwrap() {
        let text = r["text"].as_str().unwrap_or_default();
        assert!(
            text.contains("could not finish the task")
                && text
                    .contains("the daily token budget of p, which its subagents share, is spent")
                && text.contains("p and its subagents are paused until")
                && text.contains("UTC"),
            "{r:#}"
        );
    }
    for b in bots.iter().filter(|b| b["id"] != "p") {
        let id = b["id"].as_str().unwrap();
        let (_, turns) = host.get(&format!("/v1/bots/{id}/turns"), TOKEN).await;
        let statuses: Vec<&Value> = turns["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["status"])
            .collect();
        assert_eq!(statuses, [&json!("failed")], "{turns:#}");
    }
    // a retry of a task while the budget is spent is refused, saying when
    // (requeued, it waited while the bot knew the pause, and a restart ran
    // it into the same failure, reported to the parent again: QA)
    let sub = bots.iter().find(|b| b["id"] != "p").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, turns) = host.get(&format!("/v1/bots/{sub}/turns"), TOKEN).await;
    let task = turns["turns"][0]["id"].as_str().unwrap().to_owned();
    let (status, refused) = host.retry(&task).await;
    assert_eq!(status, 409, "{refused}");
    let said = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains(&format!(
            "it is a task of subagent {sub}, which fails as it starts"
        )) && said.contains("p and its subagents are paused until")
            && said.ends_with("retry it then"),
        "{refused}"
    );

    // the parent, woken by the reports, finds the budget spent: it pauses,
    // and answers them after the pause
    host.wait_get("/v1/bots", |v| {
        let p = v["bots"].as_array()?.iter().find(|b| b["id"] == "p")?;
        p["paused_until"].is_i64().then(|| p.clone())
    })
    .await;
    let entries = host.entries(&session).await;
    assert_eq!(
        deliveries(&entries),
        vec!["delegated".to_owned()],
        "{entries:#?}"
    );
    // the turn the reports woke told nobody (no person's message among
    // its inputs): the person's next message there is told of the pause
    // (QA: it was taken as told, and waited in silence until midnight)
    let (status, again) = host.send("p", "hello?", None).await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(again["session"], session.as_str(), "{again}");
    let seq = again["seq"].as_i64().unwrap();
    let notice = host
        .wait_for(&session, |es| {
            es.iter()
                .find(|e| {
                    e["kind"] == "notice"
                        && e["code"] == "budget_exhausted"
                        && e["seq"].as_i64() > Some(seq)
                })
                .cloned()
        })
        .await;
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .starts_with("p-name (p) has used its daily token budget"),
        "{notice:#}"
    );

    // a person who writes to a subagent is told whose budget it spends
    // (it said "has used its daily token budget" and named a setting the
    // subagent does not have: QA, 2026-12-05)
    let (status, sent) = host.send(&sub, "are you there?", None).await;
    assert_eq!(status, 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    let notice = host
        .wait_for(&dm, |es| {
            es.iter()
                .find(|e| e["kind"] == "notice" && e["code"] == "budget_exhausted")
                .cloned()
        })
        .await;
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(" ({sub}) is paused until "))
            && text.contains("it spends the daily token budget of p")
            && text.contains("raise p's `daily_token_budget`"),
        "{text}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// A bot made by a budgeted bot takes its maker's budget: before, it had
/// none, and its maker could hand it work past its own budget.
#[tokio::test]
async fn a_bot_made_by_a_budgeted_bot_takes_its_budget() {
    let server = OpenAiServer::builder()
        .responder(|request| {
            let after_tool = last_message(request).is_some_and(|m| m["role"] == "tool");
            if after_tool {
                return Reply::text("").usage(1, 1);
            }
            Reply::tool_call(
                "make",
                "CreateAgent",
                json!({ "name": "Helper", "role": "Helps.", "tools": ["SendMessage"] }).to_string(),
            )
            .and_tool_call("say", "SendMessage", json!({ "text": "made" }).to_string())
            .usage(1, 1)
        })
        .start()
        .await;
    let host = TestFleet::new()
        .midday()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("maker", "main", &["SendMessage", "CreateAgent"])
        .bot_lines("daily_token_budget = 5000")
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let (status, sent) = host.send("maker", "make a helper", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    let (status, helper) = host.get("/v1/bots/helper", TOKEN).await;
    assert_eq!(status, 200, "{helper}");
    assert_eq!(helper["origin"], "agent:maker", "{helper:#}");
    assert_eq!(helper["settings"]["daily_token_budget"], 5000, "{helper:#}");
    host.shutdown().await;
    server.shutdown().await;
}
