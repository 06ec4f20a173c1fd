//! What `botfleet run` tells an operator about where its data is: a data
//! directory with no store yet is named as new (once), and a
//! `host.workspace` moved to an empty directory while the previous one
//! still holds the bots' files is a warning naming both paths.
//! `botfleet check-config` says the same two, from the files as they are
//! (before, it said nothing of them).

use std::path::Path;

use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

/// A model that is never asked here.
const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "hi" } } ]
"#;

/// A fleet of one bot, `a1`, whose model is never asked.
fn one_bot() -> TestFleet {
    TestFleet::new()
        .script("m", SCRIPT)
        .bot("a1", "m", &["SendMessage"])
}

/// Runs a host on `fleet` until its banner is out, stops it, and returns
/// what it printed and logged.
async fn banner_of(fleet: &Path, log: &Path) -> String {
    let mut host = HostProcess::start(fleet, free_port(), log).await;
    // the last line of the banner
    host.wait_log("send a message:").await;
    host.stop(log).await;
    std::fs::read_to_string(log).unwrap()
}

#[tokio::test]
async fn a_new_data_dir_is_told_once_and_a_moved_workspace_names_both_paths() {
    let fleet = one_bot();
    let path = fleet.write();
    let dir = fleet.path();
    let data = dir.join("data");

    let first = banner_of(&path, &dir.join("first.log")).await;
    let new = format!(
        "new data directory {}: starting with no history",
        data.display()
    );
    assert!(first.contains(&new), "no {new:?} in:\n{first}");
    assert!(!first.contains("WARNING: the workspace"), "{first}");

    // a bot's file in the (default) workspace
    let old = data.join("workspace");
    std::fs::create_dir_all(old.join("alice")).unwrap();
    std::fs::write(old.join("alice/notes.txt"), "keep me").unwrap();
    let second = banner_of(&path, &dir.join("second.log")).await;
    assert!(!second.contains("new data directory"), "{second}");
    assert!(!second.contains("WARNING: the workspace"), "{second}");

    // `host.workspace` moved, the files not
    let moved = dir.join("elsewhere");
    let fleet = fleet.host(&format!("workspace = \"{}\"", moved.display()));
    fleet.write();
    let third = banner_of(&path, &dir.join("third.log")).await;
    assert!(!third.contains("new data directory"), "{third}");
    let warning = third
        .lines()
        .find(|l| l.starts_with("WARNING: the workspace "))
        .unwrap_or_else(|| panic!("no workspace warning in:\n{third}"));
    let old = old.canonicalize().unwrap();
    assert!(
        warning.contains(&moved.display().to_string())
            && warning.contains(&old.display().to_string())
            && warning.contains("copy them over"),
        "{warning}"
    );
    // told at every start until the files follow, and not after; the
    // empty `alice/` a first message makes there is no file (QA,
    // 2026-12-04: it stopped the warning, and the store forgot where the
    // files were)
    std::fs::create_dir_all(moved.join("alice/notes")).unwrap();
    let fourth = banner_of(&path, &dir.join("fourth.log")).await;
    assert!(fourth.contains("WARNING: the workspace "), "{fourth}");
    let again = banner_of(&path, &dir.join("fourth-again.log")).await;
    assert!(again.contains("WARNING: the workspace "), "{again}");
    // the command the warning gives works as given, with that `alice/`
    // there already (QA: `mv old/* new/` failed on it, "Directory not
    // empty", and with none renamed alice/ to the new workspace itself)
    let command = again
        .split("(`")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no command in:\n{again}"));
    let ran = std::process::Command::new("sh")
        .args(["-c", command])
        .status()
        .unwrap();
    assert!(ran.success(), "{command}");
    assert_eq!(
        std::fs::read_to_string(moved.join("alice/notes.txt")).unwrap(),
        "keep me"
    );
    std::fs::remove_dir_all(&old).unwrap();
    let fifth = banner_of(&path, &dir.join("fifth.log")).await;
    assert!(!fifth.contains("WARNING: the workspace "), "{fifth}");
}

/// Runs `botfleet check-config --fleet FLEET`; returns its exit code and
/// what it printed (stdout, then stderr).
async fn check_config(fleet: &Path) -> (i32, String) {
    let out = tokio::process::Command::new(BIN)
        .arg("check-config")
        .arg("--fleet")
        .arg(fleet)
        .env("RUST_LOG", "off")
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The line of `text` that starts with `prefix`.
fn line_of<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{text}"))
}

