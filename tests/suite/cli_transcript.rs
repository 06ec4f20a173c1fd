//! `botfleet transcript`: what the text output shows of each entry kind.

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

/// A compaction summary is part of what `--all` shows (it was printed only
/// with `--json`: the text output had no arm for it).
#[tokio::test]
async fn transcript_all_shows_compaction_summaries() {
    let script = r#"
[[rule]]
purpose = "compact"
steps = [ { text = "SUMMARY OF THE TALK" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"]);
    let path = fleet.write();
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "kind = \"scripted\"",
        "kind = \"scripted\"\ncompact_at_tokens = 1000\nbackground_compact_at_tokens = 1000",
    );
    std::fs::write(&path, text).unwrap();
    let host = crate::support::fleet::restart(fleet).await;
    let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(12);
    let mut session = String::new();
    for i in 0..12 {
        let (_, sent) = host.send("r", &format!("note {i}: {filler}"), None).await;
        session = sent["session"].as_str().unwrap().to_owned();
        host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
    }
    let summary = host
        .wait_for(&session, |es| {
            es.iter().find(|e| e["kind"] == "summary").cloned()
        })
        .await;
    let line = format!(
        "#{} (summary up to #{}) SUMMARY OF THE TALK",
        summary["seq"], summary["covers_to_seq"]
    );
    let (code, out, err) = cli(&["transcript", "r", "--all"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&line), "{line} not in:\n{out}");
    // without --all the internal steps, summaries included, stay out
    let (code, out, _) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 0);
    assert!(!out.contains("SUMMARY OF THE TALK"), "{out}");
    host.shutdown().await;
}
