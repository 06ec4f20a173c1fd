//! Transcript recall end to end: SearchTranscript and ReadTranscript with
//! the scripted model, and visibility across bots and users (through the
//! tools and `GET /v1/search`). Search and reindex for people are in
//! `recall_search.rs`, faults in `recall_faults.rs`; both share the
//! helpers here.

use std::time::Duration;
use std::time::Instant;

use botfleet::memory::BotId;
use botfleet::memory::IndexerActor;
use botfleet::memory::SessionId;
use futures::StreamExt;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;

pub(super) const RECALL_TOOLS: &[&str] = &["SendMessage", "SearchTranscript", "ReadTranscript"];

/// Every message not matched by an earlier rule gets a short reply that
/// repeats nothing of it (so the phrase of turn 17 is said only once).
pub(super) const CHAT: &str = r#"
[[rule]]
name = "chat"
steps = [ { tool = "SendMessage", args = { text = "Noted." } } ]
"#;

/// The phrase said once, in turn 17.
const TURN_17: &str = "Reminder: the quarterly supplier audit starts on Monday. 另外，第二家供应商被排除了，请更新名单。";

/// Varied topics in English, Chinese and both, with near misses of turn
/// 17's words (`audit`, `quarterly`, `supply`, 供应 without 商).
pub(super) fn topic(i: usize) -> String {
    const EN: [&str; 10] = [
        "the garden needs water before the heatwave",
        "chess club moved to Tuesday evenings",
        "can you find a pasta recipe without garlic",
        "my flight to Lisbon lands at 6pm",
        "the quarterly newsletter needs a new photo",
        "remind me to renew the car insurance",
        "the audit of the bike shed found a flat tyre",
        "we are running low on printer paper supply",
        "the kids want a puppy for their birthday",
        "backup of the laptop failed again last night",
    ];
    const ZH: [&str; 10] = [
        "今天天气很好我们去公园散步",
        "周末一起去爬山吧",
        "新买的咖啡机很好用",
        "会议改到下午三点",
        "火锅店的排队太长了",
        "孩子的钢琴课在周六上午",
        "电力供应中断了两个小时",
        "明天要交项目报告",
        "这个城市的地铁很方便",
        "晚饭想吃饺子",
    ];
    match i % 3 {
        0 => format!("{} (note {i})", EN[i % EN.len()]),
        1 => format!("{}（第{i}条）", ZH[i % ZH.len()]),
        _ => format!(
            "{} — {} #{i}",
            EN[(i / 3) % EN.len()],
            ZH[(i / 7) % ZH.len()]
        ),
    }
}

/// Sends `text` and waits for the end of the turn that answers it; returns
/// the session id and the message's seq.
pub(super) async fn chat(host: &TestHost, token: &str, bot: &str, text: &str) -> (String, i64) {
    let client = botfleet::client::Client::new(&host.url, token).unwrap();
    let mut events = client.events().await.unwrap();
    let key = uuid::Uuid::now_v7().to_string();
    let (status, body) = client.send_message(bot, text, &key).await.unwrap();
    assert_eq!(status.as_u16(), 202, "{body}");
    let session = body["session"].as_str().unwrap().to_owned();
    let seq = body["seq"].as_i64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut cursor = seq;
    loop {
        for e in client.entries_after(&session, cursor).await.unwrap() {
            cursor = cursor.max(e["seq"].as_i64().unwrap());
            let answered = e["inputs"]
                .as_array()
                .is_some_and(|a| a.contains(&json!(seq)));
            if e["kind"] == "turn_end" && e["status"] != "interrupted" && answered {
                return (session, seq);
            }
        }
        assert!(Instant::now() < deadline, "no turn end for {text:?}");
        let _ = tokio::time::timeout(Duration::from_secs(2), events.next()).await;
    }
}

/// The tool results of `tool` in a session: (content, is_error).
async fn tool_results(
    host: &TestHost,
    token: &str,
    session: &str,
    tool: &str,
) -> Vec<(String, bool)> {
    botfleet::client::Client::new(&host.url, token)
        .unwrap()
        .entries_after(session, 0)
        .await
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == tool)
        .map(|e| {
            (
                e["content"].as_str().unwrap().to_owned(),
                e["is_error"] == json!(true),
            )
        })
        .collect()
}

