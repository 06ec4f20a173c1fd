//! Each user's bots work in a directory of their own,
//! `<workspace>/<user id>/`: the bots of one user share it, and no bot
//! reaches another user's files. (Before, every bot of every user worked
//! in the one workspace: bob's bot read the token alice's bot had written
//! to a file, and overwrote her bot's notes.) Files an older version left
//! at the workspace root are named at start and stay where they are.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const ALICES: &str = "token=alice-private-0815";
const BOBS: &str = "bob was here";

const SCRIPT: &str = r#"
[[rule]]
match = "^keep"
steps = [ { tool = "Write", args = { path = "secret.txt", content = "token=alice-private-0815" } },
          { tool = "SendMessage", args = { text = "kept" } } ]

[[rule]]
match = "^overwrite"
steps = [ { tool = "Write", args = { path = "secret.txt", content = "bob was here" } },
          { tool = "SendMessage", args = { text = "written" } } ]

# a message that is a file name: Read it
[[rule]]
match = "\\.(txt|conf)$"
steps = [ { tool = "Read", args = { path = "{{input}}" } },
          { tool = "SendMessage", args = { text = "read" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

const TOOLS: &[&str] = &["SendMessage", "Read", "Write"];

/// alice's bots `ash` and `ash2`, bob's bot `bo`.
fn fleet() -> TestFleet {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("ash", "s", TOOLS)
        .bot("ash2", "s", TOOLS)
        .bot_of("bo", "s", TOOLS, "bob")
}

fn workspace(host: &TestHost) -> PathBuf {
    host.fleet.path().join("data/workspace")
}

/// Sends `text` to `bot` as the user of `token`; once the turn answering
/// it completed, returns the results of its tool calls (not SendMessage's).
async fn tool_results(host: &TestHost, bot: &str, token: &str, text: &str) -> Vec<Value> {
    let (end, es) = host.end_turn_as(bot, token, text).await;
    assert_eq!(end["status"], "completed", "{es:#?}");
    es.into_iter()
        .filter(|e| {
            e["kind"] == "tool_result" && e["name"] != "SendMessage" && e["turn"] == end["turn"]
        })
        .collect()
}

/// The one tool result of the turn answering `text`: its text and
/// whether it is an error.
async fn result(host: &TestHost, bot: &str, token: &str, text: &str) -> (String, bool) {
    let results = tool_results(host, bot, token, text).await;
    assert_eq!(results.len(), 1, "{results:#?}");
    let content = results[0]["content"].as_str().unwrap().to_owned();
    (content, results[0]["is_error"] == true)
}

#[tokio::test]
async fn one_users_bots_share_files_and_another_users_bots_do_not_see_them() {
    let host = fleet().start().await;
    let ws = workspace(&host);
    let (said, failed) = result(&host, "ash", TOKEN, "keep the token").await;
    assert!(!failed, "{said}");

    // bob's bot does not find alice's file
    let (said, failed) = result(&host, "bo", BOB_TOKEN, "secret.txt").await;
    assert!(failed && said.contains("No such file"), "{said}");
    assert!(!said.contains("alice-private"), "{said}");
    // nor reaches it by climbing out of its own directory
    let (said, failed) = result(&host, "bo", BOB_TOKEN, "../alice/secret.txt").await;
    assert!(failed && said.contains("outside the workspace"), "{said}");
    // its Write makes bob's own file and leaves alice's as it was
    let (said, failed) = result(&host, "bo", BOB_TOKEN, "overwrite it").await;
    assert!(!failed, "{said}");
    assert_eq!(
        std::fs::read_to_string(ws.join("bob/secret.txt")).unwrap(),
        BOBS
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("alice/secret.txt")).unwrap(),
        ALICES
    );
    let (said, failed) = result(&host, "bo", BOB_TOKEN, "secret.txt").await;
    assert!(
        !failed && said.contains(BOBS) && !said.contains(ALICES),
        "{said}"
    );

    // alice's other bot shares her files
    let (said, failed) = result(&host, "ash2", TOKEN, "secret.txt").await;
    assert!(!failed && said.contains(ALICES), "{said}");
    // no file at the root, where all bots would see it
    assert!(!ws.join("secret.txt").exists());
    host.shutdown().await;
}

/// Files an older version left at the workspace root are no bot's any
/// more: the start banner names them and says where each user's files
/// are; nothing is moved.
#[tokio::test]
async fn files_left_at_the_workspace_root_are_named_at_start() {
    let fleet = fleet();
    let ws = fleet.path().join("data/workspace");
    std::fs::create_dir_all(ws.join("notes/ash")).unwrap();
    std::fs::write(ws.join("deploy.conf"), "token=x").unwrap();
    std::fs::write(ws.join("notes/ash/diary.md"), "dear diary").unwrap();
    let host = fleet.start().await;
    let banner = host.host.as_ref().unwrap().banner.join("\n");
    assert!(
        banner.contains("1 entry that no bot sees any more: \"deploy.conf\"")
            && banner.contains("/<user id>/")
            && banner.contains("docs/operations.md, Upgrading"),
        "{banner}"
    );
    // a directory named like a user id may be a removed user's: kept
    assert!(
        banner.contains("named like a user id that is not a configured user's: \"notes\"")
            && banner.contains("Keep it if that user may come back"),
        "{banner}"
    );
    let (said, failed) = result(&host, "ash", TOKEN, "deploy.conf").await;
    assert!(failed && said.contains("No such file"), "{said}");
    assert!(ws.join("deploy.conf").exists() && ws.join("notes/ash/diary.md").exists());
    let host = crate::support::fleet::restart(host.shutdown().await).await;
    // the users' own directories are not named
    let banner = host.host.as_ref().unwrap().banner.join("\n");
    assert!(
        !banner.contains("\"alice\"") && !banner.contains("\"bob\""),
        "{banner}"
    );
    host.shutdown().await;
}

/// A user taken out of the config after their bot was removed (the
/// documented order): the start names their workspace directory (QA,
/// 2026-12-04: the removed bot, still listing them as owner, hid it).
#[tokio::test]
async fn a_removed_users_workspace_is_named_at_start() {
    let host = fleet()
        .bot_of("cy", "s", TOOLS, "carol")
        .tables("[[users]]\nid = \"carol\"\ntoken = \"carol-secret-token\"\n")
        .start()
        .await;
    let fleet = host.shutdown().await;
    let ws = fleet.path().join("data/workspace");
    std::fs::create_dir_all(ws.join("carol/notes")).unwrap();
    std::fs::write(ws.join("carol/notes/plan.md"), "carol's plan").unwrap();
    let fleet = fleet.without_bot("cy").without_tables();
    fleet.write();
    let host = crate::support::fleet::restart(fleet).await;
    let banner = host.host.as_ref().unwrap().banner.join("\n");
    assert!(
        banner.contains("named like a user id that is not a configured user's: \"carol\""),
        "{banner}"
    );
    assert!(ws.join("carol/notes/plan.md").exists());
    host.shutdown().await;
}
