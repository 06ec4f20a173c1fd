//! Memory end to end: Remember and Forget through the scripted model, the
//! memory API, scopes across bots and users, limits, notes, extraction.

use std::time::Duration;

use botfleet::actors::extract_after_turn;
use botfleet::actors::render_memory;
use botfleet::memory::BotId;
use botfleet::memory::BotRecord;
use botfleet::memory::MemoryId;
use botfleet::memory::MemorySnapshot;
use botfleet::memory::Store;
use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

const DAY: i64 = 86_400_000;

fn script() -> String {
    let fill: Vec<String> = (0..101)
        .map(|i| format!("{{ tool = \"Remember\", args = {{ text = \"fact number {i}\", scope = \"agent\" }} }}"))
        .collect();
    let mut chars: Vec<String> = (0..8)
        .map(|i| {
            format!(
                "{{ tool = \"Remember\", args = {{ text = \"{i}{}\", scope = \"agent\" }} }}",
                "x".repeat(499)
            )
        })
        .collect();
    chars.push("{ tool = \"Remember\", args = { text = \"one more\", scope = \"agent\" } }".into());
    chars.push(format!(
        "{{ tool = \"Remember\", args = {{ text = \"{}\", scope = \"agent\" }} }}",
        "y".repeat(501)
    ));
    format!(
        r#"
[[rule]]
match = "(?i)^I prefer tea"
steps = [
  {{ tool = "Remember", args = {{ text = "Prefers tea over coffee" }} }},
  {{ tool = "SendMessage", args = {{ text = "{{{{tool_result}}}}" }} }},
]

[[rule]]
match = "(?i)^note"
steps = [
  {{ tool = "Remember", args = {{ text = "Waiting for the ACME invoice", layer = "notes", expires_in_hours = 1 }} }},
  {{ tool = "SendMessage", args = {{ text = "{{{{tool_result}}}}" }} }},
]

[[rule]]
match = "(?i)^forget tea"
steps = [
  {{ tool = "Forget", args = {{ matching = "tea" }} }},
  {{ tool = "SendMessage", args = {{ text = "{{{{tool_result}}}}" }} }},
]

[[rule]]
match = "(?i)^fill"
steps = [
  {{ calls = [{fill}] }},
  {{ tool = "SendMessage", args = {{ text = "done" }} }},
]

[[rule]]
match = "(?i)^chars"
steps = [
  {{ calls = [{chars}] }},
  {{ tool = "SendMessage", args = {{ text = "done" }} }},
]

[[rule]]
purpose = "extract"
match = "(?s)I moved to Berlin"
steps = [{{ text = '{{"add": [{{"text": "Lives in Berlin"}}], "remove": ["m-aaaaaaaaaaaa"]}}' }}]

[[rule]]
purpose = "extract"
match = "(?s)I keep bees"
steps = [{{ text = '{{"add": [{{"text": "Keeps bees", "importance": 4.0}}, {{"text": "Owns a boat", "importance": 4.5}}]}}' }}]

[[rule]]
purpose = "extract"
match = "(?s)broken"
steps = [{{ fail = "the extractor is down" }}]
"#,
        fill = fill.join(", "),
        chars = chars.join(", ")
    )
}

const TOOLS: &[&str] = &["SendMessage", "Remember", "Forget"];

async fn start() -> TestHost {
    TestFleet::new()
        .script("s", &script())
        .bot("a1", "s", TOOLS)
        .bot("a2", "s", TOOLS)
        .bot("f1", "s", TOOLS)
        .bot("c1", "s", TOOLS)
        .bot("p1", "s", TOOLS)
        .bot_lines("projects = [\"apollo\"]")
        .bot_of("b1", "s", TOOLS, "bob")
        .start()
        .await
}

fn store(host: &TestHost) -> Store {
    host.host.as_ref().unwrap().fleet.store().clone()
}

async fn bot(host: &TestHost, id: &str) -> BotRecord {
    store(host)
        .get_bot(&BotId::new(id).unwrap())
        .await
        .unwrap()
        .unwrap()
}