/// `(session, seq)` of the hits in a SearchTranscript result.
fn hits(out: &str) -> Vec<(String, i64)> {
    out.lines()
        .filter(|l| l.starts_with('['))
        .map(|l| {
            let v: Value =
                serde_json::from_str(&l[l.find('{').unwrap()..=l.find('}').unwrap()]).unwrap();
            (
                v["session"].as_str().unwrap().to_owned(),
                v["seq"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Sends `text` to `bot`, waits for the turn that answers it, then for
/// the index to hold all of it ([`flush`]).
pub(super) async fn said_and_indexed(host: &TestHost, bot: &str, text: &str) {
    let (status, sent) = host.send(bot, text, None).await;
    assert_eq!(status, 202, "{sent}");
    host.wait_turn_end(
        sent["session"].as_str().unwrap(),
        sent["seq"].as_i64().unwrap(),
    )
    .await;
    flush(host).await;
}

/// Waits until the index holds every entry committed so far.
pub(super) async fn flush(host: &TestHost) {
    let indexer = host
        .host
        .as_ref()
        .unwrap()
        .fleet
        .runtime()
        .indexer()
        .expect("the host runs an indexer");
    IndexerActor::flush(&indexer, Duration::from_secs(10))
        .await
        .unwrap();
}

fn dm(bot: &str, user: &str) -> SessionId {
    SessionId::derive(&BotId::new(bot).unwrap(), "dm", user)
}

#[tokio::test]
async fn after_200_turns_a_phrase_of_turn_17_is_found_first_and_read_around() {
    let started = Instant::now();
    let recall = r#"
[[rule]]
name = "recall"
match = "^recall$"
steps = [
  { calls = [
      { tool = "SearchTranscript", args = { query = "\"quarterly supplier audit\"" } },
      { tool = "SearchTranscript", args = { query = "供应商", limit = 3 } },
  ] },
  { tool = "SendMessage", args = { text = "found it" } },
]
"#;
    let host = TestFleet::new()
        .script("s", &format!("{recall}{CHAT}"))
        .bot("r", "s", RECALL_TOOLS)
        .start()
        .await;
    let mut seq17 = 0;
    let mut session = String::new();
    for turn in 1..=200 {
        let text = if turn == 17 {
            TURN_17.to_owned()
        } else {
            let t = topic(turn);
            assert!(!t.contains("supplier") && !t.contains("供应商"), "{t}");
            t
        };
        let (s, seq) = chat(&host, TOKEN, "r", &text).await;
        if turn == 17 {
            seq17 = seq;
        }
        session = s;
    }
    let chatted = started.elapsed();
    flush(&host).await;
    chat(&host, TOKEN, "r", "recall").await;
    let results = tool_results(&host, TOKEN, &session, "SearchTranscript").await;
    assert_eq!(results.len(), 2, "{results:?}");
    let (english, zh) = (&results[0].0, &results[1].0);
    assert_eq!(hits(english)[0], (session.clone(), seq17), "{english}");
    assert!(
        english.contains("«quarterly» «supplier» «audit»"),
        "{english}"
    );
    assert_eq!(hits(zh)[0], (session.clone(), seq17), "{zh}");
    assert!(zh.contains("第二家«供应商»被排除了"), "{zh}");

    // ReadTranscript around the hit (a new script names the hit; the index
    // survives the restart)
    let fleet = host.shutdown().await;
    let read = format!(
        r#"
[[rule]]
name = "read"
match = "^read$"
steps = [
  {{ tool = "ReadTranscript", args = {{ session = "{session}", seq = {seq17} }} }},
  {{ tool = "SendMessage", args = {{ text = "read it" }} }},
]
"#
    );
    std::fs::write(
        fleet.path().join("scripts/s.toml"),
        format!("{read}{recall}{CHAT}"),
    )
    .unwrap();
    let host = restart(fleet).await;
    chat(&host, TOKEN, "r", "read").await;
    let read = tool_results(&host, TOKEN, &session, "ReadTranscript").await;
    assert_eq!(read.len(), 1, "{read:?}");
    let (out, is_error) = &read[0];
    assert!(!is_error, "{out}");
    assert!(
        out.starts_with(&format!(
            "Session {session} (this conversation), entries {} to {} of",
            seq17 - 3,
            seq17 + 3
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("→ #{seq17} ")) && out.contains(TURN_17),
        "{out}"
    );
    for n in [seq17 - 3, seq17 - 1, seq17 + 1, seq17 + 3] {
        assert!(out.contains(&format!("  #{n} ")), "#{n} missing: {out}");
    }
    // a neighbour: the bot's reply to turn 17
    assert!(out.contains("(sent) Noted."), "{out}");
    host.shutdown().await;
    eprintln!(
        "200 turns in {chatted:?}; whole test {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_bot_cannot_find_another_bots_private_dm() {
    let s_dm = dm("s", "alice");
    let script = format!(
        r#"
[[rule]]
match = "^look$"
steps = [
  {{ calls = [
      {{ tool = "SearchTranscript", args = {{ query = "falcon" }} }},
      {{ tool = "SearchTranscript", args = {{ query = "falcon", session = "{s_dm}" }} }},
      {{ tool = "ReadTranscript", args = {{ session = "{s_dm}", seq = 1 }} }},
  ] }},
  {{ tool = "SendMessage", args = {{ text = "looked" }} }},
]
{CHAT}"#
    );
    // r and s are alice's, t is bob's
    let host = TestFleet::new()
        .script("s", &script)
        .bot("r", "s", RECALL_TOOLS)
        .bot("s", "s", RECALL_TOOLS)
        .bot_of("t", "s", RECALL_TOOLS, "bob")
        .start()
        .await;
    chat(&host, TOKEN, "s", "the falcon password is 7431, 蓝色海豚").await;
    chat(&host, TOKEN, "r", "hello r").await;
    chat(&host, BOB_TOKEN, "t", "hello t").await;
    flush(&host).await;

    // the API (before the bots search: their results mention falcon):
    // alice sees her bots' sessions, narrowed to r nothing; bob nothing
    let (status, v) = host.get("/v1/search?q=falcon", TOKEN).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["hits"][0]["session"], s_dm.to_string(), "{v}");
    assert_eq!(v["hits"][0]["bot"], "s");
    assert_eq!(v["hits"][0]["seq"], 1);
    assert_eq!(v["hits"][0]["where"], "DM of s with alice");
    let (status, v) = host.get("/v1/search?q=falcon&bot=r", TOKEN).await;
    assert_eq!((status, v["total"].clone()), (200, json!(0)), "{v}");
    let (status, v) = host.get("/v1/search?q=falcon", BOB_TOKEN).await;
    assert_eq!((status, v["total"].clone()), (200, json!(0)), "{v}");
    let (status, v) = host
        .get(&format!("/v1/search?q=falcon&session={s_dm}"), BOB_TOKEN)
        .await;
    assert_eq!(status, 404, "{v}");
    let (status, v) = host.get("/v1/search?q=falcon&bot=t", TOKEN).await;
    assert_eq!(status, 404, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no bot \"t\" for you"),
        "{v}"
    );

    for (token, bot, user) in [(TOKEN, "r", "alice"), (BOB_TOKEN, "t", "bob")] {
        let (session, _) = chat(&host, token, bot, "look").await;
        assert_eq!(session, dm(bot, user).to_string());
        let searches = tool_results(&host, token, &session, "SearchTranscript").await;
        assert_eq!(searches.len(), 2, "{searches:?}");
        assert!(
            !searches[0].1 && searches[0].0.starts_with("No entries match \"falcon\""),
            "{bot}: {searches:?}"
        );
        let refusal = format!("session {s_dm} is not one you may read");
        assert!(
            searches[1].1 && searches[1].0.contains(&refusal),
            "{bot}: {searches:?}"
        );
        let reads = tool_results(&host, token, &session, "ReadTranscript").await;
        assert!(
            reads[0].1 && reads[0].0.contains(&refusal) && !reads[0].0.contains("7431"),
            "{bot}: {reads:?}"
        );
    }
    // s itself finds it
    let (session, _) = chat(&host, TOKEN, "s", "look").await;
    let searches = tool_results(&host, TOKEN, &session, "SearchTranscript").await;
    assert_eq!(
        hits(&searches[0].0),
        vec![(s_dm.to_string(), 1)],
        "{searches:?}"
    );
    assert!(searches[1].0.contains("7431"), "{searches:?}");

    host.shutdown().await;
}

/// A room's public timeline is keyed by the room's id where a bot's id goes,
/// so a room named like a bot passed for that bot's own session: bob's room
/// `b` was found by alice's search and read by alice's bot `b`. Rooms are
/// reached only through membership now. (A room may no longer take a
/// bot's id; a bot listed in fleet.toml later may still take a room's,
/// as here.)
#[tokio::test]
async fn a_room_named_like_another_users_bot_stays_out_of_its_reach() {
    let script = format!(
        r#"
[[rule]]
match = "^look (.*)$"
steps = [
  {{ calls = [
      {{ tool = "SearchTranscript", args = {{ query = "platypus" }} }},
      {{ tool = "ReadTranscript", args = {{ session = "{{{{input}}}}", seq = 1 }} }},
  ] }},
  {{ tool = "SendMessage", args = {{ text = "looked" }} }},
]
{CHAT}"#
    );
    // t and u are bob's; b, alice's, comes after bob's room `b`
    let host = TestFleet::new()
        .script("s", &script)
        .bot_of("t", "s", RECALL_TOOLS, "bob")
        .bot_of("u", "s", RECALL_TOOLS, "bob")
        .start()
        .await;
    let (status, room) = host
        .post_raw(
            "/v1/groups",
            Some(BOB_TOKEN),
            None,
            json!({"name": "b", "members": ["t", "u"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    let fleet = host.shutdown().await.bot("b", "s", RECALL_TOOLS);
    fleet.write();
    let host = crate::support::fleet::restart(fleet).await;
    let (status, posted) = host
        .post_raw(
            "/v1/groups/b/messages",
            Some(BOB_TOKEN),
            Some("k1"),
            json!({"text": "bob private: the vault code is platypus-7731"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{posted}");
    let timeline = posted["session"].as_str().unwrap().to_owned();
    flush(&host).await;

    // bob finds it; alice does not, neither in all her sessions nor in b's
    let (_, v) = host.get("/v1/search?q=platypus", BOB_TOKEN).await;
    assert!(v["total"].as_u64().unwrap() >= 1, "{v}");
    for q in ["/v1/search?q=platypus", "/v1/search?q=platypus&bot=b"] {
        let (status, v) = host.get(q, TOKEN).await;
        assert_eq!((status, v["total"].clone()), (200, json!(0)), "{q}: {v}");
    }
    // nor does her bot b, by search or by reading the timeline
    let (session, _) = chat(&host, TOKEN, "b", &format!("look {timeline}")).await;
    let searches = tool_results(&host, TOKEN, &session, "SearchTranscript").await;
    assert!(
        searches[0].0.starts_with("No entries match \"platypus\""),
        "{searches:?}"
    );
    let reads = tool_results(&host, TOKEN, &session, "ReadTranscript").await;
    assert!(reads[0].1 && !reads[0].0.contains("7731"), "{reads:?}");
    host.shutdown().await;
}

/// At a small `compact_at_tokens`, ReadTranscript pages a long entry in
/// parts that fit the cap a tool result is sent with (half of it, a
/// token per character), and its "reads on" points to the next part.
/// (It paged 6,000 characters at a time, which the request clipped to
/// their start and end, and "reads on" skipped the middle it cut: QA,
/// 2026-12-06.)
#[tokio::test]
async fn read_transcript_pages_fit_a_small_context() {
    let script = format!(
        r#"
[[rule]]
match = "^[0-9a-f]{{8}}-"
steps = [
  {{ tool = "ReadTranscript", args = {{ session = "{{{{input}}}}", seq = 1, before = 0, after = 0 }} }},
  {{ tool = "SendMessage", args = {{ text = "read" }} }},
]
{CHAT}"#
    );
    let fleet = TestFleet::new()
        .script("s", &script)
        .bot("r", "s", RECALL_TOOLS)
        .host("max_text_chars = 40000\nmax_body_bytes = 1048576");
    let path = fleet.write();
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "kind = \"scripted\"",
        "kind = \"scripted\"\ncompact_at_tokens = 3000",
    );
    std::fs::write(&path, text).unwrap();
    let host = crate::support::fleet::restart(fleet).await;
    let long: String = (0..4500).map(|i| format!("t{i:05} ")).collect();
    let (session, _) = chat(&host, TOKEN, "r", &long).await;
    let (dm, _) = chat(&host, TOKEN, "r", &session).await;
    assert_eq!(dm, session);
    let reads = tool_results(&host, TOKEN, &session, "ReadTranscript").await;
    let (page, error) = &reads[0];
    assert!(!error, "{page}");
    // the cap is 1,000 tokens (a quarter of 3,000, at least 1,000): pages
    // of 500 characters, the next one named
    assert!(
        page.contains("\"offset\": 500 reads on") && !page.contains("t00072"),
        "{page}"
    );
    host.shutdown().await;
}
