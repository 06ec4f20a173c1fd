//! `botfleet group transcript ROOM --last N`: the end of a long room
//! timeline without reading it whole, as `transcript BOT --last N` does
//! for a conversation (QA: a 6,400-entry room printed 28 MB in 6 s every
//! time, with no way to ask for its end).

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

/// Each member speaks once per message, then the round ends silent.
const SCRIPT: &str = r#"
[[rule]]
match = "(?s)You are a member of the group room"
steps = [ { tool = "SendMessage", args = { text = "{{bot}} heard it" } } ]

[[rule]]
steps = [ { text = "nothing more" } ]
"#;

#[tokio::test]
async fn group_transcript_last_prints_only_the_end() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("ann", "s", &["SendMessage"])
        .bot("ben", "s", &["SendMessage"])
        .start()
        .await;
    let (status, room) = host.create_room(TOKEN, "den", &["ann", "ben"]).await;
    assert_eq!(status, 201, "{room}");
    for i in 0..6 {
        host.discuss(TOKEN, "den", &format!("topic {i}")).await;
    }
    let url = host.url.as_str();
    let (code, whole, err) = cli(&["group", "transcript", "den"], url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = whole.lines().collect();
    assert!(lines.len() > 8, "{whole}");
    for n in [1_usize, 3, 7] {
        let (code, out, err) = cli(
            &["group", "transcript", "den", "--last", &n.to_string()],
            url,
            TOKEN,
        )
        .await;
        assert_eq!(code, 0, "{err}");
        let tail: Vec<&str> = out.lines().collect();
        assert_eq!(tail, lines[lines.len() - n..], "--last {n}");
    }
    // more than there are: the whole timeline
    let (code, out, _) = cli(
        &["group", "transcript", "den", "--last", "1000"],
        url,
        TOKEN,
    )
    .await;
    assert_eq!((code, out.as_str()), (0, whole.as_str()));
    // with --json, entries as JSON lines, the last one the timeline's last
    let (code, json, _) = cli(
        &["group", "transcript", "den", "--json", "--last", "2"],
        url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(json.lines().count(), 2, "{json}");
    // 0 is a usage error, as for `transcript`
    let (code, _, err) = cli(&["group", "transcript", "den", "--last", "0"], url, TOKEN).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--last takes at least 1"), "{err}");
    host.shutdown().await;
}
