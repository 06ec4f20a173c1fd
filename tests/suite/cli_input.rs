//! What the CLI makes of what it is given, against a real host: ids are
//! sent as ids (percent-encoded), `--host` without a scheme or with the
//! API's `/v1`, arguments no request can carry (usage errors), exit codes
//! that do not clash with clap's, `--json` failures on stdout, the memory
//! preview in text; and how `botfleet run` starts and stops: `--listen`
//! over a bad `host.listen`, a port in use, SIGTERM with a change stream
//! open, a second signal.

use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::HostProcess;
use crate::support::process::cli;
use crate::support::process::free_port;

/// Replies to `hello`, `first` and `second`; waits on `slow`; remembers
/// on `bought`; anything else (the delivery reminder too) gets no reply.
const SCRIPT: &str = r#"
[[rule]]
match = "^(hello|first|second)"
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]

[[rule]]
match = "^slow"
steps = [ { delay_ms = 20000, tool = "SendMessage", args = { text = "late" } } ]

[[rule]]
match = "^bought"
steps = [
  { tool = "Remember", args = { text = "Bought green tea on Monday", layer = "log" } },
  { tool = "SendMessage", args = { text = "noted" } },
]

[[rule]]
steps = [ { text = "thinking, and never replying" } ]
"#;

fn fleet() -> TestFleet {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Remember"])
}

