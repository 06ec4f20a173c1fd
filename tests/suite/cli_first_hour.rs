//! A new user's first hour with the CLI (round 22, tester H4): what
//! `transcript --last`, `send --timeout`, `reindex`, `group send`, the
//! host's hints and a start on a public address say.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::cli;
use crate::support::process::free_port;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// The lines of `out` that show an entry (`#SEQ …`).
fn entry_lines(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with('#')).collect()
}

/// Regression (H4 #1): `--last N` counted entries back from the end,
/// printed or not, so `--last 1` and `--last 2` after a reply printed
/// nothing (the turn's end and an empty `assistant` entry are never
/// shown). It prints the last N entries it shows.
#[tokio::test]
async fn transcript_last_counts_the_entries_it_prints() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    for text in ["first", "second"] {
        let (_, sent) = host.send("r", text, None).await;
        let session = sent["session"].as_str().unwrap().to_owned();
        host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
    }
    let (code, out, err) = cli(&["transcript", "r", "--last", "1"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let lines = entry_lines(&out);
    assert_eq!(lines.len(), 1, "{out}");
    // the bot's reply by its name beside its id
    assert!(lines[0].ends_with("r-name (bot r) ▸ echo: second"), "{out}");
    let (_, out, _) = cli(&["transcript", "r", "--last", "2"], &host.url, TOKEN).await;
    let lines = entry_lines(&out);
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].ends_with("alice: second"), "{out}");
    // with --all the internal steps count: the last is the turn's end
    let (_, out, _) = cli(
        &["transcript", "r", "--all", "--last", "2"],
        &host.url,
        TOKEN,
    )
    .await;
    let lines = entry_lines(&out);
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[1].contains("completed)"), "{out}");
    // JSON lines: the same count
    let (_, out, _) = cli(
        &["transcript", "r", "--json", "--last", "3"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(out.lines().count(), 3, "{out}");
    host.shutdown().await;
}

/// Regression (H4 #2, #7d): `send --timeout 0` was taken and never sent
/// anything ("the host did not answer within 0 s", exit 1), and `search
/// --limit 0` was refused by the host (exit 1). Both are usage errors
/// (2), naming the flag and the smallest value, before any request.
#[tokio::test]
async fn out_of_range_flags_are_usage_errors() {
    // no host listens there: nothing may be sent
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    for args in [
        &["send", "r", "hi", "--timeout", "0"][..],
        &["group", "send", "room", "hi", "--timeout", "0"],
    ] {
        let (code, out, err) = cli(args, &nowhere, TOKEN).await;
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}: {err}");
        assert!(
            err.contains("--timeout") && err.contains("the smallest --timeout is 1"),
            "{args:?}: {err}"
        );
    }
    let (code, _, err) = cli(&["search", "x", "--limit", "0"], &nowhere, TOKEN).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--limit takes 1 to 100"), "{err}");
    // a negative value names the flag and its range too (QA: it read as
    // an unknown option, with a tip that did not work)
    for (args, flag) in [
        (&["send", "r", "hi", "--timeout", "-1"][..], "--timeout"),
        (
            &["group", "send", "room", "hi", "--timeout", "-3"],
            "--timeout",
        ),
        (&["transcript", "r", "--last", "-1"], "--last"),
        (&["search", "milk", "--limit", "-5"], "--limit"),
        (&["search", "milk", "--offset", "-5"], "--offset"),
    ] {
        let (code, out, err) = cli(args, &nowhere, TOKEN).await;
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}: {err}");
        assert!(
            err.contains(&format!("for '{flag} ")) && err.contains(" to ") && !err.contains("tip"),
            "{args:?}: {err}"
        );
    }
    let (code, _, err) = cli(&["search", "x", "--offset", "10001"], &nowhere, TOKEN).await;
    assert_eq!(code, 2, "{err}");
    // named as the flag, not as the API's `input` (QA); 4,000 CJK
    // characters are characters, not bytes
    let long = "x".repeat(4001);
    let (code, _, err) = cli(&["memory", "r", "--input", &long], &nowhere, TOKEN).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--input is 4001 characters; it takes at most 4000"),
        "{err}"
    );
    // without the value quoted whole (QA: 4,001 characters printed back)
    assert!(err.len() < 1_000, "{} bytes: {err}", err.len());
    // with the usage of `memory`, not the top level's (QA, 2026-12-06)
    assert!(err.contains("Usage: botfleet memory "), "{err}");
    let cjk = "记".repeat(4000);
    let (code, _, err) = cli(&["memory", "r", "--input", &cjk], &nowhere, TOKEN).await;
    assert_ne!(code, 2, "{err}");
}

