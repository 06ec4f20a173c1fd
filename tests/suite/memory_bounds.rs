//! Memory and the summariser stay within bounds derived from the
//! provider's `compact_at_tokens`: a summariser that is down is not called
//! before every step once a compaction failed; the memory block of the
//! prompt (and a memory update inside an epoch) is bounded, so a bot that
//! remembers much does not compact at every turn; the fact extraction's
//! request is clipped like a turn's.

use std::time::Duration;

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;
use crate::support::openai_server::noted_turn;

fn system_text(request: &Value) -> &str {
    request["messages"][0]["content"].as_str().unwrap_or("")
}

fn is_compaction(request: &Value) -> bool {
    system_text(request).starts_with("You summarise")
}

fn is_extraction(request: &Value) -> bool {
    system_text(request).starts_with("You maintain the long-term memory")
}

async fn fleet(server: &OpenAiServer, threshold: u64, runtime: &str) -> TestHost {
    TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            &format!("max_retries = 0\ncompact_at_tokens = {threshold}"),
        )
        .bot("r", "main", &["SendMessage", "Remember"])
        .runtime(&format!("debounce_ms = 0\n{runtime}"))
        .start()
        .await
}

/// Sends `text` and waits for its turn to complete; returns the session.
async fn turn(host: &TestHost, text: &str) -> String {
    let (_, sent) = host.send("r", text, None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    session
}

fn compactions(server: &OpenAiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| is_compaction(&r.body))
        .count()
}

/// Regression (finding 1): the token marks ignored the hold a failed
/// compaction sets, so with the summariser down and the context past
/// `compact_at_tokens`, every turn called it after the turn and before
/// each of its steps (41 failed calls in 30 turns). Now after a failure
/// no check calls it again before a quarter window of entries more.
#[tokio::test]
async fn a_summariser_that_is_down_is_not_called_before_every_step() {
    let server = OpenAiServer::builder()
        .responder(|request| {
            if is_compaction(request) {
                return Reply::error(503, "the summariser is down");
            }
            noted_turn(request)
        })
        .start()
        .await;
    // a window of 40 entries: a failure holds compaction for 10 entries,
    // two turns of five
    let host = fleet(
        &server,
        1000,
        "extract_memory = false\ncontext_entries = 40",
    )
    .await;
    let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(25);
    for i in 0..12 {
        turn(&host, &format!("note {i}: {filler}")).await;
    }
    let turn_requests = server.requests().len() - compactions(&server);
    assert_eq!(turn_requests, 24, "two steps a turn");
    // the context passes the mark by the fifth turn: about one attempt
    // per two turns from there (old code: three a turn, over 20)
    let tried = compactions(&server);
    assert!(
        (1..=8).contains(&tried),
        "{tried} compaction calls in 12 turns"
    );
    host.shutdown().await;
}

/// A note of about 900 characters of words the tokenizer does not merge.
fn note_text(i: usize) -> String {
    let words: Vec<String> = (0..110).map(|w| format!("w{i}x{w}")).collect();
    format!("note {i}: {}", words.join(" "))
}