/// Turn outcomes have codes of their own (3, 4, 5), after clap's usage
/// error (2), and `send --help` lists them.
#[tokio::test]
async fn send_exit_codes_do_not_clash_with_usage_errors() {
    let host = fleet().start().await;
    let (code, out, err) = cli(&["send", "r", "hello"], &host.url, TOKEN).await;
    assert_eq!((code, out.trim()), (0, "echo: hello"), "{err}");
    let (code, _, err) = cli(&["send", "r", "quiet please"], &host.url, TOKEN).await;
    assert_eq!(code, 4, "undelivered: {err}");
    assert!(err.contains("without sending you a reply"), "{err}");
    let (code, _, err) = cli(
        &["send", "r", "slow one", "--timeout", "1"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 5, "timeout: {err}");
    let (code, _, err) = cli(&["send", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 2, "usage: {err}");
    let (code, help, _) = cli(&["send", "--help"], &host.url, TOKEN).await;
    assert_eq!(code, 0);
    for line in [
        "Exit status:",
        "2    a usage error",
        "3    the turn failed",
        "4    the bot ended its turn without replying",
        "5    no reply within --timeout",
    ] {
        assert!(help.contains(line), "{line}: {help}");
    }
    let (_, help, _) = cli(&["group", "send", "--help"], &host.url, TOKEN).await;
    assert!(help.contains("5    the discussion did not end"), "{help}");
    host.shutdown().await;
}

/// Every failure `send --json` reports is a JSON object on stdout, and
/// the message is on stderr as without `--json`.
#[tokio::test]
async fn send_json_prints_every_failure_as_json() {
    let host = fleet().start().await;
    let json = |out: &str| -> Value {
        assert_eq!(out.lines().count(), 1, "{out}");
        serde_json::from_str(out.trim()).unwrap()
    };
    // a bot that is not there: the host's 404
    let (code, out, err) = cli(&["send", "nobody", "x", "--json"], &host.url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("no bot \"nobody\""), "{err}");
    let v = json(&out);
    assert_eq!(
        (v["status"].as_str(), v["error"]["http_status"].as_u64()),
        (Some("error"), Some(404))
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no bot \"nobody\""),
        "{v}"
    );
    // a reused key with other text: the host's answer as is
    let args = |text| ["send", "r", text, "--json", "--nonce", "k-1"];
    let (code, _, _) = cli(&args("first"), &host.url, TOKEN).await;
    assert_eq!(code, 0);
    let (code, out, err) = cli(&args("second"), &host.url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("message not sent (conflict)"), "{err}");
    // regression: it named the API's `Idempotency-Key` header, which a CLI
    // user never sent: it names the key as given, and what to do
    assert!(
        err.contains("this key (`--nonce k-1`) was used with a different message")
            && err.contains("with a new --nonce")
            && !err.contains("Idempotency-Key"),
        "{err}"
    );
    assert_eq!(json(&out)["status"], "conflict");
    // a wrong token
    let (code, out, _) = cli(&["send", "r", "x", "--json"], &host.url, "wrong-token").await;
    assert_eq!(code, 1);
    assert_eq!(json(&out)["error"]["http_status"], 401);
    // no host: no answer at all, still an object
    let (code, out, err) = cli(&["send", "r", "x", "--json"], "http://127.0.0.1:9", TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("cannot reach the host"), "{err}");
    let v = json(&out);
    assert_eq!(v["status"], "error");
    assert!(v["error"].get("http_status").is_none(), "{v}");
    let out = tokio::process::Command::new(BIN)
        .args(["send", "r", "x", "--json"])
        .env("BOTFLEET_HOST", &host.url)
        .env_remove("BOTFLEET_TOKEN")
        .output()
        .await
        .unwrap();
    // no token is a usage error (2): no object, as for clap's
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no token"));
    host.shutdown().await;
}

/// Ids go into request paths percent-encoded: `/`, `?` and `#` are part
/// of the id the API judges, never a path, a query or a fragment.
#[tokio::test]
async fn ids_reach_the_api_as_ids() {
    let host = fleet().start().await;
    let (code, out, err) = cli(&["send", "nobody/../r", "hi"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "delivered to r: {out}");
    assert!(err.contains("invalid bot id \"nobody/../r\""), "{err}");
    let (_, transcript, _) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert!(!transcript.contains("hi"), "{transcript}");
    for args in [
        ["transcript", "r?x=1"],
        ["cancel", "r#x"],
        ["memory", "r/x"],
    ] {
        let (code, _, err) = cli(&args, &host.url, TOKEN).await;
        assert_eq!(code, 1, "{args:?}");
        assert!(
            err.contains(&format!("invalid bot id {:?}", args[1])),
            "{args:?}: {err}"
        );
    }
    let (code, _, err) = cli(&["forget", "m-1/../x"], &host.url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("m-1/../x"), "{err}");
    // a URL drops `..` itself: refused before sending
    let (code, _, err) = cli(&["send", "..", "hi"], &host.url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("cannot be sent"), "{err}");
    host.shutdown().await;
}

/// `BOTFLEET_HOST=127.0.0.1:PORT` works (http is assumed); an address
/// that is not http(s) is refused saying what is expected.
#[tokio::test]
async fn a_host_address_without_a_scheme_is_http() {
    let host = fleet().start().await;
    let bare = host.url.trim_start_matches("http://").to_owned();
    let (code, out, err) = cli(&["bots"], &bare, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("r-name"), "{out}");
    let (code, _, err) = cli(&["bots"], "ftp://127.0.0.1:1", TOKEN).await;
    assert_eq!(code, 2, "a usage error");
    assert!(
        err.contains("not an http(s) address") && err.contains("http://HOST:PORT"),
        "{err}"
    );
    host.shutdown().await;
}

/// Regression: a token with a newline, a `--nonce` with one, and a bot
/// id of 70,000 characters made reqwest fail to build the request, and
/// the CLI said "cannot reach the host (builder error); is `botfleet run`
/// running?" (1) to a host that was fine. Each is a usage error (2) that
/// says what is wrong; `send --json` prints no object for it, as for
/// clap's.
#[tokio::test]
async fn arguments_no_request_can_carry_are_usage_errors() {
    let host = fleet().start().await;
    let usage = async |args: &[&str], token: &str, says: &str| {
        let (code, out, err) = cli(args, &host.url, token).await;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("cannot reach"), "{args:?}: {err}");
        assert_eq!(out, "", "{args:?}");
    };
    let header = "contains characters not allowed in an HTTP header";
    usage(&["bots"], "alice-secret\n", header).await;
    usage(&["send", "r", "hi", "--json"], "alice\r\nX: y", header).await;
    usage(&["send", "r", "hi", "--nonce", "k\n1"], TOKEN, header).await;
    let long = "b".repeat(70_000);
    for (args, says) in [
        (
            vec!["transcript", &long],
            "the bot id is too long to send: 70000 characters",
        ),
        (
            vec!["send", &long, "hi", "--json"],
            "the bot id is too long",
        ),
        (
            vec!["group", "transcript", &long],
            "the room id is too long",
        ),
        (vec!["forget", &long], "the memory item id is too long"),
        // an empty path segment reached no route ("no such route")
        (vec!["forget", ""], "the memory item id is empty"),
        (vec!["transcript", " "], "the bot id is empty"),
        (vec!["group", "send", "", "hi"], "the room id is empty"),
    ] {
        usage(&args, TOKEN, says).await;
    }
    // the host was there all along
    let (code, out, err) = cli(&["send", "r", "hello"], &host.url, TOKEN).await;
    assert_eq!((code, out.trim()), (0, "echo: hello"), "{err}");
    host.shutdown().await;
}

/// Regression: an address no request can go to (`ftp://x`, a port out of
/// range, nothing), no token, an empty `--nonce`, an empty member id and
/// `--host` given to `run` were errors with status 1 ("not sent"), or
/// were sent (an empty member read as a bot named nothing: "at least 2
/// members; you gave 1"), or were ignored (`run --host` listened on the
/// fleet's address). Each is a usage error (2) naming what to change.
#[tokio::test]
async fn addresses_tokens_and_lists_no_request_can_use_are_usage_errors() {
    let run = |args: &[&str], envs: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(args)
            .env_remove("BOTFLEET_HOST")
            .env_remove("BOTFLEET_TOKEN");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let token = [("BOTFLEET_TOKEN", TOKEN)];
    for (args, envs, says) in [
        (
            vec!["--host", "ftp://x", "send", "r", "hi"],
            &token[..],
            "is not an http(s) address",
        ),
        (
            vec!["--host", "nohost:99999", "bots"],
            &token[..],
            "invalid port number",
        ),
        (vec!["--host", "", "bots"], &token[..], "empty host"),
        // a scheme with no host is not a host named "http" (QA)
        (
            vec!["--host", "http://", "bots"],
            &token[..],
            "\"http:\" is not a URL",
        ),
        (
            vec!["--host", "https:///", "bots"],
            &token[..],
            "\"https:\" is not a URL",
        ),
        (vec!["bots"], &[][..], "no token: pass --token"),
        // given, but empty: not "no token" (QA)
        (
            vec!["--token", "", "bots"],
            &[][..],
            "the token is empty: pass --token",
        ),
        (
            vec!["send", "r", "hi", "--nonce", ""],
            &token[..],
            "the --nonce has 0 characters; it must be 1-200 printable ASCII characters",
        ),
        (
            vec!["group", "create", "y", "--members", ""],
            &token[..],
            "member 1 of the list is empty",
        ),
        (
            vec!["group", "members", "y", "a,,b"],
            &token[..],
            "member 2 of the list is empty",
        ),
        // `a, b` typed with a space: said so (QA)
        (
            vec!["group", "members", "y", "a,", "b"],
            &token[..],
            "and no space after a comma (`a, b` is read as `a,` then `b`)",
        ),
        (
            vec!["--host", "127.0.0.1:1", "run", "--fleet", "none.toml"],
            &[][..],
            "give the address it listens on with --listen",
        ),
        (
            vec!["run", "--host", "127.0.0.1:1", "--fleet", "none.toml"],
            &[][..],
            "give the address it listens on with --listen",
        ),
        // typed for a command that talks to no host, they were ignored
        // without a word (QA, 2026-12-05)
        (
            vec!["run", "--token", "x", "--fleet", "none.toml"],
            &[][..],
            "the users' tokens are in the fleet file",
        ),
        (
            vec![
                "check-config",
                "--fleet",
                "none.toml",
                "--host",
                "127.0.0.1:1",
            ],
            &[][..],
            "`check-config` reads the fleet file here and connects to none: drop --host",
        ),
        (
            vec!["--token", "x", "reindex", "--data", "nowhere"],
            &[][..],
            "`run`, `check-config` and `reindex` send none",
        ),
        // a `list` word where the command itself lists (QA: "the
        // subcommand 'assistant' cannot be used with '<BOT>'")
        (
            vec!["routines", "list", "assistant"],
            &token[..],
            "`routines` takes no `list`: `botfleet routines assistant` lists them",
        ),
        (
            vec!["bots", "ls"],
            &token[..],
            "`bots` takes no `ls`: `botfleet bots` lists them",
        ),
    ] {
        let (code, err) = run(&args, envs);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let long_nonce = "k".repeat(201);
    let (code, err) = run(&["send", "r", "hi", "--nonce", &long_nonce], &token);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has 201 characters"), "{err}");
    // BOTFLEET_HOST, set for the other commands, does not stop `run`
    let (code, err) = run(
        &["run", "--fleet", "none.toml"],
        &[("BOTFLEET_HOST", "127.0.0.1:1")],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("none.toml"), "{err}");
}

/// Regression: `--host http://…/v1` was taken, and every request got 404
/// "no such route" (the CLI puts `/v1/…` after the address). It is
/// refused naming the base URL to give instead, from `BOTFLEET_HOST` too.
#[tokio::test]
async fn a_host_address_with_the_api_path_is_refused() {
    let host = fleet().start().await;
    for address in [format!("{}/v1", host.url), format!("{}/v1/", host.url)] {
        let (code, _, err) = cli(&["bots"], &address, TOKEN).await;
        assert_eq!(code, 2, "{address}: {err}");
        assert!(
            err.contains("takes the host's base URL, without the API's /v1")
                && err.contains(&format!("{} rather than {address}", host.url)),
            "{err}"
        );
    }
    let out = tokio::process::Command::new(BIN)
        .args(["bots", "--host", &format!("{}/v1", host.url)])
        .env("BOTFLEET_TOKEN", TOKEN)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // another path before the API's: the host's 404 says what it was asked
    // and to drop the prefix (QA: only "no such route")
    let (code, _, err) = cli(&["bots"], &format!("{}/foo", host.url), TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no such route: GET /foo/v1/bots")
            && err.contains("drop /foo from the host's address"),
        "{err}"
    );
    host.shutdown().await;
}

/// `memory BOT --input TEXT` shows in text what the prompt would take:
/// how many items, and the log entries with their scores.
#[tokio::test]
async fn memory_with_input_shows_what_the_prompt_takes() {
    let host = fleet().start().await;
    let (code, out, err) = cli(&["send", "r", "bought tea"], &host.url, TOKEN).await;
    assert_eq!((code, out.trim()), (0, "noted"), "{err}");
    let (code, out, err) = cli(&["memory", "r", "--input", "green tea"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("the prompt for \"green tea\" shows all 1 item(s)")
            && out.contains("log entries recalled: 1 of 1 shown"),
        "{out}"
    );
    let recall = out
        .lines()
        .find(|l| l.starts_with("  recall  m-"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        recall.contains("Bought green tea on Monday")
            && recall.contains("score ")
            && recall.ends_with("shown)"),
        "{recall}"
    );
    // without --input, no preview
    let (_, out, _) = cli(&["memory", "r"], &host.url, TOKEN).await;
    assert!(!out.contains("the prompt for"), "{out}");
    host.shutdown().await;
}

/// `run --listen` replaces `host.listen` before the file is checked, so a
/// bad value there does not stop it (`check-config` still names it).
#[tokio::test]
async fn run_listen_overrides_a_bad_host_listen() {
    let fleet = fleet();
    let path = fleet.write();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"127.0.0.1:0\"", "\"localhost\"")).unwrap();
    let port = free_port();
    let host = HostProcess::start(&path, port, &fleet.path().join("host.log")).await;
    let (code, out, err) = cli(&["send", "r", "hello"], &host.url, TOKEN).await;
    assert_eq!((code, out.trim()), (0, "echo: hello"), "{err}");
    host.kill9().await;
    let out = tokio::process::Command::new(BIN)
        .args(["check-config", "--fleet"])
        .arg(&path)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("host.listen"));
    let out = tokio::process::Command::new(BIN)
        .args(["run", "--fleet"])
        .arg(&path)
        .args(["--listen", "nowhere"])
        .output()
        .await
        .unwrap();
    // a usage error, as other commands' bad values are (QA: it was 1)
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'--listen <LISTEN>': \"nowhere\" is not an address; expected IP:PORT"),
        "{err}"
    );
}

