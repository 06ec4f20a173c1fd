//! What `botfleet retry` says the requeued inputs wait for: a bot the
//! fleet's config no longer lists answers them only once a config lists
//! it again (QA, 2026-12-06: it said "the bot answers them in its
//! conversation", as for a bot that runs).

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::restart;
use crate::support::process::cli;

const SCRIPT: &str = r#"
[[rule]]
match = "^fail"
steps = [ { fail = "provider down" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "answer" } } ]
"#;

#[tokio::test]
async fn a_retry_for_a_bot_no_config_lists_says_what_it_waits_for() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot("k", "s", &["SendMessage"])
        .start()
        .await;
    let (_, end) = host.end_turn("r", "fail please").await;
    assert_eq!(end["status"], "failed", "{end}");
    let turn = end["turn"].as_str().unwrap().to_owned();

    let fleet = host.shutdown().await.without_bot("r");
    fleet.write();
    let host = restart(fleet).await;
    let (code, out, err) = cli(&["retry", &turn], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("requeued 1 input(s)"), "{out}");
    assert!(
        err.contains(
            "the bot is no longer in the fleet's config: they wait until a config lists it again"
        ),
        "{err}"
    );
    let (status, v) = host.retry(&turn).await;
    assert_eq!(status, 409, "{v}");
    host.shutdown().await;
}
