//! A subagent's task given in alice's DM, done and reported there, then
//! its bot given to bob in fleet.toml: the task's title and report are
//! alice's words, as her DM is. bob reads neither in the subagent's name
//! or role (`GET /v1/bots`), nor through his bot's CheckSubagent; alice
//! still reads both in her DM, and reads them in the subagent again once
//! the bot is hers again. (Before, the title stayed in the subagent's
//! name, role and record, and its last report in its record:
//! CheckSubagent showed bob "result: <alice's report>".)

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;
use crate::support::process::poll;

/// The task's title, alice's words.
const TITLE: &str = "zebratitle alice tax return";
/// The subagent's report, alice's too.
const REPORT: &str = "zebrareport refund of 812";

fn script() -> String {
    format!(
        r#"
[[rule]]
bot = "p"
match = "delegate"
steps = [
  {{ tool = "Task", args = {{ description = "{TITLE}", prompt = "SUBTASK read it" }} }},
  {{ tool = "SendMessage", args = {{ text = "delegated" }} }},
]

[[rule]]
match = "SUBTASK"
steps = [ {{ tool = "SendMessage", args = {{ text = "{REPORT}" }} }} ]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ {{ tool = "SendMessage", args = {{ text = "report in" }} }} ]

[[rule]]
bot = "p"
match = '\.sub-'
steps = [
  {{ tool = "CheckSubagent", args = {{ id = "{{{{input}}}}" }} }},
  {{ tool = "SendMessage", args = {{ text = "{{{{tool_result}}}}" }} }},
]

[[rule]]
bot = "p"
match = "^list"
steps = [
  {{ tool = "CheckSubagent", args = {{}} }},
  {{ tool = "SendMessage", args = {{ text = "{{{{tool_result}}}}" }} }},
]
"#
    )
}

/// What `token`'s user reads of the fleet's bots.
async fn bots_as(host: &TestHost, token: &str) -> String {
    let (status, v) = host.get("/v1/bots", token).await;
    assert_eq!(status, 200, "{v}");
    v.to_string()
}

/// Sends `text` to `p` as the user of `token`; returns what `p` answered.
async fn ask(host: &TestHost, token: &str, text: &str) -> String {
    let sent = host.post_text("/v1/bots/p/messages", token, text).await;
    let path = format!("/v1/sessions/{}/entries", sent["session"].as_str().unwrap());
    let seq = sent["seq"].clone();
    let entries = poll(30, async || {
        let (_, v) = host.get(&path, token).await;
        let es = v["entries"].as_array().cloned().unwrap_or_default();
        let ended = es.iter().any(|e| {
            e["kind"] == "turn_end" && e["inputs"].as_array().is_some_and(|a| a.contains(&seq))
        });
        if ended {
            Ok(es)
        } else {
            Err(format!("{path}: {v:#}"))
        }
    })
    .await;
    deliveries(&entries).last().cloned().unwrap_or_default()
}

/// The tools `p` has.
const TOOLS: &[&str] = &["SendMessage", "Task", "CheckSubagent"];

/// Stops `host`, gives `p` to `owner` in fleet.toml and starts it again.
async fn give_p(host: TestHost, owner: &str) -> TestHost {
    let fleet = host
        .shutdown()
        .await
        .without_bot("p")
        .bot_of("p", "s", TOOLS, owner);
    fleet.write();
    restart(fleet).await
}

#[tokio::test]
async fn a_task_of_the_former_owners_dm_keeps_its_title_and_report_from_the_new_owner() {
    let host = TestFleet::new()
        .script("s", &script())
        .bot("p", "s", TOOLS)
        .start()
        .await;
    let (status, sent) = host.send("p", "delegate the return", None).await;
    assert_eq!(status, 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    host.wait_for(&dm, |es| {
        deliveries(es)
            .iter()
            .find(|d| d.as_str() == "report in")
            .map(|d| serde_json::json!(d))
    })
    .await;
    let sub = host.wait_subagent_of("p").await;
    assert!(bots_as(&host, TOKEN).await.contains(TITLE));

    let host = give_p(host, "bob").await;

    let listed = bots_as(&host, BOB_TOKEN).await;
    assert!(
        !listed.contains("zebratitle") && listed.contains(&format!("task {sub} (withheld)")),
        "bob reads alice's task title in the subagent's name or role: {listed}"
    );
    let check = ask(&host, BOB_TOKEN, &sub).await;
    assert!(
        check.contains("[done]")
            && check.contains("withheld")
            && !check.contains("zebratitle")
            && !check.contains("zebrareport"),
        "bob's bot reads alice's title or report: {check}"
    );
    let list = ask(&host, BOB_TOKEN, "list them").await;
    assert!(
        list.contains(sub.as_str()) && !list.contains("zebratitle"),
        "{list}"
    );
    // alice keeps her words in her DM
    let (status, v) = host.get(&format!("/v1/sessions/{dm}/entries"), TOKEN).await;
    assert_eq!(status, 200, "{v}");
    let text = v.to_string();
    assert!(text.contains(TITLE) && text.contains(REPORT), "{text}");

    // given back, the subagent shows alice her task and its report again
    let host = give_p(host, "alice").await;
    let listed = bots_as(&host, TOKEN).await;
    assert!(
        listed.contains(TITLE) && !listed.contains("withheld"),
        "{listed}"
    );
    let check = ask(&host, TOKEN, &sub).await;
    assert!(
        check.contains(TITLE) && check.contains(REPORT) && !check.contains("withheld"),
        "alice's task is not shown her whole again: {check}"
    );
    host.shutdown().await;
}
