//! Bots working together: SendToAgent, CreateAgent/UpdateAgent, subagents.

use botfleet_memory::BotId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

pub(super) const ALL: &[&str] = &[
    "SendMessage",
    "SendToAgent",
    "CreateAgent",
    "UpdateAgent",
    "Task",
    "CheckSubagent",
    "MessageSubagent",
    "StopSubagent",
];

fn kinds(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn a_bot_gathers_arguments_from_two_bots_without_waiting() {
    let script = r#"
[[rule]]
bot = "r"
match = "^debate"
steps = [
  { calls = [
      { tool = "SendToAgent", args = { agent = "a", text = "argue for tea" } },
      { tool = "SendToAgent", args = { agent = "b", text = "argue for coffee" } },
      { tool = "SendMessage", args = { text = "I asked A and B; I will report back." } },
  ] },
]

[[rule]]
bot = "r"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "summary so far: {{inputs}}" } } ]

[[rule]]
bot = "a"
steps = [ { tool = "SendMessage", args = { text = "TEA: it calms" } } ]

[[rule]]
bot = "b"
steps = [ { tool = "SendMessage", args = { text = "COFFEE: it wakes" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", ALL)
        .bot("a", "s", ALL)
        .bot("b", "s", ALL)
        .start()
        .await;
    let (_, sent) = host.send("r", "debate: tea or coffee?", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    let first = host.wait_turn_end(&session, seq).await;
    assert_eq!(
        first["status"], "completed",
        "R's turn ends right after sending"
    );
    // both replies come back into R's conversation with the user and wake R
    let entries = host
        .wait_for(&session, |es| {
            let text = deliveries(es).join("\n");
            let answered = |seq: &Value| {
                es.iter().any(|e| {
                    e["kind"] == "turn_end"
                        && e["inputs"].as_array().is_some_and(|a| a.contains(seq))
                })
            };
            let replies_answered = es
                .iter()
                .filter(|e| e["kind"] == "agent_message")
                .all(|e| answered(&e["seq"]));
            (text.contains("TEA: it calms")
                && text.contains("COFFEE: it wakes")
                && replies_answered)
                .then(|| json!(es))
        })
        .await;
    let entries = entries.as_array().unwrap().clone();
    let agents: Vec<&str> = entries
        .iter()
        .filter(|e| e["kind"] == "agent_message")
        .map(|e| e["from"].as_str().unwrap())
        .collect();
    assert_eq!(agents.len(), 2, "{:?}", kinds(&entries));
    assert!(agents.contains(&"a") && agents.contains(&"b"));
    // the exchange is in order: a reply may arrive while R's first turn is
    // still sending (it did not wait for it), and each one is answered by a
    // later turn of R, never folded into the turn that asked
    let first_end = first["seq"].as_i64().unwrap();
    for m in entries.iter().filter(|e| e["kind"] == "agent_message") {
        let seq = m["seq"].as_i64().unwrap();
        assert!(seq > sent["seq"].as_i64().unwrap());
        let answered_by = entries
            .iter()
            .find(|e| {
                e["kind"] == "turn_end"
                    && e["inputs"]
                        .as_array()
                        .is_some_and(|a| a.contains(&json!(seq)))
            })
            .unwrap_or_else(|| panic!("reply {seq} was answered: {:?}", kinds(&entries)));
        assert!(answered_by["seq"].as_i64().unwrap() > first_end);
    }
    // every reply was answered by a later turn of R
    let turns = entries.iter().filter(|e| e["kind"] == "turn_end").count();
    assert!(turns >= 2, "replies woke R: {:?}", kinds(&entries));
    // A worked in its own session with R
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let a = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "a")
        .unwrap()
        .clone();
    assert!(a["turns"]["completed"].as_i64().unwrap() >= 1);
    // each SendToAgent said which message it sent: the id of the message
    // in the recipient's session (QA: no entry of the sender's had it)
    for (to, text) in [("a", "argue for tea"), ("b", "argue for coffee")] {
        let theirs = SessionKey {
            bot: BotId::new(to).unwrap(),
            kind: SessionKind::Agent,
            peer: "r".into(),
        }
        .id()
        .to_string();
        let got = host.entries(&theirs).await;
        let message = got
            .iter()
            .find(|e| e["kind"] == "agent_message" && e["text"] == text)
            .unwrap_or_else(|| panic!("{to} got it: {got:?}"));
        let said = format!(
            "delivered to {to} as message {};",
            message["id"].as_str().unwrap()
        );
        assert!(
            entries.iter().any(|e| e["kind"] == "tool_result"
                && e["content"].as_str().is_some_and(|c| c.starts_with(&said))),
            "{said}"
        );
    }
    // the CLI prints A's conversation with R; A's own DM is empty, and
    // says where its work is (QA: "no messages with a yet", nothing else,
    // for a bot with turns)
    let (code, out, err) =
        crate::support::process::cli(&["transcript", "a"], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(
        err.contains("a has worked elsewhere")
            && err.contains("`botfleet transcript a --with BOT`")
            && err.contains("`botfleet group transcript ROOM`"),
        "{err}"
    );
    let (code, out, err) =
        crate::support::process::cli(&["transcript", "a", "--with", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("argue for tea") && !out.contains("argue for coffee"),
        "{out}"
    );
    let (code, out, err) =
        crate::support::process::cli(&["transcript", "a", "--with", "b"], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("bot a has no conversation with bot b")
            && err.contains("`botfleet transcript b --with a`"),
        "{err}"
    );
    // a and b answered r: their replies are in r's DM with alice, the
    // conversation r sent from, and they started none with r (QA: "a
    // never sent it a message")
    let (code, out, err) =
        crate::support::process::cli(&["transcript", "r", "--with", "a"], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("a never started one")
            && err.contains("its replies to r's messages are in the conversation r sent from")
            && !err.contains("never sent it a message"),
        "{err}"
    );
    // by its display name, in any case, as SendToAgent takes it (QA:
    // "R never sent it a message")
    let (code, out, err) =
        crate::support::process::cli(&["transcript", "a", "--with", "R-NAME"], &host.url, TOKEN)
            .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("argue for tea"), "{out}");
    // no such bot: said so
    let (code, _, err) =
        crate::support::process::cli(&["transcript", "a", "--with", "nobody"], &host.url, TOKEN)
            .await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no bot of yours is called so"), "{err}");
    // itself: not "the other way round" with the same command
    let (code, _, err) =
        crate::support::process::cli(&["transcript", "a", "--with", "a"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("bot a never sent itself a message"), "{err}");
    // another user's bot: the host's 404, nothing of it
    let (code, out, err) =
        crate::support::process::cli(&["transcript", "a", "--with", "r"], &host.url, BOB_TOKEN)
            .await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    host.shutdown().await;
}

#[tokio::test]
async fn two_bots_writing_to_each_other_both_progress_and_hops_are_bounded() {
    // each bot answers every message by writing to the other: a loop that
    // only the hop budget stops
    let script = r#"
[[rule]]
bot = "a"
match = "^start"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "b", text = "ping" } },
  { tool = "SendMessage", args = { text = "started" } },
] } ]

