//! The Shell tool's OS sandbox (src/sandbox.rs): a command cannot read the
//! host's files however it names them (globs and expansions got past the
//! path check on the command text: `cd .?` is `cd ..` in dash), cannot
//! write outside its workspace, and cannot reach the host process, while
//! ordinary work in the workspace goes on as before.

use std::collections::HashMap;

use botfleet::host::HostOptions;
use botfleet::sandbox::Enforcement;
use botfleet::sandbox::Probe;
use botfleet::sandbox::ProcessView;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

/// Runs the input as a Shell command and sends back what it printed.
const SCRIPT: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "{{input}}" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;

/// The review would ask before some of these commands; here they run.
const NO_REVIEW: &str = "[review]\nshell = \"off\"\n";

/// What this kernel enforces, or `None` (with the reason printed) when it
/// has no Landlock and the test cannot run.
fn landlock() -> Option<Probe> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_botfleet"))
        .args(["sandbox-exec", "--probe"])
        .output()
        .unwrap();
    let probe = Probe::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    if probe.enforcement == Enforcement::None {
        eprintln!("skipped: this kernel has no Landlock, so there is no Shell sandbox to test");
        return None;
    }
    Some(probe)
}

async fn host() -> TestHost {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .tables(NO_REVIEW)
        .start()
        .await
}

/// Runs `command` through bot r's Shell; returns what the tool answered.
async fn shell(host: &TestHost, command: &str) -> String {
    let (session, end) = host.end_turn("r", command).await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    deliveries(&entries).pop().unwrap()
}

/// Climbs from the workspace to the directory holding `name` without a
/// path the text check sees as leaving the workspace (as a model could).
fn climb_to(name: &str) -> String {
    format!(
        "while [ ! -e {name} ] && [ \"$PWD\" != / ]; do cd \"$(dirname \"$PWD\")\"; done; pwd; "
    )
}

#[tokio::test]
async fn the_host_files_are_refused_by_the_os_while_the_workspace_works() {
    if landlock().is_none() {
        return;
    }
    let host = host().await;
    let out = shell(&host, "echo hi > f && cat f").await;
    assert!(out.contains("exit code: 0") && out.contains("hi"), "{out}");

    // `.?` is `..` to dash: the path check passed it, the OS does not
    let out = shell(&host, "ls .?").await;
    assert!(out.contains("Permission denied"), "{out}");
    let out = shell(&host, "cd .?; ls").await;
    assert!(out.contains("Permission denied"), "{out}");

    // the store, found by climbing: every user's secrets and DMs
    let out = shell(
        &host,
        &format!("{}cat fleet.db | head -c 16", climb_to("fleet.db")),
    )
    .await;
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!out.contains("SQLite format"), "{out}");
    // the fleet file (tokens, inline secrets)
    let out = shell(&host, &format!("{}cat fleet.toml", climb_to("fleet.toml"))).await;
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!out.contains("[[users]]"), "{out}");
    // nothing is written outside the workspace either
    let out = shell(
        &host,
        &format!("{}echo x > planted.txt", climb_to("fleet.toml")),
    )
    .await;
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!host.fleet.path().join("planted.txt").exists(), "{out}");
    host.shutdown().await;
}

#[tokio::test]
async fn the_host_process_is_out_of_reach() {
    let Some(probe) = landlock() else {
        return;
    };
    let host = host().await;
    // the in-process host is this test's process
    let pid = std::process::id();
    let out = shell(
        &host,
        &format!("{}cat proc/{pid}/environ | wc -c", climb_to("proc/self")),
    )
    .await;
    // refused; where commands get a private /proc (src/sandbox_proc.rs)
    // the host's process is not even listed there
    let refused = match &probe.processes {
        ProcessView::Own => "No such file or directory",
        ProcessView::All(_) => "Permission denied",
    };
    assert!(out.contains(refused), "{out}");
    if probe.abi >= 6 {
        let out = shell(&host, &format!("kill -0 {pid} && echo alive")).await;
        assert!(!out.contains("alive"), "{out}");
        assert!(out.contains("not permitted"), "{out}");
    } else {
        eprintln!(
            "kill -0 not checked: Landlock ABI {} scopes no signals",
            probe.abi
        );
    }
    host.shutdown().await;
}

#[tokio::test]
async fn ordinary_commands_work_in_the_sandbox() {
    if landlock().is_none() {
        return;
    }
    let host = host().await;
    let out = shell(
        &host,
        "mkdir -p sub && (cd sub && printf 'b\\na\\n' > g && sort g | head -1) \
         && ls sub && echo quiet > /dev/null && t=$(mktemp) && echo \"tmp=$t\" \
         && python3 -c 'print(6*7)' \
         && git init -q . && git add sub && git -c user.email=b@o -c user.name=bot commit -qm one \
         && git log --oneline | wc -l",
    )
    .await;
    assert!(out.contains("exit code: 0"), "{out}");
    for seen in ["\na\n", "\ng\n", "/.tmp/tmp.", "42"] {
        assert!(out.contains(seen), "{seen:?} not in {out}");
    }
    host.shutdown().await;
}

fn fleet_with(runtime: &str) -> TestFleet {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .tables(NO_REVIEW)
        .runtime(&format!(
            "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n{runtime}\n"
        ))
}

#[tokio::test]
async fn shell_sandbox_takes_auto_required_or_off_and_names_itself_when_wrong() {
    for good in ["auto", "required", "off"] {
        let fleet = fleet_with(&format!("shell_sandbox = \"{good}\""));
        let checked = botfleet::host::check(&HostOptions {
            fleet: Some(fleet.write()),
            env: Some(HashMap::new()),
            ..Default::default()
        });
        assert!(checked.is_ok(), "{good}: {:#}", checked.err().unwrap());
    }
    for bad in ["\"yes\"", "true", "\"Required\""] {
        let fleet = fleet_with(&format!("shell_sandbox = {bad}"));
        let e = botfleet::host::check(&HostOptions {
            fleet: Some(fleet.write()),
            env: Some(HashMap::new()),
            ..Default::default()
        })
        .err()
        .unwrap();
        let e = format!("{e:#}");
        assert!(e.contains("runtime.shell_sandbox"), "{bad}: {e}");
        assert!(
            e.contains("auto") && e.contains("required") && e.contains("off"),
            "{bad}: {e}"
        );
    }
}

#[tokio::test]
async fn a_required_sandbox_the_host_cannot_have_disables_shell_saying_why() {
    let fleet = fleet_with("shell_sandbox = \"required\"");
    // no launcher: as on a kernel without Landlock, the sandbox cannot be had
    let running = botfleet::host::start(HostOptions {
        fleet: Some(fleet.write()),
        env: Some(HashMap::new()),
        shell_launcher: None,
        ..Default::default()
    })
    .await
    .unwrap();
    let host = TestHost {
        url: running.url(),
        host: Some(running),
        fleet,
        http: reqwest::Client::new(),
    };
    let out = shell(&host, "echo ran > ran.txt; echo ran").await;
    assert!(out.contains("runtime.shell_sandbox"), "{out}");
    assert!(!out.contains("exit code"), "{out}");
    host.shutdown().await;
}
