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

/// A host that stops drops the turns it runs, and with them the call's
/// future: the whole group is killed, not only `sh`, and only then is it
/// taken off the list.
#[tokio::test]
async fn a_dropped_call_kills_the_whole_group_then_unlists_it() {
    let mut f = fixture();
    let listed = f.0._dir.path().join("shell");
    f.0.rt.settings.shell_registry = Some(crate::tools::ShellRegistry::new(&listed));
    let bg = f.ws().root().join("bg.pid");
    let call = f.run(json!({"command": "sleep 30 & echo $! > bg.pid; wait"}));
    let started = async {
        // a file signals nothing: poll, bounded
        for _ in 0..500 {
            if let Some(pid) = std::fs::read_to_string(&bg)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the command never started");
    };
    let pid = tokio::select! {
        pid = started => pid,
        out = call => panic!("the call ended first: {out:?}"),
    };
    // the call's future is dropped: the group is killed as it goes
    assert_eq!(std::fs::read_dir(&listed).unwrap().count(), 0);
    for _ in 0..100 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("background process {pid} survived the dropped call");
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
    // the devices auto-review allows are not "outside the workspace" either
    let ok = f
        .run(json!({"command": "head -c1 < /dev/zero > /dev/null; head -c1 /dev/urandom > /dev/null; echo ok"}))
        .await
        .unwrap();
    assert!(ok.content.contains("ok"), "{}", ok.content);
    let err = f.run(json!({"command": "cat /dev/sda"})).await.unwrap_err();
    assert!(err.message.contains("outside the workspace"), "{err}");
    let err = f
        .run(json!({"command": "true", "timeout_s": 100000}))
        .await
        .unwrap_err();
    assert!(err.message.contains("above the limit"), "{err}");
}

#[tokio::test]
async fn a_huge_timeout_is_refused_not_a_panic() {
    let f = fixture();
    // before, Duration::from_secs_f64(1e30) panicked inside the turn
    let err = f
        .run(json!({"command": "true", "timeout_s": 1e30}))
        .await
        .unwrap_err();
    assert!(err.message.contains("above the limit"), "{err}");
}
