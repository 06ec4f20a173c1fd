//! A host as a real child process (`botfleet run`), for crash tests and
//! the CLI.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_botfleet");

/// A free loopback port (bound and released; good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `botfleet run` child.
pub struct HostProcess {
    pub child: tokio::process::Child,
    pub url: String,
    /// What this process has logged so far (its stderr, and what it
    /// prints on stdout, also appended to the log file), updated line by
    /// line.
    log: tokio::sync::watch::Receiver<String>,
    /// The tasks copying stderr and stdout; done once the process's log is
    /// all written.
    follower: tokio::task::JoinHandle<()>,
}

impl HostProcess {
    /// Starts `botfleet run --fleet FLEET --listen 127.0.0.1:PORT` and waits
    /// until it answers /healthz.
    pub async fn start(fleet: &Path, port: u16, log: &Path) -> Self {
        Self::start_with_log_level(fleet, port, log, "info").await
    }

    /// Like `start`, with `RUST_LOG` set to `level`.
    pub async fn start_with_log_level(fleet: &Path, port: u16, log: &Path, level: &str) -> Self {
        Self::spawn(fleet, port, log, level, true).await
    }

    /// Like `start`, but waits only until /healthz answers, whatever it
    /// says (a host that finds its store failing serves `503`).
    pub async fn start_answering(fleet: &Path, port: u16, log: &Path) -> Self {
        Self::spawn(fleet, port, log, "info", false).await
    }

    async fn spawn(fleet: &Path, port: u16, log: &Path, level: &str, healthy: bool) -> Self {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let mut child = tokio::process::Command::new(BIN)
            .args(["run", "--fleet"])
            .arg(fleet)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", level)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let (logged, follower) = follow(
            child.stderr.take().unwrap(),
            child.stdout.take().unwrap(),
            log_file,
        );
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        for _ in 0..300 {
            if let Ok(r) = http.get(format!("{url}/healthz")).send().await
                && (r.status().is_success() || !healthy)
            {
                return Self {
                    child,
                    url,
                    log: logged,
                    follower,
                };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "host did not start; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }

    /// Waits until this process has logged a line containing `text`
    /// (woken by each line it logs; fails after 20 s).
    pub async fn wait_log(&mut self, text: &str) {
        let found = tokio::time::timeout(
            Duration::from_secs(20),
            self.log.wait_for(|logged| logged.contains(text)),
        )
        .await;
        assert!(
            found.is_ok_and(|r| r.is_ok()),
            "the host never logged {text:?}; log:\n{}",
            self.log.borrow().as_str()
        );
    }

    /// SIGKILL: no shutdown, no flush.
    pub async fn kill9(mut self) {
        self.child.start_kill().unwrap();
        let _ = self.child.wait().await;
        self.drain_log().await;
    }

    /// Waits until the exited process's log is all in the file: its stderr
    /// ends when it and any child still holding it are gone (bounded, as a
    /// leftover child would hold it open).
    async fn drain_log(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.follower).await;
    }

    /// SIGTERM (as Ctrl-C): a clean stop; fails unless the host exits with
    /// success within 20 s.
    pub async fn stop(mut self, log: &Path) {
        signal(self.child.id().unwrap(), "TERM");
        let exited = tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await;
        assert!(
            exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
            "the host did not stop cleanly; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        self.drain_log().await;
        // and says so, after its "stopping…"
        let logged = std::fs::read_to_string(log).unwrap_or_default();
        let stopping = logged.rfind("stopping…").unwrap_or(0);
        assert!(
            logged[stopping..].contains("stopped cleanly"),
            "the log does not say \"stopped cleanly\" after its last \"stopping…\":\n{logged}"
        );
    }
}

/// Copies a child's stderr and stdout line by line into `file` and into
/// the returned channel (the text so far), until both end.
fn follow(
    stderr: tokio::process::ChildStderr,
    stdout: tokio::process::ChildStdout,
    file: std::fs::File,
) -> (
    tokio::sync::watch::Receiver<String>,
    tokio::task::JoinHandle<()>,
) {
    use std::io::Write;
    use std::sync::Arc;
    use std::sync::Mutex;
    use tokio::io::AsyncBufReadExt;

    let (tx, rx) = tokio::sync::watch::channel(String::new());
    let tx = Arc::new(tx);
    let file = Arc::new(Mutex::new(file));
    let copy = |stream: Box<dyn tokio::io::AsyncRead + Send + Unpin>| {
        let (tx, file) = (tx.clone(), file.clone());
        async move {
            let mut lines = tokio::io::BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = writeln!(file.lock().unwrap(), "{line}");
                tx.send_modify(|logged| {
                    logged.push_str(&line);
                    logged.push('\n');
                });
            }
        }
    };
    let (err, out) = (copy(Box::new(stderr)), copy(Box::new(stdout)));
    let task = tokio::spawn(async move {
        tokio::join!(err, out);
    });
    (rx, task)
}

/// Sends `signal` (e.g. "TERM", "HUP", "KILL") to `pid` with kill(1).
pub fn signal(pid: impl std::fmt::Display, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}: {status}");
}

