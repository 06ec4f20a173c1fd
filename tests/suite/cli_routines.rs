//! `botfleet routines`: a bot's routines through the CLI against a real
//! host (the API had them, the CLI had no view: a user learnt when a
//! routine fires next, or that its last run failed, only with curl).

use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;
use crate::support::routines::FAILING;
use crate::support::routines::once_in;

/// Put, list (text and `--json`), remove, and the refusals with their
/// exit codes: a routine's next fire shows in its own time zone.
#[tokio::test]
async fn routines_are_listed_put_and_removed_through_the_cli() {
    let host = TestFleet::new()
        .script("s", FAILING)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let url = host.url.as_str();
    // said on stderr, nothing on stdout (QA)
    let (code, out, err) = cli(&["routines", "r"], url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.is_empty() && err.contains("r has no routines"),
        "{out}{err}"
    );

    let put = [
        "routines",
        "put",
        "r",
        "brief",
        "--cron",
        "0 8 * * *",
        "--timezone",
        "Asia/Shanghai",
        "--prompt",
        "Brief me",
    ];
    let (code, out, err) = cli(&put, url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("created routine brief of r: next at ")
            && out.contains(" 08:00 (Asia/Shanghai)"),
        "{out}"
    );
    let (code, out, err) = cli(&put, url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("replaced routine brief of r"), "{out}");

    let (code, out, err) = cli(&["routines", "r"], url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let words: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        words,
        ["NAME", "CRON", "TIMEZONE", "NEXT", "LAST", "ERROR"],
        "{out}"
    );
    // the slot in Shanghai's time (08:00), not in UTC (00:00); no run yet
    assert!(
        lines[1].starts_with("brief 0 8 * * * Asia/Shanghai ")
            && lines[1].contains(" 08:00 ")
            && lines[1].split_whitespace().rev().take(2).eq(["-", "-"]),
        "{out}"
    );

    let (code, out, _) = cli(&["routines", "r", "--json"], url, TOKEN).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            &v["bot"],
            &v["routines"][0]["name"],
            &v["routines"][0]["silent_ok"]
        ),
        (&"r".into(), &"brief".into(), &true.into()),
        "{v}"
    );

    // not bob's bot: refused (1), as the API refuses it
    let (code, _, err) = cli(&["routines", "r"], url, BOB_TOKEN).await;
    assert_eq!(code, 1, "{err}");
    // a bad time zone is the host's refusal (1), naming the field
    let (code, _, err) = cli(
        &[
            "routines",
            "put",
            "r",
            "x",
            "--cron",
            "0 8 * * *",
            "--timezone",
            "Mars/Base",
            "--prompt",
            "p",
        ],
        url,
        TOKEN,
    )
    .await;
    assert!(code == 1 && err.contains("timezone"), "{code} {err}");
    // no bot at all is a usage error (2)
    let (code, _, err) = cli(&["routines"], url, TOKEN).await;
    assert_eq!(code, 2, "{err}");

    let (code, out, err) = cli(&["routines", "remove", "r", "brief"], url, TOKEN).await;
    assert_eq!(
        (code, out.trim()),
        (0, "removed routine brief of r"),
        "{err}"
    );
    // again: the host's 404, its hint naming the command, not the route
    let (code, _, err) = cli(&["routines", "remove", "r", "brief"], url, TOKEN).await;
    assert!(
        code == 1
            && err.contains("has no routine \"brief\"")
            && err.contains("`botfleet routines r`")
            && !err.contains("GET /v1"),
        "{code} {err}"
    );
    host.shutdown().await;
}

/// A routine whose last run failed says so in the listing, with its
/// error cut short and the command that runs it again.
#[tokio::test]
async fn a_failed_run_shows_in_the_cli_listing_with_its_retry() {
    let host = TestFleet::new()
        .script("s", FAILING)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let url = host.url.as_str();
    let cron = once_in(3);
    let (code, _, err) = cli(
        &[
            "routines",
            "put",
            "r",
            "failer",
            "--cron",
            &cron,
            "--timezone",
            "UTC",
            "--prompt",
            "FAILME now",
            "--report",
        ],
        url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let failed = host
        .wait_get("/v1/bots/r/turns", |v| {
            v["turns"]
                .as_array()?
                .iter()
                .find(|t| t["status"] == "failed")
                .cloned()
        })
        .await;
    let turn = failed["id"].as_str().unwrap();
    let (code, out, err) = cli(&["routines", "r"], url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let row = out.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("failer ") && row.contains(" failed ") && row.contains("boom"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "failer failed its last run: run it again with `botfleet retry {turn}`"
        )),
        "{out}"
    );
    host.shutdown().await;
}

/// A subagent's listing points at its parent, not at a `routines put`
/// the host refuses (QA, 2026-12-04: "add one with `botfleet routines
/// put p.sub-… …`", answered 409).
#[tokio::test]
async fn a_subagents_listing_points_at_its_parent() {
    const DELEGATES: &str = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "job", prompt = "SUBTASK job" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "done" } } ]
"#;
    let host = TestFleet::new()
        .script("s", DELEGATES)
        .bot("p", "s", &["SendMessage", "Task"])
        .start()
        .await;
    host.complete_turn("p", "delegate it").await;
    let sub = host.wait_subagent_of("p").await;
    let (code, out, err) = cli(&["routines", &sub], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!("{sub} is a subagent of p and runs no routines"))
            && err.contains("`botfleet routines put p NAME")
            && !err.contains(&format!("routines put {sub}")),
        "{err}"
    );
    // nor at a fleet.toml entry a subagent does not have for webhooks (QA)
    let (code, out, err) = cli(&["hooks", &sub], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(
        err.contains(&format!("{sub} is a subagent of p and takes no webhooks"))
            && !err.contains("add one"),
        "{err}"
    );
    host.shutdown().await;
}
