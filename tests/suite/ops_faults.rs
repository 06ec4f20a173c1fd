//! Faults an operator of a long-running host met (round 13, F7):
//! - a clean stop during a turn logged `ERROR … turn could not be
//!   persisted … the store writer has stopped; restart the host`, though
//!   the turn resumed and delivered once at the next start;
//! - a host whose search index it could not write started, said healthy,
//!   and failed every index commit;
//! - a scripted provider without a `purpose = "extract"` rule logged a
//!   failed fact extraction after every turn;
//! - a bot removed from fleet.toml showed `"active": true`.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use super::crash::turn_ended;
use super::crash::wait_until;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;
use crate::support::process::BIN;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

/// What the in-process host logs, as text. A `#[tokio::test]` runs on a
/// current-thread runtime, so the host's actors and turn tasks log on the
/// test's thread, where [`Logged::capture`] puts the subscriber.
#[derive(Clone, Default)]
struct Logged(Arc<Mutex<Vec<u8>>>);

impl Logged {
    /// Captures what this thread logs (info and above) until the guard is
    /// dropped.
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logged = Self::default();
        let writer = logged.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        (logged, tracing::subscriber::set_default(subscriber))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Waits (bounded) until a logged line contains `text`.
    async fn wait_for(&self, text: &str) {
        poll(20, async || {
            if self.text().contains(text) {
                Ok(())
            } else {
                Err(format!("never logged {text:?}; log:\n{}", self.text()))
            }
        })
        .await;
    }
}

impl std::io::Write for Logged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A turn whose Shell call waits until the test creates `go` in the
/// workspace: it is still running when the host stops, and writes its
/// result only once the test lets it, after the store closed.
const GATED: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "touch started; while [ ! -e go ]; do sleep 0.02; done; echo through" } },
  { tool = "SendMessage", args = { text = "after the stop: {{tool_result}}" } },
]
"#;

/// The tester's case, made exact: a clean stop while a turn runs. The
/// turn's next write, after the store closed, fails; that is the stop
/// cutting the turn off, not a failed store: an info line saying it
/// resumes, no ERROR telling the operator to restart. The next start
/// resumes it and it delivers once. In-process: in `botfleet run` that
/// write races the process's exit, which the test could not hold back.
#[tokio::test]
async fn a_turn_cut_off_by_a_clean_stop_logs_no_error_and_resumes() {
    let (logged, _guard) = Logged::capture();
    let host = TestFleet::new()
        .script("s", GATED)
        .bot("r", "s", &["SendMessage", "Shell"])
        .start()
        .await;
    let workspace = host.fleet.path().join("data/workspace/alice");
    let (status, sent) = host.send("r", "go", Some("k1")).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    poll(20, async || {
        if workspace.join("started").exists() {
            Ok(())
        } else {
            Err(format!(
                "the Shell call never started: {:#?}",
                host.entries(&session).await
            ))
        }
    })
    .await;

    let fleet = host.shutdown().await;
    // the turn goes on past the stop (its task outlives the bot actor):
    // its Shell call ends now, and writing its result finds the store closed
    std::fs::write(workspace.join("go"), "").unwrap();
    logged
        .wait_for("turn cut off by the host's stop; the next start resumes it from its last step")
        .await;
    let log = logged.text();
    assert!(
        !log.lines().any(|l| l.contains("ERROR")),
        "a clean stop logged an error:\n{log}"
    );

    let host = restart(fleet).await;
    host.wait_turn_end(&session, seq).await;
    let delivered = deliveries(&host.entries(&session).await);
    assert_eq!(delivered.len(), 1, "delivered once: {delivered:?}");
    assert!(delivered[0].starts_with("after the stop"), "{delivered:?}");
    host.shutdown().await;
}

/// A chat script without an extract rule, and one with.
const NO_EXTRACT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]
"#;

const WITH_EXTRACT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]

[[rule]]
purpose = "extract"
steps = [ { text = '{"add": [{"text": "Alice keeps bees"}], "replace": [], "remove": []}' } ]
"#;

/// The host's log line for an extraction that failed.
const EXTRACTION_FAILED: &str = "fact extraction failed";

/// A bot whose script cannot extract is not asked to (before, every turn
/// logged `WARN fact extraction failed … the answer is empty`); a bot whose
/// script can still extracts. A real host, so its log is the process's.
#[tokio::test]
async fn a_script_without_an_extract_rule_is_not_asked_to_extract() {
    let fleet = TestFleet::new()
        .script("plain", NO_EXTRACT)
        .script("keeper", WITH_EXTRACT)
        .runtime("debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = true\n")
        .bot("p", "plain", &["SendMessage"])
        .bot("k", "keeper", &["SendMessage"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let host = HostProcess::start(&path, free_port(), &log).await;

    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    for (bot, text, key) in [
        ("p", "I keep bees", "k1"),
        ("p", "and some hens", "k2"),
        ("k", "I keep bees", "k3"),
    ] {
        let (status, sent) = client.send_message(bot, text, key).await.unwrap();
        assert_eq!(status.as_u16(), 202, "{sent}");
        let session = sent["session"].as_str().unwrap();
        wait_until(
            &host.url,
            session,
            turn_ended(sent["seq"].as_i64().unwrap()),
        )
        .await;
    }
    poll(20, async || {
        let memory = client.get("/v1/bots/k/memory").await.unwrap();
        if memory.to_string().contains("Alice keeps bees") {
            Ok(())
        } else {
            Err(format!("k's extraction never added its fact: {memory}"))
        }
    })
    .await;
    // a clean stop waits for running extractions: the log is complete
    host.stop(&log).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains(EXTRACTION_FAILED),
        "an extraction was asked of a script that cannot answer it:\n{text}"
    );
}

/// `dir` made unwritable (`chmod 0500`) for the hosts [`Unwritable::run`]
/// starts; made writable again when dropped.
struct Unwritable {
    dir: PathBuf,
    /// What runs the host: nothing for a user without privileges, whom
    /// the mode stops; for root, `setpriv` without the capabilities that
    /// pass over file permissions.
    wrapper: Vec<&'static str>,
}

/// `setpriv` taking away the capabilities that let root write anywhere.
const UNPRIVILEGED: [&str; 3] = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search,-fowner",
    "--",
];

