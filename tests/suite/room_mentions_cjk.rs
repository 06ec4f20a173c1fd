//! Rooms of a Chinese-speaking team: members whose display names carry an
//! emoji or a bracketed part are mentioned by their letters and digits,
//! also with no space before the text that follows; and `botfleet group
//! list` lines its columns up under Chinese and emoji room names and cuts
//! a long one.

use serde_json::json;
use unicode_width::UnicodeWidthStr as _;

use super::groups::SILENT;
use super::groups::create;
use super::groups::discuss;
use super::groups::notice_codes;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::process::cli;

/// Alice's bots with the names the tester gave them.
const MEMBERS: &str = r#"
[[bots]]
id = "zhushou"
name = "小助手🤖"
role = "团队助手。"
owner = "alice"
provider = "s"
tools = ["SendMessage"]

[[bots]]
id = "yanjiu"
name = "研究员 (Researcher)"
role = "研究员。"
owner = "alice"
provider = "s"
tools = ["SendMessage"]
"#;

/// A host with alice's `zhushou` and `yanjiu`, which say nothing.
async fn host() -> TestHost {
    TestFleet::new()
        .script("s", SILENT)
        .tables(MEMBERS)
        .start()
        .await
}

/// Regression (round 20, Chinese-user tester): `@小助手` for "小助手🤖",
/// `@研究员` for "研究员 (Researcher)" and `请@研究员查一下` were unknown
/// mentions ("no member of family is called @研究员查一下") and nobody
/// was addressed: only the ASCII ids could be mentioned.
#[tokio::test]
async fn members_with_emoji_or_brackets_in_their_names_are_mentioned_by_name() {
    let host = host().await;
    let room = json!({"name": "家庭群👨‍👩‍👧", "id": "family", "members": ["zhushou", "yanjiu"]});
    let (status, body) = create(&host, TOKEN, room).await;
    assert_eq!(status, 201, "{body}");
    for (i, (text, addressed)) in [
        ("@小助手 你好", json!(["zhushou"])),
        ("@研究员 请查一下", json!(["yanjiu"])),
        ("请@研究员查一下", json!(["yanjiu"])),
        (
            "@研究员Researcher 和＠小助手，看看",
            json!(["zhushou", "yanjiu"]),
        ),
        ("＠ｙａｎｊｉｕ 在吗", json!(["yanjiu"])),
    ]
    .into_iter()
    .enumerate()
    {
        let (answer, run) = discuss(&host, "family", text, &format!("k{i}")).await;
        assert_eq!(
            (
                answer["addressed"].clone(),
                answer["unknown_mentions"].clone()
            ),
            (addressed, json!([])),
            "{text}"
        );
        assert!(
            !notice_codes(&run).contains(&"unknown_mention".to_owned()),
            "{text}: {run:?}"
        );
    }
    // a start of a name is still no mention
    let (answer, _) = discuss(&host, "family", "@研究 在吗", "k-short").await;
    assert_eq!(answer["unknown_mentions"], json!(["研究"]));
    host.shutdown().await;
}

/// Regression (round 20, Chinese-user tester): `botfleet group list`
/// padded names with `{:<24}`, counting characters, so rows with Chinese
/// or emoji names (two cells a character) pushed their other columns out
/// of line, and a name of 84 Chinese characters ran 168 cells wide.
#[tokio::test]
async fn group_list_lines_up_wide_names_and_cuts_long_ones() {
    let host = host().await;
    let long = "很长的房间名字".repeat(12);
    for (id, name) in [
        ("weekly", "每周例会（产品组）🚀"),
        ("longroom", long.as_str()),
        ("zhouhui", "zhouhui"),
    ] {
        let room = json!({"name": name, "id": id, "members": ["zhushou", "yanjiu"]});
        let (status, body) = create(&host, TOKEN, room).await;
        assert_eq!(status, 201, "{body}");
    }
    let (code, out, err) = cli(&["group", "list"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    // the SHARED column starts at the same cell on every line
    let shared_at: Vec<usize> = lines
        .iter()
        .map(|line| {
            let at = line
                .find(if line.starts_with("ID") {
                    " SHARED"
                } else {
                    " no "
                })
                .unwrap_or_else(|| panic!("no SHARED cell in {line:?}"));
            line[..at].width()
        })
        .collect();
    assert!(
        shared_at.iter().all(|at| *at == shared_at[0]),
        "{shared_at:?}\n{out}"
    );
    let row = |id: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("no row {id} in\n{out}"))
            .to_owned()
    };
    assert!(row("weekly").contains("每周例会（产品组）🚀 "), "{out}");
    // the long name is cut to 40 cells with an ellipsis, between characters
    let cut = row("longroom")
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        cut,
        format!("{}…", &long.chars().take(19).collect::<String>())
    );
    assert!(cut.width() <= 40, "{cut}");
    host.shutdown().await;
}