#[tokio::test]
async fn check_config_says_what_a_start_would_of_the_data_dir_and_workspace() {
    let fleet = one_bot();
    let path = fleet.write();
    let dir = fleet.path();
    let data = dir.join("data");

    // before any start: a new data directory (a note: exit 0), and the
    // check creates nothing
    let (code, out) = check_config(&path).await;
    assert_eq!(code, 0, "{out}");
    let new = format!(
        "new data directory {}: starting with no history",
        data.display()
    );
    assert!(out.lines().any(|l| l == new), "no {new:?} in:\n{out}");
    assert!(!data.exists(), "{out}");

    // after starts, with a bot's file in the (default) workspace: nothing
    banner_of(&path, &dir.join("first.log")).await;
    let old = data.join("workspace");
    std::fs::create_dir_all(old.join("alice")).unwrap();
    std::fs::write(old.join("alice/notes.txt"), "keep me").unwrap();
    banner_of(&path, &dir.join("second.log")).await;
    let (code, out) = check_config(&path).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        !out.contains("new data directory") && !out.contains("WARNING"),
        "{out}"
    );

    // `host.workspace` moved, the files not: the start's warning, word for
    // word, and still exit 0
    let moved = dir.join("elsewhere");
    let fleet = fleet.host(&format!("workspace = \"{}\"", moved.display()));
    fleet.write();
    let (code, out) = check_config(&path).await;
    assert_eq!(code, 0, "{out}");
    let warning = line_of(&out, "WARNING: the workspace ").to_owned();
    assert!(!out.contains("new data directory"), "{out}");
    let started = banner_of(&path, &dir.join("third.log")).await;
    assert_eq!(line_of(&started, "WARNING: the workspace "), warning);

    // and while a host runs on the data directory (its WAL is read, its
    // lock is not taken)
    let log = dir.join("fourth.log");
    let mut host = HostProcess::start(&path, free_port(), &log).await;
    host.wait_log("send a message:").await;
    let (code, out) = check_config(&path).await;
    host.stop(&log).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(line_of(&out, "WARNING: the workspace "), warning);
}

/// A relative `host.data_dir` is read from the current directory: the note
/// of a new data directory names the whole path, so that a wrong current
/// directory shows (QA, 2026-12-04: it printed `./rel-data`, hiding
/// where that was).
#[tokio::test]
async fn the_new_data_directory_note_names_the_whole_path() {
    let fleet = one_bot();
    let path = fleet.write();
    let dir = fleet.path();
    let text = std::fs::read_to_string(&path).unwrap();
    let absolute = format!("data_dir = \"{}\"", dir.join("data").display());
    assert!(text.contains(&absolute), "{text}");
    std::fs::write(&path, text.replace(&absolute, "data_dir = \"./rel-data\"")).unwrap();
    let out = tokio::process::Command::new(BIN)
        .arg("check-config")
        .arg("--fleet")
        .arg(&path)
        .current_dir(&dir)
        .env("RUST_LOG", "off")
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let cwd = std::fs::canonicalize(&dir).unwrap();
    let new = format!(
        "new data directory {}: starting with no history",
        cwd.join("rel-data").display()
    );
    assert!(said.lines().any(|l| l == new), "no {new:?} in:\n{said}");
}

/// A data directory the host makes is its own (0700): the store holds
/// every transcript and the secrets people saved, unencrypted. One that
/// other local users may read is a warning, at start and in check-config,
/// saying how to close it. (A new one was 0755, its `fleet.db` 0644: any
/// account read `user_secrets`; QA, 2026-12-05.)
#[tokio::test]
async fn the_data_directory_is_private_or_the_start_says_so() {
    use std::os::unix::fs::PermissionsExt as _;

    let fleet = one_bot();
    let path = fleet.write();
    let dir = fleet.path();
    let data = dir.join("data");
    let first = banner_of(&path, &dir.join("first.log")).await;
    let mode = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{first}");
    assert!(!first.contains("other local users"), "{first}");

    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let warning = format!(
        "WARNING: other local users may read the data directory {} (mode 755)",
        data.display()
    );
    let (code, out) = check_config(&path).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&warning) && out.contains("chmod 700"), "{out}");
    let second = banner_of(&path, &dir.join("second.log")).await;
    assert!(second.contains(&warning), "{second}");
}

/// A bot of the fleet file with a room's id (ignoring case): check-config
/// warns of it as a start logs it (it said only "ok"), and still exits 0:
/// the start is not refused either.
#[tokio::test]
async fn check_config_warns_of_a_bot_with_a_rooms_id() {
    let fleet = one_bot().bot("a2", "m", &["SendMessage"]);
    let host = fleet.start().await;
    let (status, room) = host
        .create_room(crate::support::fleet::TOKEN, "standup", &["a1", "a2"])
        .await;
    assert_eq!(status, 201, "{room}");
    let fleet = host.shutdown().await;
    let fleet = fleet.bot("standup", "m", &["SendMessage"]);
    let path = fleet.write();
    let (code, out) = check_config(&path).await;
    assert_eq!(code, 0, "{out}");
    let warning = line_of(&out, "WARNING: ");
    assert!(
        warning.contains("the fleet file's bot `standup` has the id of the room `standup`")
            && warning.contains("Give that [[bots]] table another id"),
        "{out}"
    );
}

/// `check-config` refuses a database a newer botfleet migrated, as the
/// start does, naming what to do (audit: it said "ok", exit 0, and `run`
/// then refused it).
#[tokio::test]
async fn check_config_refuses_a_database_of_a_newer_botfleet() {
    let fleet = one_bot();
    let path = fleet.write();
    let dir = fleet.path();
    banner_of(&path, &dir.join("first.log")).await;
    let db = dir.join("data/fleet.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    conn.pragma_update(None, "user_version", version + 1)
        .unwrap();
    drop(conn);
    let (code, out) = check_config(&path).await;
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "database schema version {} is newer than this binary supports ({version}); upgrade botfleet",
            version + 1
        )),
        "{out}"
    );
}
