//! What the command line shows of a subagent: `botfleet transcript SUB`
//! prints its task, its progress and its report; `botfleet bots` says how
//! its task ended.
//!
//! (Before, `transcript` printed the person's DM with the subagent, empty
//! for one nobody wrote to: nothing at all, exit 0, as if it had done
//! nothing. And `bots` showed a finished or stopped subagent as `idle` or
//! `asleep`, like a bot ready for work.)

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

const SCRIPT: &str = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "find the answer", prompt = "work out the answer" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "got the report" } } ]

[[rule]]
match = "work out the answer"
steps = [
  { tool = "SendMessage", args = { text = "working on it" } },
  { tool = "SendMessage", args = { text = "the answer is 42" } },
]

[[rule]]
match = "^hello sub"
steps = [ { tool = "SendMessage", args = { text = "hi, person" } } ]
"#;

#[tokio::test]
async fn transcript_of_a_subagent_prints_its_task_and_bots_says_it_is_done() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p", "s", &["SendMessage", "Task"])
        .start()
        .await;
    let session = host.complete_turn("p", "delegate please").await;
    host.wait_for(&session, |es| {
        es.iter()
            .find(|e| e["kind"] == "delivery" && e["text"] == "got the report")
            .cloned()
    })
    .await;
    let sub = host.wait_subagent_of("p").await;

    let (code, out, err) = cli(&["transcript", &sub], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    // each line without its `#seq`
    let said = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest).to_owned())
            .collect()
    };
    assert_eq!(
        said(&out),
        [
            "task from p: work out the answer".to_owned(),
            format!("p-name · find the answer (bot {sub}) ▸ working on it"),
            format!("p-name · find the answer (bot {sub}) ▸ the answer is 42"),
        ],
        "{out}"
    );
    assert!(out.starts_with("#1 task from p"), "{out}");
    let (code, out, err) = cli(&["transcript", &sub, "--last", "1"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        said(&out),
        [format!(
            "p-name · find the answer (bot {sub}) ▸ the answer is 42"
        )],
        "{out}"
    );
    // --json prints the same entries, the task among them
    let (code, out, err) = cli(&["transcript", &sub, "--json"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let kinds: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["kind"].to_string())
        .collect();
    assert_eq!(
        kinds,
        ["\"event\"", "\"delivery\"", "\"delivery\""],
        "{out}"
    );

    let (code, out, err) = cli(&["bots"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with(&sub))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.split_whitespace().any(|w| w == "done"), "{out}");

    // a person's DM with it is printed with its task, in the fleet's
    // order, its lines marked (each session numbers its own entries: two
    // `#1` read alike: QA, 2026-12-05)
    let (_, end) = host.end_turn(&sub, "hello sub").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (code, out, err) = cli(&["transcript", &sub], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(lines[0].starts_with("#1 task from p"), "{out}");
    assert!(lines[3].starts_with("#1 (direct) alice"), "{out}");
    assert!(
        lines[4].starts_with("#")
            && lines[4].contains(" (direct) ")
            && lines[4].ends_with("hi, person"),
        "{out}"
    );
    host.shutdown().await;
}