/// Runs the CLI; returns (exit code, stdout, stderr).
pub async fn cli(args: &[&str], host: &str, token: &str) -> (i32, String, String) {
    let out = tokio::process::Command::new(BIN)
        .args(args)
        .env("BOTFLEET_HOST", host)
        .env("BOTFLEET_TOKEN", token)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `botfleet check-config --fleet <fleet>` with logging off;
/// returns (exit code, stderr).
pub async fn check_config(fleet: &Path) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(BIN)
        .arg("check-config")
        .arg("--fleet")
        .arg(fleet)
        .env("RUST_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether process `pid` runs (a zombie waiting for its reaper does not).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

/// Re-runs `check` until it finds something, every 20 ms; fails with its
/// last state after `secs`. For a host in another process: its clock is
/// the wall clock, which a test cannot pause, so the wait is bounded on a
/// real condition instead of slept through.
pub async fn poll<T>(secs: u64, mut check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let last = match check().await {
            Ok(found) => return found,
            Err(last) => last,
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {secs} s waiting; {last}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls (bounded) until searching `q` finds `total` entries; the answer.
pub async fn wait_found(
    client: &botfleet::client::Client,
    q: &str,
    total: u64,
) -> serde_json::Value {
    poll(20, async || {
        let v = client.get_query("/v1/search", &[("q", q)]).await.unwrap();
        if v["total"] == serde_json::json!(total) {
            Ok(v)
        } else {
            Err(format!("searching {q:?} never found {total}: {v}"))
        }
    })
    .await
}

/// The soft and hard "Max open files" of `/proc/PID/limits` (`None`:
/// unlimited or unreadable).
pub fn open_file_limits(pid: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let mut fields = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .map(str::parse::<u64>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

/// `botfleet run --fleet FLEET` as a process of its own on a free port,
/// logging at info into `log`, optionally started with a lowered soft
/// open-file limit (as a shell's `ulimit -S -n` leaves it; `exec`, so the
/// shell's process is the host's).
pub struct RunProcess {
    pub child: tokio::process::Child,
    pub pid: String,
    pub url: String,
    pub log: std::path::PathBuf,
}

impl RunProcess {
    pub fn spawn(fleet: &Path, log: &Path, soft_open_files: Option<u64>) -> Self {
        Self::spawn_after(
            fleet,
            log,
            soft_open_files.map(|soft| format!("ulimit -S -n {soft}")),
        )
    }

    /// [`RunProcess::spawn`], with the host started by `sh` after
    /// `prelude` (shell commands: a limit, a descriptor left open).
    pub fn spawn_after(fleet: &Path, log: &Path, prelude: Option<String>) -> Self {
        let out = std::fs::File::create(log).unwrap();
        let port = free_port();
        let mut command = match prelude {
            Some(prelude) => {
                let mut c = tokio::process::Command::new("sh");
                c.arg("-c")
                    .arg(format!("{prelude} && exec \"$0\" \"$@\""))
                    .arg(BIN);
                c
            }
            None => tokio::process::Command::new(BIN),
        };
        let child = command
            .args(["run", "--fleet"])
            .arg(fleet)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap().to_string();
        Self {
            child,
            pid,
            url: format!("http://127.0.0.1:{port}"),
            log: log.to_path_buf(),
        }
    }

    /// What the host logged so far.
    pub fn logged(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls (bounded) until the host answers `/healthz`.
    pub async fn wait_healthy(&self) {
        let http = reqwest::Client::new();
        let health = format!("{}/healthz", self.url);
        poll(30, async || match http.get(&health).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            other => Err(format!(
                "the host never answered /healthz ({other:?}); log:\n{}",
                self.logged()
            )),
        })
        .await;
    }

    /// SIGTERM, then the exit (within `secs`): whether it succeeded, and
    /// the log.
    pub async fn stop(mut self, secs: u64) -> (bool, String) {
        signal(&self.pid, "TERM");
        let exited = tokio::time::timeout(Duration::from_secs(secs), self.child.wait()).await;
        let success = exited.is_ok_and(|s| s.is_ok_and(|s| s.success()));
        (success, self.logged())
    }
}