[[rule]]
bot = "a"
steps = [ { tool = "SendToAgent", args = { agent = "b", text = "ping again" } } ]

[[rule]]
bot = "b"
steps = [ { tool = "SendToAgent", args = { agent = "a", text = "pong" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("a", "s", ALL)
        .bot("b", "s", ALL)
        .runtime("debounce_ms = 0\nmax_hops = 5")
        .start()
        .await;
    let (_, sent) = host.send("a", "start", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    // the chain ends with a hop-budget error in one of the bots' tool results
    let c = host.client();
    let mut found = false;
    for _ in 0..400 {
        let (_, turns_a) = host.get("/v1/bots/a/turns", TOKEN).await;
        let (_, turns_b) = host.get("/v1/bots/b/turns", TOKEN).await;
        let n =
            turns_a["turns"].as_array().unwrap().len() + turns_b["turns"].as_array().unwrap().len();
        let a_session = c.get("/v1/bots/a/session").await.unwrap();
        let _ = a_session;
        let mut all = Vec::new();
        for bot in ["a", "b"] {
            let (_, t) = host.get(&format!("/v1/bots/{bot}/turns"), TOKEN).await;
            for turn in t["turns"].as_array().unwrap() {
                all.push(turn["session"].as_str().unwrap().to_owned());
            }
        }
        all.sort();
        all.dedup();
        for s in &all {
            let es = host.entries(s).await;
            if es.iter().any(|e| {
                e["kind"] == "tool_result"
                    && e["content"].as_str().unwrap_or("").contains("hop budget")
            }) {
                found = true;
            }
        }
        if found && n >= 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(found, "the hop budget stopped the loop and said so");
    // a's conversation with the person still got its reply
    let es = host.entries(&session).await;
    assert!(deliveries(&es).contains(&"started".to_string()));
    host.shutdown().await;
}

#[tokio::test]
async fn a_bot_can_message_itself_and_unknown_agents_are_refused() {
    let script = r#"
[[rule]]
bot = "a"
match = "^go"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "a", text = "note to self" } },
  { tool = "SendToAgent", args = { agent = "nobody", text = "hi" } },
  { tool = "SendMessage", args = { text = "ok" } },
] } ]

