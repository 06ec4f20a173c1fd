//! Token counts past belief from a model server (QA): `completion_tokens`
//! of `2**63 + 10` or `u64::MAX` crashed the turn's budget check with an
//! overflow after its reply went out (the turn ended `failed` offering a
//! retry that would answer twice), and in a release build wrapped: the
//! count went negative in the store and turned the bot's daily budget
//! off. Such a count is now odd (logged, the tokens counted by the host),
//! and the budget holds.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// `r`'s record in `GET /v1/bots`.
fn bot_r(bots: &Value) -> &Value {
    bots["bots"]
        .as_array()
        .and_then(|bs| bs.iter().find(|b| b["id"] == "r"))
        .unwrap_or_else(|| panic!("no bot r: {bots:#}"))
}

#[tokio::test]
async fn a_count_past_belief_is_not_taken_and_the_budget_still_holds() {
    let server = OpenAiServer::builder()
        .reply(
            Reply::tool_call("c1", "SendMessage", r#"{"text":"usage huge"}"#)
                .usage(5, (1 << 63) + 10),
        )
        .reply(Reply::text("").usage(5, u64::MAX))
        // then 1,510 tokens a call: one two-call turn spends the budget
        .responder(|body| {
            let last = body["messages"].as_array().and_then(|m| m.last());
            if last.is_some_and(|m| m["role"] == "tool") {
                Reply::text("").usage(10, 1500)
            } else {
                Reply::tool_call("c2", "SendMessage", r#"{"text":"big"}"#).usage(10, 1500)
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .midday()
        .openai(
            "main",
            &server.base_url(),
            "stream = false\nmax_retries = 0",
        )
        .bot("r", "main", &["SendMessage"])
        .bot_lines("daily_token_budget = 2000")
        .start()
        .await;

    let (session, end) = host.end_turn("r", "hello").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    assert!(
        !entries.iter().any(|e| e["kind"] == "notice"),
        "no failure: {entries:#?}"
    );
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let today = &bot_r(&bots)["usage"]["today"];
    let completion = today["completion_tokens"].as_u64().unwrap();
    assert!(
        (1..1000).contains(&completion),
        "the host's own count: {today}"
    );
    assert!(bot_r(&bots)["paused_until"].is_null(), "{bots:#}");

    // the budget still holds: the next turn spends it and pauses the bot
    let (_, end) = host.end_turn("r", "big one").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    assert!(bot_r(&bots)["paused_until"].is_i64(), "{bots:#}");
    let (status, next) = host.send("r", "and again", None).await;
    assert_eq!(status, 202, "{next}");
    assert!(next["paused_until"].is_i64(), "{next}");
    host.shutdown().await;
}