/// Regression (H4 #3): `cd /tmp && botfleet reindex --fleet DIR/fleet.toml`
/// with `data_dir = "./botfleet-data"` said "pass … --fleet with its fleet
/// file" to one who had. It says the relative data_dir is read from the
/// current directory, as `run` reads it, and what to do.
#[tokio::test]
async fn reindex_says_a_relative_data_dir_is_read_from_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let fleet_dir = dir.path().join("fleet");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(fleet_dir.join("scripts")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(
        fleet_dir.join("scripts/offline.toml"),
        botfleet::config::EMBEDDED_OFFLINE_SCRIPT,
    )
    .unwrap();
    let fleet = fleet_dir.join("fleet.toml");
    std::fs::write(&fleet, botfleet::config::EMBEDDED_FLEET).unwrap();
    assert!(botfleet::config::EMBEDDED_FLEET.contains("data_dir = \"./botfleet-data\""));
    let out = tokio::process::Command::new(BIN)
        .args(["reindex", "--fleet"])
        .arg(&fleet)
        .current_dir(&elsewhere)
        .env_remove("XAI_API_KEY")
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let expected = format!(
        "data_dir = \"./botfleet-data\" in {} is read from the current directory ({})",
        fleet.display(),
        elsewhere.display()
    );
    assert!(err.contains(&expected), "{expected:?} not in: {err}");
    assert!(err.contains("make data_dir absolute"), "{err}");
    assert!(!err.contains("or --fleet with its fleet file"), "{err}");
}

/// Every member's model call fails; `ok` (if a member) answers, `quiet`
/// takes its turn and says nothing.
const ALL_FAIL_BUT_OK: &str = r#"
[[rule]]
bot = "ok"
steps = [ { tool = "SendMessage", args = { text = "here" } } ]

[[rule]]
bot = "quiet"
steps = [ { text = "nothing to add" } ]

[[rule]]
steps = [ { fail = "client error (Connect): dns error: failed to lookup address" } ]
"#;

