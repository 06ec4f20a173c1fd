//! The examples of docs/scripted-model.md run as written: the greeting
//! rule answers "hello" with the Shell's output, and the `match_tool`
//! rule put above it answers the step after a failed command. (The
//! greeting had a `match_tool` too, which no step 0 matches: the
//! example never replied. QA, 2026-12-05.)

use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

const DOC: &str = include_str!("../../docs/scripted-model.md");

/// The TOML blocks of the doc, in order.
fn toml_blocks() -> Vec<&'static str> {
    DOC.split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .collect()
}

/// What `assistant` (the greeting's bot) replies to "hello" with `script`.
async fn reply(script: &str) -> Vec<String> {
    let fleet =
        TestFleet::new()
            .script("s", script)
            .bot("assistant", "s", &["SendMessage", "Shell"]);
    let ws = super::review::workspace_of(&fleet.path());
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("plan.txt"), "the plan\n").unwrap();
    let host = fleet.start().await;
    let (session, end) = host.end_turn("assistant", "hello").await;
    assert_eq!(end["status"], "completed", "{end}");
    let said = deliveries(&host.entries(&session).await);
    host.shutdown().await;
    said
}

#[tokio::test]
async fn the_format_examples_run_as_written() {
    let blocks = toml_blocks();
    assert!(blocks.len() >= 2, "{blocks:?}");
    let (greeting, failed) = (blocks[0], blocks[1]);
    let said = reply(greeting).await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("Files: exit code: 0") && said[0].contains("plan.txt"),
        "{said:?}"
    );
    // the second rule above the greeting, whose `ls` now fails: the
    // second rule's step 1 answers
    let failing = greeting.replace(r#"command = "ls""#, r#"command = "ls no-such-dir""#);
    assert_ne!(failing, greeting);
    let said = reply(&format!("{failed}\n{failing}")).await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("That failed: exit code: 2"), "{said:?}");
    // and above a greeting whose `ls` works, the greeting answers
    let said = reply(&format!("{failed}\n{greeting}")).await;
    assert!(said[0].starts_with("Files: exit code: 0"), "{said:?}");
}
