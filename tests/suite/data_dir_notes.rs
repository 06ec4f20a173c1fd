//! What `botfleet run` tells an operator about where its data is: a data
//! directory with no store yet is named as new (once), and a
//! `host.workspace` moved to an empty directory while the previous one
//! still holds the bots' files is a warning naming both paths.

use std::path::Path;

use crate::support::fleet::TestFleet;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

/// A model that is never asked here.
const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "hi" } } ]
"#;

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
    let fleet = TestFleet::new()
        .script("m", SCRIPT)
        .bot("a1", "m", &["SendMessage"]);
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
            && warning.contains("move them"),
        "{warning}"
    );
    // told at every start until the files follow, and not after
    let fourth = banner_of(&path, &dir.join("fourth.log")).await;
    assert!(fourth.contains("WARNING: the workspace "), "{fourth}");
    std::fs::create_dir_all(&moved).unwrap();
    std::fs::rename(old.join("alice"), moved.join("alice")).unwrap();
    let fifth = banner_of(&path, &dir.join("fifth.log")).await;
    assert!(!fifth.contains("WARNING: the workspace "), "{fifth}");
}
