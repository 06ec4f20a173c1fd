//! A waiting `botfleet send` / `botfleet group send` survives a restart of
//! the host (SIGKILL, then a new host on the same data dir and port): it
//! keeps polling, reopens its change stream, and prints the reply that the
//! restarted host delivers, once. Also when the host dies after taking
//! the message and before its answer reaches the CLI: the CLI sends it
//! again with the same idempotency key, and the host admits it once.

use std::process::ExitStatus;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::wait_running;
use crate::support::process::BIN;
use crate::support::process::HostProcess;
use crate::support::process::cli;
use crate::support::process::free_port;

#[path = "cli_restart_proxy.rs"]
mod proxy;
use proxy::Cut;
use proxy::CutProxy;

/// Every bot answers after a pause, so the kill lands while the CLI waits
/// (and the resumed turn answers again after the same pause).
const SLOW: &str = r#"
[[rule]]
steps = [ { delay_ms = 1500, tool = "SendMessage", args = { text = "{{bot}} speaks late" } } ]
"#;

/// A CLI command running as a child; its output is collected as it comes.
struct Waiting {
    child: tokio::process::Child,
    stdout: watch::Receiver<String>,
    stderr: watch::Receiver<String>,
}

/// Copies `from` into a watch channel until it ends.
fn collect(
    mut from: impl tokio::io::AsyncRead + Unpin + Send + 'static,
) -> watch::Receiver<String> {
    let (tx, rx) = watch::channel(String::new());
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                break;
            }
            tx.send_modify(|s| s.push_str(&String::from_utf8_lossy(&buf[..n])));
        }
    });
    rx
}

impl Waiting {
    fn spawn(args: &[&str], host: &str) -> Self {
        let mut child = tokio::process::Command::new(BIN)
            .args(args)
            .env("BOTFLEET_HOST", host)
            .env("BOTFLEET_TOKEN", TOKEN)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Self {
            child,
            stdout,
            stderr,
        }
    }

    fn err(&self) -> String {
        self.stderr.borrow().clone()
    }

    /// Asserts the command is still waiting.
    fn assert_waiting(&mut self, when: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the CLI ended {when}: {status}; stderr:\n{}", self.err());
        }
    }

    /// Waits until the CLI says on stderr that it lost the host (it polled
    /// while the host was down) and fails if it ends first.
    async fn wait_lost_note(&mut self) {
        let mut stderr = self.stderr.clone();
        tokio::select! {
            noted = stderr.wait_for(|s| s.contains("connection to the host")) => {
                noted.unwrap();
            }
            status = self.child.wait() => {
                panic!("the CLI ended while the host was down: {:?}; stderr:\n{}", status, self.err());
            }
            () = tokio::time::sleep(Duration::from_secs(20)) => {
                panic!("the CLI never noticed the host was down; stderr:\n{}", self.err());
            }
        }
    }

    /// Waits (with a deadline) for the exit; returns (status, stdout, stderr)
    /// once both outputs are closed.
    async fn finish(mut self) -> (ExitStatus, String, String) {
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the CLI did not end; stderr:\n{}", self.err()))
            .unwrap();
        // the readers end at EOF, i.e. when the watch senders are dropped
        let _ = tokio::time::timeout(Duration::from_secs(5), self.stdout.wait_for(|_| false)).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.stderr.wait_for(|_| false)).await;
        let out = self.stdout.borrow().clone();
        let err = self.stderr.borrow().clone();
        (status, out, err)
    }
}

/// How the host comes back.
#[derive(Clone, Copy, PartialEq)]
enum Restart {
    /// At once, while the CLI sleeps on its change stream.
    AtOnce,
    /// Only after the CLI found the host unreachable on a poll.
    AfterTheCliNoticed,
}

/// The fleet of these tests: the slow script and bots `a`, `b`.
fn slow_fleet() -> TestFleet {
    TestFleet::new()
        .script("s", SLOW)
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
}

