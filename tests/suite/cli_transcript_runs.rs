//! `botfleet transcript BOT --hook NAME` / `--routine NAME`: the runs of a
//! bot's webhook or routine, where a failed run's notice and its retry
//! are. `transcript` printed only the person's conversation, and no
//! command showed a failed webhook run (found by QA).

use botfleet::api::sign_hook;
use pretty_assertions::assert_eq;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::process::cli;

const SECRET: &str = "a-hook-secret-of-some-length";

const SCRIPT: &str = r#"
[[rule]]
match = "FAILME"
steps = [ { fail = "boom model error" } ]

[[rule]]
match = "EMPTYSEND"
steps = [
  { tool = "SendMessage", args = { text = "" } },
  { text = "nothing to say" },
]

[[rule]]
match = "QUIET"
steps = [ { text = "nothing worth telling" } ]

[[rule]]
match = "REPORTME"
steps = [ { tool = "SendMessage", args = { text = "a push to main, 3 commits" } } ]
"#;

/// A host with alice's bot `r` on [`SCRIPT`] and its webhook `gh`.
async fn hooked_host() -> TestHost {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\n"
        ))
        .start()
        .await
}

/// `botfleet transcript r --hook gh` with `flags`, as alice.
async fn hook_runs(host: &TestHost, flags: &[&str]) -> (i32, String, String) {
    let mut args = vec!["transcript", "r", "--hook", "gh"];
    args.extend_from_slice(flags);
    cli(&args, &host.url, TOKEN).await
}