[[rule]]
bot = "a"
match = "note to self"
steps = [ { tool = "SendMessage", args = { text = "self got it" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("a", "s", ALL)
        .start()
        .await;
    let (_, sent) = host.send("a", "go", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed");
    let es = host.entries(&session).await;
    let unknown = es
        .iter()
        .find(|e| {
            e["kind"] == "tool_result"
                && e["content"]
                    .as_str()
                    .unwrap()
                    .contains("no agent \"nobody\"")
        })
        .unwrap();
    assert_eq!(unknown["is_error"], true);
    assert!(
        unknown["content"]
            .as_str()
            .unwrap()
            .contains("message one of: a"),
        "{unknown}"
    );
    // the self-message is processed in a later turn of its own session
    let self_session = host.client().get("/v1/bots/a/turns").await.unwrap();
    let _ = self_session;
    let mut answered = false;
    for _ in 0..300 {
        let (_, t) = host.get("/v1/bots/a/turns", TOKEN).await;
        if t["turns"].as_array().unwrap().len() >= 2 {
            answered = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(answered, "a bot writing to itself does not deadlock");
    host.shutdown().await;
}

#[tokio::test]
async fn created_agents_persist_and_are_usable_at_once() {
    let script = r#"
[[rule]]
bot = "boss"
match = "^hire"
steps = [
  { tool = "CreateAgent", args = { name = "Scout", role = "Finds things.", tools = ["SendMessage"] } },
  { tool = "SendToAgent", args = { agent = "scout", text = "find the keys" } },
  { tool = "SendMessage", args = { text = "hired" } },
]

[[rule]]
bot = "boss"
match = "^promote"
steps = [
  { tool = "UpdateAgent", args = { agent = "scout", role = "Finds things fast." } },
  { tool = "UpdateAgent", args = { agent = "scout", tools = ["Shell"] } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]

[[rule]]
bot = "scout"
steps = [ { tool = "SendMessage", args = { text = "keys are on the hook" } } ]

[[rule]]
bot = "boss"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "scout says: {{input}}" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("boss", "s", ALL)
        .start()
        .await;
    let (_, sent) = host.send("boss", "hire someone", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_for(&session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d.contains("keys are on the hook"))
            .then_some(json!(true))
    })
    .await;
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let scout = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "scout")
        .unwrap()
        .clone();
    assert_eq!(scout["origin"], "agent:boss");
    assert_eq!(scout["tools"], json!(["SendMessage"]));
    let (_, sent) = host.send("boss", "promote scout", None).await;
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed");
    let es = host.entries(&session).await;
    let last = deliveries(&es).last().unwrap().clone();
    assert!(
        last.contains("cannot give the tool \"Shell\""),
        "tools cannot be escalated: {last}"
    );
    let (_, scout) = host.get("/v1/bots/scout", TOKEN).await;
    assert_eq!(scout["role"], "Finds things fast.");
    host.shutdown().await;
}

#[tokio::test]
async fn a_subagent_reports_back_once_and_the_parent_keeps_a_list() {
    let script = r#"
[[rule]]
bot = "p"
match = "^research"
steps = [
  { tool = "Task", args = { description = "count files", prompt = "count the files in the workspace" } },
  { tool = "SendMessage", args = { text = "delegated: {{tool_result}}" } },
]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [
  { tool = "CheckSubagent", args = {} },
  { tool = "SendMessage", args = { text = "report in; tasks: {{tool_result}}" } },
]

[[rule]]
match = "count the files"
steps = [
  { tool = "Shell", args = { command = "ls | wc -l" } },
  { tool = "SendMessage", args = { text = "there are {{tool_result}}" } },
]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("p", "s", &["SendMessage", "Task", "CheckSubagent", "Shell"])
        .start()
        .await;
    let (_, sent) = host.send("p", "research please", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let v = host
        .wait_for(&session, |es| {
            deliveries(es)
                .iter()
                .find(|d| d.starts_with("report in"))
                .map(|d| json!(d))
        })
        .await;
    let report = v.as_str().unwrap();
    assert!(report.contains("[done] count files"), "{report}");
    let es = host.entries(&session).await;
    let reports: Vec<&Value> = es.iter().filter(|e| e["kind"] == "agent_message").collect();
    assert_eq!(reports.len(), 1, "one report wakes the parent once");
    assert!(
        reports[0]["text"]
            .as_str()
            .unwrap()
            .contains("exit code: 0")
    );
    // the subagent is a bot of the same owner, with a narrower tool set
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let sub = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["origin"] == "subagent:p")
        .unwrap()
        .clone();
    assert_eq!(sub["tools"], json!(["SendMessage", "Shell"]));
    host.shutdown().await;
}

/// The CreateAgent result of the turn that answers `text`, sent to `bot` as
/// the user of `token`, once that turn ended.
async fn create_agent_result(host: &TestHost, bot: &str, token: &str, text: &str) -> Value {
    let (end, es) = host.end_turn_as(bot, token, text).await;
    assert_eq!(end["status"], "completed", "{es:#?}");
    es.iter()
        .find(|e| {
            e["kind"] == "tool_result" && e["name"] == "CreateAgent" && e["turn"] == end["turn"]
        })
        .cloned()
        .unwrap_or_else(|| panic!("{bot} called CreateAgent: {es:#?}"))
}

/// Bot ids are global. Two users' bots (and two bots of one user) creating
/// the same new id at the same moment: one creates it, the others are told
/// it is taken, and the bot belongs to its creator's owner. (Before, each
/// read the id as free before any wrote it, all were told "created agent",
/// and the last write took the record over, owner included.)
#[tokio::test]
async fn bots_racing_to_create_one_id_get_one_creation_and_taken_errors() {
    let script = r#"
[[rule]]
match = "^race"
steps = [
  { tool = "CreateAgent", args = { id = "{{input}}", name = "Racer {{bot}} {{input}}", role = "Made by {{bot}}.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;
    let tools = &["SendMessage", "CreateAgent"];
    let host = TestFleet::new()
        .script("s", script)
        .bot("a", "s", tools)
        .bot("a2", "s", tools)
        .bot_of("b", "s", tools, "bob")
        .start()
        .await;
    let owners = [("a", "alice"), ("a2", "alice"), ("b", "bob")];
    for round in 0..8 {
        let id = format!("race{round}");
        let (ra, ra2, rb) = tokio::join!(
            create_agent_result(&host, "a", TOKEN, &id),
            create_agent_result(&host, "a2", TOKEN, &id),
            create_agent_result(&host, "b", BOB_TOKEN, &id),
        );
        let results = [ra, ra2, rb];
        let created: Vec<usize> = (0..3)
            .filter(|&i| results[i]["is_error"] == false)
            .collect();
        assert_eq!(created.len(), 1, "one creation of {id}: {results:#?}");
        let (creator, owner) = owners[created[0]];
        let won = results[created[0]]["content"].as_str().unwrap();
        assert!(won.starts_with(&format!("created agent {id} ")), "{won}");
        for (i, r) in results.iter().enumerate().filter(|(i, _)| *i != created[0]) {
            let refused = r["content"].as_str().unwrap();
            assert!(
                refused.contains(&format!("the agent id \"{id}\" is already taken")),
                "{}: {refused}",
                owners[i].0
            );
            assert!(refused.contains("choose another name"), "{refused}");
            for leak in ["alice", "bob", "Made by"] {
                assert!(!refused.contains(leak), "{leak}: {refused}");
            }
        }
        // the record is the creator's, as the creator was told
        let token = if owner == "alice" { TOKEN } else { BOB_TOKEN };
        let (status, bot) = host.get(&format!("/v1/bots/{id}"), token).await;
        assert_eq!(status, 200, "{bot}");
        assert_eq!(bot["owner"], owner, "{bot}");
        assert_eq!(bot["origin"], format!("agent:{creator}"), "{bot}");
        assert_eq!(bot["role"], format!("Made by {creator}."), "{bot}");
        let other = if owner == "alice" { BOB_TOKEN } else { TOKEN };
        let (status, _) = host.get(&format!("/v1/bots/{id}"), other).await;
        assert_eq!(status, 404, "{id} is not the other user's");
    }
    host.shutdown().await;
}

/// A message to a subagent is refused at the call, stopped or not: its
/// parent steers it with MessageSubagent (checked against
/// `runtime.max_subagents`) or starts a new Task, so nothing is sent and
/// the sender does not wait for a reply. (Before, SendToAgent to a
/// finished subagent said "delivered" and ran it again outside its task,
/// while CheckSubagent said `done`; one to a stopped subagent was
/// cancelled in its session, and the sender was never told.)
#[tokio::test]
async fn send_to_agent_refuses_a_subagent_and_sends_nothing() {
    let script = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "quick", prompt = "SUBTASK quick" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "got report" } } ]

[[rule]]
bot = "p"
match = "^p\\.sub-"
steps = [
  { tool = "SendToAgent", args = { agent = "{{input}}", text = "one more thing" } },
  { tool = "StopSubagent", args = { id = "{{input}}" } },
  { tool = "SendToAgent", args = { agent = "{{input}}", text = "and another" } },
  { tool = "SendMessage", args = { text = "sent: {{tool_result}}" } },
]

[[rule]]
match = "SUBTASK quick"
steps = [ { tool = "SendMessage", args = { text = "REPORT done" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot(
            "p",
            "s",
            &[
                "SendMessage",
                "Task",
                "MessageSubagent",
                "StopSubagent",
                "SendToAgent",
            ],
        )
        .start()
        .await;
    let (_, sent) = host.send("p", "delegate it", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    // the subagent finished and reported
    host.wait_for(&session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d == "got report")
            .then_some(json!(true))
    })
    .await;
    let sub = host.wait_subagent_of("p").await;
    // the parent messages it (it had finished), stops it, and messages it
    // again
    let (_, sent) = host.send("p", &sub, None).await;
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    let es = host.entries(&session).await;
    let results: Vec<&Value> = es
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["turn"] == end["turn"])
        .collect();
    let names: Vec<&str> = results.iter().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(
        names,
        ["SendToAgent", "StopSubagent", "SendToAgent", "SendMessage"],
        "{es:#?}"
    );
    let refusal = format!(
        "error: {sub} is your subagent: it takes work only as a task, through your subagent \
         tools (so its status and your limit of running subagents hold); nothing was sent. \
         Next step: give it more work with MessageSubagent (it counts against your running \
         subagents), or start a new subagent with Task"
    );
    let stopped = format!(
        "error: subagent {sub} was stopped and takes no more messages: nothing was sent. \
         Next step: start a new subagent with Task"
    );
    for (send, want) in [(results[0], &refusal), (results[2], &stopped)] {
        assert_eq!(send["is_error"], true, "{send}");
        assert_eq!(send["content"], want.as_str(), "{send}");
    }
    let stop = results[1]["content"].as_str().unwrap();
    assert!(stop.contains("It had finished its task"), "{stop}");
    // nothing was admitted: the conversation it would have gone to was
    // never opened
    let rt = host.host.as_ref().unwrap().fleet.runtime().clone();
    let would_be = SessionKey {
        bot: BotId::new(sub.as_str()).unwrap(),
        kind: SessionKind::Agent,
        peer: "p".into(),
    };
    let stored = rt.store.get_session(would_be.id()).await.unwrap();
    assert!(stored.is_none(), "{stored:?}");
    host.shutdown().await;
}

/// Regression (QA, 2026-12-05): CheckSubagent on a task that ended
/// `failed` said "result: (none yet)" (the subagent never delivered) or
/// showed its last progress, never why it failed. Its result is now what
/// its parent was told.
#[tokio::test]
async fn check_subagent_on_a_failed_task_says_why() {
    let script = r#"
[[rule]]
bot = "p"
match = "^research"
steps = [
  { tool = "Task", args = { description = "quiet job", prompt = "stay quiet" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "report in" } } ]

[[rule]]
bot = "p"
match = '\.sub-'
steps = [
  { tool = "CheckSubagent", args = { id = "{{input}}" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]

[[rule]]
match = "stay quiet"
steps = [ { text = "thinking it over" } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("p", "s", &["SendMessage", "Task", "CheckSubagent"])
        .start()
        .await;
    let (_, sent) = host.send("p", "research please", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_for(&session, |es| {
        deliveries(es)
            .iter()
            .find(|d| d.as_str() == "report in")
            .map(|d| json!(d))
    })
    .await;
    let sub = host.wait_subagent_of("p").await;
    let (session, _) = host.end_turn("p", &sub).await;
    let said = deliveries(&host.entries(&session).await);
    let check = said.last().unwrap();
    assert!(
        check.contains("[failed]: quiet job")
            && check.contains("result: I could not finish the task: ")
            && check.contains("without sending you a reply"),
        "{check}"
    );
    host.shutdown().await;
}

/// Regression (QA): a done subagent given more work (MessageSubagent)
/// was shown by CheckSubagent as `[running]` with its last run's report
/// as the result, and its progress did not show the new work; a step of
/// calls alone read `#2  SendMessage`.
#[tokio::test]
async fn check_subagent_on_a_task_running_again_shows_no_old_result() {
    let script = r#"
[[rule]]
bot = "p"
match = "^research"
steps = [
  { tool = "Task", args = { description = "counting job", prompt = "count the lines" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "report in" } } ]

[[rule]]
bot = "p"
match = '\.sub-'
steps = [
  { tool = "MessageSubagent", args = { id = "{{input}}", text = "count them again" } },
  { tool = "CheckSubagent", args = { id = "{{input}}" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]

[[rule]]
match = "count them again"
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "12 lines again" } } ]

[[rule]]
match = "count the lines"
steps = [ { tool = "SendMessage", args = { text = "12 lines" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot(
            "p",
            "s",
            &["SendMessage", "Task", "CheckSubagent", "MessageSubagent"],
        )
        .start()
        .await;
    let (_, sent) = host.send("p", "research please", None).await;
    let dm = sent["session"].as_str().unwrap().to_owned();
    host.wait_for(&dm, |es| {
        deliveries(es)
            .iter()
            .find(|d| d.as_str() == "report in")
            .map(|d| json!(d))
    })
    .await;
    let sub = host.wait_subagent_of("p").await;
    // more work, then a look at it in the next step, while it runs
    let (session, _) = host.end_turn("p", &sub).await;
    let said = deliveries(&host.entries(&session).await);
    let check = said.last().unwrap();
    assert!(
        check.contains("[running]: counting job") && check.contains("result: (none yet)"),
        "{check}"
    );
    assert!(
        check.contains("SendMessage") && !check.contains("  SendMessage"),
        "{check}"
    );
    assert!(
        check.contains("message from p: count them again"),
        "{check}"
    );
    host.shutdown().await;
}
