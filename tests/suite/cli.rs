//! The CLI against a running host, and `botfleet run` refusing bad config.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::cli;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

#[tokio::test]
async fn send_transcript_and_bots() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (code, out, err) = cli(&["send", "r", "hello there"], &host.url, TOKEN).await;
    assert_eq!((code, out.trim()), (0, "echo: hello there"), "{err}");

    let (code, out, _) = cli(
        &["send", "r", "again", "--json", "--nonce", "n-1"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["deliveries"][0]["text"], "echo: again");
    // the same nonce again: no new turn, the same reply
    let (code, out2, _) = cli(
        &["send", "r", "again", "--json", "--nonce", "n-1"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0);
    let v2: Value = serde_json::from_str(out2.trim()).unwrap();
    assert_eq!(v2["deliveries"], v["deliveries"]);
    // the same nonce with other text: refused
    let (code, _, err) = cli(&["send", "r", "other", "--nonce", "n-1"], &host.url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("conflict"), "{err}");

    let (code, out, _) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("alice: hello there") && out.contains("▸ echo: hello there"),
        "{out}"
    );
    assert_eq!(out.matches("echo: again").count(), 1, "{out}");

    let (code, out, _) = cli(&["bots"], &host.url, TOKEN).await;
    assert_eq!(code, 0);
    assert!(out.contains("r-name"), "{out}");
    let (code, out, _) = cli(&["bots", "--json"], &host.url, TOKEN).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["bots"][0]["turns"]["completed"], 2);

    let (code, _, err) = cli(&["send", "nobody", "x"], &host.url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("no bot \"nobody\""), "{err}");
    let (code, _, err) = cli(&["bots"], &host.url, "wrong-token").await;
    assert_eq!(code, 1);
    assert!(
        err.contains("unknown token") && err.contains("check --token / BOTFLEET_TOKEN"),
        "{err}"
    );
    // the API's own words name no CLI flag (QA)
    let (status, v) = host.get("/v1/bots", "wrong-token").await;
    assert_eq!(status, 401, "{v}");
    let said = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("unknown token")
            && !said.contains("--token")
            && said.contains("[[users]]"),
        "{v}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn cli_without_a_host_or_token_says_what_to_do() {
    let (code, _, err) = cli(&["bots"], "http://127.0.0.1:9", TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("cannot reach the host"), "{err}");
    // the cause, not reqwest's chain around it with an API route (QA)
    assert!(
        err.contains("Connection refused")
            && !err.contains("/v1/")
            && !err.contains("client error"),
        "{err}"
    );
    // an address without a port says which was tried, and the host's
    let (code, _, err) = cli(&["bots"], "http://127.0.0.1", TOKEN).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("gives no port, so port 80 was tried")
            && err.contains("--host 127.0.0.1:7878"),
        "{err}"
    );
    // the scheme's own port, given, is given (it said "gives no port", QA)
    for given in ["http://127.0.0.1:80", "127.0.0.1:80", "http://[::1]:80"] {
        let (code, _, err) = cli(&["bots"], given, TOKEN).await;
        assert_eq!(code, 1, "{given}");
        assert!(
            err.contains("cannot reach the host") && !err.contains("gives no port"),
            "{given}: {err}"
        );
    }
    let out = tokio::process::Command::new(BIN)
        .args(["bots"])
        .env_remove("BOTFLEET_TOKEN")
        .output()
        .await
        .unwrap();
    // no token is a usage error, as `send --help` says of bad arguments
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("BOTFLEET_TOKEN"));
}

#[tokio::test]
async fn run_refuses_a_bad_config_naming_file_and_key() {
    let fleet = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage", "Teleport"]);
    let path = fleet.write();
    let out = tokio::process::Command::new(BIN)
        .args(["run", "--fleet"])
        .arg(&path)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fleet.toml") && err.contains("bots[0].tools[1]") && err.contains("Teleport"),
        "{err}"
    );

    std::fs::write(
        &path,
        std::fs::read_to_string(&path)
            .unwrap()
            .replace("[runtime]", "[runtime]\nspeed = 3"),
    )
    .unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["check-config", "--fleet"])
        .arg(&path)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("speed"), "{err}");
}

