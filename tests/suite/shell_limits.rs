//! What one user's bot can do to the others through Shell and the file
//! tools (tester H3, round 22):
//! - fill the disk of the data directory, where the workspace is by
//!   default, and so stop every user's messages (507): the tools keep
//!   `runtime.tools_min_free_disk_mb` free (actors/src/tools/workspace_disk.rs);
//! - test guesses of another person's secrets or of the host's
//!   credentials by printing candidates and seeing which come back
//!   `[redacted]`: where commands are isolated (the sandbox with a private
//!   `/proc`) a bot's results are scrubbed only of its owner's secrets
//!   (actors/src/vault.rs);
//! - run with the host's raised open-file limit.

use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

/// Runs the input as a Shell command and sends back what it printed.
const SHELL: &str = r#"
[[rule]]
steps = [
  { tool = "Shell", args = { command = "{{input}}", timeout_s = 300 } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;

/// Writes the input to `note.txt` and sends back the result.
const WRITE: &str = r#"
[[rule]]
steps = [
  { tool = "Write", args = { path = "note.txt", content = "{{input}}" } },
  { tool = "SendMessage", args = { text = "{{tool_result}}" } },
]
"#;

/// The review would ask before some of these commands; here they run.
const NO_REVIEW: &str = "[review]\nshell = \"off\"\nfile_write = \"off\"\n";

/// MiB free on the file system of `path`, as `df` says.
fn free_mib(path: &std::path::Path) -> u64 {
    let out = std::process::Command::new("df")
        .args(["-P", "-k"])
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().nth(1).unwrap();
    let kib: u64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    kib / 1024
}

/// What bob's bot `bot` sent back for `text`.
async fn answer_as_bob(host: &TestHost, bot: &str, text: &str) -> String {
    let (end, entries) = host.end_turn_as(bot, BOB_TOKEN, text).await;
    assert_eq!(end["status"], "completed", "{end}");
    deliveries(&entries).pop().unwrap()
}

/// A fleet with bob's Shell bot `b1` and Write bot `bw`, and alice's `a1`,
/// leaving `reserve_mib` free on the disk.
async fn fleet_leaving(reserve_mib: u64) -> TestHost {
    TestFleet::new()
        .script("s", SHELL)
        .script("w", WRITE)
        .bot("a1", "s", &["SendMessage", "Shell"])
        .bot_of("b1", "s", &["SendMessage", "Shell"], "bob")
        .bot_of("bw", "w", &["SendMessage", "Write"], "bob")
        .tables(NO_REVIEW)
        .runtime(&format!(
            "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n\
             tools_min_free_disk_mb = {reserve_mib}\n"
        ))
        .start()
        .await
}

/// [`fleet_leaving`] all but 64 MiB of what is free now.
async fn fleet_with_64_mib_of_room() -> TestHost {
    let probe = tempfile::tempdir().unwrap();
    fleet_leaving(free_mib(probe.path()).saturating_sub(64)).await
}

#[tokio::test]
async fn a_command_filling_the_disk_is_stopped_at_the_reserve_and_messages_still_go_in() {
    // the command writes 512 MiB
    let host = fleet_with_64_mib_of_room().await;
    let out = answer_as_bob(
        &host,
        "b1",
        "head -c 536870912 /dev/zero > fill.bin; sleep 30; echo never",
    )
    .await;
    assert!(
        out.contains("was stopped") && out.contains("runtime.tools_min_free_disk_mb"),
        "{out}"
    );
    assert!(!out.contains("never"), "{out}");
    // the store still takes every user's messages
    let session = host.complete_turn("a1", "echo still-here").await;
    let said = deliveries(&host.entries(&session).await).pop().unwrap();
    assert!(said.contains("still-here"), "{said}");
    // bob's bot may free the space it took
    let out = answer_as_bob(&host, "b1", "rm fill.bin && echo removed").await;
    assert!(out.contains("removed"), "{out}");
    host.shutdown().await;
}

#[tokio::test]
async fn nothing_is_written_or_started_far_below_the_reserve() {
    let probe = tempfile::tempdir().unwrap();
    // more than twice what is free: below half of the reserve
    let host = fleet_leaving(free_mib(probe.path()) * 3 + 1024).await;
    let out = answer_as_bob(&host, "bw", "some text").await;
    assert!(
        out.contains("note.txt was not written") && out.contains("runtime.tools_min_free_disk_mb"),
        "{out}"
    );
    let out = answer_as_bob(&host, "b1", "echo ran").await;
    assert!(
        out.contains("was not started") && out.contains("runtime.tools_min_free_disk_mb"),
        "{out}"
    );
    assert!(!out.contains("\nran"), "{out}");
    // a file replaced by less may be written, to free space, as Edit may
    // shrink one (QA, 2026-12-05: "its 5 bytes would take the disk below
    // the reserve")
    let note = host.fleet.path().join("data/workspace/bob/note.txt");
    std::fs::write(&note, "x".repeat(4096)).unwrap();
    let out = answer_as_bob(&host, "bw", "short").await;
    assert!(out.starts_with("wrote 5 bytes to note.txt"), "{out}");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "short");
    host.shutdown().await;
}

/// A call that takes its space at once (`fallocate`), and a writer left
/// running after its call (`setsid`, which nothing watches), went past
/// the reserve by any amount (QA: 1.7 GiB): each file a command writes
/// is bounded by the room above the reserve at its start (and an eighth
/// of the reserve, at most 64 MiB, beyond it).
#[tokio::test]
async fn no_file_grows_past_the_room_above_the_reserve() {
    // at most 128 MiB per file
    let host = fleet_with_64_mib_of_room().await;
    let out = answer_as_bob(
        &host,
        "b1",
        "fallocate -l 2G big.bin; echo rc=$?; ls big.bin 2>&1; echo done",
    )
    .await;
    // refused in the program's own words, not killed by SIGXFSZ (153)
    assert!(
        out.contains("File too large") && out.contains("rc=1"),
        "{out}"
    );
    assert!(out.contains("done"), "{out}");
    // a writer that outlives its call: the call waits until it runs in
    // its own session (so the call's end does not kill it), and it says
    // when it is done, and how
    let dir = host.fleet.path().join("data/workspace/bob");
    answer_as_bob(
        &host,
        "b1",
        "setsid sh -c ': > bg.started; head -c 1073741824 /dev/zero > bg.bin; echo $? > bg.done' \
         >/dev/null 2>&1 </dev/null & while [ ! -e bg.started ]; do :; done; echo started",
    )
    .await;
    let done = crate::support::process::poll(60, async || {
        std::fs::read_to_string(dir.join("bg.done"))
            .ok()
            .filter(|d| d.ends_with('\n'))
            .ok_or_else(|| "the background writer has not ended".to_owned())
    })
    .await;
    // it ended at the limit, refused (`head` fails on EFBIG)
    assert_eq!(done.trim(), "1", "head's exit status");
    let size = std::fs::metadata(dir.join("bg.bin")).map_or(0, |m| m.len());
    // about 128 MiB: the room at the call's start (other tests' files
    // come and go meanwhile) and the slack; far short of its 1 GiB
    assert!(size <= 512 << 20, "bg.bin grew to {size} bytes");
    let _ = std::fs::remove_file(dir.join("bg.bin"));
    host.shutdown().await;
}

/// Alice's secret, stored through the API.
const ALICE_VALUE: &str = "Summer2024!-alice-value";

/// A fleet where alice's `a1` may use her secret, with the Shell sandbox
/// as `sandbox` says; alice's secret stored and put in the vault's set by
/// a turn of `a1`.
async fn fleet_with_alices_secret(sandbox: &str) -> TestHost {
    let host = TestFleet::new()
        .script("s", SHELL)
        .bot("a1", "s", &["SendMessage", "Shell"])
        .bot_lines("secrets = [\"ALICE_SECRET\"]")
        .bot_of("b1", "s", &["SendMessage", "Shell"], "bob")
        .tables(NO_REVIEW)
        .runtime(&format!(
            "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n\
             shell_sandbox = \"{sandbox}\"\n"
        ))
        .start()
        .await;
    let put = host
        .http
        .put(format!("{}/v1/secrets/ALICE_SECRET", host.url))
        .bearer_auth(TOKEN)
        .body(json!({ "value": ALICE_VALUE }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status().as_u16(), 200);
    // alice's bot uses it: its own output is scrubbed of it
    let session = host.complete_turn("a1", "echo \"$ALICE_SECRET\"").await;
    let said = deliveries(&host.entries(&session).await).pop().unwrap();
    assert!(
        said.contains("[redacted]") && !said.contains(ALICE_VALUE),
        "{said}"
    );
    host
}

/// Bob's bot prints candidates for alice's secret and alice's login
/// token (a host credential).
const GUESSES: &str = "echo password1 Summer2024!-alice-value guess alice-secret-token";

#[tokio::test]
async fn isolated_commands_cannot_test_guesses_of_another_persons_secret() {
    let probe = std::process::Command::new(env!("CARGO_BIN_EXE_botfleet"))
        .args(["sandbox-exec", "--probe"])
        .output()
        .unwrap();
    let probe = botfleet::sandbox::Probe::parse(&String::from_utf8_lossy(&probe.stdout)).unwrap();
    if probe.enforcement == botfleet::sandbox::Enforcement::None
        || probe.processes != botfleet::sandbox::ProcessView::Own
    {
        eprintln!("skipped: commands are not isolated here ({probe:?})");
        return;
    }
    assert!(GUESSES.contains(TOKEN) && GUESSES.contains(ALICE_VALUE));
    let host = fleet_with_alices_secret("required").await;
    let out = answer_as_bob(&host, "b1", GUESSES).await;
    // nothing is redacted: bob learns nothing from which candidate is
    assert!(!out.contains("[redacted]"), "{out}");
    assert!(out.contains(ALICE_VALUE) && out.contains(TOKEN), "{out}");
    host.shutdown().await;
}

#[tokio::test]
async fn commands_that_see_every_process_keep_every_persons_secret_scrubbed() {
    let host = fleet_with_alices_secret("off").await;
    let out = answer_as_bob(&host, "b1", GUESSES).await;
    // a command could have read it in another's arguments: scrubbed
    assert!(out.contains("password1 [redacted]"), "{out}");
    assert!(!out.contains(ALICE_VALUE), "{out}");
    host.shutdown().await;
}
