//! A bot paused by its daily token budget holds its waiting message across
//! restarts: a host killed (SIGKILL) and started again, several times,
//! while the bot is paused does not count those starts as crashes of the
//! turn that waits. (QA: after four kills the message was failed, "the
//! turn crashed at least 3 times in a row before its first step", though
//! no model call was ever made, and needed a manual retry.)

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::HostProcess;
use crate::support::process::cli;
use crate::support::process::free_port;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

#[tokio::test]
async fn restarts_while_a_bot_is_paused_do_not_fail_its_waiting_message() {
    let fleet = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 1");
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let (code, _, err) = cli(&["send", "r", "spend it"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(
        &["send", "r", "while paused", "--timeout", "10"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 5, "{err}");
    let mut host = host;
    for _ in 0..5 {
        host.kill9().await;
        host = HostProcess::start(&path, port, &log).await;
        // each start reads the waiting message back and holds it
        host.wait_log("daily token budget spent; paused").await;
    }
    let (code, out, err) = cli(&["transcript", "r", "--all"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains("turn_failed") && !out.contains("crashed"),
        "the waiting message was failed: {out}"
    );
    host.kill9().await;
}
