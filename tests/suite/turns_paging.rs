//! `GET /v1/bots/{bot}/turns` pages: `more` says older turns follow, and
//! `before` (the last turn of a page) gives them, each turn once.
//! Regression (QA): the newest 100 were listed and no more, with no way
//! to reach older turns and no sign that there were any.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
match = "^slow"
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "late" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

#[tokio::test]
async fn a_bots_turns_are_paged_with_before_each_once() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let mut ended = Vec::new();
    for i in 0..5 {
        let (_, end) = host.end_turn("r", &format!("message {i}")).await;
        assert_eq!(end["status"], "completed", "{end}");
        ended.push(end["turn"].as_str().unwrap().to_owned());
    }
    let (_, end) = host.end_turn("q", "hello").await;
    let other = end["turn"].as_str().unwrap().to_owned();

    let mut listed: Vec<String> = Vec::new();
    let mut path = "/v1/bots/r/turns?limit=2".to_owned();
    let mut pages = Vec::new();
    loop {
        let (status, v) = host.get(&path, TOKEN).await;
        assert_eq!(status, 200, "{path}: {v}");
        let turns: Vec<String> = v["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect();
        pages.push((turns.len(), v["more"].clone()));
        listed.extend(turns.iter().cloned());
        if v["more"] != Value::Bool(true) {
            break;
        }
        path = format!("/v1/bots/r/turns?limit=2&before={}", turns.last().unwrap());
    }
    assert_eq!(
        pages,
        [
            (2, Value::Bool(true)),
            (2, Value::Bool(true)),
            (1, Value::Bool(false))
        ]
    );
    // newest first, each once
    ended.reverse();
    assert_eq!(listed, ended);
    // a cursor that is no turn of this bot is refused, naming it
    for bad in ["nonsense".to_owned(), other] {
        let (status, v) = host
            .get(&format!("/v1/bots/r/turns?before={bad}"), TOKEN)
            .await;
        assert_eq!(status, 400, "{bad}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("before=") && m.contains("no turn of bot r")),
            "{v}"
        );
    }

    // a running turn, listed before its record is stored, heads the first
    // page; the page after it starts from the newest stored turn (review:
    // its id was refused as a cursor)
    host.send("r", "slow one", None).await;
    host.wait_running("r").await;
    let (status, v) = host.get("/v1/bots/r/turns?limit=1", TOKEN).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["more"], true, "{v}");
    let running = v["turns"][0]["id"].as_str().unwrap().to_owned();
    assert!(!ended.contains(&running), "{v}");
    let (status, v) = host
        .get(&format!("/v1/bots/r/turns?limit=2&before={running}"), TOKEN)
        .await;
    assert_eq!(status, 200, "{v}");
    let ids: Vec<&str> = v["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [ended[0].as_str(), ended[1].as_str()], "{v}");
    host.shutdown().await;
}