/// Starts a host with [`slow_fleet`]; runs `setup` commands; starts
/// `command` and kills the host once `busy` is in its turn; restarts it on
/// the same data dir and port; returns how the command ended.
async fn across_a_restart(
    setup: &[&[&str]],
    command: &[&str],
    busy: &str,
    restart: Restart,
) -> (ExitStatus, String, String) {
    let fleet = slow_fleet();
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let url = host.url.clone();
    for args in setup {
        let (code, _, err) = cli(args, &url, TOKEN).await;
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    let mut waiting = Waiting::spawn(command, &url);
    wait_running(&url, busy).await;
    waiting.assert_waiting("before the kill");
    // the turn may start before the host has written its answer to the
    // message's POST, so this kill may also land before the CLI has read
    // it: `killed_before_its_answer` makes that case happen every time
    host.kill9().await;
    if restart == Restart::AfterTheCliNoticed {
        waiting.wait_lost_note().await;
    }
    let host = HostProcess::start(&path, port, &log).await;
    let ended = waiting.finish().await;
    host.kill9().await;
    ended
}

/// Starts a host with [`slow_fleet`]; runs `setup` commands; starts
/// `command` through a [`CutProxy`] that loses the host's answer to the
/// request starting with `lost` as `how` says, and kills the host right
/// then (it has taken the request); restarts it on the same data dir and
/// port; returns how the command ended and `a`'s transcript.
async fn killed_before_its_answer(
    setup: &[&[&str]],
    command: &[&str],
    lost: &'static str,
    how: Cut,
) -> (ExitStatus, String, String, String) {
    let fleet = slow_fleet();
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    for args in setup {
        let (code, _, err) = cli(args, &host.url, TOKEN).await;
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    let proxy = CutProxy::start(port, lost, how).await;
    let waiting = Waiting::spawn(command, &proxy.url);
    proxy.wait_cut().await;
    host.kill9().await;
    let host = HostProcess::start(&path, port, &log).await;
    let ended = waiting.finish().await;
    let (code, transcript, err) = cli(&["transcript", "a"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    host.kill9().await;
    (ended.0, ended.1, ended.2, transcript)
}

fn assert_clean(err: &str) {
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("error:"), "{err}");
    let notes = err.lines().filter(|l| l.contains("host")).count();
    assert!(notes <= 1, "at most one note: {err}");
}

#[tokio::test]
async fn send_survives_a_host_restart() {
    let (status, out, err) = across_a_restart(
        &[],
        &["send", "a", "hello", "--timeout", "40"],
        "a",
        Restart::AtOnce,
    )
    .await;
    assert_eq!(status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out, "a speaks late\n", "the reply, once");
    assert_clean(&err);
}

#[tokio::test]
async fn send_keeps_waiting_while_the_host_is_down() {
    let (status, out, err) = across_a_restart(
        &[],
        &["send", "a", "hello", "--timeout", "40"],
        "a",
        Restart::AfterTheCliNoticed,
    )
    .await;
    assert_eq!(status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out, "a speaks late\n", "the reply, once");
    assert_clean(&err);
}

#[tokio::test]
async fn group_send_survives_a_host_restart() {
    let (status, out, err) = across_a_restart(
        &[&["group", "create", "team", "--members", "a,b"]],
        &["group", "send", "team", "@a hello", "--timeout", "40"],
        "a",
        Restart::AfterTheCliNoticed,
    )
    .await;
    assert_eq!(status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out, "a-name (bot a) ▸ a speaks late\n", "the reply, once");
    assert_clean(&err);
}

/// The message reached the host, which died before its answer (202, the
/// admission) reached the CLI: the CLI sends it again with its key and
/// waits for the reply (before: "cannot reach the host", exit 1, the
/// message saved all the same: the flake of this test's first sibling
/// when the kill landed before the CLI had read the admission).
#[tokio::test]
async fn send_sends_again_when_the_host_dies_before_answering() {
    send_sends_again(Cut::Whole).await;
}

/// As above, with the answer's head received and its body cut off
/// (before: "the host answered 202 Accepted: no details", exit 1).
#[tokio::test]
async fn send_sends_again_when_the_answer_is_cut_off() {
    send_sends_again(Cut::Body).await;
}

/// `botfleet send` whose POST's answer is lost as `cut` says: the reply
/// printed once, the message in the transcript once, no "already sent".
async fn send_sends_again(cut: Cut) {
    let (status, out, err, transcript) = killed_before_its_answer(
        &[],
        &["send", "a", "hello", "--timeout", "40"],
        "POST /v1/bots/a/messages ",
        cut,
    )
    .await;
    assert_eq!(status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out, "a speaks late\n", "the reply, once");
    assert_clean(&err);
    // its own first attempt is no news to the person
    assert!(!err.contains("already sent"), "{err}");
    assert_eq!(transcript.matches(": hello").count(), 1, "{transcript}");
}

/// `group send` posts the same way.
#[tokio::test]
async fn group_send_sends_again_when_the_host_dies_before_answering() {
    let (status, out, err, _) = killed_before_its_answer(
        &[&["group", "create", "team", "--members", "a,b"]],
        &["group", "send", "team", "@a hello", "--timeout", "40"],
        "POST /v1/groups/team/messages ",
        Cut::Whole,
    )
    .await;
    assert_eq!(status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out, "a-name (bot a) ▸ a speaks late\n", "the reply, once");
    assert_clean(&err);
    assert!(!err.contains("already sent"), "{err}");
}
