//! The host end to end with the scripted model: admission, delivery,
//! idempotency, batching, interrupts, failures, isolation, bad input.

use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

#[tokio::test]
async fn a_message_is_answered_through_send_message() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (status, body) = host.send("r", "hello", Some("k1")).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "accepted");
    let session = body["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, body["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed");
    assert_eq!(end["deliveries"], 1);
    let entries = host.entries(&session).await;
    let kinds: Vec<&str> = entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "user_message",
            "assistant",
            "tool_result",
            "delivery",
            "assistant",
            "turn_end"
        ]
    );
    assert_eq!(deliveries(&entries), vec!["echo: hello".to_string()]);
    let seqs: Vec<i64> = entries.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as i64).collect::<Vec<_>>(),
        "seqs strictly increase from 1"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn the_same_key_is_one_turn_and_another_body_is_a_conflict() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let (s1, first) = host.send("r", "once", Some("same-key")).await;
    let (s2, second) = host.send("r", "once", Some("same-key")).await;
    assert_eq!((s1, s2), (202, 200));
    assert_eq!(second["status"], "duplicate");
    assert_eq!(second["seq"], first["seq"]);
    assert_eq!(second["entry_id"], first["entry_id"]);
    let (s3, third) = host.send("r", "a different text", Some("same-key")).await;
    assert_eq!(s3, 409, "{third}");
    assert_eq!(third["status"], "conflict");
    assert_eq!(third["original"]["seq"], first["seq"]);
    let message = third["error"]["message"].as_str().unwrap();
    assert!(message.contains("different message"), "{message}");
    // a key names one message of the user's across all bots: the same text
    // to another bot is a conflict that says where the key went
    let (s4, fourth) = host.send("q", "once", Some("same-key")).await;
    assert_eq!(s4, 409, "{fourth}");
    let message = fourth["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("your message to r in another conversation")
            && message.contains(session_of(&first)),
        "{message}"
    );
    let session = first["session"].as_str().unwrap();
    host.wait_turn_end(session, first["seq"].as_i64().unwrap())
        .await;
    let entries = host.entries(session).await;
    let users: Vec<&str> = entries
        .iter()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(users, vec!["once"], "nothing lost, nothing doubled");
    let turns = entries.iter().filter(|e| e["kind"] == "turn_end").count();
    assert_eq!(turns, 1);
    host.shutdown().await;
}

#[tokio::test]
async fn a_turn_that_does_not_deliver_is_reminded_once_then_undelivered() {
    let silent = r#"
[[rule]]
steps = [ { text = "I will think quietly." } ]
"#;
    let host = TestFleet::new()
        .script("s", silent)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, body) = host.send("r", "hi", None).await;
    let session = body["session"].as_str().unwrap();
    let end = host
        .wait_turn_end(session, body["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "undelivered");
    let entries = host.entries(session).await;
    assert_eq!(
        entries.iter().filter(|e| e["kind"] == "reminder").count(),
        1
    );
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "notice" && e["code"] == "undelivered")
    );
    host.shutdown().await;
}

