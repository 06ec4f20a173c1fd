//! Recall: a bot reaches every mention of a word it heard
//! more often than one SearchTranscript call shows (30 hits), by paging
//! with `offset` as the output tells it to.

use serde_json::Value;
use serde_json::json;

use super::recall::chat;
use super::recall::flush;
use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

/// "older pelicans": the best 30 mentions, then the next page as the
/// first answer says; everything else gets a reply that repeats nothing.
const PAGING: &str = r#"
[[rule]]
name = "page"
match = "^older pelicans$"
steps = [
  { tool = "SearchTranscript", args = { query = "pelican", limit = 30 } },
  { tool = "SearchTranscript", args = { query = "pelican", limit = 30, offset = 30 } },
  { tool = "SendMessage", args = { text = "Read them all." } },
]

[[rule]]
name = "chat"
steps = [ { tool = "SendMessage", args = { text = "Noted." } } ]
"#;

/// The seqs of the hits in a SearchTranscript result.
fn hit_seqs(out: &str) -> Vec<i64> {
    out.lines()
        .filter(|l| l.starts_with('['))
        .map(|l| {
            let v: Value =
                serde_json::from_str(&l[l.find('{').unwrap()..=l.find('}').unwrap()]).unwrap();
            v["seq"].as_i64().unwrap()
        })
        .collect()
}

#[tokio::test]
async fn a_bot_pages_to_mentions_past_its_first_thirty_hits() {
    let host = TestFleet::new()
        .script("s", PAGING)
        .bot(
            "r",
            "s",
            &["SendMessage", "SearchTranscript", "ReadTranscript"],
        )
        .start()
        .await;
    let mut said = Vec::new();
    for i in 0..34 {
        let (_, seq) = chat(
            &host,
            TOKEN,
            "r",
            &format!("pelican count {i} from the harbour wall"),
        )
        .await;
        said.push(seq);
    }
    flush(&host).await;
    let (session, _) = chat(&host, TOKEN, "r", "older pelicans").await;

    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let results: Vec<String> = client
        .entries_after(&session, 0)
        .await
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "SearchTranscript")
        .map(|e| {
            assert_eq!(e["is_error"], false, "{e}");
            e["content"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        results[0].starts_with("30 of 34 matching entries"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains("\"offset\": 30 for the next ones"),
        "the first page says how to reach the rest: {}",
        results[0]
    );
    assert!(
        results[1].starts_with("Entries 31 to 34 of 34 matching"),
        "{}",
        results[1]
    );
    let mut seen: Vec<i64> = results.iter().flat_map(|r| hit_seqs(r)).collect();
    seen.sort();
    assert_eq!(seen, said, "each mention once over the two pages");
}

/// A room hit's `bot` is its room id, so a person narrowing a search to
/// it with `bot=` was told there is no such bot, though they see the
/// room. They are told it is a room and how to search only its timeline;
/// someone who may not use the room still hears only "no bot".
#[tokio::test]
async fn a_room_id_given_as_bot_says_how_to_search_the_room() {
    let host = TestFleet::new()
        .script("s", super::recall::CHAT)
        .bot("r1", "s", super::recall::RECALL_TOOLS)
        .bot("r2", "s", super::recall::RECALL_TOOLS)
        .bot_of("t", "s", super::recall::RECALL_TOOLS, "bob")
        .start()
        .await;
    let (status, room) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "standup", "members": ["r1", "r2"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    let (status, posted) = host
        .post_raw(
            "/v1/groups/standup/messages",
            Some(TOKEN),
            Some("k1"),
            json!({"text": "the walrus budget is due on Friday"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{posted}");
    let timeline = posted["session"].as_str().unwrap().to_owned();
    flush(&host).await;

    let (status, v) = host.get("/v1/search?q=walrus", TOKEN).await;
    assert_eq!(status, 200, "{v}");
    let room_hit = v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["session_kind"] == "room")
        .unwrap_or_else(|| panic!("a hit in the room's timeline: {v}"))
        .clone();
    assert_eq!(room_hit["bot"], "standup", "{room_hit}");

    // narrowing by the hit's `bot`
    let (status, v) = host.get("/v1/search?q=walrus&bot=standup", TOKEN).await;
    assert_eq!(status, 404, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"standup\" is a room"), "{message}");
    assert!(
        message.contains(&format!("session={timeline}")),
        "{message}"
    );
    // in another case too, as every route taking a room finds it (QA,
    // 2026-12-05: it lost the hint)
    let (status, v) = host.get("/v1/search?q=walrus&bot=StandUp", TOKEN).await;
    assert_eq!(status, 404, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no bot \"StandUp\" for you: \"standup\" is a room")
            && message.contains(&format!("session={timeline}")),
        "{message}"
    );
    // the CLI says the command alone (QA, 2026-12-05: it printed the
    // API's `session=…` and the command)
    let (code, _, err) = cli(&["search", "walrus", "--bot", "standup"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "give its session: `botfleet search WORDS --session {timeline}`"
        )) && !err.contains("/v1/")
            && !err.contains("session="),
        "{err}"
    );
    // the advice works
    let (status, v) = host
        .get(&format!("/v1/search?q=walrus&session={timeline}"), TOKEN)
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["total"], 1, "{v}");
    assert_eq!(v["hits"][0]["session"], timeline.as_str(), "{v}");

    // bob may not use the room: the same answer as for any unknown bot
    let (status, v) = host.get("/v1/search?q=walrus&bot=standup", BOB_TOKEN).await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(
        v["error"]["message"],
        "no bot \"standup\" for you; list your bots with GET /v1/bots or `botfleet bots`",
        "{v}"
    );
    host.shutdown().await;
}
