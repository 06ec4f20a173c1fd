#![allow(clippy::unwrap_used)]

use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use serde_json::json;

use super::super::Task;
use super::*;
use crate::tools::Tool;
use crate::tools::ToolOutput;
use crate::tools::test_support::ToolFixture;

/// The name of the child a Task call's effects create.
fn child_name(out: &ToolOutput) -> String {
    let bots: Vec<&BotRecord> = out
        .effects
        .iter()
        .flat_map(Mutation::within_limits)
        .filter_map(|m| match m {
            Mutation::CreateBot(b) | Mutation::UpsertBot(b) => Some(b),
            _ => None,
        })
        .collect();
    assert_eq!(bots.len(), 1, "{:#?}", out.effects);
    bots[0].name.clone()
}

async fn task(f: &ToolFixture, description: &str) -> Result<ToolOutput, ToolError> {
    Task.call(
        &f.ctx("c1"),
        json!({ "description": description, "prompt": "Look around and report." }),
    )
    .await
}

/// Regression (round 20, H4 finding 7): a subagent's name was its parent's
/// and the task's title as given, so a bidi control, a newline or a
/// zero-width space in the title went into `GET /v1/bots`, the web page
/// and `botfleet bots`. A title that breaks the rules of names is refused
/// with what is wrong, and nothing is made.
#[tokio::test]
async fn a_title_with_characters_names_may_not_hold_is_refused() {
    let f = ToolFixture::new();
    for (title, code) in [
        ("bi\u{202e}di evil", "U+202E"),
        ("two\nlines", "U+000A"),
        ("hidden\u{200b} space", "U+200B"),
        ("sep\u{2028}arated", "U+2028"),
    ] {
        let e = task(&f, title).await.unwrap_err();
        assert_eq!(
            e.message,
            format!(
                "the description names the subagent, so it follows the rules of names: it \
                 holds the character {code}, which names may not hold (control, line-breaking \
                 or invisible formatting characters); use one line of plain text"
            ),
            "{title:?}"
        );
        assert_eq!(
            e.hint,
            "give the task a short title of plain text on one line and put the details in `prompt`"
        );
    }
    // past the part of a long title the name keeps, too
    let long = format!("{} tail\u{202e}", "word ".repeat(30));
    let e = task(&f, &long).await.unwrap_err();
    assert!(e.message.contains("U+202E"), "{}", e.message);
    // a word mixing alphabets passes for another
    let e = task(&f, "ask H\u{0435}lper").await.unwrap_err();
    assert!(
        e.message.contains("mixes Latin and Cyrillic"),
        "{}",
        e.message
    );
    assert!(
        f.rt.store
            .subagents_listed(&f.bot.id, usize::MAX)
            .await
            .unwrap()
            .0
            .is_empty()
    );
}

/// Plain titles pass as before, in any script, with emoji sequences; a
/// title that reads "You" is no name "You"; one longer than a name leaves
/// room for is kept whole as the task's title and cut in the name.
#[tokio::test]
async fn a_plain_title_names_the_subagent_and_a_long_one_is_cut_in_the_name() {
    let f = ToolFixture::new();
    for title in [
        "audit the logs",
        "You",
        "نامه\u{200c}ها",
        "pair 👩\u{200d}💻 review",
    ] {
        let out = task(&f, title).await.unwrap();
        assert_eq!(child_name(&out), format!("B · {title}"));
    }
    let long = "x".repeat(150);
    let out = task(&f, &long).await.unwrap();
    let name = child_name(&out);
    assert_eq!(name, format!("B · {}…", "x".repeat(95)));
    assert_eq!(name.chars().count(), 100);
    assert_eq!(botfleet_memory::display_name_problem(&name), None);
    assert!(
        out.content.contains(&format!("{long:?}")),
        "{}",
        out.content
    );
}