/// The offline model of the embedded fleet in a room (README tour, step
/// 7): each member answers a person's message once and stays quiet while
/// only bots talk, so the run ends after one silent round; its replies do
/// not quote the room prompt back.
#[tokio::test]
async fn offline_members_answer_a_person_once_per_message() {
    let host = TestFleet::new()
        .script("offline", botfleet::config::EMBEDDED_OFFLINE_SCRIPT)
        .bot("a", "offline", &["SendMessage"])
        .bot("b", "offline", &["SendMessage"])
        .start()
        .await;
    let (code, _, err) = cli(
        &["group", "create", "standup", "--members", "a,b"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");

    let (code, out, err) = cli(
        &["group", "send", "standup", "hello everyone", "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let replies = v["replies"].as_array().unwrap();
    let authors: Vec<&str> = replies
        .iter()
        .map(|r| r["author"].as_str().unwrap())
        .collect();
    assert_eq!(authors, ["a", "b"], "{out}");
    for r in replies {
        let text = r["text"].as_str().unwrap();
        assert!(text.starts_with("(offline) "), "{text}");
        assert!(!text.contains("group room"), "quotes the prompt: {text}");
    }

    let (code, out, err) = cli(
        &["group", "send", "standup", "@B status?"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("b-name (bot b) ▸ (offline) b here."),
        "{out}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_reader_that_goes_away_stops_the_cli_quietly() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (code, _, err) = cli(&["send", "r", "hello there"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    // `botfleet transcript r | head -0`: the reader is gone before the
    // CLI prints its first line
    let mut child = tokio::process::Command::new(BIN)
        .args(["transcript", "r", "--host", &host.url])
        .env("BOTFLEET_TOKEN", TOKEN)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    host.shutdown().await;
}

/// Regression: `botfleet run > host.out` with that file on a full disk
/// panicked at its banner ("failed printing to stdout"), so the host never
/// served. It serves without the line, and stops cleanly.
#[tokio::test]
async fn a_host_whose_stdout_fails_still_serves() {
    let fleet = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"]);
    let config = fleet.write();
    let port = crate::support::process::free_port();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut child = tokio::process::Command::new(BIN)
        .args(["run", "--fleet"])
        .arg(&config)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(std::process::Stdio::from(full))
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let pid = child.id().unwrap();
    let answered = crate::support::process::poll(30, async || {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(Err(status));
        }
        let (code, out, err) = cli(&["send", "r", "hello"], &url, TOKEN).await;
        if code == 0 {
            Ok(Ok(out))
        } else {
            Err(format!("no answer yet ({code}): {err}"))
        }
    })
    .await;
    let out = answered.unwrap_or_else(|status| panic!("the host stopped: {status}"));
    assert_eq!(out.trim(), "echo: hello");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let out = child.wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(!err.contains("panicked"), "{err}");
}

/// A command whose output cannot be written says so and fails, rather
/// than panicking (before) or ending with 0 on an incomplete output.
#[tokio::test]
async fn a_command_whose_stdout_fails_says_so() {
    let fleet = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"]);
    let config = fleet.write();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["check-config", "--fleet"])
        .arg(&config)
        .stdout(std::process::Stdio::from(full))
        .stderr(std::process::Stdio::piped())
        // not `output()`, which pipes stdout too
        .spawn()
        .unwrap()
        .wait_with_output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot write to stdout") && err.contains("incomplete"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// Regression: `send` to a bot whose daily token budget is spent waited
/// out the whole `--timeout` and said "no reply within …", although the
/// host wrote its `budget_exhausted` notice at once (a paused turn writes
/// no turn_end). It prints the notice (or, when the host's answer to the
/// message already says the bot is paused, as it does from the end of the
/// turn that spent the budget, until when) and ends at once with 5
/// ("saved, no reply yet"), with `--json` too.
#[tokio::test]
async fn send_to_a_bot_paused_by_its_budget_ends_at_once_with_the_notice() {
    let host = TestFleet::new()
        .midday()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 1")
        .bot("q", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 1")
        .start()
        .await;
    for bot in ["r", "q"] {
        let (code, out, err) = cli(&["send", bot, "spend it"], &host.url, TOKEN).await;
        assert_eq!((code, out.trim()), (0, "echo: spend it"), "{err}");
    }

    let started = std::time::Instant::now();
    let (code, out, err) = cli(
        &["send", "r", "and again", "--timeout", "30"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 5, "saved, no reply yet: {err}");
    assert_eq!(out, "");
    // the host's notice, or the pause its answer to the message gave
    assert!(
        err.contains("daily token budget") && err.contains("paused until"),
        "the host's notice: {err}"
    );
    assert!(
        err.contains("your message is saved (seq ")
            && err.contains("will be answered when the pause ends"),
        "{err}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    let (code, out, err) = cli(
        &["send", "q", "and again", "--timeout", "30", "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 5, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["status"], "paused", "{v}");
    assert!(v["seq"].is_i64() && v["session"].is_string(), "{v}");
    assert!(
        v["notice"]
            .as_str()
            .is_some_and(|text| text.contains("daily token budget")),
        "{v}"
    );
    host.shutdown().await;
}

/// A host whose bot `r` (echoing) has a daily budget of one token: its
/// first turn spends it, and it is paused after.
async fn paused_after_one_turn() -> crate::support::fleet::TestHost {
    TestFleet::new()
        .midday()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 1")
        .start()
        .await
}

/// Regression: the host writes its `budget_exhausted` notice once per
/// conversation, so only the first `send` of a pause ended at once; a
/// second one waited out the whole `--timeout` ("no reply within …").
/// The host's answer to the message says until when the bot is paused,
/// and every `send` of the pause ends at once with 5 saying so. A message
/// sent again with its key (answered before the pause) still prints its
/// reply.
#[tokio::test]
async fn every_send_to_a_paused_bot_ends_at_once_saying_until_when() {
    let host = paused_after_one_turn().await;
    let (code, out, err) = cli(
        &["send", "r", "spend it", "--nonce", "k-1"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!((code, out.trim()), (0, "echo: spend it"), "{err}");
    // the first message of the pause: the host's notice, or the pause
    // its answer gave (the bot paused as the turn that spent it ended)
    let (code, _, err) = cli(&["send", "r", "first", "--timeout", "5"], &host.url, TOKEN).await;
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("daily token budget") && err.contains("paused until"),
        "{err}"
    );
    // its notice is written before the next message comes (else it would
    // follow that one, and be what `send` shows for it)
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    host.wait_for(dm["session"].as_str().unwrap(), |es| {
        es.iter().find(|e| e["code"] == "budget_exhausted").cloned()
    })
    .await;

    let until = host
        .wait_get("/v1/bots", |v| {
            v["bots"][0]["paused_until"].as_i64().map(Value::from)
        })
        .await;
    let until = until.as_i64().unwrap();
    let when = chrono::DateTime::from_timestamp_millis(until)
        .unwrap()
        .format("%Y-%m-%d %H:%M UTC")
        .to_string();
    // a short --timeout: on a wait for the reply, the old "no reply"
    // shows up instead of a hang
    let (code, out, err) = cli(&["send", "r", "second", "--timeout", "5"], &host.url, TOKEN).await;
    assert_eq!(code, 5, "saved, no reply yet: {err}");
    assert_eq!(out, "");
    assert!(
        err.contains(&format!("r is paused until {when}"))
            && err.contains("will be answered when the pause ends")
            && !err.contains("no reply within"),
        "{err}"
    );
    let (code, out, err) = cli(
        &["send", "r", "third", "--timeout", "5", "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 5, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["status"], "paused", "{v}");
    assert_eq!(v["paused_until"], until, "{v}");
    assert!(v["seq"].is_i64() && v["session"].is_string(), "{v}");
    assert!(
        v["notice"].as_str().is_some_and(|t| t.contains(&when)),
        "{v}"
    );

    // the API's answer to a message says it too
    let (status, sent) = host.send("r", "fourth", None).await;
    assert_eq!(
        (status, &sent["paused_until"]),
        (202, &Value::from(until)),
        "{sent}"
    );
    // answered before the pause: its reply, not the pause
    let (code, out, err) = cli(
        &["send", "r", "spend it", "--nonce", "k-1"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!((code, out.trim()), (0, "echo: spend it"), "{err}");
    host.shutdown().await;
}

/// Regression: `botfleet bots` had fixed column widths, so a subagent id
/// such as `p.sub-29ffbdea1146` (18 characters in a 16-wide column) or a
/// long name pushed the rest of its row out of line. Each column is as
/// wide as its widest value as printed. (A control character can no
/// longer reach a name: a Task title holding one is refused, so the
/// subagent's name here is long, not escaped; cli::columns' unit tests
/// measure escapes and wide characters.)
#[tokio::test]
async fn bots_lines_up_long_subagent_ids_and_escaped_names() {
    let script = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "count the files of every directory", prompt = "count the files" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "there are some" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("p", "s", &["SendMessage", "Task"])
        .start()
        .await;
    let (status, sent) = host.send("p", "delegate", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    let (code, out, err) = cli(&["bots"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    host.shutdown().await;

    let lines: Vec<Vec<char>> = out.lines().map(|l| l.chars().collect()).collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        out.contains("p-name · count the files of every directory"),
        "{out}"
    );
    let sub = out.lines().find(|l| l.contains(".sub-")).unwrap();
    assert!(sub.starts_with("p.sub-"), "{out}");
    let header: String = lines[0].iter().collect();
    let at = |name: &str| header.find(name).unwrap();
    // a left-aligned column starts where its heading does, after a space
    for name in ["NAME", "PROVIDER", "STATE"] {
        for line in &lines {
            assert!(
                line[at(name) - 1] == ' ' && line[at(name)] != ' ',
                "{name} out of line:\n{out}"
            );
        }
    }
    // a right-aligned column ends where its heading does
    for name in ["QUEUED", "COMPLETED"] {
        let end = at(name) + name.len();
        for line in &lines {
            assert!(
                line[end - 1].is_ascii_alphanumeric() && line.get(end).is_none_or(|c| *c == ' '),
                "{name} out of line:\n{out}"
            );
        }
    }
}

/// The first message of a pause gets the host's notice (a read just after
/// the message may come before the notice is written: QA saw the generic
/// "paused until" line); sent again with its key once the pause is over
/// and a turn answered it, `send` prints that reply, not the old notice
/// (QA: exit 5 "will be answered when the pause ends" after the answer).
#[tokio::test]
async fn a_message_of_a_pause_sent_again_after_its_answer_prints_the_answer() {
    let host = paused_after_one_turn().await;
    let (code, _, err) = cli(&["send", "r", "spend it"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(
        &[
            "send",
            "r",
            "while paused",
            "--nonce",
            "k-2",
            "--timeout",
            "10",
        ],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("r-name (r) has used its daily token budget"),
        "the host's notice: {err}"
    );

    // the pause ends (a larger budget, a restart): the message is answered
    let fleet = host.shutdown().await;
    let path = fleet.path().join("fleet.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("daily_token_budget = 1\n", "daily_token_budget = 1000000\n"),
    )
    .unwrap();
    let host = crate::support::fleet::restart(fleet).await;
    let (code, out, err) = cli(
        &[
            "send",
            "r",
            "while paused",
            "--nonce",
            "k-2",
            "--timeout",
            "30",
        ],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!((code, out.trim()), (0, "echo: while paused"), "{err}");
    host.shutdown().await;
}