impl Unwritable {
    /// Makes `dir` unwritable to the hosts this starts, or `None` (saying
    /// why) where that cannot be done.
    fn make(dir: &Path) -> Option<Self> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o500)).unwrap();
        let made = |wrapper| {
            Some(Self {
                dir: dir.to_path_buf(),
                wrapper,
            })
        };
        let probe = dir.join("probe");
        if std::fs::write(&probe, "").is_err() {
            return made(Vec::new());
        }
        // privileged (root): the mode does not bite without setpriv
        std::fs::remove_file(&probe).unwrap();
        let denied = std::process::Command::new(UNPRIVILEGED[0])
            .args(&UNPRIVILEGED[1..])
            .args(["sh", "-c", "touch \"$0\" 2>/dev/null; test $? -ne 0"])
            .arg(&probe)
            .status();
        if denied.as_ref().is_ok_and(|s| s.success()) {
            return made(UNPRIVILEGED.to_vec());
        }
        let _ = std::fs::remove_file(&probe);
        eprintln!(
            "skipped: running with privileges, and setpriv cannot take away the capabilities that pass over file permissions ({denied:?})"
        );
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        None
    }

    /// Runs `botfleet run` on `fleet`, expecting it to refuse to start;
    /// returns its exit code and stderr. A host that starts instead is
    /// killed after 20 s and the test fails.
    async fn run(&self, fleet: &Path) -> (i32, String) {
        let mut command = self.wrapper.iter().chain([&BIN]);
        let program = command.next().copied().unwrap_or(BIN);
        refused_start(
            tokio::process::Command::new(program).args(command.copied()),
            fleet,
        )
        .await
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o755));
    }
}

/// Runs `command` (`botfleet run` on `fleet`), expecting it to refuse to
/// start; returns its exit code and stderr. A host that starts instead is
/// killed after 20 s and the test fails.
async fn refused_start(command: &mut tokio::process::Command, fleet: &Path) -> (i32, String) {
    let child = command
        .args(["run", "--fleet"])
        .arg(fleet)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the host started with a search index it cannot write"))
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A host that cannot write its search index refuses to start, naming the
/// directory and what to do, as it does for a store it cannot write
/// (before, it started, said healthy, and every index commit failed).
#[tokio::test]
async fn a_host_refuses_to_start_with_a_search_index_it_cannot_write() {
    let fleet = TestFleet::new()
        .script("s", NO_EXTRACT)
        .bot("r", "s", &["SendMessage"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    // a first start makes the index
    HostProcess::start(&path, free_port(), &log)
        .await
        .stop(&log)
        .await;
    let index = fleet.path().join("data/index");
    assert!(index.join("meta.json").exists(), "the host made its index");

    if let Some(unwritable) = Unwritable::make(&index) {
        let (code, err) = unwritable.run(&path).await;
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(&index.display().to_string())
                && err.contains("cannot be written (Permission denied")
                && err.contains("chown"),
            "{err}"
        );
    }

    // a file where the directory should be: refused for anyone, root too
    std::fs::remove_dir_all(&index).unwrap();
    std::fs::write(&index, "not an index").unwrap();
    let (code, err) = refused_start(&mut tokio::process::Command::new(BIN), &path).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&index.display().to_string()) && err.contains("not a directory"),
        "{err}"
    );
}

fn listed<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .unwrap_or_else(|| panic!("no bot {id} in {list:#}"))
}

/// `active` (docs/api.md): awake in the fleet. A bot taken out of the
/// config whose actor is woken at the next start (it has work left from
/// before) is not: it does nothing (before, `"active": true`).
#[tokio::test]
async fn a_removed_bot_is_not_active() {
    let (logged, _guard) = Logged::capture();
    let script = r#"
[[rule]]
bot = "b"
steps = [ { delay_ms = 600000, tool = "SendMessage", args = { text = "much later" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    let (status, v) = host.send("b", "take your time", Some("k1")).await;
    assert_eq!(status, 202, "{v}");
    host.wait_running("b").await;
    let (_, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(listed(&list, "b")["active"], true, "{list:#}");

    let fleet = host.shutdown().await.without_bot("b");
    fleet.write();
    let host = restart(fleet).await;
    // its unfinished turn wakes it
    logged
        .wait_for("bot is no longer in the fleet's config")
        .await;
    let (_, list) = host.get("/v1/bots", TOKEN).await;
    let b = listed(&list, "b");
    assert!(b["removed_at"].is_i64(), "{list:#}");
    assert_eq!(b["active"], false, "{list:#}");
    // and the CLI's list says what it is
    let (code, out, err) = crate::support::process::cli(&["bots"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("b "))
        .unwrap_or_default();
    assert!(line.contains("removed"), "{out}");
    host.shutdown().await;
}
