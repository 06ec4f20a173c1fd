//! A routine whose runs failed: the next run reads its prompt once. Each
//! failed run's prompt stayed in the routine's context, unanswered, and
//! the next run's model was asked once more per failure, with nothing
//! saying they were one routine's runs (QA: after three failures, four
//! copies of "send the daily invoice"). The failed runs stay in the
//! transcript with their failure notices.

use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;

#[tokio::test]
async fn a_run_after_failed_ones_reads_the_routines_prompt_once() {
    let server = OpenAiServer::builder()
        .responder(|request| {
            if last_message(request).is_some_and(|m| m["role"] == "tool") {
                Reply::text("")
            } else {
                Reply::tool_call(
                    "s",
                    "SendMessage",
                    json!({"text": "invoice sent"}).to_string(),
                )
            }
        })
        .fail_next(2, Reply::error(400, "boom"))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (status, body) = host
        .call(
            reqwest::Method::PUT,
            "/v1/bots/r/routines/invoice",
            TOKEN,
            Some(json!({"cron": "* * * * * *", "timezone": "UTC",
                        "prompt": "send the daily invoice", "catch_up": "skip"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    // two runs fail, the third answers
    let done = host
        .wait_get("/v1/bots/r/turns", |v| {
            let turns = v["turns"].as_array()?;
            let failed = turns.iter().filter(|t| t["status"] == "failed").count();
            let completed = turns.iter().any(|t| t["status"] == "completed");
            (failed >= 2 && completed).then(|| v.clone())
        })
        .await;
    // its fires are named by the routine, not `system` (QA)
    let (code, out, err) = crate::support::process::cli(
        &["transcript", "r", "--routine", "invoice", "--all"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("(event from routine:invoice)") && !out.contains("system"),
        "{out}"
    );
    let (status, body) = host
        .call(
            reqwest::Method::DELETE,
            "/v1/bots/r/routines/invoice",
            TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // the first answered request: the third (two were refused)
    let requests = server.requests();
    let answered = &requests[2];
    let asked: usize = answered
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            m["content"]
                .as_str()
                .unwrap_or_default()
                .matches("send the daily invoice")
                .count()
        })
        .sum();
    // as many times as the completed run had fires (one, unless two came
    // together), not once more per failed run
    let completed = done["turns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "completed")
        .min_by_key(|t| t["started_at"].as_i64())
        .unwrap();
    let session = completed["session"].as_str().unwrap();
    let end = host
        .entries(session)
        .await
        .into_iter()
        .find(|e| e["kind"] == "turn_end" && e["turn"] == completed["id"])
        .unwrap();
    let fires = end["inputs"].as_array().unwrap().len();
    assert_eq!(asked, fires, "{:#?}", answered.messages());
    host.shutdown().await;
    server.shutdown().await;
}
