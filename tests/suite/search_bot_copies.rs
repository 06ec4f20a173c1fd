//! A message between bots is found once (docs/search.md, "Messages
//! between bots are found once"): a bot's SendMessage in its
//! conversation with another bot is kept as its delivery there and as a
//! message in the other bot's session, a subagent's report as its last
//! delivery in its task session and as a message in its parent's; a
//! search that covers both found each twice.

use botfleet::memory::SessionKind;
use serde_json::Value;

use super::recall::flush;
use super::search_rooms::search;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::session_of;

const CHAT: &str = r#"
[[rule]]
bot = "r"
match = "^ask a$"
steps = [ { tool = "SendToAgent", args = { agent = "a", text = "which walrus 海象 is best?" } } ]

[[rule]]
bot = "r"
match = "^ask b$"
steps = [ { tool = "SendToAgent", args = { agent = "b", text = "which otter is best?" } } ]

[[rule]]
bot = "r"
match = "^delegate$"
steps = [ { tool = "Task", args = { description = "otters", prompt = "count the otters" } } ]

[[rule]]
bot = "r"
match = "^look for the otters$"
steps = [
  { tool = "SearchTranscript", args = { query = "forty two" } },
  { tool = "SendMessage", args = { text = "Looked." } },
]

[[rule]]
bot = "a"
match = "walrus"
steps = [ { tool = "SendMessage", args = { text = "the tusked walrus 海象最好 wins" } } ]

[[rule]]
bot = "b"
match = "otter"
steps = [ { tool = "SendToAgent", args = { agent = "r", text = "the sea otter wins" } } ]

[[rule]]
match = "count the otters"
steps = [ { tool = "SendMessage", args = { text = "halfway there" } }, { tool = "SendMessage", args = { text = "forty two otters counted" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

const TOOLS: &[&str] = &[
    "SendMessage",
    "SendToAgent",
    "Task",
    "SearchTranscript",
    "ReadTranscript",
];

async fn chat() -> TestHost {
    TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", TOOLS)
        .bot("a", "s", TOOLS)
        .bot("b", "s", TOOLS)
        .start()
        .await
}

/// r asked a (SendToAgent) and b (SendToAgent); a answered with
/// SendMessage in its conversation with r, b with SendToAgent; r
/// delegated a count of otters to a subagent, which reported. Returns
/// the subagent's id.
async fn talked(host: &TestHost) -> String {
    host.send_until_reports("r", "ask a", 1).await;
    host.send_until_reports("r", "ask b", 2).await;
    host.send_until_reports("r", "delegate", 3).await;
    flush(host).await;
    host.wait_subagent_of("r").await
}

/// a's answer to r is one hit, where it arrived (r's DM with alice, as
/// a message from a), in English and Chinese, not once more as a's
/// delivery in its conversation with r; narrowed to a (or to that
/// conversation) it is found there. A SendToAgent message was found once
/// before and still is.
#[tokio::test]
async fn a_bots_answer_to_another_bot_is_one_hit() {
    let host = chat().await;
    talked(&host).await;
    let r_dm = session_of("r", SessionKind::Dm, "alice");
    let a_with_r = session_of("a", SessionKind::Agent, "r");

    for q in [
        "tusked+walrus",
        "海象最好",
        "%22%E6%B5%B7%E8%B1%A1%E6%9C%80%E5%A5%BD%22",
    ] {
        let (total, hits) = search(&host, &format!("q={q}")).await;
        assert_eq!(total, 1, "{q}: {hits:?}");
        assert_eq!(
            (&hits[0].0, hits[0].2.as_str(), hits[0].3.as_str()),
            (&r_dm, "agent_message", "a"),
            "{q}"
        );
    }
    // r's own words to a (SendToAgent) and b's answer (SendToAgent): once
    let (total, hits) = search(&host, "q=which+walrus").await;
    assert_eq!(
        (total, hits[0].0.as_str()),
        (1, a_with_r.as_str()),
        "{hits:?}"
    );
    let (total, hits) = search(&host, "q=sea+otter").await;
    assert_eq!((total, hits[0].0.as_str()), (1, r_dm.as_str()), "{hits:?}");

    // a's side, searched without r's sessions, still has its words
    for params in [
        "q=tusked&bot=a".to_owned(),
        format!("q=tusked&session={a_with_r}"),
    ] {
        let (total, hits) = search(&host, &params).await;
        assert_eq!(total, 1, "{params}: {hits:?}");
        assert_eq!(
            (&hits[0].0, hits[0].2.as_str()),
            (&a_with_r, "delivery"),
            "{params}"
        );
    }
    let (total, hits) = search(&host, "q=tusked&bot=r").await;
    assert_eq!((total, hits[0].0.as_str()), (1, r_dm.as_str()), "{hits:?}");

    // pages count what is shown: `wins` is in a's and b's answers, two
    // hits on two pages of one, none repeated
    let (total, first) = search(&host, "q=wins&limit=1").await;
    let (_, second) = search(&host, "q=wins&limit=1&offset=1").await;
    assert_eq!(total, 2, "{first:?} {second:?}");
    assert_eq!((first.len(), second.len()), (1, 1));
    assert_ne!(first[0], second[0]);
    let (status, v) = host.get("/v1/search?q=wins&limit=1&offset=1", TOKEN).await;
    assert_eq!((status, &v["more"]), (200, &Value::Bool(false)), "{v}");
    host.shutdown().await;
}

/// A subagent's report is one hit, where the subagent said it (its task
/// session), not once more in its parent's DM where it arrived, through
/// the API and the parent's own SearchTranscript; the parent's DM
/// searched alone still has it.
#[tokio::test]
async fn a_subagents_report_is_one_hit() {
    let host = chat().await;
    let sub = talked(&host).await;
    let r_dm = session_of("r", SessionKind::Dm, "alice");
    let task = session_of(&sub, SessionKind::Subagent, "r");

    for params in ["q=forty+two", "q=forty+two&bot=r"] {
        let (total, hits) = search(&host, params).await;
        assert_eq!(total, 1, "{params}: {hits:?}");
        assert_eq!(
            (&hits[0].0, hits[0].2.as_str(), hits[0].3.as_str()),
            (&task, "delivery", sub.as_str()),
            "{params}"
        );
    }
    // its progress, only in its task session, is found as before
    let (total, hits) = search(&host, "q=halfway").await;
    assert_eq!((total, hits[0].0.as_str()), (1, task.as_str()), "{hits:?}");
    // the parent's DM alone: the report as it arrived
    let (total, hits) = search(&host, &format!("q=forty+two&session={r_dm}")).await;
    assert_eq!(total, 1, "{hits:?}");
    assert_eq!((&hits[0].0, hits[0].2.as_str()), (&r_dm, "agent_message"));

    // r's SearchTranscript (it sees its subagent's sessions): once
    let dm = host.complete_turn("r", "look for the otters").await;
    let out = host
        .entries(&dm)
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "SearchTranscript")
        .map(|e| e["content"].as_str().unwrap().to_owned())
        .next_back()
        .unwrap();
    let found: Vec<&str> = out.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(found.len(), 1, "{out}");
    assert!(found[0].contains(&task), "{out}");
    host.shutdown().await;
}