/// A port in use stops the start before the data directory is made.
#[tokio::test]
async fn a_port_in_use_stops_the_start_before_the_data_directory() {
    let fleet = fleet();
    let path = fleet.write();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let data = fleet.path().join("fresh-data");
    let out = tokio::process::Command::new(BIN)
        .args(["run", "--fleet"])
        .arg(&path)
        .args(["--listen", &addr, "--data"])
        .arg(&data)
        .env("RUST_LOG", "off")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert!(!data.exists(), "the data directory was created");
    drop(taken);
}

/// `botfleet run` as a child, its stdout read line by line.
struct Running {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    url: String,
}

impl Running {
    async fn start(fleet: &TestFleet) -> Self {
        let port = free_port();
        let mut child = tokio::process::Command::new(BIN)
            .args(["run", "--fleet"])
            .arg(fleet.write())
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "off")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("send <bot>") {
                    return;
                }
            }
            panic!("run printed no banner");
        })
        .await
        .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        Self { child, lines, url }
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the line that starts with `prefix`.
    async fn line(&mut self, prefix: &str) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                if line.starts_with(prefix) {
                    return;
                }
            }
            panic!("no line {prefix:?}");
        })
        .await
        .unwrap();
    }
}

/// Opens `/v1/events` and reads its first event: a client stays connected.
async fn open_change_stream(url: &str) -> reqwest::Response {
    let mut resp = reqwest::Client::new()
        .get(format!("{url}/v1/events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("ready"));
    resp
}

/// SIGTERM with a change stream open stops the host about as fast as
/// without one (the stream used to hold the server's graceful shutdown
/// until its 5 s timeout), and the stream ends. The stop's line names
/// the signal.
#[tokio::test]
async fn a_change_stream_does_not_hold_up_the_stop() {
    let mut host = Running::start(&fleet()).await;
    let mut stream = open_change_stream(&host.url).await;
    let started = Instant::now();
    host.signal("TERM");
    // no Ctrl-C was pressed: the line names the signal (it said "Ctrl-C
    // again", QA 2026-12-06)
    host.line("stopping… (SIGTERM; send it again, or Ctrl-C, to stop at once)")
        .await;
    let status = tokio::time::timeout(Duration::from_secs(20), host.child.wait())
        .await
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(status.code(), Some(0));
    assert!(took < Duration::from_secs(4), "stopping took {took:?}");
    // the stream ended (no error: the body was complete)
    while let Some(chunk) = stream.chunk().await.unwrap() {
        assert!(!chunk.is_empty());
    }
}

/// A second signal while the host stops exits at once, with status 130.
#[tokio::test]
async fn a_second_signal_stops_at_once() {
    use tokio::io::AsyncWriteExt;

    let mut host = Running::start(&fleet()).await;
    // a request whose body never comes: the server waits for it (up to
    // 5 s) before the stop goes on
    let addr = host.url.trim_start_matches("http://").to_owned();
    let mut stalled = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/bots/r/messages HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{"
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    // the server must have read that head before the first signal, or the
    // connection is idle and the stop does not wait for it (it then ends
    // cleanly, with 0, before the second signal): give it a moment, as
    // nothing outside the server shows that it has
    tokio::time::sleep(Duration::from_millis(300)).await;
    host.signal("INT");
    host.line("stopping…").await;
    let started = Instant::now();
    host.signal("INT");
    let status = tokio::time::timeout(Duration::from_secs(20), host.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(130));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// The CLI run with `args`, the host and token from the environment (no
/// host listens there): its exit code and stderr.
fn usage_run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Option<i32>, String) {
    let out = std::process::Command::new(BIN)
        .args(args)
        .env("BOTFLEET_HOST", "http://127.0.0.1:9")
        .env("BOTFLEET_TOKEN", TOKEN)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A usage error's usage line names the arguments a person must give
/// (QA, 2026-12-06: with BOTFLEET_HOST and BOTFLEET_TOKEN set, `botfleet
/// search` showed `Usage: botfleet search --host <HOST> --token <TOKEN>
/// <QUERY>`, as if the variables were not enough).
#[test]
fn a_usage_line_leaves_out_what_the_environment_gives() {
    for args in [&["search"][..], &["forget"], &["group", "send"]] {
        let (code, err) = usage_run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        let usage = err.lines().find(|l| l.starts_with("Usage: ")).unwrap();
        assert!(
            usage.starts_with(&format!("Usage: botfleet {} <", args.join(" ")))
                && !usage.contains("--token")
                && !usage.contains("--host"),
            "{args:?}: {err}"
        );
        assert!(
            err.starts_with("error: the following required arguments were not provided"),
            "{err}"
        );
    }
}

/// An argument that is not UTF-8 is a usage error (2) saying so, not a
/// panic (QA: `send r $'\xff'` panicked with a backtrace, exit 101).
#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error() {
    use std::os::unix::ffi::OsStrExt as _;

    let bad = std::ffi::OsStr::from_bytes(b"\xff abc");
    for args in [
        vec!["send".as_ref(), "r".as_ref(), bad],
        vec!["search".as_ref(), bad],
    ] {
        let (code, err) = usage_run(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: invalid UTF-8"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// `group create NAME --members a1 a2` (the members as separate words,
/// which `group members` takes) says to give them comma-separated, with
/// `group create`'s usage (QA: "unexpected argument 'a2' found").
#[test]
fn group_create_members_as_separate_words_say_the_form_to_use() {
    let (code, err) = usage_run(&["group", "create", "r9", "--members", "a1", "a2", "a3"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with(
            "error: --members takes the member bots as one comma-separated word: --members a1,a2,a3"
        ) && err.contains("Usage: botfleet group create "),
        "{err}"
    );
}

/// `send` whose host dies after taking the message: at its timeout it
/// says the host has not answered since it went (QA: "no reply within
/// 360 s", read as a slow bot); `--json` gives when, as
/// `host_unreachable_since`.
#[tokio::test]
async fn a_send_whose_host_died_says_so_at_its_timeout() {
    let fleet = fleet();
    let path = fleet.write();
    let port = free_port();
    let host = HostProcess::start(&path, port, &fleet.path().join("host.log")).await;
    let url = host.url.clone();
    // the message is in, under a key the CLI then sends it with: it says
    // so as soon as the host answers, and the host goes after that
    let key = "died-while-waiting";
    let client = botfleet::client::Client::new(&url, TOKEN).unwrap();
    let (status, sent) = client.send_message("r", "slow please", key).await.unwrap();
    assert_eq!(status.as_u16(), 202, "{sent}");
    let mut child = tokio::process::Command::new(BIN)
        .args(["send", "r", "slow please", "--nonce", key, "--timeout", "6"])
        .args(["--host", &url, "--token", TOKEN])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    while let Some(line) = stderr.next_line().await.unwrap() {
        said.push_str(&line);
        said.push('\n');
        if line.contains("already sent with this key") {
            break;
        }
    }
    assert!(said.contains("already sent with this key"), "{said}");
    host.kill9().await;
    while let Some(line) = stderr.next_line().await.unwrap() {
        said.push_str(&line);
        said.push('\n');
    }
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(5), "{said}");
    assert!(
        said.contains("no reply within 6 s, and the host has not answered since ")
            && said.contains("(is `botfleet run` still running?); your message is saved"),
        "{said}"
    );
}

/// A text that starts with `-` is the message, in `send` and `group
/// send`. Regression (QA): `send r "-hi, are you there?"` read as the
/// flags `-h -i …`, printed the help and exited 0 (`--json` too: help on
/// stdout, no JSON), and the message was never sent.
#[tokio::test]
async fn a_text_starting_with_a_dash_is_sent() {
    let host = fleet().bot("r2", "s", &["SendMessage"]).start().await;
    let (code, out, err) = cli(
        &["send", "r", "-hi, are you there?", "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    // the script answers it with nothing: exit 4, as JSON
    assert_eq!(code, 4, "{out}{err}");
    let printed: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let session = printed["session"]
        .as_str()
        .unwrap_or_else(|| panic!("{printed}"));
    let texts: Vec<Value> = host
        .entries(session)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(texts, [Value::from("-hi, are you there?")]);

    let (status, room) = host.create_room(TOKEN, "team", &["r", "r2"]).await;
    assert_eq!(status, 201, "{room}");
    let (code, out, err) = cli(
        &[
            "group",
            "send",
            "team",
            "-how about lunch",
            "--json",
            "--timeout",
            "1",
        ],
        &host.url,
        TOKEN,
    )
    .await;
    assert!(!out.contains("Usage:"), "{code} {out}{err}");
    let (_, room) = host.get("/v1/groups/team", TOKEN).await;
    let timeline = room["session"].as_str().unwrap_or_else(|| panic!("{room}"));
    assert!(
        host.entries(timeline)
            .await
            .iter()
            .any(|e| e["text"] == "-how about lunch"),
        "{room}"
    );
    host.shutdown().await;
}

/// A message whose turn failed, whose conversation a later turn then
/// answered (it had the message in its context), sent again with its
/// key: the failure is reported with that later turn, and no retry is
/// offered, which the host would refuse. (QA: `send` said "retry it with
/// `botfleet retry T`" again, and that retry answered 409.)
#[tokio::test]
async fn a_failed_message_answered_by_a_later_turn_offers_no_retry() {
    let host = TestFleet::new()
        .script(
            "s",
            r#"
[[rule]]
match = "^boom"
steps = [ { fail = "the model broke" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok: {{inputs}}" } } ]
"#,
        )
        .bot("r", "s", &["SendMessage"])
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let send = ["send", "r", "boom", "--nonce", "k-boom", "--json"];
    let (code, out, err) = cli(&send, &host.url, TOKEN).await;
    assert_eq!(code, 3, "{out}{err}");
    let first: Value = serde_json::from_str(&out).unwrap();
    assert!(first["retry_command"].is_string(), "{first}");
    let (code, out, err) = cli(&["send", "r", "another"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = cli(&send, &host.url, TOKEN).await;
    assert_eq!(code, 3, "{out}{err}");
    let again: Value = serde_json::from_str(&out).unwrap();
    let notice = again["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("a later turn") && !notice.contains("botfleet retry"),
        "{again}"
    );
    assert!(again.get("retry_command").is_none(), "{again}");
    host.shutdown().await;
}