/// Regression (H4 #4): `group send` exited 0 when every member's turn
/// failed, so a script could not tell it from a discussion. It exits 3
/// (as `send` does for a failed turn) when no member answered because
/// turns failed, and 0 when one answered.
#[tokio::test]
async fn group_send_exits_3_when_every_member_turn_failed() {
    let host = TestFleet::new()
        .script("s", ALL_FAIL_BUT_OK)
        .bot("m1", "s", &["SendMessage"])
        .bot("m2", "s", &["SendMessage"])
        .bot("ok", "s", &["SendMessage"])
        .start()
        .await;
    let run = async |args: &[&str]| cli(args, &host.url, TOKEN).await;
    let (code, _, err) = run(&["group", "create", "down", "--members", "m1,m2"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(&["group", "send", "down", "hello"]).await;
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(err.contains("2 of 2 member turns failed"), "{err}");
    let (code, _, err) = run(&["group", "send", "down", "hello", "--json"]).await;
    assert_eq!(code, 3, "{err}");
    // one member answered: the discussion is no failure
    let (code, _, err) = run(&["group", "create", "half", "--members", "m1,ok"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(&["group", "send", "half", "hello"]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("ok-name (bot ok) ▸ here"), "{out}");
    host.shutdown().await;
}

/// Regression (round 24): a member whose turn failed and one that took its
/// turn and chose to say nothing: the discussion ended with no public
/// reply and a `room_run_failed_round` notice, and `group send` exited 3
/// as if no member could answer. It exits 0: one member answered, by
/// passing. The run's `turn_end` on the timeline lists how each member
/// did, which is what the exit status is decided from.
#[tokio::test]
async fn group_send_exits_0_when_a_member_passed_while_another_failed() {
    let host = TestFleet::new()
        .script("s", ALL_FAIL_BUT_OK)
        .bot("m1", "s", &["SendMessage"])
        .bot("quiet", "s", &["SendMessage"])
        .start()
        .await;
    let run = async |args: &[&str]| cli(args, &host.url, TOKEN).await;
    let (code, _, err) = run(&["group", "create", "mixed", "--members", "m1,quiet"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(&["group", "send", "mixed", "hello", "--json"]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["replies"], json!([]), "{v}");
    assert_eq!(
        v["members"],
        json!([
            {"id": "m1", "outcome": "failed"},
            {"id": "quiet", "outcome": "passed"},
        ]),
        "{v}"
    );
    // the same on the timeline, for any client
    let (status, page) = host
        .call(
            reqwest::Method::GET,
            "/v1/groups/mixed/entries",
            TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 200, "{page}");
    let ends: Vec<&Value> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "turn_end")
        .collect();
    assert_eq!(ends.len(), 1, "{page}");
    assert_eq!(ends[0]["members"], v["members"], "{page}");
    host.shutdown().await;
}

/// Regression (H4 #5): the CLI printed the host's hints for API clients
/// ("removed with DELETE /v1/bots/{bot}", "create a new room (POST
/// /v1/groups)"); it names its own commands instead.
#[tokio::test]
async fn cli_errors_name_cli_commands_not_api_routes() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let (code, _, err) = cli(&["bots", "remove", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("`botfleet bots remove BOT`"), "{err}");
    assert!(!err.contains("/v1/"), "{err}");
    for args in [
        &["group", "create", "standup", "--members", "r,q"][..],
        &["group", "close", "standup"],
    ] {
        let (code, _, err) = cli(args, &host.url, TOKEN).await;
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    let (code, _, err) = cli(&["group", "send", "standup", "x"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("`botfleet group create"), "{err}");
    assert!(!err.contains("POST /v1/groups"), "{err}");
    // the API's own text is unchanged for API clients
    let (status, body) = host
        .call(
            reqwest::Method::POST,
            "/v1/groups/standup/messages",
            TOKEN,
            Some(serde_json::json!({"text": "x"})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("POST /v1/groups")),
        "{body}"
    );
    host.shutdown().await;
}

/// A fresh directory with the example fleet's offline script, and the
/// path its `fleet.toml` is to have.
fn example_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
    std::fs::write(
        dir.path().join("scripts/offline.toml"),
        botfleet::config::EMBEDDED_OFFLINE_SCRIPT,
    )
    .unwrap();
    let fleet = dir.path().join("fleet.toml");
    (dir, fleet)
}

/// The lines `botfleet run` prints up to its `send a message` line, from a
/// start with `--listen ADDR` on the example fleet (its token
/// `alice-secret`) in a fresh data directory; the host is then killed.
async fn banner(listen: &str) -> String {
    let (dir, fleet) = example_dir();
    std::fs::write(&fleet, botfleet::config::EMBEDDED_FLEET).unwrap();
    let mut child = tokio::process::Command::new(BIN)
        .args(["run", "--fleet"])
        .arg(&fleet)
        .args(["--listen", listen])
        .current_dir(dir.path())
        .env_remove("XAI_API_KEY")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = String::new();
    let read = async {
        while let Ok(Some(line)) = lines.next_line().await {
            out.push_str(&line);
            out.push('\n');
            if line.starts_with("send a message:") {
                return;
            }
        }
    };
    let done = tokio::time::timeout(Duration::from_secs(60), read).await;
    child.start_kill().unwrap();
    let _ = child.wait().await;
    assert!(done.is_ok(), "no banner in time: {out}");
    out
}

/// Regression (H4 #6): `run --listen 0.0.0.0:PORT` on the example fleet
/// served every interface with the published token `alice-secret`, and
/// said nothing. The banner warns, naming the user, the risk and the fix;
/// on loopback it does not.
#[tokio::test]
async fn a_public_address_with_a_published_token_is_warned_about() {
    let out = banner(&format!("0.0.0.0:{}", free_port())).await;
    let warning = out
        .lines()
        .find(|l| l.starts_with("WARNING: listening on 0.0.0.0:"))
        .unwrap_or_else(|| panic!("no warning in:\n{out}"));
    assert!(
        warning.contains("alice")
            && warning.contains("alice-secret")
            && warning.contains("token_env")
            && warning.contains("--listen 127.0.0.1:"),
        "{warning}"
    );
    let out = banner(&format!("127.0.0.1:{}", free_port())).await;
    assert!(!out.contains("WARNING: listening on"), "{out}");
}

/// `check-config` says what a start would warn of (QA, 2026-12-06: it
/// printed a plain `ok` where `run` warned): a public address with a
/// published token, and a reviewer that is the offline model, so every
/// action the rules allow waits for a person.
#[tokio::test]
async fn check_config_warns_as_a_start_does() {
    let (dir, fleet) = example_dir();
    let check = async |body: String| {
        std::fs::write(&fleet, body).unwrap();
        let out = tokio::process::Command::new(BIN)
            .args(["check-config", "--fleet"])
            .arg(&fleet)
            .current_dir(dir.path())
            .env_remove("XAI_API_KEY")
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        stdout
    };
    let example = botfleet::config::EMBEDDED_FLEET;
    let plain = check(example.to_owned()).await;
    assert!(
        !plain.contains("WARNING: listening on") && !plain.contains("the reviewer"),
        "{plain}"
    );
    let exposed = check(example.replace("127.0.0.1:7878", "0.0.0.0:7878")).await;
    assert!(
        exposed.contains("WARNING: listening on 0.0.0.0:7878") && exposed.contains("alice-secret"),
        "{exposed}"
    );
    let reviewed = check(example.replace("# reviewer = \"main\"", "reviewer = \"main\"")).await;
    assert!(
        reviewed.contains(
            "OFFLINE: the reviewer (review.reviewer = \"main\") is the scripted model \
             \"offline\", which cannot judge"
        ),
        "{reviewed}"
    );
}
