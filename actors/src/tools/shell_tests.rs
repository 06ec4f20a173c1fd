#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::tools::test_support::ToolFixture;

struct Fixture(ToolFixture);

fn fixture() -> Fixture {
    Fixture(ToolFixture::new())
}

impl Fixture {
    async fn run(&self, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
        Shell.call(&self.0.ctx("c1"), args).await
    }

    fn ws(&self) -> &Workspace {
        self.0.ws()
    }
}

fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
}

#[tokio::test]
async fn runs_in_the_workspace() {
    let f = fixture();
    let out = f
        .run(json!({"command": "pwd; echo hi >&2; exit 3"}))
        .await
        .unwrap();
    assert!(out.content.starts_with("exit code: 3"), "{}", out.content);
    assert!(out.content.contains(&f.ws().root().display().to_string()));
    assert!(out.content.contains("hi"));
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let f = fixture();
    let err = f
        .run(json!({"command": "sleep 30 & echo $! > bg.pid; sleep 30", "timeout_s": 0.3}))
        .await
        .unwrap_err();
    assert!(err.message.contains("timed out"), "{err}");
    let pid: i32 = std::fs::read_to_string(f.ws().root().join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // the background child was in the group: it is gone (or a zombie being reaped)
    for _ in 0..50 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("background process {pid} survived the timeout");
}

#[tokio::test]
async fn background_leftovers_are_killed_after_exit() {
    let f = fixture();
    let out = f
        .run(json!({"command": "sleep 30 > /dev/null 2>&1 & echo $! > bg.pid"}))
        .await
        .unwrap();
    assert!(out.content.starts_with("exit code: 0"), "{}", out.content);
    let pid: i32 = std::fs::read_to_string(f.ws().root().join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for _ in 0..50 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("leftover process {pid} survived");
}

#[tokio::test]
async fn cancel_kills_the_command() {
    let f = fixture();
    let cancel = f.0.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let err = f.run(json!({"command": "sleep 30"})).await.unwrap_err();
    assert!(err.message.contains("cancelled"), "{err}");
}

#[tokio::test]
async fn paths_outside_are_refused() {
    let f = fixture();
    for cmd in [
        "cat /etc/passwd",
        "ls ..",
        "cat ~/.ssh/id_rsa",
        "cd ../.. && ls",
    ] {
        let err = f.run(json!({ "command": cmd })).await.unwrap_err();
        assert!(
            err.message.contains("outside the workspace"),
            "{cmd}: {err}"
        );
    }
    let ok = f
        .run(json!({"command": "ls /usr/bin/env > /dev/null && echo ok"}))
        .await
        .unwrap();
    assert!(ok.content.contains("ok"));
    let err = f
        .run(json!({"command": "true", "timeout_s": 100000}))
        .await
        .unwrap_err();
    assert!(err.message.contains("above the limit"), "{err}");
}
