#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::tools::Workspace;
use crate::tools::test_support::ToolFixture;

struct Fixture(ToolFixture);

fn fixture() -> Fixture {
    Fixture(ToolFixture::new())
}

impl Fixture {
    async fn run(&self, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
        Shell::default().call(&self.0.ctx("c1"), args).await
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
    assert_gone(pid, "background process the timeout").await;
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
    assert_gone(pid, "leftover process").await;
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
    let started = written_pid(&bg);
    let pid = tokio::select! {
        pid = started => pid,
        out = call => panic!("the call ended first: {out:?}"),
    };
    // the call's future is dropped: the group is killed as it goes
    assert_eq!(std::fs::read_dir(&listed).unwrap().count(), 0);
    assert_gone(pid, "background process the dropped call").await;
}

#[tokio::test]
async fn paths_outside_are_refused() {
    let f = fixture();
    for cmd in [
        "cat /etc/passwd",
        "ls ..",
        "cat ~/../.ssh/id_rsa",
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

/// QA (2026-12-04): a NUL byte in the command was "could not start the
/// shell … the host cannot run commands right now; tell the user".
#[tokio::test]
async fn a_nul_byte_in_the_command_is_named_not_blamed_on_the_host() {
    let f = fixture();
    let err = f.run(json!({"command": "echo a\u{0}b"})).await.unwrap_err();
    assert!(err.message.contains("NUL byte (at byte 6)"), "{err}");
    assert!(!err.to_string().contains("host cannot"), "{err}");
}

#[tokio::test]
async fn a_huge_timeout_is_refused_not_a_panic() {
    let f = fixture();
    // before, Duration::from_secs_f64(1e30) panicked inside the turn
    let err = f
        .run(json!({"command": "true", "timeout_s": 1e30}))
        .await
        .unwrap_err();
    // in exponent form (QA: 1e308 was written out in its 309 digits)
    assert!(
        err.message
            .starts_with("timeout_s 1e30 is above the limit of"),
        "{err}"
    );
}

/// The pid a command wrote to `file` in the workspace.
fn pid_in(f: &Fixture, file: &str) -> i32 {
    std::fs::read_to_string(f.ws().root().join(file))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The pid a running command writes to `file` (`echo $! > file`), once a
/// whole line is there. The file is the child's only sign that it runs,
/// and nothing signals its writing: polled, at most 5 s.
async fn written_pid(file: &std::path::Path) -> i32 {
    for _ in 0..500 {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .filter(|s| s.ends_with('\n'))
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the command never wrote {}", file.display());
}

/// Waits (at most 2 s) for `pid` to be gone; kills it and fails if it is
/// not. The process is not this one's child (the shell's, or one that left
/// its group), so nothing here can await its exit without unsafe code (a
/// pidfd): polled every 10 ms.
async fn assert_gone(pid: i32, what: &str) {
    for _ in 0..200 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
    panic!("{what} {pid} survived");
}

/// A process that left the group with setsid and kept the output open
/// held the call until it exited (15 s here, 0.2 s for the command).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_setsid_child_holding_the_output_does_not_hold_the_call() {
    let f = fixture();
    let call =
        f.run(json!({"command": "setsid sleep 15 & echo $! > bg.pid; echo done; sleep 0.2"}));
    let out = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call waited for the escaped child")
        .unwrap();
    assert!(out.content.starts_with("exit code: 0"), "{}", out.content);
    assert!(out.content.contains("done"), "{}", out.content);
    assert!(
        out.content.contains("1 background process(es) that left"),
        "{}",
        out.content
    );
    assert_gone(pid_in(&f, "bg.pid"), "the escaped child").await;
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_timeout_ends_the_call_on_time_despite_a_setsid_child() {
    let f = fixture();
    let started = std::time::Instant::now();
    let call = f.run(json!({
        "command": "setsid sleep 40 & echo $! > bg.pid; sleep 100",
        "timeout_s": 0.5
    }));
    let err = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call outlived its timeout")
        .unwrap_err();
    assert!(err.message.contains("timed out"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_gone(pid_in(&f, "bg.pid"), "the escaped child").await;
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn cancel_ends_the_call_at_once_despite_a_setsid_child() {
    let f = fixture();
    let cancel = f.0.cancel.clone();
    let bg = f.ws().root().join("bg.pid");
    tokio::spawn(async move {
        // cancel once the command runs
        written_pid(&bg).await;
        cancel.cancel();
    });
    let call = f.run(json!({"command": "setsid sleep 40 & echo $! > bg.pid; sleep 100"}));
    let err = tokio::time::timeout(Duration::from_secs(8), call)
        .await
        .expect("the cancelled call waited for the escaped child")
        .unwrap_err();
    assert!(err.message.contains("cancelled"), "{err}");
    assert_gone(pid_in(&f, "bg.pid"), "the escaped child").await;
}

/// An escapee that keeps the output open but cannot be found (here: the
/// test holds the pipe's other end) stops the reading after the grace.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn output_left_open_stops_being_read_after_a_grace() {
    use tokio::io::AsyncWriteExt;
    let (mut writer, reader) = tokio::net::unix::pipe::pipe().unwrap();
    writer.write_all(b"early").await.unwrap();
    let stop = CancellationToken::new();
    let out = output::spawn_reader(Some(reader), 100, stop.clone());
    let err = output::spawn_reader(None::<tokio::net::unix::pipe::Receiver>, 100, stop.clone());
    // a group that cannot exist, with no pipes watched: nothing is found
    let mut group = GroupGuard::new(u32::MAX, None, Vec::new());
    let started = std::time::Instant::now();
    let (out, _, end) = output::finish(&mut group, &stop, out, err).await;
    assert_eq!(end, OutputEnd::LeftOpen);
    assert_eq!(out.kept, b"early");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    drop(writer);
}

#[tokio::test]
async fn the_tester_commands_with_a_slash_run() {
    let f = fixture();
    std::fs::write(f.ws().root().join("list.txt"), "a/b c\n").unwrap();
    let out = f.run(json!({"command": "echo $((6 / 2))"})).await.unwrap();
    assert!(out.content.contains("\n3\n"), "{}", out.content);
    let out = f
        .run(json!({"command": "sed \"s/ /_/g\" list.txt; awk -F / '{print $2}' list.txt"}))
        .await
        .unwrap();
    assert!(out.content.contains("a/b_c"), "{}", out.content);
    assert!(out.content.contains("b c"), "{}", out.content);
    for cmd in ["cat /etc/passwd", "ls /", "cd /", "echo x > /x", "rm -rf /"] {
        let err = f.run(json!({ "command": cmd })).await.unwrap_err();
        assert!(
            err.message.contains("outside the workspace"),
            "{cmd}: {err}"
        );
    }
}

/// The schema states the timeouts the fleet's settings apply (before: always
/// "default 60, at most 600").
#[test]
fn the_schema_states_the_timeouts_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = crate::settings::FleetSettings::new(dir.path().to_path_buf());
    settings.tool_limits.shell_default_timeout = Duration::from_secs(20);
    settings.tool_limits.shell_max_timeout = Duration::from_secs(120);
    let store = botfleet_memory::Store::open(botfleet_memory::StoreOptions::new(
        dir.path().join("db.sqlite"),
    ))
    .unwrap();
    let rt = crate::runtime::Runtime::new(
        store,
        std::collections::HashMap::new(),
        crate::tools::ToolRegistry::builtin(),
        settings,
        Workspace::open(dir.path()).unwrap(),
    );
    let spec = rt.tools.spec("Shell").unwrap();
    let timeout = &spec.parameters["properties"]["timeout_s"];
    assert_eq!(
        timeout["description"],
        "Seconds before the command is killed (default 20, at most 120)."
    );
    assert_eq!(timeout["maximum"], 120.0);
    assert!(
        spec.description.contains("(20 s unless"),
        "{}",
        spec.description
    );
    // the defaults, where no settings say otherwise
    let spec = Shell::default().spec();
    assert_eq!(
        spec.parameters["properties"]["timeout_s"]["description"],
        "Seconds before the command is killed (default 60, at most 600)."
    );
}

/// The tester's secret, across the output limit of 32 KiB.
const SECRET: &str = "SUPERSECRETVALUE_0123456789abcdef";

/// Regression (round 14, H2): output cut at the limit was scrubbed after
/// the cut, so a secret the cut went through showed its start
/// (`…AAAASUPERSEC`). It is scrubbed before the cut now: the cut moves
/// to the secret's start, and the note counts the secret as not shown.
#[tokio::test]
async fn output_cut_through_a_secret_shows_no_part_of_it() {
    let mut f = fixture();
    f.0.secrets = crate::vault::BotSecrets {
        values: vec![("MYTOK".into(), crate::safety::Secret::new(SECRET))],
        redactor: crate::safety::Redactor::new([SECRET]),
    };
    let text = format!("{}{SECRET}{}", "A".repeat(32760), "B".repeat(100));
    std::fs::write(f.ws().root().join("sec1.txt"), &text).unwrap();
    let parts: Vec<&str> = (0..SECRET.len() - 3).map(|i| &SECRET[i..i + 4]).collect();
    for command in [
        "cat sec1.txt",
        // from the environment, cut a few bytes further on
        "head -c 32765 /dev/zero | tr '\\0' A; printf %s \"$MYTOK\"; head -c 100 /dev/zero | tr '\\0' B",
    ] {
        let out = f.run(json!({ "command": command })).await.unwrap().content;
        for part in &parts {
            assert!(
                !out.contains(part),
                "{command}: {part} in {}",
                &out[32700..]
            );
        }
        assert!(
            out.contains("more bytes not shown]") && !out.contains('B'),
            "{command}: {}",
            &out[32700..]
        );
    }
    let out = f.run(json!({"command": "cat sec1.txt"})).await.unwrap();
    assert!(
        out.content.contains("AAAA\n[... 133 more bytes not shown]"),
        "{}",
        &out.content[32700..]
    );
    // output under the limit shows the secret redacted, as before
    let out = f
        .run(json!({"command": "tail -c 140 sec1.txt"}))
        .await
        .unwrap();
    assert!(
        out.content.contains("AAAAAAA[redacted]BBB"),
        "{}",
        out.content
    );
}

/// Regression: binary output past the limit said fewer bytes were not
/// shown than were: the count was taken on the lossy text, where each
/// byte of binary is a U+FFFD of 3 bytes (40,000 bytes of 0xFF showed
/// 10,922 of them and said "7232 more"). It counts the bytes written.
#[tokio::test]
async fn binary_output_past_the_limit_counts_the_bytes_not_shown() {
    let f = fixture();
    let out = f
        .run(json!({"command": "head -c 40000 /dev/zero | tr '\\0' '\\377'; printf 'ok\\n' >&2"}))
        .await
        .unwrap()
        .content;
    let shown = out.matches('\u{FFFD}').count();
    assert_eq!(shown, 32768 / 3, "{}", &out[out.len() - 200..]);
    assert!(
        out.contains(&format!(
            "\u{FFFD}\n[... {} more bytes not shown]\n--- stderr ---\nok\n",
            40000 - shown
        )),
        "{}",
        &out[out.len() - 200..]
    );
    // valid text is counted as before
    let out = f
        .run(json!({"command": "head -c 40000 /dev/zero | tr '\\0' a"}))
        .await
        .unwrap()
        .content;
    assert!(
        out.contains("\n[... 7232 more bytes not shown]"),
        "{}",
        &out[out.len() - 200..]
    );
}

/// How many raw bytes a prefix of the lossy text stands for.
#[test]
fn raw_len_counts_a_replacement_as_the_bytes_it_stands_for() {
    use super::output::raw_len;
    let raw = b"ab\xff\xfe\xc3\xa9\xe2\x82";
    // lossy: "ab" U+FFFD U+FFFD "é" U+FFFD
    assert_eq!(String::from_utf8_lossy(raw), "ab\u{FFFD}\u{FFFD}é\u{FFFD}");
    assert_eq!(raw_len(raw, 0), 0);
    assert_eq!(raw_len(raw, 2), 2);
    assert_eq!(raw_len(raw, 5), 3);
    assert_eq!(raw_len(raw, 8), 4);
    assert_eq!(raw_len(raw, 10), 6);
    assert_eq!(raw_len(raw, 13), 8);
    assert_eq!(raw_len("héllo".as_bytes(), 3), 3);
}

/// Regression (round 14, H2): a command over Linux's 128 KiB limit on one
/// argument failed to start, and the error said the host could not run
/// commands and showed the host binary's path. It is refused before it
/// is started, with its size, the limit and the way out.
#[tokio::test]
async fn a_command_over_the_argument_limit_is_refused_with_the_way_out() {
    let f = fixture();
    let command = format!("cat > big.txt <<'EOF'\n{}\nEOF", "x".repeat(143_000));
    let err = f.run(json!({ "command": command })).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!("the command is {} bytes", command.len()))
            && text.contains("at most 131071 bytes")
            && text.contains("Write the long text"),
        "{text}"
    );
    assert!(!text.contains("could not start"), "{text}");
    assert!(!f.ws().root().join("big.txt").exists());
    // at the limit it runs
    let command = format!("echo {} | wc -c", "y".repeat(super::MAX_COMMAND_BYTES - 20));
    let out = f.run(json!({ "command": command })).await.unwrap();
    assert!(
        out.content.starts_with("exit code: 0"),
        "{}",
        &out.content[..100]
    );
}

/// Regression (round 14, H2): a cwd that exists but is no directory was
/// answered "create it first", which cannot work; the error says what it
/// is instead.
#[tokio::test]
async fn a_cwd_that_is_no_directory_is_named_for_what_it_is() {
    let f = fixture();
    let root = f.ws().root();
    std::fs::write(root.join("notes.txt"), "x").unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("gone", root.join("dangling")).unwrap();
    for (cwd, what) in [
        ("notes.txt", "cwd notes.txt is a file, not a directory"),
        ("pipe", "cwd pipe is a FIFO (named pipe), not a directory"),
        (
            "dangling",
            "cwd dangling is a symbolic link to gone, which does not exist",
        ),
    ] {
        let err = f
            .run(json!({"command": "true", "cwd": cwd}))
            .await
            .unwrap_err();
        assert!(err.message.contains(what), "{cwd}: {err}");
        assert!(!err.to_string().contains("mkdir"), "{cwd}: {err}");
    }
    let err = f
        .run(json!({"command": "true", "cwd": "missing"}))
        .await
        .unwrap_err();
    assert!(err.message.contains("cwd missing does not exist"), "{err}");
    assert!(err.to_string().contains("mkdir -p"), "{err}");
}

/// Regression (round 14, H2): a command killed by a signal said only
/// "killed by a signal"; it names the signal now.
#[tokio::test]
async fn a_command_killed_by_a_signal_names_it() {
    let f = fixture();
    let out = f.run(json!({"command": "kill -9 $$"})).await.unwrap();
    assert!(
        out.content
            .starts_with("exit code: killed by signal 9 (SIGKILL)\n"),
        "{}",
        out.content
    );
}

/// Regression (round 14, H2): a timeout_s under the schema's minimum of
/// 0.1 ran (`1e-300` answered "timed out after 0.0 s"); it is refused.
#[tokio::test]
async fn a_timeout_under_the_minimum_is_refused() {
    let f = fixture();
    // 0 and below too, named the same way (QA: "must be a positive
    // number, got 0")
    for (timeout, shown) in [
        (0.05, "0.05"),
        (1e-300, "1e-300"),
        (0.0, "0.0"),
        (-5.0, "-5.0"),
    ] {
        let err = f
            .run(json!({"command": "touch ran", "timeout_s": timeout}))
            .await
            .unwrap_err();
        assert!(
            err.message
                .contains(&format!("timeout_s {shown} is below the minimum of 0.1 s")),
            "{err}"
        );
        assert!(err.to_string().contains("default of 60 s"), "{err}");
    }
    assert!(!f.ws().root().join("ran").exists());
    let out = f
        .run(json!({"command": "true", "timeout_s": 0.1}))
        .await
        .unwrap();
    assert!(out.content.starts_with("exit code: 0"), "{}", out.content);
}

/// Regression (round 29): a command that timed out after a long stdout
/// lost its stderr, often the reason it hung: the output so far was cut
/// to one stream's limit, stdout filled it, and the note under it counted
/// only the bytes of that cut ("84 more bytes not shown", where 67 KB
/// and all of stderr were left out). Each stream is cut on its own, with
/// its own note, as for a command that exits.
#[tokio::test]
async fn a_timed_out_command_keeps_its_stderr_after_a_long_stdout() {
    let f = fixture();
    let err = f
        .run(json!({
            "command": "yes out | head -c 100000; echo why-it-hangs >&2; sleep 30",
            "timeout_s": 1
        }))
        .await
        .unwrap_err();
    assert!(err.message.contains("timed out"), "{err}");
    let shown_out = 32 * 1024;
    assert!(
        err.message.contains(&format!(
            "[... {} more bytes not shown]\n--- stderr ---\nwhy-it-hangs\n",
            100_000 - shown_out
        )),
        "{}",
        &err.message[err.message.len().saturating_sub(300)..]
    );
}