/// Seeding: the turn whose input starts with "seed" remembers `n` notes,
/// one a step; "remember <text>" remembers one important note; anything
/// else is answered with SendMessage.
fn memory_reply(request: &Value, n: usize) -> Reply {
    if is_compaction(request) {
        return Reply::text("SUMMARY: the person had the bot remember notes.");
    }
    let input = last_user_text(request).unwrap_or("");
    let done = request["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let after_tool = last_message(request).is_some_and(|m| m["role"] == "tool");
    if input.contains("seed the notes") && done < n {
        let args = json!({ "text": note_text(done), "layer": "notes", "expires_in_hours": 240 });
        return Reply::tool_call(&format!("call_{done}"), "Remember", args.to_string());
    }
    if let Some(fact) = input.split("remember this: ").nth(1)
        && !after_tool
    {
        let args = json!({ "text": fact, "layer": "notes", "importance": 5 });
        return Reply::tool_call("call_r", "Remember", args.to_string());
    }
    noted_turn(request)
}

/// Regression (finding 2): the memory block was not bounded: 20 notes of
/// 900 characters made every request's system message pass
/// `compact_at_tokens`, so every turn compacted (summarising only that
/// turn), and a Remember inside an epoch appended the whole fresh block
/// again. Now the block takes at most its share (`compact_at_tokens`/8,
/// at least 256 tokens) and says how many items it left out, turns after
/// the first compaction do not compact, and the update holds only the new
/// item.
#[tokio::test]
async fn a_large_memory_stays_within_its_share_of_the_context() {
    const NOTES: usize = 20;
    let server = OpenAiServer::builder()
        .responder(|request| memory_reply(request, NOTES))
        .start()
        .await;
    let host = fleet(&server, 3000, "extract_memory = false").await;
    turn(&host, "seed the notes").await;
    let bare_system = system_text(&server.requests()[0].body).len();
    // the seeding turn's context is compacted (in chunks) within a few
    // turns; the next epoch's system message holds the memory block
    let mut turns = 0;
    while !server
        .requests()
        .iter()
        .rev()
        .find(|r| !is_compaction(&r.body))
        .is_some_and(|r| system_text(&r.body).contains("## Notes"))
    {
        assert!(turns < 8, "no compaction brought the memory block in");
        turn(&host, &format!("hello {turns}")).await;
        turns += 1;
    }
    let before = server.requests().len();
    for i in 0..4 {
        turn(&host, &format!("small talk {i}")).await;
    }
    let requests = server.requests();
    let later: Vec<&Value> = requests[before..].iter().map(|r| &r.body).collect();
    let compacted = later.iter().filter(|r| is_compaction(r)).count();
    assert_eq!(
        compacted, 0,
        "small turns compacted because of the memory block"
    );
    for r in later.iter().filter(|r| !is_compaction(r)) {
        let system = system_text(r);
        // 375 tokens of notes are well under 3,000 characters; all 20
        // notes are about 19,000
        assert!(
            system.len() < bare_system + 3_000,
            "system message of {} characters",
            system.len()
        );
        assert!(
            system.contains("more remembered items are not shown"),
            "{system}"
        );
    }

    // inside the epoch, a new item goes in as an update holding only it
    turn(&host, "remember this: the person's cat is called Miso").await;
    let before = server.requests().len();
    turn(&host, "hello again").await;
    let requests = server.requests();
    // the update follows the turn's input, joined to it as one user-side
    // message: from its heading to the end
    let updates: Vec<String> = requests[before..]
        .iter()
        .filter(|r| !is_compaction(&r.body))
        .flat_map(|r| r.messages().to_vec())
        .filter_map(|m| {
            let content = m["content"].as_str()?;
            let at = content.find("[memory update]")?;
            Some(content[at..].to_owned())
        })
        .collect();
    assert!(!updates.is_empty(), "no memory update was sent");
    for u in updates {
        assert!(u.contains("Miso"), "{u}");
        assert!(
            u.len() < 1_000,
            "memory update of {} characters: {u}",
            u.len()
        );
    }
    host.shutdown().await;
}

/// Regression (finding 3): the fact extraction sent the person's message
/// whole (20,000 characters), where a turn's request clips it; on a
/// small-window model the extraction failed on its context. Now each text
/// it reads is clipped like a turn's message, within a budget derived
/// from `compact_at_tokens`.
#[tokio::test]
async fn the_fact_extraction_request_is_bounded() {
    let server = OpenAiServer::builder()
        .responder(|request| {
            if is_extraction(request) {
                return Reply::text(r#"{"add": []}"#);
            }
            noted_turn(request)
        })
        .start()
        .await;
    let host = fleet(&server, 1000, "").await;
    let words: Vec<String> = (0..3_000).map(|w| format!("t{w}")).collect();
    let long = format!("please read this: {}", words.join(" "));
    assert!(long.len() > 15_000);
    turn(&host, &long).await;
    let extraction = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let seen = server.request_count();
            if let Some(r) = server
                .requests()
                .into_iter()
                .find(|r| is_extraction(&r.body))
            {
                return r;
            }
            server.wait_for_requests(seen + 1).await;
        }
    })
    .await
    .expect("no fact extraction request");
    let user = extraction.messages()[1]["content"].as_str().unwrap();
    // the clip keeps about 1,000 tokens of the message
    assert!(
        user.len() < 9_000,
        "extraction input of {} characters",
        user.len()
    );
    assert!(user.contains("characters are cut here"), "{user}");
    assert!(user.contains("t2999"), "the message's end is kept");
    host.shutdown().await;
}