/// Delivers `{"action": ACTION}` to r's hook `gh` as delivery `id`, signed;
/// waits for the run's end and returns its `turn_end` entry.
async fn deliver(host: &TestHost, id: &str, action: &str) -> serde_json::Value {
    let payload = format!(r#"{{"action":"{action}"}}"#);
    let (status, body) = host
        .post_hook(
            "/v1/hooks/r/gh",
            Some(id),
            Some(&sign_hook(SECRET.as_bytes(), payload.as_bytes())),
            &payload,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    host.wait_turn_end(
        body["session"].as_str().unwrap(),
        body["seq"].as_i64().unwrap(),
    )
    .await
}

/// Runs that sent nothing (a routine or hook with nothing to report) are
/// said so on stderr, not an empty exit 0 on both streams (QA).
#[tokio::test]
async fn runs_that_sent_nothing_are_said_so() {
    let host = hooked_host().await;
    let end = deliver(&host, "d-1", "QUIET").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (code, out, err) = hook_runs(&host, &[]).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert_eq!(
        err.trim(),
        "r-name (bot r) sent nothing from the webhook's 1 run read; `--all` shows what it did"
    );
    // what it did, with --all
    let (code, out, err) = hook_runs(&host, &["--all"]).await;
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert!(out.contains("nothing worth telling"), "{out}");
    host.shutdown().await;
}

#[tokio::test]
async fn transcript_prints_a_webhooks_runs_and_its_failure() {
    let host = hooked_host().await;
    // no run yet: said as such (QA: "none came yet, or the bot has no such
    // webhook", of one it has)
    let (code, out, err) = hook_runs(&host, &[]).await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("no runs of webhook \"gh\" of bot r: no delivery came yet")
            && !err.contains("no such"),
        "{err}"
    );
    let (code, _, err) = cli(&["transcript", "r", "--routine", "daily"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("`botfleet routines r`"), "{err}");
    // a routine it has that has not run: said so, with when it runs next
    let (status, put) = host
        .call(
            reqwest::Method::PUT,
            "/v1/bots/r/routines/weekly",
            TOKEN,
            Some(serde_json::json!({"cron": "0 9 * * 1", "timezone": "UTC", "prompt": "Weekly."})),
        )
        .await;
    assert_eq!(status, 201, "{put}");
    let (code, _, err) = cli(
        &["transcript", "r", "--routine", "weekly"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "no runs of routine \"weekly\" of bot r: it has not run yet; it runs next at "
        ),
        "{err}"
    );

    let end = deliver(&host, "d-1", "FAILME").await;
    assert_eq!(end["status"], "failed", "{end}");

    // the failure, with its retry, by default
    let (code, out, err) = hook_runs(&host, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("[turn_failed]") && out.contains("webhook gh") && out.contains("boom"),
        "{out}"
    );
    // with --all, the delivery that set it off
    let (code, out, err) = hook_runs(&host, &["--all", "--last", "5"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("FAILME"), "{out}");
    // the person's conversation is not the hook's
    let (code, out, err) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");

    // a run that reported: what the bot sent, which went to alice's
    // conversation (QA, 2026-12-04: it printed nothing without --all)
    let end = deliver(&host, "d-2", "REPORTME").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (code, out, err) = hook_runs(&host, &["--last", "1"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.trim_end()
            .ends_with("#5 r-name (bot r) ▸ a push to main, 3 commits (to your conversation)")
            && out.lines().count() == 1,
        "{out}"
    );
    // a SendMessage refused (empty) delivered nothing: `--last 1` is
    // still the last delivered message (it showed the refused call as
    // delivered to you, QA)
    deliver(&host, "d-3", "EMPTYSEND").await;
    let (code, out, err) = hook_runs(&host, &["--last", "1"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim_end(),
        "#5 r-name (bot r) ▸ a push to main, 3 commits (to your conversation)"
    );
    let (code, out, err) = hook_runs(&host, &["--json"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("a push to main"), "{out}");
    // another user's bot: the host's 404, nothing of its runs
    let (code, out, err) = cli(&["transcript", "r", "--hook", "gh"], &host.url, BOB_TOKEN).await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("no bot \"r\" for you"), "{err}");

    // fleet.toml gives r to bob: the hook's runs come along, and what r
    // sent before went to alice, not to bob's conversation (QA,
    // 2026-12-05: bob read "(to your conversation)")
    let fleet = host
        .shutdown()
        .await
        .without_bot("r")
        .bot_of("r", "s", &["SendMessage"], "bob")
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\n"
        ));
    fleet.write();
    let host = restart(fleet).await;
    let (code, out, err) = cli(&["transcript", "r", "--hook", "gh"], &host.url, BOB_TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("▸ a push to main, 3 commits (to alice's conversation, its owner then)")
            && !out.contains("(to your conversation)"),
        "{out}"
    );
    // `--last` reads the call's result too: the same words
    let (code, out, err) = cli(
        &["transcript", "r", "--hook", "gh", "--last", "1"],
        &host.url,
        BOB_TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.trim_end()
            .ends_with("▸ a push to main, 3 commits (to alice's conversation, its owner then)"),
        "{out}"
    );
    // its owner lists the hook, with its path and limits, never its secret
    let (code, out, err) = cli(&["hooks", "r"], &host.url, BOB_TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with("NAME")
            && lines[1].starts_with("gh")
            && lines[1].contains("/v1/hooks/r/gh"),
        "{out}"
    );
    let (code, out, err) = cli(&["hooks", "r", "--json"], &host.url, BOB_TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("\"deliveries_per_minute\"") && !out.contains(SECRET),
        "{out}"
    );
    // another user: the same 404 as for any bot not theirs
    let (code, out, err) = cli(&["hooks", "r"], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("no bot \"r\" for you"), "{err}");

    // the hook taken out of fleet.toml: its runs are refused as a removed
    // routine's are (they printed, exit 0, where the docs say exit 1)
    let fleet = host
        .shutdown()
        .await
        .without_bot("r")
        .bot_of("r", "s", &["SendMessage"], "bob");
    fleet.write();
    let host = restart(fleet).await;
    let (code, out, err) = cli(&["transcript", "r", "--hook", "gh"], &host.url, BOB_TOKEN).await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("bot r has no webhook \"gh\" (removed, or never made)")
            && err.contains("`botfleet hooks r`"),
        "{err}"
    );
    let (code, out, err) = cli(&["hooks", "r"], &host.url, BOB_TOKEN).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(err.contains("r has no webhooks; add one"), "{err}");
    host.shutdown().await;
}