/// Sends `text` to `bot` and waits for the turn; returns the session's
/// entries.
async fn turn(host: &TestHost, bot: &str, text: &str) -> Vec<Value> {
    let (status, body) = host.send(bot, text, None).await;
    assert_eq!(status, 202, "{body}");
    let session = body["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, body["seq"].as_i64().unwrap())
        .await;
    host.entries(&session).await
}

fn tool_results(entries: &[Value]) -> Vec<(String, bool)> {
    entries
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| {
            (
                e["content"].as_str().unwrap_or("").to_owned(),
                e["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

async fn snapshot_at(host: &TestHost, id: &str, input: &str, at: i64) -> MemorySnapshot {
    store(host)
        .bot_memory_snapshot(&bot(host, id).await, input, at)
        .await
        .unwrap()
}

fn profile_texts(s: &MemorySnapshot) -> Vec<&str> {
    s.profile.iter().map(|i| i.text.as_str()).collect()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[tokio::test]
async fn a_preference_told_once_is_known_days_later_to_the_users_bots_only() {
    let host = start().await;
    let entries = turn(&host, "a1", "I prefer tea over coffee, remember that").await;
    let said = deliveries(&entries);
    assert!(said[0].starts_with("Remembered as m-"), "{said:?}");
    assert!(said[0].contains("in user:alice profile"), "{said:?}");

    // a new session days later: the profile is in the snapshot the prompt renders
    let later = now() + 3 * DAY;
    let snap = snapshot_at(&host, "a1", "what should I drink?", later).await;
    assert_eq!(profile_texts(&snap), vec!["Prefers tea over coffee"]);
    let rendered = render_memory(&snap);
    // with the day it was set, so a later fact that disagrees is told apart
    let set = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(snap.profile[0].updated_at)
        .unwrap()
        .format("%Y-%m-%d");
    assert!(
        rendered.contains(&format!(
            "(user:alice, set {set}) \"Prefers tea over coffee\""
        )),
        "{rendered}"
    );
    // another bot of the same user sees it, a bot of another user does not
    let sibling = snapshot_at(&host, "a2", "", later).await;
    assert_eq!(profile_texts(&sibling), vec!["Prefers tea over coffee"]);
    assert!(snapshot_at(&host, "b1", "", later).await.is_empty());

    // and the API says the same
    let (status, mem) = host.get("/v1/bots/a2/memory", TOKEN).await;
    assert_eq!(status, 200, "{mem}");
    assert_eq!(mem["scopes"][1]["scope"], "user:alice");
    assert_eq!(
        mem["scopes"][1]["profile"]["items"][0]["text"],
        "Prefers tea over coffee"
    );
    assert_eq!(mem["scopes"][1]["profile"]["count"], 1);
    assert_eq!(mem["prompt"]["shown"].as_array().unwrap().len(), 1);
    let (status, mem) = host.get("/v1/bots/b1/memory", BOB_TOKEN).await;
    assert_eq!(status, 200, "{mem}");
    assert_eq!(mem["scopes"][1]["scope"], "user:bob");
    assert_eq!(mem["scopes"][1]["profile"]["count"], 0);
    let (status, _) = host.get("/v1/bots/a1/memory", BOB_TOKEN).await;
    assert_eq!(status, 404, "another user's bot does not exist for bob");
    host.shutdown().await;
}

#[tokio::test]
async fn limits_answer_with_what_to_replace() {
    let host = start().await;
    let entries = turn(&host, "f1", "fill my profile").await;
    let results = tool_results(&entries);
    assert_eq!(results.len(), 102, "101 Remember calls and the SendMessage");
    assert!(results[..100].iter().all(|(_, err)| !err));
    let (last, is_error) = &results[100];
    assert!(is_error);
    assert!(
        last.contains("the profile of agent:f1 is full (100/100 facts"),
        "{last}"
    );
    assert!(
        last.contains("Next step: replace one of these ids"),
        "{last}"
    );
    let (_, mem) = host.get("/v1/bots/f1/memory", TOKEN).await;
    assert_eq!(mem["scopes"][0]["profile"]["count"], 100);

    let entries = turn(&host, "c1", "chars test").await;
    let results = tool_results(&entries);
    assert!(results[..8].iter().all(|(_, err)| !err), "{results:?}");
    assert!(
        results[8].1 && results[8].0.contains("4000/4000 characters"),
        "{results:?}"
    );
    assert!(
        results[9].1 && results[9].0.contains("501 characters"),
        "{results:?}"
    );
    let (_, mem) = host.get("/v1/bots/c1/memory", TOKEN).await;
    assert_eq!(mem["scopes"][0]["profile"]["chars"], 4000);
    host.shutdown().await;
}

#[tokio::test]
async fn notes_expire_out_of_the_prompt() {
    let host = start().await;
    let entries = turn(&host, "a1", "note: the ACME invoice is due").await;
    assert!(deliveries(&entries)[0].contains("agent:a1 notes until"));
    let t = now();
    let live = snapshot_at(&host, "a1", "", t).await;
    assert_eq!(live.notes.len(), 1);
    let expired = snapshot_at(&host, "a1", "", t + 2 * 3_600_000).await;
    assert!(expired.notes.is_empty());
    host.shutdown().await;
}

#[tokio::test]
async fn forget_really_forgets_through_the_tool_and_the_api() {
    let host = start().await;
    turn(&host, "a1", "I prefer tea over coffee").await;
    let before = snapshot_at(&host, "a2", "", now()).await;
    assert_eq!(before.profile.len(), 1);
    let entries = turn(&host, "a2", "forget tea please").await;
    let said = deliveries(&entries);
    assert!(
        said.last().unwrap().starts_with("Forgot 1 item(s)"),
        "{said:?}"
    );
    assert!(snapshot_at(&host, "a1", "", now()).await.is_empty());

    // the API: only the owner, clear answers
    turn(&host, "a1", "I prefer tea over coffee").await;
    let id = snapshot_at(&host, "a1", "", now()).await.profile[0]
        .id
        .clone();
    let delete = |token: &'static str, id: String| {
        let http = host.http.clone();
        let url = format!("{}/v1/memory/{id}", host.url);
        async move {
            let r = http.delete(url).bearer_auth(token).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = delete(BOB_TOKEN, id.to_string()).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = delete(TOKEN, id.to_string()).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("forgotten")),
        "{body}"
    );
    let (status, body) = delete(TOKEN, id.to_string()).await;
    assert_eq!(body["status"], "already_forgotten", "{status} {body}");
    let (status, body) = delete(TOKEN, MemoryId::derive("never").to_string()).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("GET /v1/bots/{bot}/memory"),
        "{body}"
    );
    let (status, body) = delete(TOKEN, "not-an-id".into()).await;
    assert_eq!(status, 400, "{body}");
    assert!(snapshot_at(&host, "a1", "", now()).await.is_empty());
    host.shutdown().await;
}

/// Runs the fact extraction after a turn of `a1` in alice's DM where
/// she said `said` and the bot answered `reply`; its report.
async fn extract_in_dm(
    rt: &std::sync::Arc<botfleet::actors::Runtime>,
    a1: &BotRecord,
    said: &str,
    reply: &str,
) -> botfleet::actors::ExtractReport {
    let session = botfleet::memory::SessionId::derive(&a1.id, "dm", "alice");
    extract_after_turn(
        rt,
        a1,
        session,
        botfleet::memory::TurnId::new_v7(),
        &[],
        &[said.into()],
        reply,
    )
    .await
    .unwrap()
}

/// Fact extraction takes an importance written as a whole float (`4.0`,
/// as models write it), as Remember does, and refuses a fraction naming
/// the 1–5 range (QA, 2026-12-05: `4.0` was refused as "expected u8",
/// and the fact lost).
#[tokio::test]
async fn extraction_takes_a_whole_float_importance_and_names_the_range() {
    let host = start().await;
    let rt = host.host.as_ref().unwrap().fleet.runtime().clone();
    let a1 = bot(&host, "a1").await;
    let report = extract_in_dm(&rt, &a1, "I keep bees", "Lovely!").await;
    assert_eq!(report.added.len(), 1, "{report:?}");
    assert_eq!(report.added[0].text, "Keeps bees");
    assert_eq!(report.added[0].importance.get(), 4);
    assert_eq!(report.rejected.len(), 1, "{report:?}");
    assert!(
        report.rejected[0].reason.contains("\"4.5\"")
            && report.rejected[0]
                .reason
                .contains("1 (trivia) to 5 (critical)"),
        "{report:?}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn extraction_with_a_scripted_extractor_and_a_failing_one() {
    let host = start().await;
    let running = host.host.as_ref().unwrap();
    let rt = running.fleet.runtime().clone();
    let a1 = bot(&host, "a1").await;
    let session = botfleet::memory::SessionId::derive(&a1.id, "dm", "alice");
    let report = extract_in_dm(&rt, &a1, "I moved to Berlin", "Welcome to Berlin!").await;
    assert_eq!(report.added.len(), 1);
    assert_eq!(report.added[0].text, "Lives in Berlin");
    assert_eq!(
        report.rejected.len(),
        1,
        "an unshown fact cannot be removed"
    );
    let before = snapshot_at(&host, "a1", "", now()).await;
    let failed = tokio::time::timeout(
        Duration::from_secs(10),
        extract_after_turn(
            &rt,
            &a1,
            session,
            botfleet::memory::TurnId::new_v7(),
            &before.shown_ids(),
            &["broken".into()],
            "ok",
        ),
    )
    .await
    .unwrap();
    assert!(failed.is_err());
    assert_eq!(snapshot_at(&host, "a1", "", now()).await.hash, before.hash);
    host.shutdown().await;
}

#[tokio::test]
async fn project_members_share_project_memory() {
    let host = start().await;
    let rt = host.host.as_ref().unwrap().fleet.runtime().clone();
    let p1 = bot(&host, "p1").await;
    let scope =
        botfleet::actors::writable_scope(&p1, Some("project"), botfleet::memory::Layer::Profile)
            .unwrap();
    assert_eq!(scope.to_string(), "project:apollo");
    assert!(
        botfleet::actors::writable_scope(
            &bot(&host, "a1").await,
            Some("project:apollo"),
            botfleet::memory::Layer::Profile
        )
        .is_err()
    );
    rt.memory
        .apply(botfleet::memory::MemoryOp::Add(
            botfleet::memory::NewMemory {
                id: MemoryId::derive("apollo"),
                scope,
                layer: botfleet::memory::Layer::Profile,
                text: "Launch is on May 3".into(),
                importance: botfleet::memory::Importance::NORMAL,
                expires_at: None,
                source: "test".into(),
            },
        ))
        .await
        .unwrap();
    let (_, mem) = host.get("/v1/bots/p1/memory", TOKEN).await;
    assert_eq!(mem["scopes"][2]["scope"], "project:apollo");
    assert_eq!(
        mem["scopes"][2]["profile"]["items"][0]["text"],
        "Launch is on May 3"
    );
    assert_eq!(
        profile_texts(&snapshot_at(&host, "p1", "", now()).await),
        vec!["Launch is on May 3"]
    );
    assert!(snapshot_at(&host, "a1", "", now()).await.is_empty());
    host.shutdown().await;
}

#[tokio::test]
async fn the_cli_shows_and_forgets_memory() {
    use crate::support::process::cli;

    let host = start().await;
    turn(&host, "a1", "I prefer tea over coffee").await;
    let (code, out, err) = cli(&["memory", "a1"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("user:alice — profile 1/100 facts"), "{out}");
    // with its importance and who wrote it (QA: the listing showed neither)
    assert!(
        out.contains("Prefers tea over coffee  (importance 3, by a1's Remember)"),
        "{out}"
    );
    let (_, json_out, _) = cli(
        &["memory", "a1", "--json", "--input", "tea?"],
        &host.url,
        TOKEN,
    )
    .await;
    let v: Value = serde_json::from_str(json_out.trim()).unwrap();
    let id = v["scopes"][1]["profile"]["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, out, err) = cli(&["forget", &id], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("forgot {id} (user:alice profile)")),
        "{out}"
    );
    let (code, _, err) = cli(&["forget", "m-zzzzzzzzzzzz"], &host.url, TOKEN).await;
    assert_ne!(code, 0);
    assert!(
        err.contains("no memory item m-zzzzzzzzzzzz for you"),
        "{err}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn the_memory_api_refuses_bad_queries_clearly() {
    let host = start().await;
    let (status, body) = host.get("/v1/bots/a1/memory?inptu=x", TOKEN).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("?input=TEXT"),
        "{body}"
    );
    let long = "x".repeat(4001);
    let (status, body) = host
        .get(&format!("/v1/bots/a1/memory?input={long}"), TOKEN)
        .await;
    assert_eq!(status, 400, "{body}");
    // a preview text that is not UTF-8 is refused, as search refuses it
    // (it was decoded lossily and previewed for U+FFFD)
    let (status, body) = host.get("/v1/bots/a1/memory?input=%FF", TOKEN).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not UTF-8 text"),
        "{body}"
    );
    let (status, _) = host.get("/v1/bots/nobody/memory", TOKEN).await;
    assert_eq!(status, 404);
    host.shutdown().await;
}

/// Memory as the model receives it, and extraction after turns.
#[path = "memory_prompt.rs"]
mod prompt;

/// Memory in rooms shared with other people's bots.
#[path = "memory_rooms.rs"]
mod rooms;

/// Regression (QA): Remember answered with the item's id and scope only,
/// and the call itself is not indexed, so a search for what a bot
/// remembered found nothing, while docs/search.md says the memory tools'
/// results are the transcript's record of what was written. The result
/// quotes the text, as Replace's and Forget's do.
#[tokio::test]
async fn what_a_bot_remembered_is_found_by_search() {
    let script = r#"
[[rule]]
match = "(?i)^keep it"
steps = [
  { tool = "Remember", args = { text = "The spare key is under the zebrafish mat", layer = "log" } },
  { tool = "SendMessage", args = { text = "noted" } },
]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("a1", "s", TOOLS)
        .start()
        .await;
    let entries = turn(&host, "a1", "keep it").await;
    let results = tool_results(&entries);
    assert!(
        results[0]
            .0
            .contains("agent:a1 log: \"The spare key is under the zebrafish mat\""),
        "{results:?}"
    );
    let found = host
        .wait_get("/v1/search?q=zebrafish", |v| {
            v["hits"].as_array()?.first().cloned()
        })
        .await;
    assert_eq!(found["kind"], "tool_result", "{found:#}");
    host.shutdown().await;
}
