//! A Shell command sees only its own processes (src/sandbox_proc.rs):
//! `/proc/<pid>/cmdline` is readable by everyone, so on the host's `/proc`
//! one user's bot listed every other running command with its arguments
//! (`ps ax`), secrets passed as arguments included, and the host's own
//! process. The sandbox mounts its commands a private `/proc` listing only
//! what they may trace, which Landlock limits to their own processes.

use botfleet::sandbox::Enforcement;
use botfleet::sandbox::Probe;
use botfleet::sandbox::ProcessView;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::process::poll;

/// What bot a runs: a command that holds, with a recognisable text.
const HOLDING: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "echo started > started.txt; i=0; while [ ! -f go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo marker-xyz-done", timeout_s = 120 } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;

/// What bot b runs: the input, sending back what it printed.
const LISTING: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "{{input}}" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;

/// The review would ask before some of these commands; here they run.
const NO_REVIEW: &str = "[review]\nshell = \"off\"\n";

/// The probe, or `None` (with the reason printed) when this machine gives
/// no private process list (no Landlock, or no right to mount a `/proc`)
/// and the test cannot run.
fn private_process_list() -> Option<Probe> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_botfleet"))
        .args(["sandbox-exec", "--probe"])
        .output()
        .unwrap();
    let probe = Probe::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    if probe.enforcement == Enforcement::None {
        eprintln!("skipped: this kernel has no Landlock, so there is no Shell sandbox to test");
        return None;
    }
    if let ProcessView::All(why) = &probe.processes {
        eprintln!("skipped: commands see every process here: {why}");
        return None;
    }
    Some(probe)
}

#[tokio::test]
async fn a_command_sees_neither_another_users_running_command_nor_the_host() {
    if private_process_list().is_none() {
        return;
    }
    let host = TestFleet::new()
        .script("hold", HOLDING)
        .script("list", LISTING)
        .bot_of("a", "hold", &["SendMessage", "Shell"], "alice")
        .bot_of("b", "list", &["SendMessage", "Shell"], "bob")
        .tables(NO_REVIEW)
        .start()
        .await;
    let (status, sent) = host.send("a", "hold on", None).await;
    assert_eq!(status, 202, "{sent}");
    // a file signals nothing: poll, bounded
    let started = host.fleet.path().join("data/workspace/alice/started.txt");
    poll(30, async || {
        started
            .exists()
            .then_some(())
            .ok_or_else(|| "bot a's command never started".to_owned())
    })
    .await;

    // every process's command line, by the way a model would: up to `/`
    // without a path the text check refuses, then `proc/*/cmdline`; and
    // `ps`, which reads the same. Only the lines that matter are kept (the
    // whole list may be longer than a result shows): bot a's command (the
    // pattern `mark[e]r` does not match this command's own text), the
    // host's process and this command's shell
    let host_pid = std::process::id();
    let listing = format!(
        "while [ ! -e proc/self ] && [ \"$PWD\" != / ]; do cd \"$(dirname \"$PWD\")\"; done; \
         grep -a . proc/[0-9]*/cmdline | tr '\\0' ' ' \
         | grep -e 'mark[e]r-xyz' -e '^proc/{host_pid}/' -e \"^proc/$$/\"; \
         ps ax -o pid=,args= | grep -e 'mark[e]r-xyz'; echo \"me=$$\""
    );
    let (end, entries) = host.end_turn_as("b", BOB_TOKEN, &listing).await;
    assert_eq!(end["status"], "completed", "{end}");
    let out = deliveries(&entries).pop().unwrap();
    assert!(out.contains("exit code: 0"), "{out}");
    // bot a's command, running all along, is not listed
    assert!(
        !out.contains("marker-xyz"),
        "bot b sees bot a's command: {out}"
    );
    // nor is the host (this test's process; its pid is in this command's
    // own text, so a line of its own is looked for)
    let host_line = format!("proc/{host_pid}/cmdline:");
    assert!(
        !out.lines().any(|l| l.starts_with(&host_line)),
        "bot b sees the host's process {host_pid}: {out}"
    );
    // the command's own processes are: its shell, by its process id
    let me = out
        .lines()
        .find_map(|l| l.strip_prefix("me="))
        .unwrap_or_else(|| panic!("no me= in {out}"));
    assert!(out.contains(&format!("proc/{me}/cmdline:sh -c ")), "{out}");
    // bot a's command ends when told, not at a fixed time
    std::fs::write(started.with_file_name("go"), "").unwrap();
    host.shutdown().await;
}