#[tokio::test]
async fn the_reminder_gets_a_reply_out() {
    let script = r#"
[[rule]]
match = "runtime reminder"
steps = [ { tool = "SendMessage", args = { text = "sorry, here it is" } } ]

[[rule]]
steps = [ { text = "thinking only" } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, body) = host.send("r", "question", None).await;
    let session = body["session"].as_str().unwrap();
    let end = host
        .wait_turn_end(session, body["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed");
    assert_eq!(
        deliveries(&host.entries(session).await),
        vec!["sorry, here it is".to_string()]
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_failing_model_leaves_a_visible_retryable_failure() {
    let script = r#"
[[rule]]
match = "^fail"
steps = [ { fail = "provider down" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "recovered: {{inputs}}" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, body) = host.send("r", "fail please", None).await;
    let session = body["session"].as_str().unwrap().to_owned();
    let seq = body["seq"].as_i64().unwrap();
    let end = host.wait_turn_end(&session, seq).await;
    assert_eq!(end["status"], "failed");
    let entries = host.entries(&session).await;
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap();
    assert!(
        notice["text"].as_str().unwrap().contains("provider down"),
        "{notice}"
    );
    let turn = notice["retry_turn"].as_str().unwrap();
    let (status, retry) = host
        .post_raw(&format!("/v1/turns/{turn}/retry"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 200, "{retry}");
    assert_eq!(retry["requeued"], 1);
    // the retried input still says "fail please": the failing rule matches again
    let second = host
        .wait_for(&session, |es| {
            let ends: Vec<_> = es
                .iter()
                .filter(|e| e["kind"] == "turn_end")
                .cloned()
                .collect();
            (ends.len() >= 2).then(|| ends[1].clone())
        })
        .await;
    assert_eq!(second["status"], "failed");
    assert_eq!(second["inputs"], json!([seq]));
    host.shutdown().await;
}

#[tokio::test]
async fn users_see_only_their_own_bots() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot_of("b2", "s", &["SendMessage"], "bob")
        .start()
        .await;
    let (_, alice) = host.get("/v1/bots", TOKEN).await;
    let ids: Vec<&str> = alice["bots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["r"]);
    let (status, _) = host
        .post_raw(
            "/v1/bots/b2/messages",
            Some(TOKEN),
            None,
            r#"{"text":"hi"}"#,
        )
        .await;
    assert_eq!(status, 404, "alice cannot write to bob's bot");
    let (_, sent) = host.send("r", "private", None).await;
    let session = sent["session"].as_str().unwrap();
    let (status, _) = host
        .get(&format!("/v1/sessions/{session}/entries"), BOB_TOKEN)
        .await;
    assert_eq!(status, 404, "bob cannot read alice's session");
    host.shutdown().await;
}

#[tokio::test]
async fn a_dm_not_written_to_yet_reads_as_an_empty_page() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot_of("b2", "s", &["SendMessage"], "bob")
        .start()
        .await;
    let (status, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    assert_eq!(status, 200, "{dm}");
    assert_eq!(dm["last_seq"], 0);
    let session = dm["session"].as_str().unwrap();
    let path = format!("/v1/sessions/{session}/entries");
    let (status, page) = host.get(&path, TOKEN).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        page,
        json!({"session": session, "bot": "r", "kind": "dm", "peer": "alice", "last_seq": 0, "entries": []})
    );
    // not for another user, nor another user's own DM not written to yet
    let (status, _) = host.get(&path, BOB_TOKEN).await;
    assert_eq!(status, 404, "bob cannot read alice's DM");
    let (_, bobs) = host.get("/v1/bots/b2/session", BOB_TOKEN).await;
    let bobs = bobs["session"].as_str().unwrap();
    let (status, _) = host
        .get(&format!("/v1/sessions/{bobs}/entries"), TOKEN)
        .await;
    assert_eq!(status, 404, "alice cannot read bob's DM");
    // an id no DM of alice's has is unknown
    let last = if session.ends_with('0') { "1" } else { "0" };
    let unknown = format!("{}{last}", &session[..session.len() - 1]);
    let (status, _) = host
        .get(&format!("/v1/sessions/{unknown}/entries"), TOKEN)
        .await;
    assert_eq!(status, 404);
    // once written to, the same route pages the entries as before
    let (_, sent) = host.send("r", "hello", None).await;
    assert_eq!(sent["session"], session);
    let (_, page) = host.get(&path, TOKEN).await;
    assert_eq!(page["entries"][0]["text"], "hello", "{page}");
    assert!(page["last_seq"].as_i64().unwrap() >= 1, "{page}");
    host.shutdown().await;
}

#[tokio::test]
async fn an_entries_pages_last_seq_is_never_behind_its_entries() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, first) = host.send("r", "m0", None).await;
    let session = session_of(&first).to_owned();
    let path = format!("/v1/sessions/{session}/entries");
    // messages and the bot's answers commit while the page is read
    let writer = {
        let host_url = host.url.clone();
        tokio::spawn(async move {
            let c = botfleet::client::Client::new(&host_url, TOKEN).unwrap();
            for i in 1..150 {
                let (status, body) = c
                    .send_message("r", &format!("m{i}"), &format!("k{i}"))
                    .await
                    .unwrap();
                assert_eq!(status.as_u16(), 202, "{body}");
            }
        })
    };
    let mut reads = 0;
    let mut newest = 0_i64;
    while !writer.is_finished() || reads == 0 {
        let after = (newest - 5).max(0).to_string();
        let (status, page) = host.get(&format!("{path}?after={after}"), TOKEN).await;
        assert_eq!(status, 200, "{page}");
        let last_seq = page["last_seq"].as_i64().unwrap();
        for e in page["entries"].as_array().unwrap() {
            let seq = e["seq"].as_i64().unwrap();
            assert!(
                seq <= last_seq,
                "entry {seq} beyond last_seq {last_seq} (read {reads})"
            );
        }
        newest = last_seq;
        reads += 1;
    }
    writer.await.unwrap();
    host.shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_clear_errors_and_loses_nothing() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .host("max_body_bytes = 4096\nmax_text_chars = 100")
        .start()
        .await;
    let cases: Vec<(&str, Option<&str>, String, u16, &str)> = vec![
        (
            "/v1/bots/r/messages",
            Some(TOKEN),
            "{not json".into(),
            400,
            "not valid JSON",
        ),
        (
            "/v1/bots/r/messages",
            Some(TOKEN),
            r#"{"txt":"x"}"#.into(),
            400,
            "text",
        ),
        (
            "/v1/bots/r/messages",
            Some(TOKEN),
            r#"{"text":"   "}"#.into(),
            400,
            "empty",
        ),
        (
            "/v1/bots/r/messages",
            Some(TOKEN),
            json!({"text": "x".repeat(101)}).to_string(),
            400,
            "limit is 100",
        ),
        (
            "/v1/bots/r/messages",
            Some(TOKEN),
            json!({"text": "x".repeat(5000)}).to_string(),
            413,
            "larger than 4096",
        ),
        (
            "/v1/bots/nobody/messages",
            Some(TOKEN),
            r#"{"text":"x"}"#.into(),
            404,
            "no bot",
        ),
        (
            "/v1/bots/r/messages",
            Some("wrong-token"),
            r#"{"text":"x"}"#.into(),
            401,
            "unknown token",
        ),
        (
            "/v1/bots/r/messages",
            None,
            r#"{"text":"x"}"#.into(),
            401,
            "Authorization",
        ),
        (
            "/v1/bots/bad%20id/messages",
            Some(TOKEN),
            r#"{"text":"x"}"#.into(),
            400,
            "invalid bot id",
        ),
        (
            "/v1/bots",
            Some(TOKEN),
            r#"{"text":"x"}"#.into(),
            405,
            "POST is not allowed on /v1/bots",
        ),
    ];
    for (path, token, body, want, says) in cases {
        let (status, answer) = host.post_raw(path, token, None, body.clone()).await;
        assert_eq!(status, want, "{path} {body:.60}: {answer}");
        let msg = answer["error"]["message"].as_str().unwrap_or("");
        assert!(msg.contains(says), "{path}: {msg:?} should say {says:?}");
    }
    let (status, answer) = host.get("/v1/sessions/not-a-uuid/entries", TOKEN).await;
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = host.get("/v1/nothing-here", TOKEN).await;
    assert_eq!(status, 404);
    assert_eq!(answer["error"]["code"], "not_found", "{answer}");
    // a wrong method is a JSON error too, with the methods that are allowed
    let resp = reqwest::Client::new()
        .delete(format!("{}/v1/bots", host.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    let allow = resp
        .headers()
        .get("allow")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(allow.as_deref(), Some("GET,HEAD"));
    let answer: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(answer["error"]["code"], "method_not_allowed", "{answer}");
    // the host still works and nothing was admitted by the bad requests
    let (status, ok) = host.send("r", "fine", None).await;
    assert_eq!(status, 202);
    assert_eq!(ok["seq"], 1);
    host.shutdown().await;
}

fn session_of(sent: &serde_json::Value) -> &str {
    sent["session"].as_str().unwrap()
}

/// `GET /v1/bots` counts each bot's turns by status (kept by the store as
/// turns start and end, no longer counted over every turn stored): a
/// completed turn, a failed one and its retry (a new turn) are counted
/// where they belong, other bots' turns are not, and the counts match the
/// bot's own list of turns.
#[tokio::test]
async fn the_bot_list_counts_turns_by_status() {
    let script = r#"
[[rule]]
match = "^fail"
steps = [ { fail = "provider down" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let (_, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(list["bots"][0]["turns"], json!({}), "{list}");
    for (bot, text) in [("r", "hello"), ("r", "fail please"), ("q", "hi")] {
        let (_, body) = host.send(bot, text, None).await;
        let session = body["session"].as_str().unwrap().to_owned();
        host.wait_turn_end(&session, body["seq"].as_i64().unwrap())
            .await;
    }
    let (_, turns) = host.get("/v1/bots/r/turns", TOKEN).await;
    let failed = turns["turns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["status"] == "failed")
        .unwrap()
        .clone();
    let (status, retry) = host.retry(failed["id"].as_str().unwrap()).await;
    assert_eq!(status, 200, "{retry}");
    let session = failed["session"].as_str().unwrap();
    host.wait_for(session, |es| {
        (es.iter().filter(|e| e["kind"] == "turn_end").count() >= 3).then_some(json!(null))
    })
    .await;
    let (_, list) = host.get("/v1/bots", TOKEN).await;
    let counts = |id: &str| {
        list["bots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == id)
            .unwrap()["turns"]
            .clone()
    };
    assert_eq!(counts("r"), json!({"completed": 1, "failed": 2}), "{list}");
    assert_eq!(counts("q"), json!({"completed": 1}), "{list}");
    let (_, turns) = host.get("/v1/bots/r/turns", TOKEN).await;
    let mut tally = serde_json::Map::new();
    for t in turns["turns"].as_array().unwrap() {
        let n = tally
            .entry(t["status"].as_str().unwrap())
            .or_insert(json!(0));
        *n = json!(n.as_i64().unwrap() + 1);
    }
    assert_eq!(counts("r"), json!(tally), "{turns}");
    host.shutdown().await;
}
