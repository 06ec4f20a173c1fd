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
}

impl HostProcess {
    /// Starts `botfleet run --fleet FLEET --listen 127.0.0.1:PORT` and waits
    /// until it answers /healthz.
    pub async fn start(fleet: &Path, port: u16, log: &Path) -> Self {
        Self::start_with_log_level(fleet, port, log, "info").await
    }

    /// Like `start`, with `RUST_LOG` set to `level`.
    pub async fn start_with_log_level(fleet: &Path, port: u16, log: &Path, level: &str) -> Self {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = tokio::process::Command::new(BIN)
            .args(["run", "--fleet"])
            .arg(fleet)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", level)
            .stdout(Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        for _ in 0..300 {
            if let Ok(r) = http.get(format!("{url}/healthz")).send().await
                && r.status().is_success()
            {
                return Self { child, url };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "host did not start; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }

    /// SIGKILL: no shutdown, no flush.
    pub async fn kill9(mut self) {
        self.child.start_kill().unwrap();
        let _ = self.child.wait().await;
    }

    /// SIGTERM (as Ctrl-C): a clean stop; fails unless the host exits with
    /// success within 20 s.
    pub async fn stop(mut self, log: &Path) {
        let pid = self.child.id().unwrap();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM {pid}: {status}");
        let exited = tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await;
        assert!(
            exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
            "the host did not stop cleanly; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
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
