//! A room message is found once, on the room's timeline: the members'
//! own sessions hold copies of it (the coordinator's input quoting it,
//! the member's delivery that the timeline publishes), which a search
//! that covers the timeline too leaves out (docs/search.md, "Room
//! messages are found once").

use botfleet::memory::BotId;
use botfleet::memory::SessionKey;
use botfleet::memory::SessionKind;
use serde_json::Value;
use serde_json::json;

use super::recall::flush;
use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

/// r1 answers the tacos in English, r2 in Chinese and English; `look it
/// up` (a DM to r1) searches for the tacos; anything else stays silent.
const TACOS: &str = r#"
[[rule]]
bot = "b1"
match = "^find zanzibar$"
steps = [
  { tool = "SearchTranscript", args = { query = "zanzibar" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]

[[rule]]
bot = "r1"
match = "^look it up$"
steps = [
  { tool = "SearchTranscript", args = { query = "fish tacos" } },
  { tool = "SendMessage", args = { text = "Looked." } },
]

[[rule]]
bot = "r1"
match = "fish tacos"
steps = [ { tool = "SendMessage", args = { text = "the grilled halibut wins" } } ]

[[rule]]
bot = "r2"
match = "fish tacos"
steps = [ { tool = "SendMessage", args = { text = "烤鱼也不错 with lime" } } ]

[[rule]]
steps = [ { text = "nothing to add" } ]
"#;

const TOOLS: &[&str] = &["SendMessage", "SearchTranscript", "ReadTranscript"];

fn member_session(bot: &str, room: &str) -> String {
    SessionKey {
        bot: BotId::new(bot).unwrap(),
        kind: SessionKind::Group,
        peer: room.into(),
    }
    .id()
    .to_string()
}

/// `GET /v1/search` as alice: (total, (session, seq, kind, author) of each hit).
pub(super) async fn search(
    host: &TestHost,
    params: &str,
) -> (u64, Vec<(String, i64, String, String)>) {
    let (status, v) = host.get(&format!("/v1/search?{params}"), TOKEN).await;
    assert_eq!(status, 200, "{params}: {v}");
    let hits = v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["session"].as_str().unwrap().to_owned(),
                h["seq"].as_i64().unwrap(),
                h["kind"].as_str().unwrap().to_owned(),
                h["author"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (v["total"].as_u64().unwrap(), hits)
}

/// A room "lunch" of r1 and r2 that discussed the fish tacos; returns the
/// timeline's id and the message's seq. r3 is in no room.
async fn lunch() -> (TestHost, String, i64) {
    let host = TestFleet::new()
        .script("s", TACOS)
        .bot("r1", "s", TOOLS)
        .bot("r2", "s", TOOLS)
        .bot("r3", "s", TOOLS)
        .start()
        .await;
    let (status, room) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "lunch", "members": ["r1", "r2"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    let (posted, run) = host
        .discuss(TOKEN, "lunch", "shall we order fish tacos for the offsite?")
        .await;
    let replies: Vec<&Value> = run.iter().filter(|e| e["kind"] == "delivery").collect();
    assert_eq!(replies.len(), 2, "{run:?}");
    flush(&host).await;
    let timeline = posted["session"].as_str().unwrap().to_owned();
    (host, timeline, posted["seq"].as_i64().unwrap())
}

/// The person's message, and each member's reply, is one hit on the
/// timeline, not one more per member that was shown it (and per member
/// that said it): a search for a room phrase in a room of N members gave
/// N+1 hits.
#[tokio::test]
async fn a_room_message_is_one_hit_on_the_timeline() {
    let (host, timeline, seq) = lunch().await;

    let (total, hits) = search(&host, "q=fish+tacos").await;
    assert_eq!(total, 1, "{hits:?}");
    assert_eq!(
        hits[0],
        (timeline.clone(), seq, "user_message".into(), "alice".into())
    );

    // a member's reply: once, on the timeline, authored by the member
    let (total, hits) = search(&host, "q=halibut").await;
    assert_eq!(total, 1, "{hits:?}");
    assert_eq!((&hits[0].0, hits[0].2.as_str()), (&timeline, "delivery"));
    assert_eq!(hits[0].3, "r1");
    // Chinese and English mixed, a phrase too
    for q in [
        "烤鱼+lime",
        "%22%E7%83%A4%E9%B1%BC%E4%B9%9F%E4%B8%8D%E9%94%99%22",
    ] {
        let (total, hits) = search(&host, &format!("q={q}")).await;
        assert_eq!(total, 1, "{q}: {hits:?}");
        assert_eq!((&hits[0].0, hits[0].3.as_str()), (&timeline, "r2"), "{q}");
    }

    // narrowed to a member, the same: it sees the timeline
    for bot in ["r1", "r2"] {
        let (total, hits) = search(&host, &format!("q=fish+tacos&bot={bot}")).await;
        assert_eq!(total, 1, "{bot}: {hits:?}");
        assert_eq!(hits[0].0, timeline, "{bot}");
    }
    host.shutdown().await;
}

/// Searched alone, a member's own session still finds what the member
/// said there (and the input it was given), and the timeline alone its
/// messages.
#[tokio::test]
async fn a_members_own_session_still_finds_its_words() {
    let (host, timeline, _) = lunch().await;
    let r1 = member_session("r1", "lunch");

    let (total, hits) = search(&host, &format!("q=halibut&session={r1}")).await;
    assert_eq!(total, 1, "{hits:?}");
    assert_eq!((&hits[0].0, hits[0].2.as_str()), (&r1, "delivery"));
    let (total, hits) = search(&host, &format!("q=fish+tacos&session={r1}")).await;
    assert_eq!(total, 1, "{hits:?}");
    assert_eq!((&hits[0].0, hits[0].2.as_str()), (&r1, "event"));

    let (total, hits) = search(&host, &format!("q=halibut&session={timeline}")).await;
    assert_eq!(total, 1, "{hits:?}");
    assert_eq!(hits[0].0, timeline);
    host.shutdown().await;
}

/// r1's SearchTranscript for the tacos (asked in its DM): its hits'
/// `(session, seq)`.
async fn r1_looks_it_up(host: &TestHost) -> (String, Vec<(String, i64)>) {
    let dm = host.complete_turn("r1", "look it up").await;
    let out: Vec<String> = host
        .entries(&dm)
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "SearchTranscript")
        .map(|e| e["content"].as_str().unwrap().to_owned())
        .collect();
    let out = out.last().unwrap().clone();
    let hits = out
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| {
            let v: Value =
                serde_json::from_str(&l[l.find('{').unwrap()..=l.find('}').unwrap()]).unwrap();
            (
                v["session"].as_str().unwrap().to_owned(),
                v["seq"].as_i64().unwrap(),
            )
        })
        .collect();
    (out, hits)
}

/// A member's own search (SearchTranscript) finds the room message once
/// too, on the timeline; once the member has left the room (it no longer
/// sees the timeline), it still finds what it was shown, in its own
/// session.
#[tokio::test]
async fn a_members_search_tool_finds_the_room_message_once() {
    let (host, timeline, seq) = lunch().await;
    let (out, hits) = r1_looks_it_up(&host).await;
    assert_eq!(hits, vec![(timeline, seq)], "{out}");

    let (status, room) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/lunch/members",
            TOKEN,
            Some(json!({"members": ["r2", "r3"]})),
        )
        .await;
    assert_eq!(status, 200, "{room}");
    let (out, hits) = r1_looks_it_up(&host).await;
    assert_eq!(hits, vec![(member_session("r1", "lunch"), 1)], "{out}");
    host.shutdown().await;
}

/// Bob's bot b1 shown a message of alice's room, taken out of the room
/// and added back: bob reads the timeline from the change that added it
/// back, so the earlier message is found in b1's own session, in bob's
/// search and in b1's. Regression (QA): its copy there was left out as a
/// room copy while the timeline's was hidden by the floor, and the
/// message was found nowhere; what comes after the rejoin is still found
/// once, on the timeline.
#[tokio::test]
async fn a_message_before_a_bot_was_added_back_is_still_found() {
    let host = TestFleet::new()
        .script("s", TACOS)
        .bot("r1", "s", TOOLS)
        .bot("r2", "s", TOOLS)
        .bot_of("b1", "s", TOOLS, "bob")
        .bot_lines("shareable = true")
        .start()
        .await;
    let (status, room) = host.create_room(TOKEN, "lunch", &["r1", "b1"]).await;
    assert_eq!(status, 201, "{room}");
    host.discuss(TOKEN, "lunch", "the zanzibar figures are in")
        .await;
    let members = |list: &[&str]| json!({ "members": list });
    for list in [["r1", "r2"], ["r1", "b1"]] {
        let (status, v) = host
            .call(
                reqwest::Method::PUT,
                "/v1/groups/lunch/members",
                TOKEN,
                Some(members(&list)),
            )
            .await;
        assert_eq!(status, 200, "{v}");
    }
    let (posted, _) = host.discuss(TOKEN, "lunch", "more zanzibar news").await;
    let timeline = posted["session"].as_str().unwrap().to_owned();
    flush(&host).await;
    let own = member_session("b1", "lunch");
    for params in ["q=zanzibar", "q=zanzibar&bot=b1"] {
        let (status, v) = host.get(&format!("/v1/search?{params}"), BOB_TOKEN).await;
        assert_eq!(status, 200, "{v}");
        let hits: Vec<(&str, &str)> = v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["session"].as_str().unwrap(),
                    h["snippet"].as_str().unwrap(),
                )
            })
            .collect();
        // the earlier message once, where bob may read it (b1's input);
        // the later one once, on the timeline
        let earlier: Vec<_> = hits.iter().filter(|(_, t)| t.contains("figures")).collect();
        let later: Vec<_> = hits.iter().filter(|(_, t)| t.contains("news")).collect();
        assert_eq!(earlier.len(), 1, "{params}: {v:#}");
        assert_eq!(earlier[0].0, own, "{params}: {v:#}");
        assert_eq!(later.len(), 1, "{params}: {v:#}");
        assert_eq!(later[0].0, timeline, "{params}: {v:#}");
    }
    // and b1's own SearchTranscript finds both, each once
    let (end, entries) = host.end_turn_as("b1", BOB_TOKEN, "find zanzibar").await;
    assert_eq!(end["status"], "completed", "{entries:#?}");
    let found = entries
        .iter()
        .rev()
        .find(|e| e["kind"] == "delivery")
        .and_then(|e| e["text"].as_str())
        .unwrap_or_default();
    assert_eq!(found.matches("figures").count(), 1, "{found}");
    assert_eq!(found.matches("news").count(), 1, "{found}");
    host.shutdown().await;
}
