//! Parallel requests that race for one change: exactly one of them made
//! it, and only that one says so. Parallel `PUT`s of a new routine: one
//! `201`, the rest `200` (before, several answered `201`, each having read
//! "no such routine" before any of them wrote it). Parallel cancels of one
//! running turn: one `{"cancelled": true}`, the rest `false` (before,
//! every cancel that reached the bot before the turn ended said `true`).

use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

/// `slow` hangs in its model call until cancelled.
const SCRIPT: &str = r#"
[[rule]]
match = "^slow"
steps = [ { delay_ms = 600000, tool = "SendMessage", args = { text = "too late" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// How many requests race each time.
const RACERS: usize = 20;

#[tokio::test]
async fn of_parallel_puts_of_a_new_routine_exactly_one_answers_created() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let body = json!({"cron": "0 8 * * *", "timezone": "UTC", "prompt": "Check the news."});
    for name in ["x0", "x1", "x2", "x3", "x4"] {
        let puts = (0..RACERS).map(|_| {
            host.http
                .put(format!("{}/v1/bots/r/routines/{name}", host.url))
                .bearer_auth(TOKEN)
                .json(&body)
                .send()
        });
        let mut statuses: Vec<u16> = futures::future::join_all(puts)
            .await
            .into_iter()
            .map(|r| r.unwrap().status().as_u16())
            .collect();
        statuses.sort_unstable();
        let mut expected = vec![200; RACERS - 1];
        expected.push(201);
        assert_eq!(statuses, expected, "routine {name}");
    }
    let (status, listed) = host.get("/v1/bots/r/routines", TOKEN).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["routines"].as_array().unwrap().len(), 5, "{listed}");
    host.shutdown().await;
}

#[tokio::test]
async fn of_parallel_cancels_of_one_turn_exactly_one_says_it_cancelled() {
    // a bot per round, so each round's turn is the bot's first
    let bots = ["r0", "r1", "r2"];
    let mut fleet = TestFleet::new().script("s", SCRIPT);
    for bot in bots {
        fleet = fleet.bot(bot, "s", &["SendMessage"]);
    }
    let host = fleet.start().await;
    for bot in bots {
        let (status, sent) = host.send(bot, "slow", None).await;
        assert_eq!(status, 202, "{sent}");
        host.wait_running(bot).await;
        let path = format!("/v1/bots/{bot}/cancel");
        let cancels = (0..RACERS).map(|_| host.post_raw(&path, Some(TOKEN), None, ""));
        let answers: Vec<bool> = futures::future::join_all(cancels)
            .await
            .into_iter()
            .map(|(status, v)| {
                assert_eq!(status, 200, "{v}");
                v["cancelled"].as_bool().unwrap()
            })
            .collect();
        assert_eq!(
            answers.iter().filter(|c| **c).count(),
            1,
            "{bot}: {answers:?}"
        );
        let end = host
            .wait_turn_end(
                sent["session"].as_str().unwrap(),
                sent["seq"].as_i64().unwrap(),
            )
            .await;
        assert_eq!(end["status"], "cancelled", "{end}");
    }
    host.shutdown().await;
}
